"""Functional collectives in kiln's IR, in this process (a one-rank gloo group): import,
syntax, effects, lowering with an explicit wait, ``reorder-collectives``, and a compiled
graph against eager. The multi-rank numbers are in test_distributed.py."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.parser import Parser

from kiln.compiler import CompileOptions, compile_graph
from kiln.dialects.aten.encoding import ArgEncodingError
from kiln.dialects.aten.fx import import_graph
from kiln.dialects.kernel import ExternOp, FreeOp, LaunchOp, ProgramOp, ReuseOp
from kiln.dialects.kernel.interpreter import run_program
from kiln.frontends.capture import capture_make_fx
from kiln.passes.reorder_collectives import is_collective, is_wait, overlapping_compute
from kiln.registry import default_registry, make_context

c10d = torch.ops._c10d_functional
FILECHECK = Path(__file__).parent.parent / "filecheck" / "kernel" / "reorder-collectives.mlir"


@pytest.fixture(scope="module")
def group(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A one-rank gloo world; its group name (what graphs pass as ``group_name``)."""
    if dist.is_initialized():
        pytest.skip("a process group already exists in this process")
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    store = tmp_path_factory.mktemp("gloo") / "store"
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    world = dist.group.WORLD
    assert world is not None
    yield world.group_name
    dist.destroy_process_group()


def run_pipeline(text: str, pipeline: str) -> ModuleOp:
    module = Parser(make_context(), text).parse_module()
    registry = default_registry()
    from xdsl.passes import PassPipeline

    PassPipeline.parse_spec(registry.passes, pipeline).apply(registry.make_context(), module)
    module.verify()
    return module


def program_ops(module: ModuleOp) -> list[Operation]:
    program = next(op for op in module.ops if isinstance(op, ProgramOp))
    return list(program.body.block.ops)


def overlap(module: ModuleOp) -> int:
    program = next(op for op in module.ops if isinstance(op, ProgramOp))
    return overlapping_compute(program.body.block)


def collectives_program(name: str) -> object:
    def f(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
        h = x @ w
        reduced = c10d.wait_tensor(c10d.all_reduce(h, "sum", name))
        independent = torch.tanh(x) * 2
        gathered = c10d.wait_tensor(c10d.all_gather_into_tensor(x + 1, 1, name))
        scattered = c10d.wait_tensor(c10d.reduce_scatter_tensor(h, "sum", 1, name))
        exchanged = c10d.wait_tensor(c10d.all_to_all_single(x, [4], [4], name))
        broadcast = c10d.wait_tensor(c10d.broadcast(w, 0, name))
        return reduced + 1, independent, gathered, scattered, exchanged, broadcast

    return f


def inputs() -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return [torch.randn(4, 8, generator=generator), torch.randn(8, 8, generator=generator)]


def test_functional_collectives_import_and_round_trip(group: str) -> None:
    module = import_graph(capture_make_fx(collectives_program(group), *inputs()).gm)  # pyright: ignore[reportArgumentType]
    text = str(module)
    for name in (
        "all_reduce",
        "all_gather_into_tensor",
        "reduce_scatter_tensor",
        "all_to_all_single",
        "broadcast",
        "wait_tensor",
    ):
        assert f"aten._c10d_functional.{name}.default(" in text, name
    assert f'reduce_op = "sum", group_name = "{group}"' in text
    reparsed = Parser(make_context(), text).parse_module()
    reparsed.verify()
    assert str(reparsed) == text


def test_in_place_all_reduce_imports(group: str) -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        y = x * 2
        c10d.all_reduce_(y, "sum", group)
        return c10d.wait_tensor(y) + 1

    text = str(import_graph(capture_make_fx(f, torch.randn(4)).gm))
    assert "aten._c10d_functional.all_reduce_.default(" in text
    assert str(Parser(make_context(), text).parse_module()) == text


def test_a_group_object_is_a_clear_error() -> None:
    from kiln.dialects.aten.dialect import op_class
    from kiln.dialects.aten.ops import GenericOp

    x = Parser(make_context(), "%x = aten.constant dense<1.0> : tensor<4xf32>").parse_op()
    all_reduce = op_class("_c10d_functional::all_reduce.default")
    assert all_reduce is not None
    with pytest.raises(ArgEncodingError, match="group_name"):
        all_reduce.from_args(
            {"input": x.results[0], "reduce_op": "sum", "group_name": object()},
            [x.results[0].type],
        )
    # torch 2.13 types group_name Any: aten.generic (the _coalesced variants) stores names only.
    with pytest.raises(ArgEncodingError, match="group_name"):
        GenericOp.build_generic(
            "_c10d_functional::all_reduce.default",
            {"input": x.results[0], "reduce_op": "sum", "group_name": object()},
            [x.results[0].type],
        )


ATEN = """
func.func @forward(%x: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> (tensor<8x8xf32>, tensor<4x8xf32>) {
  %h = aten.tanh.default(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %g = aten._c10d_functional.all_gather_into_tensor.default(%h, group_size = 2, group_name = "GROUP") : (tensor<4x8xf32>) -> tensor<8x8xf32>
  %w = aten._c10d_functional.wait_tensor.default(%g) : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %same = aten._c10d_functional.all_gather_into_tensor.default(%h, group_size = 2, group_name = "GROUP") : (tensor<4x8xf32>) -> tensor<8x8xf32>
  %unused = aten._c10d_functional.wait_tensor.default(%same) : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %e = aten.exp.default(%b) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %s = aten.sin.default(%e) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %r = aten.relu.default(%w) : (tensor<8x8xf32>) -> tensor<8x8xf32>
  func.return %r, %s : tensor<8x8xf32>, tensor<4x8xf32>
}
"""


def test_collectives_are_never_merged_or_removed() -> None:
    text = str(run_pipeline(ATEN, "canonicalize,cse,dce"))
    assert text.count("all_gather_into_tensor.default(") == 2
    assert text.count("wait_tensor.default(") == 2


def test_wait_keeps_the_collective_input_alive() -> None:
    """The all-gather may read %h until its wait: the wait's extern takes %h's buffer, so
    buffer-reuse neither frees nor reuses it (%e, %s: same size, computed in between)
    before then. Without it %h died at the all-gather and %e's kernel reused its memory."""
    module = run_pipeline(ATEN, "lower-aten,fuse,tile,reorder-collectives,buffer-reuse")
    ops = program_ops(module)
    collective = next(op for op in ops if is_collective(op))
    wait = next(op for op in ops if is_wait(op) and collective.results[0] in op.operands)
    h = collective.operands[0]
    assert h in wait.operands
    between = ops[ops.index(collective) + 1 : ops.index(wait)]
    assert any(isinstance(op, LaunchOp) for op in between), "nothing overlaps the all-gather"
    for op in between:
        assert not (isinstance(op, FreeOp) and op.buffer is h)
        assert not (isinstance(op, ReuseOp) and op.source is h)
        assert not (isinstance(op, LaunchOp) and h in op.outs)


def test_reorder_overlaps_independent_compute() -> None:
    before = run_pipeline(ATEN, "lower-aten,fuse,tile")
    after = run_pipeline(ATEN, "lower-aten,fuse,tile,reorder-collectives")
    assert overlap(after) > overlap(before) == 0
    kinds = [
        "C" if is_collective(op) else "W" if is_wait(op) else "L"
        for op in program_ops(after)
        if isinstance(op, ExternOp | LaunchOp)
    ]
    # Both all-gathers start right after %h (the second above the first's wait), before
    # the independent exp/sin; the waits follow it.
    assert "".join(kinds).startswith("LCCL"), kinds
    assert kinds.index("W") > kinds.index("C") + 2, kinds


def test_reorder_filecheck_inputs_compute_the_same(group: str) -> None:
    """The FileCheck input of reorder-collectives runs to the same numbers before and after
    the pass (kernel interpreter, in a one-rank world)."""
    text = FILECHECK.read_text().replace('"GROUP"', f'"{group}"')
    chunks = [c for c in text.split("\n// -----\n") if "kernel.program" in c]
    assert chunks
    generator = torch.Generator().manual_seed(1)
    for chunk in chunks:
        before = Parser(make_context(), chunk).parse_module()
        after = run_pipeline(chunk, "reorder-collectives")
        program = next(op for op in before.ops if isinstance(op, ProgramOp))
        args = [
            torch.randn(list(t.get_shape()), generator=generator)  # pyright: ignore[reportAttributeAccessIssue]
            for t in program.function_type.inputs.data
        ]
        name = program.sym_name.data
        want, _ = run_program(before, [a.clone() for a in args], name)
        got, _ = run_program(after, [a.clone() for a in args], name)
        for a, b in zip(got, want, strict=True):
            torch.testing.assert_close(a, b)


def test_compiled_graph_overlaps_and_matches_eager(group: str) -> None:
    program = collectives_program(group)
    capture = capture_make_fx(program, *inputs())  # pyright: ignore[reportArgumentType]
    compiled = compile_graph(capture.gm, inputs(), CompileOptions(verbose=False))
    got = compiled(*inputs())
    want = program(*inputs())  # pyright: ignore[reportCallIssue]
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b)
    assert compiled.stats.executor == "cpp"
    assert overlap(compiled.module) > 0
