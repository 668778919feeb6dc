"""Cross-graph kernel reuse (issue 19): a kernel whose C++ another graph already built
(under another name, with other comments) is loaded from that graph's library, not
compiled again; a damaged index entry is a miss, never a wrong kernel."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from kiln.backends.cpp import cache, loader
from kiln.backends.cpp.loader import KernelText, load_kernel_texts

SCALE = """extern "C" int {name}(const float* in_ptr0, float* out_ptr0, int64_t ks0)
{{
    for (int64_t x0 = 0; x0 < ks0; x0++) {{ out_ptr0[x0] = in_ptr0[x0] * {factor}f; }}
    return 0;
}}
"""


_FACTORS = itertools.count(11)
"""Libraries stay loaded per process by source: each test builds kernels of its own."""


def kernel(name: str, factor: float, comment: str) -> KernelText:
    return KernelText(name, f"// {comment}\n" + SCALE.format(name=name, factor=factor), "ppi")


@pytest.fixture
def compiled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The sources the compiler is run on, in a cache of this test's own."""
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))
    sources: list[str] = []
    real = loader.compile_library

    def counting(source: str, source_path: Path, output: Path) -> None:
        sources.append(source)
        real(source, source_path, output)

    monkeypatch.setattr(loader, "compile_library", counting)
    return sources


def run(function: Callable[..., int], x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    assert function(x.data_ptr(), out.data_ptr(), x.numel()) == 0
    return out


def test_an_identical_kernel_of_another_graph_is_not_compiled_again(compiled: list[str]) -> None:
    x = torch.randn(37)
    factor = float(next(_FACTORS))
    first = load_kernel_texts([kernel("kernel0", factor, "graph A: mul_3")])
    assert len(compiled) == 1
    torch.testing.assert_close(run(first.functions["kernel0"], x), x * factor)
    second = load_kernel_texts(
        [kernel("kernel1", 3.0, "graph B: mul_8"), kernel("kernel4", factor, "graph B: mul_9")]
    )
    assert second.reused == 1
    assert len(compiled) == 2
    assert "kernel4" not in compiled[1]  # only the new one built
    assert "kernel1" in compiled[1]
    torch.testing.assert_close(run(second.functions["kernel4"], x), x * factor)
    torch.testing.assert_close(run(second.functions["kernel1"], x), x * 3.0)
    # The whole program's C++ is still there to read.
    assert all(name in "".join(second.sources) for name in ("kernel1", "kernel4"))


def test_a_different_body_is_not_reused(compiled: list[str]) -> None:
    factor = float(next(_FACTORS))
    load_kernel_texts([kernel("kernel0", factor, "A")])
    x = torch.randn(16)
    other = load_kernel_texts([kernel("kernel0", -factor, "A")])
    assert other.reused == 0
    assert len(compiled) == 2
    torch.testing.assert_close(run(other.functions["kernel0"], x), x * -factor)


@pytest.mark.parametrize("damage", ["garbage", "wrong-symbol", "missing-library"])
def test_a_damaged_index_entry_is_a_miss(compiled: list[str], tmp_path: Path, damage: str) -> None:
    factor = float(next(_FACTORS))
    load_kernel_texts([kernel("kernel0", factor, "A")])
    assert len(compiled) == 1
    key = cache.kernel_key("kernel0", kernel("kernel0", factor, "A").text)
    assert key is not None
    entry = tmp_path / cache.KERNEL_INDEX / key[:2] / key
    library, _symbol, _check = entry.read_text().split()
    if damage == "garbage":
        entry.write_text("nonsense\n")
    elif damage == "wrong-symbol":
        entry.write_text(f"{library} kernel9 0000\n")
    else:
        loader._LOADED.pop(library, None)  # pyright: ignore[reportPrivateUsage]
        (tmp_path / f"{library}.so").unlink()
    x = torch.randn(16)
    again = load_kernel_texts([kernel("kernel2", factor, "B"), kernel("kernel3", 0.5, "B")])
    assert again.reused == 0
    assert len(compiled) == 2
    torch.testing.assert_close(run(again.functions["kernel2"], x), x * factor)
    assert cache.lookup_kernel(key) is not None  # indexed again
