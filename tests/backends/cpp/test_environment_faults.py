"""A broken environment (cache dir, HOME, compiler, TMPDIR, debug dir) never fails a compile
with a raw OSError, and is never blamed on the generated code (issue #20 items 8-10)."""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from test_cpp_runtime import SOURCE, _call_twice

import kiln
from kiln.backends import cache as shared_cache
from kiln.backends.cpp import cache
from kiln.backends.cpp import compiler as cxx
from kiln.compiler import CompileError


@pytest.fixture
def fresh_compiler_state() -> Iterator[None]:
    """find_compiler / compiler_identity / toolchain_problem are cached per process."""
    for fn in (cxx.find_compiler, cxx.compiler_identity, cxx.toolchain_problem):
        fn.cache_clear()
    yield
    for fn in (cxx.find_compiler, cxx.compiler_identity, cxx.toolchain_problem):
        fn.cache_clear()


_SCALES = iter(range(3, 10**6))


def _compiled_matches(**options: object) -> str:
    """Compile and check a graph no earlier test built (kiln keeps loaded libraries per
    process by source, so each call gets a new constant)."""
    from kiln.compiler import last_compile_stats

    scale = float(next(_SCALES))

    def fn(x: torch.Tensor) -> torch.Tensor:
        return torch.sin(x) * scale + 1

    torch._dynamo.reset()
    compiled = kiln.compile(fn, verbose=False, **options)  # type: ignore[arg-type]
    x = torch.randn(33)
    torch.testing.assert_close(compiled(x), fn(x))
    return last_compile_stats().executor


def test_cache_dir_that_is_a_file_falls_back_to_a_private_temp_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    monkeypatch.setenv("KILN_CACHE_DIR", str(blocker))
    with pytest.warns(RuntimeWarning, match="cannot use the cache directory"):
        path = cache.cache_dir()
    assert path.is_dir()
    assert str(path).startswith(tempfile.gettempdir())
    assert os.stat(path).st_mode & 0o077 == 0
    assert _compiled_matches() == "cpp"


def test_home_that_cannot_hold_a_cache_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KILN_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", "/dev/null")  # even root cannot mkdir under a device file
    shared_cache._warned.clear()
    with pytest.warns(RuntimeWarning, match="/dev/null"):
        assert _compiled_matches() == "cpp"


def test_cached_library_replaced_by_a_directory_is_rebuilt(tmp_path: Path) -> None:
    _, path, _ = cache.load_or_build(SOURCE, cxx.compile_library, tmp_path)
    path.unlink()
    (path / "junk").mkdir(parents=True)
    library, again, hit = cache.load_or_build(SOURCE, cxx.compile_library, tmp_path)
    assert (again, hit) == (path, False)
    torch.testing.assert_close(_call_twice(library), torch.arange(5.0) * 2)


@pytest.mark.usefixtures("fresh_compiler_state")
@pytest.mark.parametrize("broken", ["/bin/false", "/bin/true"])
def test_broken_compiler_is_blamed_not_the_generated_code(
    broken: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KILN_CXX", broken)
    with pytest.raises(cxx.CompilerUnusable, match="cannot build libraries here"):
        cache.load_or_build(SOURCE, cxx.compile_library, tmp_path)
    assert not any(tmp_path.iterdir()) or not (tmp_path / "failed").exists()
    # auto: a clean fallback to the reference interpreter; an explicit cpp: a clear error
    assert _compiled_matches() == "interpret"
    with pytest.raises(Exception, match=f"C\\+\\+ compiler {broken} cannot build"):
        _compiled_matches(executor="cpp")


@pytest.mark.usefixtures("fresh_compiler_state")
def test_compiler_failing_for_its_own_reasons_reports_its_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What g++ says when it cannot write its temporaries (an unwritable TMPDIR as a user).
    fake = tmp_path / "fake-g++"
    fake.write_text(
        "#!/bin/sh\necho 'cc1plus: fatal error: cannot create temporary file' >&2\nexit 1\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("KILN_CXX", str(fake))
    with pytest.raises(cxx.CompilerUnusable, match="cannot create temporary file"):
        cache.load_or_build(SOURCE, cxx.compile_library, tmp_path)


def test_unwritable_debug_dir_warns_and_compiles(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.warns(RuntimeWarning, match="cannot write the debug directory"):
        assert _compiled_matches(debug_dir=str(blocker)) == "cpp"


def test_prune_removes_stale_temporaries_and_least_recently_used_entries(tmp_path: Path) -> None:
    now = time.time()
    for k, age in enumerate([500.0, 400.0, 300.0, 200.0]):
        entry = tmp_path / f"{k}.so"
        entry.write_bytes(b"x" * 1000)
        os.utime(entry, (now - age, now - age))
    stale = tmp_path / ".dead-build.so"
    stale.write_bytes(b"x")
    os.utime(stale, (now - 7200, now - 7200))
    live = tmp_path / ".running-build.so"
    live.write_bytes(b"x")
    assert shared_cache.prune(tmp_path, limit=2500, now=now) == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == [".running-build.so", "2.so", "3.so"]


def test_compile_error_type_for_bad_executor_choice_is_unchanged() -> None:
    assert issubclass(cxx.CompilerUnusable, cxx.CompilerNotFound)
    assert issubclass(CompileError, RuntimeError)
