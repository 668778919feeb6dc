"""``dedup-kernels``: identical kernels are lowered and built once, and the program still
computes what it did (interpreter before/after, C++ against eager)."""

from __future__ import annotations

import re
from pathlib import Path

import torch
from torch import nn
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp

import kiln
from kiln.compiler import last_compile_stats
from kiln.dialects.kernel import KernelOp, LaunchOp
from kiln.dialects.kernel.interpreter import run_program
from kiln.passes.dedup_kernels import DedupKernelsPass, kernel_key
from kiln.registry import default_registry

CHAIN = Path(__file__).parents[1] / "filecheck" / "kernel" / "dedup-kernels.mlir"


def _parse(text: str) -> ModuleOp:
    from xdsl.parser import Parser

    ctx = default_registry().make_context()
    return Parser(ctx, text).parse_module()


def _kernels(module: ModuleOp) -> list[str]:
    return [op.sym_name.data for op in module.ops if isinstance(op, KernelOp)]


def test_identical_kernels_merge_and_the_program_computes_the_same() -> None:
    module = _parse(CHAIN.read_text())
    args = [torch.randn(8, 8), torch.randn(8, 8)]
    (expected,), _ = run_program(module, [a.clone() for a in args], "chain")
    merged = module.clone()
    DedupKernelsPass().apply(Context(), merged)
    merged.verify()
    assert _kernels(merged) == ["kernel0", "kernel1", "kernel3"]
    launched = [op.kernel.string_value() for op in merged.walk() if isinstance(op, LaunchOp)]
    assert launched == ["kernel0", "kernel1", "kernel0", "kernel3"]
    (got,), _ = run_program(merged, [a.clone() for a in args], "chain")
    torch.testing.assert_close(got, expected)


def test_key_ignores_names_but_not_constants() -> None:
    module = _parse(CHAIN.read_text())
    keys = {
        name: kernel_key(op)
        for op in module.ops
        if isinstance(op, KernelOp)
        for name in [op.sym_name.data]
    }
    assert keys["kernel0"] == keys["kernel2"]
    assert keys["kernel0"] != keys["kernel1"]  # transposed load
    assert keys["kernel0"] != keys["kernel3"]  # -0.0 is not 0.0


class _Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.fc = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.nn.functional.gelu(self.fc(self.norm(x)))


def _compile_layers(layers: int) -> tuple[int, int, str]:
    torch.manual_seed(layers)
    # 32x64 floats (8 KB): above inline-producers' always-inline size, so every layer's
    # residual sum is stored, not recomputed by the next layer's kernel (which would
    # make the layers' kernels repeat with a period of two).
    model = nn.Sequential(*[_Block(64) for _ in range(layers)]).eval()
    x = torch.randn(32, 64)
    with torch.no_grad():
        expected = model(x)
        got = kiln.compile(model, verbose=False, debug_dir=None)(x)
    torch.testing.assert_close(got, expected)
    stats = last_compile_stats()
    assert stats.executor == "cpp"
    return stats.kernels, stats.launches, stats.name


def test_repeated_layers_build_each_kernel_once() -> None:
    """Four identical layers cost the kernels of two (the first layer reads the graph's
    input, later ones a buffer: same types, same kernels), launched four times."""
    kernels2, launches2, _ = _compile_layers(2)
    kernels4, launches4, _ = _compile_layers(4)
    assert launches4 > launches2
    assert kernels4 == kernels2
    assert kernels4 < launches4


def test_built_library_holds_one_function_per_distinct_kernel() -> None:
    from kiln.targets import build_cpp_program

    original = _parse(CHAIN.read_text())
    module = original.clone()
    DedupKernelsPass().apply(Context(), module)
    program = build_cpp_program(module, "chain")
    functions = re.findall(r'^extern "C" int (\w+)\(', program.cpp_source, re.M)
    assert sorted(functions) == ["kernel0", "kernel1", "kernel3"]
    x, w = torch.randn(8, 8), torch.randn(8, 8)
    (got,) = program([x, w])
    (expected,), _ = run_program(original, [x, w], "chain")  # before the merge
    torch.testing.assert_close(got, expected)
