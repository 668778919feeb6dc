"""The program walk both backends share (kiln.backends.host.walker), run through each.

Each program is compared with what eager PyTorch computes on random inputs, through the
C++ backend and through Triton (interpreter mode, so it runs on the CPU anywhere).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser

from kiln.registry import make_context

EXTERN_WITH_SIZE_ARITHMETIC = """
kernel.program @forward(%x: memref<4x8xf32>, %n: index) -> memref<?xf32> {
  %1 = kernel.extern (%x) syms(%n) : (memref<4x8xf32>, index) -> memref<?xf32> {
  ^bb0(%a: tensor<4x8xf32>, %k: index):
    %c8 = arith.constant 8 : index
    %m = arith.muli %k, %c8 : index
    %v = aten.view.default(%a, size = [%m]) : (tensor<4x8xf32>, index) -> tensor<?xf32>
    kernel.yield %v : tensor<?xf32>
  }
  kernel.return %1 : memref<?xf32>
}
"""
"""An extern body with host arithmetic besides its ATen call: it cannot be written
inline, so it runs in the aten interpreter (the Triton wrapper used to refuse it)."""

VALUE_NAMED_LIKE_A_BUILTIN = """
kernel.program @forward(%x: memref<?x8xf32>) -> (memref<?x8xf32>, index) {
  %c0 = arith.constant 0 : index
  %max = memref.dim %x, %c0 : memref<?x8xf32>
  %c3 = arith.constant 3 : index
  %r = arith.maxsi %max, %c3 : index
  kernel.return %x, %r : memref<?x8xf32>, index
}
"""
"""A value called ``max`` (FX names values after their ops) must not shadow the
``max(...)`` the wrapper calls for ``arith.maxsi``."""


def _module(text: str) -> ModuleOp:
    module = Parser(make_context(), text).parse_module()
    module.verify()
    return module


def _cpp(module: ModuleOp, tmp_path: Path) -> Callable[[list[Any]], tuple[Any, ...]]:
    from kiln.targets import build_cpp_program

    return build_cpp_program(module)


def _triton(module: ModuleOp, tmp_path: Path) -> Callable[[list[Any]], tuple[Any, ...]]:
    pytest.importorskip("triton")
    from kiln.backends.triton.runtime import TritonOptions
    from kiln.targets import build_triton_program

    return build_triton_program(module, options=TritonOptions(cache_dir=str(tmp_path)))


BACKENDS = {"cpp": _cpp, "triton": _triton}


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TRITON_INTERPRET", "1")


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_extern_body_with_size_arithmetic_runs(backend: str, tmp_path: Path) -> None:
    program = BACKENDS[backend](_module(EXTERN_WITH_SIZE_ARITHMETIC), tmp_path)
    x = torch.randn(4, 8)
    (out,) = program([x, 4])
    torch.testing.assert_close(out.cpu(), x.reshape(32), rtol=0, atol=0)


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_value_named_like_a_builtin(backend: str, tmp_path: Path) -> None:
    program = BACKENDS[backend](_module(VALUE_NAMED_LIKE_A_BUILTIN), tmp_path)
    for rows in (2, 5):
        x = torch.randn(rows, 8)
        out, size = program([x])
        torch.testing.assert_close(out.cpu(), x, rtol=0, atol=0)
        assert size == max(rows, 3)


def test_cpp_backend_refuses_kernel_level_ir() -> None:
    """The C++ backend runs cpp-level IR: the driver lowers (kiln.targets), the backend
    says so instead of interpreting every kernel."""
    from kiln.backends.cpp.wrapper import WrapperError, build_program

    module = _module(
        """
        kernel.kernel @kernel0 pointwise [4] x [1] (%x: memref<4xf32>) -> (memref<4xf32>) {
          %e = loop.pointwise [4] (%x) {kernel.vars = [#loop.expr<"d0">]} : (memref<4xf32>) -> memref<4xf32> {
          ^bb0(%d0: index, %in0: memref<4xf32>):
            %a = loop.load %in0["d0"] : memref<4xf32>
            loop.yield %a : f32
          }
          kernel.yield %e : memref<4xf32>
        }
        kernel.program @forward(%x: memref<4xf32>) -> memref<4xf32> {
          %0 = kernel.alloc : memref<4xf32>
          kernel.launch @kernel0(%x) outs(%0) : (memref<4xf32>) -> (memref<4xf32>)
          kernel.return %0 : memref<4xf32>
        }
        """
    )
    with pytest.raises(WrapperError, match="run lower-to-cpp first"):
        build_program(module)
