"""The steps ``fuse`` and ``lower-to-cpp`` run inside, as passes of their own.

``inline-producers`` (loop IR), ``elide-extern-copies`` (kernel IR), ``cpp-drop-proven-checks``,
``cpp-hoist-invariants`` and ``cpp-reciprocals`` (cpp IR): each runs alone on IR of its own level (the inputs of
their FileCheck tests under tests/filecheck), computes the same numbers before and after
(loop and kernel interpreters; the compiled C++ for cpp IR), and the composite passes
still produce exactly what running the steps one by one produces.
"""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
import torch
from fuse_checks import assert_results_close, random_inputs
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp
from xdsl.parser import Parser
from xdsl.passes import ModulePass, PassPipeline
from xdsl.printer import Printer

from kiln.diagnostics import OpError
from kiln.dialects.kernel import KernelOp, ProgramOp
from kiln.dialects.kernel.interpreter import run_program
from kiln.dialects.loop.interpreter import run_function
from kiln.dialects.loop.ops import LoopNestOp
from kiln.passes.cpp_drop_proven_checks import CppDropProvenChecksPass
from kiln.passes.cpp_hoist_invariants import CppHoistInvariantsPass
from kiln.passes.cpp_reciprocals import CppReciprocalsPass
from kiln.passes.cpp_uniform_masks import CppUniformMasksPass
from kiln.passes.elide_extern_copies import ElideExternCopiesPass
from kiln.passes.inline_producers import InlineProducersPass
from kiln.passes.kernel_to_cpp.kernel import lower_kernel
from kiln.passes.kernel_to_cpp.options import CppOptions
from kiln.registry import default_registry

FILECHECK = Path(__file__).parent.parent / "filecheck"


def _inputs(path: str) -> list[str]:
    """The input IR of a FileCheck test, one string per ``// -----`` chunk."""
    return (FILECHECK / path).read_text().split("// -----")


def _parse(text: str) -> ModuleOp:
    module = Parser(default_registry().make_context(), text).parse_module()
    module.verify()
    return module


def _apply(pass_: ModulePass, module: ModuleOp) -> ModuleOp:
    after = module.clone()
    pass_.apply(default_registry().make_context(), after)
    after.verify()
    return after


def _run(module: ModuleOp, pipeline: str) -> ModuleOp:
    registry = default_registry()
    PassPipeline.parse_spec(registry.passes, pipeline).apply(registry.make_context(), module)
    return module


def _printed(module: ModuleOp) -> str:
    out = StringIO()
    Printer(stream=out).print_op(module)
    return out.getvalue()


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        ("inline-producers", InlineProducersPass),
        ("elide-extern-copies", ElideExternCopiesPass),
        ("cpp-drop-proven-checks", CppDropProvenChecksPass),
        ("cpp-hoist-invariants", CppHoistInvariantsPass),
        ("cpp-reciprocals", CppReciprocalsPass),
        ("cpp-uniform-masks", CppUniformMasksPass),
    ],
)
def test_registered(name: str, cls: type[ModulePass]) -> None:
    assert default_registry().get_pass(name) is cls


@pytest.mark.parametrize("chunk", _inputs("loop/inline-producers.mlir"))
def test_inline_producers_keeps_the_numbers(chunk: str) -> None:
    before = _parse(chunk)
    after = _apply(InlineProducersPass(), before)
    func = next(op for op in before.ops if isinstance(op, FuncOp))
    name = func.sym_name.data
    args = random_inputs(func.function_type.inputs.data)
    expected = run_function(before, [a.clone() for a in args], name)
    assert_results_close(run_function(after, [a.clone() for a in args], name), expected)

    def nests(m: ModuleOp) -> int:
        return sum(isinstance(op, LoopNestOp) for op in m.walk())

    # @product_alone shows a producer that stays (not worth recomputing).
    assert (nests(after) < nests(before)) == (name != "product_alone")


def test_inline_producers_refuses_aten_ir() -> None:
    aten = """
    func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
      %0 = aten.exp.default(%x) : (tensor<4xf32>) -> tensor<4xf32>
      func.return %0 : tensor<4xf32>
    }
    """
    with pytest.raises(OpError, match="inline-producers: @f still has aten ops; run lower-aten"):
        _apply(InlineProducersPass(), _parse(aten))


@pytest.mark.parametrize("chunk", _inputs("kernel/elide-extern-copies.mlir"))
def test_elide_extern_copies_keeps_the_numbers(chunk: str) -> None:
    before = _parse(chunk)
    after = _apply(ElideExternCopiesPass(), before)
    program = next(op for op in before.ops if isinstance(op, ProgramOp))
    name = program.sym_name.data
    # The dynamic programs take their sizes first: 5 rows (of which a prefix of 3).
    sizes = {"dynamic": [5], "prefix": [5, 3]}.get(name, [])
    tensors = [torch.randn(5, 16), torch.randn(16, 4)] if sizes else None
    args = [*sizes, *tensors] if tensors else random_inputs(program.function_type.inputs.data)

    def fresh() -> list[object]:
        return [a.clone() if isinstance(a, torch.Tensor) else a for a in args]

    expected, _ = run_program(before, fresh(), name)
    got, _ = run_program(after, fresh(), name)
    assert_results_close(got, expected)
    folded = not any(isinstance(op, KernelOp) for op in after.ops)
    assert folded == (name in ("reshaped", "dynamic"))


def test_elide_extern_copies_refuses_loop_ir() -> None:
    loop = _inputs("loop/inline-producers.mlir")[0]
    with pytest.raises(OpError, match="elide-extern-copies: @inlined holds loop IR; run fuse"):
        _apply(ElideExternCopiesPass(), _parse(loop))


def _cpp_inputs(name: str) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    if name == "cpp-drop-proven-checks":
        return [
            torch.randn(8, 16, generator=generator),
            torch.randint(0, 8, (9,), generator=generator),
        ]
    if name == "cpp-hoist-invariants":
        return [torch.randn(20, 64, generator=generator), torch.randint(0, 20, (9,))]
    if name == "cpp-uniform-masks":
        return [torch.randn(*shape, generator=generator) for shape in ((6, 8), (1, 8), (1, 8))]
    y = torch.randn(6, generator=generator)
    # Divisors y + 1 of every kind: zero, subnormal, huge, and normal ones.
    y[1], y[2], y[3] = -1.0, -1.0 + 2.0**-24, 3e38
    return [torch.randn(6, 8, generator=generator), y]


def _cpp_eager(
    name: str, x: torch.Tensor, y: torch.Tensor | None = None, z: torch.Tensor | None = None
) -> tuple[torch.Tensor, ...]:
    if name == "cpp-uniform-masks":  # the max of each row and its neighbours, 0 outside
        assert y is not None
        assert z is not None
        padded = torch.nn.functional.pad(x, (0, 0, 1, 1))
        rows = torch.maximum(torch.maximum(padded[:-2], padded[1:-1]), padded[2:])
        return rows, torch.cat([y, z])  # and a cat of two rows
    assert y is not None
    if name == "cpp-drop-proven-checks":
        squares = y[torch.arange(9) ** 2 % 9].to(x.dtype)
        return torch.roll(x, -3, 0), x[y] + squares[:, None]
    if name == "cpp-hoist-invariants":
        return (x[y] * 2,)
    return (x / (y[:, None] + 1),)


@pytest.mark.parametrize(
    ("name", "pass_"),
    [
        ("cpp-drop-proven-checks", CppDropProvenChecksPass()),
        ("cpp-hoist-invariants", CppHoistInvariantsPass()),
        ("cpp-reciprocals", CppReciprocalsPass()),
        ("cpp-uniform-masks", CppUniformMasksPass()),
    ],
)
def test_cpp_rewrites_keep_the_numbers(
    name: str, pass_: ModulePass, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The C++ compiled from the IR before and after the pass computes the same values
    (the reciprocal within its 1.5 ulp, and exactly where its guard keeps the division)."""
    from kiln.backends.cpp.wrapper import build_program

    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))
    before = _parse((FILECHECK / f"cpp/{name}.mlir").read_text())
    after = _apply(pass_, before)
    assert _printed(after) != _printed(before)
    assert _printed(_apply(pass_, after)) == _printed(after), "not idempotent"
    inputs = _cpp_inputs(name)
    expected = build_program(before)(inputs)
    actual = build_program(after)(inputs)
    eager = _cpp_eager(name, *inputs)
    assert len(actual) == len(expected) == len(eager)
    for got, want, reference in zip(actual, expected, eager, strict=True):
        torch.testing.assert_close(got, want, atol=0.0, rtol=2.5e-7, equal_nan=True)
        torch.testing.assert_close(got, reference, atol=0.0, rtol=2.5e-7, equal_nan=True)


def test_cpp_drop_proven_checks_keeps_the_index_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checks it keeps still raise: an embedding id out of range fails the call."""
    from kiln.backends.cpp.wrapper import build_program

    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))
    module = _apply(
        CppDropProvenChecksPass(),
        _parse((FILECHECK / "cpp/cpp-drop-proven-checks.mlir").read_text()),
    )
    x, ids = _cpp_inputs("cpp-drop-proven-checks")
    ids[4] = 8
    with pytest.raises(IndexError):
        build_program(module)([x, ids])


COMPOSITE = """
func.func @f(%w: tensor<20x64xf32>, %i: tensor<9xi64>, %x: tensor<6x70xf32>) -> (tensor<9x64xf32>, tensor<6x70xf32>, tensor<3x3x20xf32>) {
  %e = aten.embedding.default(%w, %i) : (tensor<20x64xf32>, tensor<9xi64>) -> tensor<9x64xf32>
  %m = aten.mul.Scalar(%e, other = 2.0) : (tensor<9x64xf32>) -> tensor<9x64xf32>
  %a = aten.abs.default(%x) : (tensor<6x70xf32>) -> tensor<6x70xf32>
  %s = aten.sum.dim_IntList(%a, dim = [1], keepdim = true) : (tensor<6x70xf32>) -> tensor<6x1xf32>
  %d = aten.div.Tensor(%x, %s) : (tensor<6x70xf32>, tensor<6x1xf32>) -> tensor<6x70xf32>
  %t = aten.t.default(%w) : (tensor<20x64xf32>) -> tensor<64x20xf32>
  %p = aten.mm.default(%e, %t) : (tensor<9x64xf32>, tensor<64x20xf32>) -> tensor<9x20xf32>
  %v = aten.view.default(%p, size = [3, 3, 20]) : (tensor<9x20xf32>) -> tensor<3x3x20xf32>
  func.return %m, %d, %v : tensor<9x64xf32>, tensor<6x70xf32>, tensor<3x3x20xf32>
}
"""


def test_fuse_runs_inline_producers_first() -> None:
    whole = _run(_parse(COMPOSITE), "lower-aten,fuse")
    steps = _run(_parse(COMPOSITE), "lower-aten,inline-producers,fuse{inline=false}")
    assert _printed(steps) == _printed(whole)


def test_lower_to_cpp_is_the_lowering_then_its_rewrites() -> None:
    """``lower-to-cpp`` = each kernel lowered as it is, then ``cpp-drop-proven-checks``,
    ``cpp-hoist-invariants`` and ``cpp-reciprocals`` (the same IR, so the same C++)."""
    whole = _run(_parse(COMPOSITE), "lower-aten,fuse,tile,lower-to-cpp{threads=2 lanes=8}")
    steps = _run(_parse(COMPOSITE), "lower-aten,fuse,tile")
    block = steps.body.block
    for kernel in [k for k in block.ops if isinstance(k, KernelOp)]:
        block.insert_op_before(
            lower_kernel(kernel, CppOptions(threads=2, lanes=8), rewrites=False), kernel
        )
        block.erase_op(kernel)
    _run(steps, "cpp-drop-proven-checks,cpp-hoist-invariants,cpp-reciprocals,cpp-uniform-masks")
    assert "reciprocal" in _printed(whole)
    assert _printed(steps) == _printed(whole)
