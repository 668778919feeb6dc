"""The ``fuse`` pass: which nodes share a kernel, the program it builds, and the same
numbers before and after (loop interpreter vs kernel interpreter, random inputs)."""

from __future__ import annotations

import pytest
import torch
from fuse_checks import (
    assert_schedule_preserves,
    kernels,
    launches,
    parse,
    program,
    schedule,
)
from xdsl.dialects.builtin import StringAttr
from xdsl.utils.exceptions import DiagnosticException

from kiln.dialects.kernel import AllocOp, ExternOp, KernelKind
from kiln.dialects.kernel.interpreter import run_program
from kiln.dialects.loop import LoopNestOp
from kiln.passes.buffer_reuse import BufferReusePass
from kiln.passes.fuse import FusePass
from kiln.passes.tile import TilePass
from kiln.registry import default_registry


def lowered(aten_text: str, decompose: bool = False) -> str:
    """Loop IR (text) of an aten function."""
    return str(schedule(parse(aten_text), "decompose,lower-aten" if decompose else "lower-aten"))


def loop_nodes(module: object) -> int:
    return sum(1 for k in kernels(module) for _ in k.nodes())  # pyright: ignore[reportArgumentType]


RELU_CHAIN = """
func.func @forward(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %relu = aten.relu.default(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %add = aten.add.Scalar(%relu, other = 1) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %mul = aten.mul.Scalar(%add, other = 2) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %mul : tensor<4x8xf32>
}
"""

CYCLE = """
func.func @forward(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %relu = aten.relu.default(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %mm = aten.mm.default(%relu, %w) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %add = aten.add.Tensor(%relu, %mm) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %add : tensor<4x8xf32>
}
"""


def test_registered() -> None:
    registry = default_registry()
    assert registry.get_pass("fuse") is FusePass
    assert registry.get_pass("tile") is TilePass
    assert registry.get_pass("buffer-reuse") is BufferReusePass


@pytest.mark.parametrize("inline", [True, False])
def test_pointwise_chain_is_one_kernel(inline: bool) -> None:
    loop = parse(lowered(RELU_CHAIN))
    module, trace = assert_schedule_preserves(loop, f"fuse{{inline={str(inline).lower()}}}")
    (kernel,) = kernels(module)
    assert kernel.kernel_kind is KernelKind.POINTWISE
    assert len(kernel.nodes()) == (1 if inline else 3)
    # Only the result gets a buffer: the intermediates are kernel-local.
    allocs = [op for op in program(module).body.block.ops if isinstance(op, AllocOp)]
    assert len(allocs) == 1
    assert trace.allocations == 1


def test_reduction_epilogue_and_prologue() -> None:
    loop = parse(
        lowered(
            """
            func.func @forward(%x: tensor<4x8xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
              %e = aten.exp.default(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
              %sum = aten.sum.dim_IntList(%e, dim = [-1]) : (tensor<4x8xf32>) -> tensor<4xf32>
              %add = aten.add.Tensor(%sum, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
              func.return %add : tensor<4xf32>
            }
            """
        )
    )
    module, _ = assert_schedule_preserves(loop, "fuse{inline=false}")
    (kernel,) = kernels(module)
    assert (kernel.kernel_kind, str(kernel.numel.data), str(kernel.rnumel.data)) == (
        KernelKind.REDUCTION,
        "4",
        "8",
    )
    assert [n.name for n in kernel.nodes()] == [
        "loop.pointwise",
        "loop.reduction",
        "loop.pointwise",
    ]
    # The prologue runs at every (x, r) point, the epilogue once per row.
    vars_ = [[e.text for e in n.attributes["kernel.vars"].data] for n in kernel.nodes()]  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType, reportUnknownVariableType]
    assert vars_ == [["d0", "r0"], ["d0", "r0"], ["d0"]]


def test_softmax_and_layer_norm_are_one_kernel() -> None:
    text = lowered(
        """
        func.func @forward(%x: tensor<4x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
          %s = aten._softmax.default(%x, dim = -1, half_to_float = false) : (tensor<4x8xf32>) -> tensor<4x8xf32>
          %y, %mean, %rstd = aten.native_layer_norm.default(%s, normalized_shape = [8], weight = %w, bias = %b, eps = 1.0e-05) : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x1xf32>)
          func.return %s, %y : tensor<4x8xf32>, tensor<4x8xf32>
        }
        """,
        decompose=True,
    )
    for inline in ("true", "false"):
        module, _ = assert_schedule_preserves(parse(text), f"fuse{{inline={inline}}}")
        # softmax and the layer norm of its result share the row space: one kernel.
        (kernel,) = kernels(module)
        assert kernel.kernel_kind is KernelKind.REDUCTION


def test_cycle_through_extern_stays_split(capsys: pytest.CaptureFixture[str]) -> None:
    module, _ = assert_schedule_preserves(parse(lowered(CYCLE)), "fuse{report=true}")
    assert len(kernels(module)) == 2
    order = [op.name for op in program(module).body.block.ops]
    assert order == [
        "kernel.alloc",
        "kernel.launch",
        "kernel.extern",
        "kernel.alloc",
        "kernel.launch",
        "kernel.return",
    ]
    report = capsys.readouterr().err
    assert "[%relu] + [%add]: not fused: would create a cycle (through [%mm])" in report
    assert "%mm is an extern call (ATen), which is never fused" in report


def test_transposed_read_is_not_fused(capsys: pytest.CaptureFixture[str]) -> None:
    loop = parse(
        lowered(
            """
            func.func @forward(%x: tensor<4x8xf32>, %y: tensor<8x4xf32>) -> (tensor<4x8xf32>, tensor<8x4xf32>) {
              %a = aten.mul.Tensor(%x, %x) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
              %t = aten.t.default(%a) : (tensor<4x8xf32>) -> tensor<8x4xf32>
              %b = aten.add.Tensor(%t, %y) : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
              func.return %a, %b : tensor<4x8xf32>, tensor<8x4xf32>
            }
            """
        )
    )
    module, _ = assert_schedule_preserves(loop, "fuse{report=true}")
    assert len(kernels(module)) == 2
    assert 'reads %a at "d0 + 8*d1", not where it is computed' in capsys.readouterr().err


def test_reductions_over_one_input_share_a_kernel() -> None:
    loop = parse(
        lowered(
            """
            func.func @forward(%x: tensor<6x16xf32>) -> (tensor<6xf32>, tensor<6xf32>) {
              %m = aten.amax.default(%x, dim = [1]) : (tensor<6x16xf32>) -> tensor<6xf32>
              %s = aten.sum.dim_IntList(%x, dim = [1]) : (tensor<6x16xf32>) -> tensor<6xf32>
              func.return %m, %s : tensor<6xf32>, tensor<6xf32>
            }
            """
        )
    )
    module, _ = assert_schedule_preserves(loop, "fuse")
    (kernel,) = kernels(module)
    assert len(kernel.nodes()) == 2
    assert len(kernel.function_type.outputs) == 2


def test_cheap_broadcast_producer_is_inlined() -> None:
    # The mask is computed on [4, 8] and read broadcast over [2, 4, 8]: too small to
    # share the reduction's space, cheap enough to recompute in it.
    loop = parse(
        lowered(
            """
            func.func @forward(%x: tensor<2x4x8xf32>, %m: tensor<4x8xi1>) -> tensor<2x4x8xf32> {
              %n = aten.bitwise_not.default(%m) : (tensor<4x8xi1>) -> tensor<4x8xi1>
              %f = aten.masked_fill.Scalar(%x, %n, value = -1.0e+09) : (tensor<2x4x8xf32>, tensor<4x8xi1>) -> tensor<2x4x8xf32>
              %s = aten._softmax.default(%f, dim = -1, half_to_float = false) : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
              func.return %s : tensor<2x4x8xf32>
            }
            """,
            decompose=True,
        )
    )
    assert len([op for op in loop.walk() if isinstance(op, LoopNestOp)]) >= 5
    inputs = [torch.randn(2, 4, 8), torch.rand(4, 8) > 0.3]
    module, _ = assert_schedule_preserves(loop, "fuse", inputs=inputs)
    assert len(kernels(module)) == 1
    module, _ = assert_schedule_preserves(loop, "fuse{inline=false}", inputs=inputs)
    assert len(kernels(module)) > 1


def test_tiny_int64_mask_is_inlined_into_a_larger_consumer() -> None:
    """Session 12 (issue 16): an embedding's backward masks its gradient with
    ``ids >= 0 & ids < n`` computed on the ids (int64) and read over (ids, width): by
    bytes alone, storing the bool mask beats re-reading 8-byte ids, so the mask kept a
    kernel of its own (3 in BERT's backward). Re-reading at most a few KB is now always
    worth a launch."""
    loop = parse(
        lowered(
            """
            func.func @forward(%x: tensor<32x128xf32>, %ids: tensor<32xi64>) -> tensor<32x128xf32> {
              %ge = aten.ge.Scalar(%ids, other = 0) : (tensor<32xi64>) -> tensor<32xi1>
              %lt = aten.lt.Scalar(%ids, other = 512) : (tensor<32xi64>) -> tensor<32xi1>
              %m = aten.bitwise_and.Tensor(%ge, %lt) : (tensor<32xi1>, tensor<32xi1>) -> tensor<32xi1>
              %u = aten.unsqueeze.default(%m, dim = 1) : (tensor<32xi1>) -> tensor<32x1xi1>
              %f = aten.masked_fill.Scalar(%x, %u, value = 0.0) : (tensor<32x128xf32>, tensor<32x1xi1>) -> tensor<32x128xf32>
              func.return %f : tensor<32x128xf32>
            }
            """
        )
    )
    inputs = [torch.randn(32, 128), torch.randint(-4, 600, (32,))]
    module, _ = assert_schedule_preserves(loop, "fuse", inputs=inputs)
    assert len(kernels(module)) == 1
    module, _ = assert_schedule_preserves(loop, "fuse{inline=false}", inputs=inputs)
    assert len(kernels(module)) == 2


def test_max_nodes() -> None:
    loop = parse(lowered(RELU_CHAIN))
    module, _ = assert_schedule_preserves(loop, "fuse{max-nodes=1}")
    assert [len(k.nodes()) for k in kernels(module)] == [1, 1, 1]
    module, _ = assert_schedule_preserves(loop, "fuse{max-nodes=2 inline=false}")
    assert sorted(len(k.nodes()) for k in kernels(module)) == [1, 2]


def test_dynamic_shapes() -> None:
    loop = parse(
        lowered(
            """
            func.func @forward(%x: tensor<?x8xf32>, %b: tensor<8xf32>) -> tensor<?x8xf32> {
              %a = aten.add.Tensor(%x, %b) : (tensor<?x8xf32>, tensor<8xf32>) -> tensor<?x8xf32>
              %r = aten.relu.default(%a) : (tensor<?x8xf32>) -> tensor<?x8xf32>
              %s = aten._softmax.default(%r, dim = -1, half_to_float = false) : (tensor<?x8xf32>) -> tensor<?x8xf32>
              func.return %s : tensor<?x8xf32>
            }
            """
        )
    )
    for rows in (3, 5):
        inputs = [torch.randn(rows, 8), torch.randn(8)]
        module, _ = assert_schedule_preserves(loop, "fuse,tile,buffer-reuse", inputs=inputs)
    assert all(k.sym_args() for k in kernels(module))


def test_kernel_names_are_unique_across_functions() -> None:
    text = lowered(RELU_CHAIN).replace("@forward", "@first")
    second = lowered(RELU_CHAIN).replace("@forward", "@second")
    module = parse(text.rstrip().removesuffix("}") + second.split("{", 1)[1])
    schedule(module, "fuse")
    assert [k.sym_name.data for k in kernels(module)] == ["kernel0", "kernel1"]
    x = torch.randn(4, 8)
    for name in ("first", "second"):
        (out,), _ = run_program(module, [x], name)
        assert torch.allclose(out, (x.relu() + 1) * 2)  # pyright: ignore[reportArgumentType]


def test_externs_become_kernel_externs() -> None:
    module = schedule(parse(lowered(CYCLE)), "fuse")
    (extern,) = [op for op in program(module).body.block.ops if isinstance(op, ExternOp)]
    assert [op.name for op in extern.body.block.ops] == ["aten.mm.default", "kernel.yield"]
    assert len(launches(module)) == 2


def test_aten_input_is_a_diagnostic() -> None:
    with pytest.raises(DiagnosticException, match="run lower-aten first"):
        schedule(parse(RELU_CHAIN), "fuse")
    with pytest.raises(DiagnosticException, match="max-nodes must be at least 1"):
        schedule(parse(lowered(RELU_CHAIN)), "fuse{max-nodes=0}")


MM_RESHAPED = """
func.func @forward(%x: tensor<6x8xf32>, %w: tensor<8x4xf32>) -> (tensor<2x3x4xf32>, tensor<24xf32>) {
  %mm = aten.mm.default(%x, %w) : (tensor<6x8xf32>, tensor<8x4xf32>) -> tensor<6x4xf32>
  %v = aten.view.default(%mm, size = [2, 3, 4]) : (tensor<6x4xf32>) -> tensor<2x3x4xf32>
  %mm2 = aten.mm.default(%x, %w) : (tensor<6x8xf32>, tensor<8x4xf32>) -> tensor<6x4xf32>
  %t = aten.t.default(%mm2) : (tensor<6x4xf32>) -> tensor<4x6xf32>
  %f = aten.view.default(%t, size = [24]) : (tensor<4x6xf32>) -> tensor<24xf32>
  func.return %v, %f : tensor<2x3x4xf32>, tensor<24xf32>
}
"""


def test_reshaped_extern_result_is_not_copied() -> None:
    """A reshape of an ATen result becomes part of the extern call (no copy kernel);
    a transpose still needs its kernel. Same numbers before and after."""
    module, _ = assert_schedule_preserves(parse(lowered(MM_RESHAPED)), "fuse")
    externs = [op for op in program(module).body.block.ops if isinstance(op, ExternOp)]
    assert len(externs) == 2
    reshaped = externs[0]
    assert [str(r.type) for r in reshaped.outputs] == ["memref<2x3x4xf32>"]
    assert [op.name for op in reshaped.body.block.ops][-2:] == [
        "aten.reshape.default",
        "kernel.yield",
    ]
    (copy,) = kernels(module)  # only the transpose copy of the second product is left
    assert [launch.kernel.string_value() for launch in launches(module)] == [copy.sym_name.data]


def window_qk(tokens: int, channels: int) -> str:
    """A window attention's scaled queries and its keys transposed for ``q @ k^T`` (Swin's
    split of ``qkv``): shapes [.., tokens, channels] and [.., channels, tokens]."""
    t, c = tokens, channels
    return f"""
func.func @forward(%qk: tensor<2x3x{t}x2x{c}xf32>) -> (tensor<2x3x{t}x{c}xf32>, tensor<2x3x{c}x{t}xf32>) {{
  %q = aten.select.int(%qk, dim = 3, index = 0) : (tensor<2x3x{t}x2x{c}xf32>) -> tensor<2x3x{t}x{c}xf32>
  %k = aten.select.int(%qk, dim = 3, index = 1) : (tensor<2x3x{t}x2x{c}xf32>) -> tensor<2x3x{t}x{c}xf32>
  %qs = aten.mul.Scalar(%q, other = 0.5) : (tensor<2x3x{t}x{c}xf32>) -> tensor<2x3x{t}x{c}xf32>
  %kt = aten.transpose.int(%k, dim0 = 2, dim1 = 3) : (tensor<2x3x{t}x{c}xf32>) -> tensor<2x3x{c}x{t}xf32>
  %kc = aten.clone.default(%kt, memory_format = 0) : (tensor<2x3x{c}x{t}xf32>) -> tensor<2x3x{c}x{t}xf32>
  func.return %qs, %kc : tensor<2x3x{t}x{c}xf32>, tensor<2x3x{c}x{t}xf32>
}}
"""


def test_shapes_crossing_in_the_inner_loop_do_not_fuse(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Fused, the C++ lowering indexed the transposed keys by ``//`` and ``%`` of the
    position in the inner loop: a division per element and no vectorization (Swin's
    q/k/v split took 4.9 ms a call of one thread on this machine's CPU). On a GPU the
    fused kernel indexed the queries by ``%``/``//`` of a flat position Triton cannot
    prove contiguous: a gather per element (Swin-tiny's split, batch 32, bfloat16: 292
    us a call on the H200, Inductor's separate kernels about 20)."""
    loop = parse(lowered(window_qk(7, 5)))
    module, _ = assert_schedule_preserves(loop, "fuse{report=true}")
    assert len(kernels(module)) == 2
    assert "vectorized loop on the CPU" in capsys.readouterr().err
    # Swin's 49 tokens of 32 channels (windows of 210 points merge as tiny kernels on a GPU)
    on_gpu = parse(lowered(window_qk(49, 32)))
    on_gpu.attributes["kiln.device"] = StringAttr("cuda:0")
    module, _ = assert_schedule_preserves(on_gpu, "fuse{report=true}")
    assert len(kernels(module)) == 2
    assert "gather per element on the GPU" in capsys.readouterr().err


REL_POS_BIAS = """
func.func @forward(%s: tensor<4x3x6x6xf32>, %table: tensor<11x3xf32>, %index: tensor<36xi64>) -> tensor<4x3x6x6xf32> {
  %g = aten.index.Tensor(%table, indices = [%index]) : (tensor<11x3xf32>, tensor<36xi64>) -> tensor<36x3xf32>
  %v = aten.view.default(%g, size = [6, 6, 3]) : (tensor<36x3xf32>) -> tensor<6x6x3xf32>
  %p = aten.permute.default(%v, dims = [2, 0, 1]) : (tensor<6x6x3xf32>) -> tensor<3x6x6xf32>
  %a = aten.add.Tensor(%s, %p) : (tensor<4x3x6x6xf32>, tensor<3x6x6xf32>) -> tensor<4x3x6x6xf32>
  %o = aten._softmax.default(%a, dim = -1, half_to_float = false) : (tensor<4x3x6x6xf32>) -> tensor<4x3x6x6xf32>
  func.return %o : tensor<4x3x6x6xf32>
}
"""
"""Swin's relative-position bias: ``table[index]`` (3 heads over 6 x 6 token pairs),
added to the attention scores of 4 windows before the softmax."""


def test_a_gather_read_broadcast_is_stored_once_on_the_cpu() -> None:
    """Inlined, the gather and its bounds check ran again at every point of the softmax
    (once per window, in each of its passes), and a checked index keeps the C++ loop
    serial. Stored, it is a kernel of 3 x 36 points and the softmax reads it
    contiguously; on the GPU it is still recomputed in the softmax's kernel."""
    loop = parse(lowered(REL_POS_BIAS, decompose=True))
    inputs = [torch.randn(4, 3, 6, 6), torch.randn(11, 3), torch.randint(0, 11, (36,))]
    module, _ = assert_schedule_preserves(loop, "fuse", inputs=inputs)
    assert len(kernels(module)) == 2
    gathers = [k for k in kernels(module) if any(getattr(op, "indirect", ()) for op in k.walk())]
    assert len(gathers) == 1
    assert gathers[0].numel.data == 3 * 36
    on_gpu = loop.clone()
    on_gpu.attributes["kiln.device"] = StringAttr("cuda:0")
    module, _ = assert_schedule_preserves(on_gpu, "fuse", inputs=inputs)
    assert len(kernels(module)) == 1
