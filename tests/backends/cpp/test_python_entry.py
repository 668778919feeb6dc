"""Kernels are called as Python built-in functions (``kiln.backends.cpp.python_entry``):
the same results and error flags as the ``ctypes`` call they replace, a clear
``TypeError`` for a wrong call, the GIL released while a kernel runs, and the ``ctypes``
call still used for a library that has no entries."""

from __future__ import annotations

import ctypes
import itertools
import threading
import time
import types
from pathlib import Path

import pytest
import torch

from kiln.backends.cpp import loader, python_entry
from kiln.backends.cpp.compiler import compile_library
from kiln.backends.cpp.loader import KernelText, load_kernel_texts

AXPY = """extern "C" int {name}(const float* in_ptr0, const int64_t* in_ptr1, float* out_ptr0, int64_t ks0)
{{
    for (int64_t x0 = 0; x0 < ks0; x0++) {{ out_ptr0[x0] = in_ptr0[x0] * {factor}f + (float)in_ptr1[x0]; }}
    return ks0 < 0 ? 2 : 0;
}}
"""

SPIN = """extern "C" int {name}(int64_t ms)
{{
    volatile double x = 0;
    for (int64_t i = 0; i < ms * 200000; i++) x = x + 1.0;
    return 0;
}}
"""

_FACTORS = itertools.count(101)
"""Libraries stay loaded per process by source: each test builds kernels of its own."""


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))


def axpy(name: str) -> tuple[KernelText, float]:
    factor = float(next(_FACTORS))
    return KernelText(name, AXPY.format(name=name, factor=factor), "pppi"), factor


def test_kernels_are_built_in_functions_computing_what_ctypes_computes() -> None:
    text, factor = axpy("kernel0")
    function = load_kernel_texts([text]).functions["kernel0"]
    assert isinstance(function, types.BuiltinFunctionType)
    x, k = torch.randn(37), torch.randint(-5, 5, (37,))
    out = torch.empty(37)
    assert function(x.data_ptr(), k.data_ptr(), out.data_ptr(), 37) == 0
    torch.testing.assert_close(out, x * factor + k.float())
    # The error flags come back as the return value, as from the ctypes call.
    assert function(x.data_ptr(), k.data_ptr(), out.data_ptr(), -1) == 2


def test_a_wrong_call_is_a_type_error_naming_the_kernel() -> None:
    text, _ = axpy("kernel3")
    function = load_kernel_texts([text]).functions["kernel3"]
    x = torch.randn(4)
    with pytest.raises(TypeError, match=r"kiln kernel kernel3 takes 4 arguments \(3 given\)"):
        function(x.data_ptr(), x.data_ptr(), x.data_ptr())
    with pytest.raises(TypeError):
        function(x.data_ptr(), x.data_ptr(), x.data_ptr(), "4")
    with pytest.raises(TypeError):
        function(x, x.data_ptr(), x.data_ptr(), 4)


def test_the_gil_is_released_while_a_kernel_runs() -> None:
    spin = load_kernel_texts([KernelText("kernel1", SPIN.format(name="kernel1"), "i")])
    function = spin.functions["kernel1"]
    ticks: list[float] = []
    done = threading.Event()

    def count() -> None:
        while not done.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.001)

    thread = threading.Thread(target=count)
    thread.start()
    time.sleep(0.01)
    before = len(ticks)
    start = time.perf_counter()
    function(300)  # ~0.1-0.5 s of one core
    elapsed = time.perf_counter() - start
    done.set()
    thread.join()
    during = [t for t in ticks[before:] if start < t < start + elapsed]
    assert elapsed > 0.02, elapsed
    assert len(during) >= 5, (elapsed, len(during))


def test_a_library_without_entries_is_called_through_ctypes(tmp_path: Path) -> None:
    """A library some other build made (no ``kiln_py_*`` symbols, no table): ctypes."""
    text, factor = axpy("kernel2")
    source = "#include <cstdint>\n" + text.text
    library_path = tmp_path / "plain.so"
    compile_library(source, tmp_path / "plain.cpp", library_path)
    library = ctypes.CDLL(str(library_path))
    assert not python_entry.bind(library)
    assert python_entry.entry(library, "kernel2") is None
    function = loader._callable(library, "kernel2", "pppi")  # pyright: ignore[reportPrivateUsage]
    assert not isinstance(function, types.BuiltinFunctionType)
    x, k = torch.randn(5), torch.randint(0, 3, (5,))
    out = torch.empty(5)
    assert function(x.data_ptr(), k.data_ptr(), out.data_ptr(), 5) == 0
    torch.testing.assert_close(out, x * factor + k.float())


def test_entry_source_converts_each_argument_by_kind() -> None:
    source = python_entry.entry_source("kernel7", "pip")
    assert 'extern "C" kiln_py_object* kiln_py_kernel7(' in source
    assert "kiln_py.as_pointer(args[0])" in source
    assert "kiln_py.as_int64(args[1])" in source
    assert "kernel7(kiln_py_pointer{a0}, a1, kiln_py_pointer{a2})" in source
    assert 'kiln_py_wrong_count("kernel7", nargs, 3)' in source
