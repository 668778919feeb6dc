"""The ``buffer-reuse`` pass: frees, reuse, in-place updates, and peak memory; the
program computes the same numbers (the interpreter poisons freed and reused memory)."""

from __future__ import annotations

import pytest
import torch
from fuse_checks import assert_schedule_preserves, parse, program, schedule

from kiln.dialects.kernel import ExternOp, FreeOp, LaunchOp, ReuseOp
from kiln.dialects.kernel.interpreter import run_program
from kiln.dialects.kernel.liveness import memory_timeline
from kiln.passes.buffer_reuse import plan_program


def chain(steps: int, size: int = 8) -> str:
    """``steps`` times: a matrix product, then an activation (every other one reading
    its input transposed)."""
    ty = f"tensor<{size}x{size}xf32>"
    lines = [f"func.func @forward(%x: {ty}, %w: {ty}) -> {ty} {{"]
    current = "%x"
    for i in range(steps):
        lines.append(f"  %m{i} = aten.mm.default({current}, %w) : ({ty}, {ty}) -> {ty}")
        source = f"%m{i}"
        if i % 2:
            lines.append(f"  %t{i} = aten.t.default(%m{i}) : ({ty}) -> {ty}")
            source = f"%t{i}"
        lines.append(f"  %r{i} = aten.tanh.default({source}) : ({ty}) -> {ty}")
        current = f"%r{i}"
    lines.append(f"  func.return {current} : {ty}")
    lines.append("}")
    return "\n".join(lines)


def lowered(text: str, decompose: bool = False) -> str:
    return str(schedule(parse(text), "decompose,lower-aten" if decompose else "lower-aten"))


def ops(module: object, cls: type) -> list[object]:
    return [op for op in program(module).body.block.ops if isinstance(op, cls)]  # pyright: ignore[reportArgumentType]


def test_long_chain_peak_memory(capsys: pytest.CaptureFixture[str]) -> None:
    steps, buffer = 12, 8 * 8 * 4
    loop = parse(lowered(chain(steps)))
    module, trace = assert_schedule_preserves(loop, "fuse,tile,buffer-reuse{report=true}")
    report = capsys.readouterr().err
    # As written every product and activation stays alive to the end; with frees two
    # buffers at a time; the untransposed activations run in place.
    assert f"peak {2 * steps * buffer} B as written, {2 * buffer} B with frees" in report
    assert f"{2 * buffer} B after reuse and in-place" in report
    # The products come from ATen; every activation goes in place or into a dead product.
    assert (
        f"allocations {2 * steps} -> {steps}, {steps // 2} reused, {steps // 2} in place" in report
    )
    static = memory_timeline(program(module))
    assert trace.peak == static.peak == 2 * buffer
    assert trace.allocations == static.allocations == steps
    assert trace.reuses == static.reuses == len(ops(module, ReuseOp)) > 0
    # Without the pass, nothing is freed.
    _, unfreed = assert_schedule_preserves(loop, "fuse,tile")
    assert unfreed.peak == 2 * steps * buffer


def test_in_place_halves_softmax_peak() -> None:
    loop = parse(
        lowered(
            """
            func.func @forward(%x: tensor<8x16xf32>, %w: tensor<16x16xf32>) -> tensor<8x16xf32> {
              %m = aten.mm.default(%x, %w) : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
              %s = aten._softmax.default(%m, dim = -1, half_to_float = false) : (tensor<8x16xf32>) -> tensor<8x16xf32>
              func.return %s : tensor<8x16xf32>
            }
            """,
            decompose=True,
        )
    )
    module, trace = assert_schedule_preserves(loop, "fuse,tile,buffer-reuse")
    (launch,) = ops(module, LaunchOp)
    assert isinstance(launch, LaunchOp)
    assert tuple(launch.args) == tuple(launch.outs)
    assert trace.peak == 8 * 16 * 4
    module, trace = assert_schedule_preserves(loop, "fuse,tile,buffer-reuse{in-place=false}")
    assert trace.peak == 2 * 8 * 16 * 4


def test_in_place_through_a_reshape_of_an_extern_result() -> None:
    # Attention scores: bmm gives [4, 8, 8], the softmax reads and writes [2, 2, 8, 8].
    loop = parse(
        lowered(
            """
            func.func @forward(%q: tensor<4x8x16xf32>, %k: tensor<4x16x8xf32>) -> tensor<2x2x8x8xf32> {
              %b = aten.bmm.default(%q, %k) : (tensor<4x8x16xf32>, tensor<4x16x8xf32>) -> tensor<4x8x8xf32>
              %v = aten.view.default(%b, size = [2, 2, 8, 8]) : (tensor<4x8x8xf32>) -> tensor<2x2x8x8xf32>
              %s = aten._softmax.default(%v, dim = -1, half_to_float = false) : (tensor<2x2x8x8xf32>) -> tensor<2x2x8x8xf32>
              func.return %s : tensor<2x2x8x8xf32>
            }
            """,
            decompose=True,
        )
    )
    module, trace = assert_schedule_preserves(loop, "fuse,tile,buffer-reuse")
    (launch,) = ops(module, LaunchOp)
    assert isinstance(launch, LaunchOp)
    assert tuple(launch.args) == tuple(launch.outs)
    assert trace.peak == 4 * 8 * 8 * 4
    _, trace = assert_schedule_preserves(loop, "fuse,tile,buffer-reuse{in-place=false}")
    assert trace.peak == 2 * 4 * 8 * 8 * 4


def test_reshape_for_in_place_leaves_shared_results_alone() -> None:
    # The product is also returned: it must keep its own shape and buffer.
    loop = parse(
        lowered(
            """
            func.func @forward(%x: tensor<8x16xf32>, %w: tensor<16x16xf32>) -> (tensor<8x16xf32>, tensor<2x4x16xf32>) {
              %m = aten.mm.default(%x, %w) : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
              %v = aten.view.default(%m, size = [2, 4, 16]) : (tensor<8x16xf32>) -> tensor<2x4x16xf32>
              %r = aten.relu.default(%v) : (tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
              func.return %m, %r : tensor<8x16xf32>, tensor<2x4x16xf32>
            }
            """
        )
    )
    module, _ = assert_schedule_preserves(loop, "fuse,tile,buffer-reuse")
    (launch,) = ops(module, LaunchOp)
    assert isinstance(launch, LaunchOp)
    assert set(launch.args).isdisjoint(launch.outs)
    assert "reshape" not in str(module)


def test_value_reused_by_a_later_node_of_a_reduction_is_not_in_place() -> None:
    # The residual h is returned and normalized in the same kernel; a looped lowering
    # recomputes h from the product in its second pass, so h must not overwrite it.
    loop = parse(
        lowered(
            """
            func.func @forward(%x: tensor<4x32xf32>, %w: tensor<32x32xf32>) -> (tensor<4x32xf32>, tensor<4x32xf32>) {
              %m = aten.mm.default(%x, %w) : (tensor<4x32xf32>, tensor<32x32xf32>) -> tensor<4x32xf32>
              %h = aten.add.Tensor(%x, %m) : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
              %s = aten.sum.dim_IntList(%h, dim = [1], keepdim = true) : (tensor<4x32xf32>) -> tensor<4x1xf32>
              %n = aten.mul.Tensor(%h, %s) : (tensor<4x32xf32>, tensor<4x1xf32>) -> tensor<4x32xf32>
              func.return %n, %h : tensor<4x32xf32>, tensor<4x32xf32>
            }
            """
        )
    )
    module, _ = assert_schedule_preserves(loop, "fuse,tile,buffer-reuse")
    (launch,) = ops(module, LaunchOp)
    assert isinstance(launch, LaunchOp)
    residual, normalized = (launch.outs[k] for k in (0, 1))
    assert residual.name_hint == "h"
    assert residual not in launch.args  # h gets its own buffer
    assert normalized in launch.args  # the last pass's output may take the product's


def test_transposed_read_is_not_updated_in_place() -> None:
    loop = parse(lowered(chain(2)))
    module, _ = assert_schedule_preserves(loop, "fuse,buffer-reuse")
    launches = [op for op in ops(module, LaunchOp) if isinstance(op, LaunchOp)]
    assert [set(op.args) == set(op.outs) for op in launches] == [True, False]


def test_options_and_idempotence() -> None:
    loop = parse(lowered(chain(6)))
    module, _ = assert_schedule_preserves(loop, "fuse,buffer-reuse{reuse=false in-place=false}")
    assert not ops(module, ReuseOp)
    assert all(set(op.args).isdisjoint(op.outs) for op in ops(module, LaunchOp))  # pyright: ignore[reportAttributeAccessIssue]
    once = schedule(loop.clone(), "fuse,buffer-reuse")
    assert str(schedule(once.clone(), "buffer-reuse")) == str(once)


def test_frees_never_touch_arguments_or_results() -> None:
    module, _ = assert_schedule_preserves(parse(lowered(chain(4))), "fuse,buffer-reuse")
    prog = program(module)
    freed = {op.buffer for op in ops(module, FreeOp) if isinstance(op, FreeOp)}
    assert freed.isdisjoint(prog.body.block.args)
    terminator = prog.body.block.last_op
    assert terminator is not None
    assert freed.isdisjoint(terminator.operands)


def test_reuse_never_raises_the_peak() -> None:
    module = schedule(parse(lowered(chain(9))), "fuse,tile")
    kernels = {k.sym_name.data: k for k in module.ops if hasattr(k, "nodes")}  # pyright: ignore[reportAttributeAccessIssue]
    stats = plan_program(program(module), kernels, in_place=False)  # pyright: ignore[reportArgumentType]
    assert stats.after.peak <= stats.with_frees.peak < stats.as_written.peak
    assert stats.after.allocations < stats.with_frees.allocations


SAVED_ACTIVATION = """
func.func @forward(%x: tensor<16x16xf32>, %act: tensor<64x64xf32>, %y: tensor<32x32xf32>)
    -> (tensor<16x16xf32>, tensor<32x32xf32>) {
  %a = aten.tanh.default(%x) : (tensor<16x16xf32>) -> tensor<16x16xf32>
  %b = aten.exp.default(%a) : (tensor<16x16xf32>) -> tensor<16x16xf32>
  %s = aten.sum.default(%act) : (tensor<64x64xf32>) -> tensor<f32>
  %c = aten.add.Tensor(%b, %s) : (tensor<16x16xf32>, tensor<f32>) -> tensor<16x16xf32>
  %d = aten.sin.default(%y) : (tensor<32x32xf32>) -> tensor<32x32xf32>
  func.return %c, %d : tensor<16x16xf32>, tensor<32x32xf32>
}
"""


def test_reuse_does_not_hold_memory_while_arguments_are_live() -> None:
    # %a dies at %b, while the 16 KB argument %act (a saved activation, which the boxed
    # wrapper releases after its last use) is still live: holding %a's memory for %c
    # would add to the call's real peak there, although not to the owned buffers' own
    # peak (%c and %d, at the end). The allocator gets it back instead.
    module = schedule(parse(lowered(SAVED_ACTIVATION)), "fuse{max-nodes=1},tile")
    kernels = {k.sym_name.data: k for k in module.ops if hasattr(k, "nodes")}  # pyright: ignore[reportAttributeAccessIssue]
    plan_program(program(module), kernels, in_place=False)  # pyright: ignore[reportArgumentType]
    assert not ops(module, ReuseOp), program(module)
    # Without the argument, the same reuse is taken.
    alone = SAVED_ACTIVATION.replace("%act: tensor<64x64xf32>", "%act: tensor<1x1xf32>")
    alone = alone.replace("tensor<64x64xf32>", "tensor<1x1xf32>")
    module = schedule(parse(lowered(alone)), "fuse{max-nodes=1},tile")
    kernels = {k.sym_name.data: k for k in module.ops if hasattr(k, "nodes")}  # pyright: ignore[reportAttributeAccessIssue]
    plan_program(program(module), kernels, in_place=False)  # pyright: ignore[reportArgumentType]
    assert ops(module, ReuseOp), program(module)


DYNAMIC_RESHAPE_COPY = """
builtin.module {
  kernel.kernel @copy pointwise ["s0*s1*s2"] x [1] (%mm: memref<?x?xf32>, %s0: index, %s1: index, %s2: index) -> (memref<?x?xf32>) {
    %v = loop.pointwise ["s0", "s1*s2"] (%mm) syms(%s0, %s1, %s2) {kernel.vars = [#loop.expr<"d0 // (s1*s2)">, #loop.expr<"d0 % (s1*s2)">]} : (memref<?x?xf32>, index, index, index) -> memref<?x?xf32> {
    ^bb0(%d0: index, %d1: index, %in0: memref<?x?xf32>):
      %0 = loop.load %in0["d0*s1*s2 + d1"] : memref<?x?xf32>
      loop.yield %0 : f32
    }
    kernel.yield %v : memref<?x?xf32>
  }
  kernel.program @forward(%x: memref<?x?xf32>, %w: memref<?x?xf32>, %s0: index, %s1: index) -> (memref<?x?xf32>) {
    %c1 = arith.constant 1 : index
    %s2 = memref.dim %w, %c1 : memref<?x?xf32>
    %rows = arith.muli %s0, %s1 : index
    %mm = kernel.extern (%x, %w) : (memref<?x?xf32>, memref<?x?xf32>) -> memref<?x?xf32> {
    ^bb0(%a: tensor<?x?xf32>, %b: tensor<?x?xf32>):
      %p = aten.mm.default(%a, %b) : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
      kernel.yield %p : tensor<?x?xf32>
    }
    %cols = arith.muli %s1, %s2 : index
    %out = kernel.alloc(%s0, %cols) : memref<?x?xf32>
    %cols2 = arith.muli %s1, %s2 : index
    %out2 = kernel.alloc(%s0, %cols2) : memref<?x?xf32>
    kernel.launch @copy(%mm, %s0, %s1, %s2) outs(%out) : (memref<?x?xf32>, index, index, index) -> (memref<?x?xf32>)
    kernel.launch @copy(%out, %s0, %s1, %s2) outs(%out2) : (memref<?x?xf32>, index, index, index) -> (memref<?x?xf32>)
    kernel.return %out2 : memref<?x?xf32>
  }
}
"""


def test_dynamic_sizes_must_match_for_an_in_place_update() -> None:
    """A matmul's ``(s0*s1) x s2`` result copied into an ``s0 x (s1*s2)`` buffer: the same
    type, other sizes; writing the copy in place returned the matmul's sizes (a symbolic-
    size graph-batch finding). The second copy's sizes are equal computations of the
    first's: that one may go in place."""
    module = schedule(parse(DYNAMIC_RESHAPE_COPY), "buffer-reuse")
    launches = ops(module, LaunchOp)
    assert isinstance(launches[0], LaunchOp)
    assert isinstance(launches[1], LaunchOp)
    first_out = launches[0].outs[0]
    assert first_out is not launches[0].args[0]  # not over the matmul's result
    assert launches[1].outs[0] is launches[1].args[0]  # same sizes: in place


def _product_copy(rows: str) -> str:
    """A matmul of ``rows`` x 8 rows (an ``as_strided`` view of ``%x`` of the host size
    ``rows``) times an 8 x ``s2`` view of ``%w``, doubled in order into an
    ``s0 x (s1*s2)`` buffer, whose sizes are computed before the matmul."""
    return f"""
builtin.module {{
  kernel.kernel @copy pointwise ["s0*s1*s2"] x [1] (%mm: memref<?x?xf32>, %s0: index, %s1: index, %s2: index) -> (memref<?x?xf32>) {{
    %v = loop.pointwise ["s0", "s1*s2"] (%mm) syms(%s0, %s1, %s2) {{kernel.vars = [#loop.expr<"d0 // (s1*s2)">, #loop.expr<"d0 % (s1*s2)">]}} : (memref<?x?xf32>, index, index, index) -> memref<?x?xf32> {{
    ^bb0(%d0: index, %d1: index, %in0: memref<?x?xf32>):
      %0 = loop.load %in0["d0*s1*s2 + d1"] : memref<?x?xf32>
      %1 = arith.constant 2.000000e+00 : f32
      %2 = arith.mulf %0, %1 : f32
      loop.yield %2 : f32
    }}
    kernel.yield %v : memref<?x?xf32>
  }}
  kernel.program @forward(%x: memref<?x8xf32>, %w: memref<8x?xf32>, %s0: index, %s1: index, %s2: index) -> (memref<?x?xf32>) {{
    %c1 = arith.constant 1 : index
    %rows = arith.muli %s0, %s1 : index
    %more = arith.addi %rows, %c1 : index
    %cols = arith.muli %s1, %s2 : index
    %mm = kernel.extern (%x, %w) syms({rows}, %s2) : (memref<?x8xf32>, memref<8x?xf32>, index, index) -> memref<?x?xf32> {{
    ^bb0(%a: tensor<?x8xf32>, %b: tensor<8x?xf32>, %r: index, %n: index):
      %av = aten.as_strided.default(%a, size = [%r, 8], stride = [8, 1]) : (tensor<?x8xf32>, index) -> tensor<?x8xf32>
      %bv = aten.as_strided.default(%b, size = [8, %n], stride = [%n, 1]) : (tensor<8x?xf32>, index, index) -> tensor<8x?xf32>
      %p = aten.mm.default(%av, %bv) : (tensor<?x8xf32>, tensor<8x?xf32>) -> tensor<?x?xf32>
      kernel.yield %p : tensor<?x?xf32>
    }}
    %out = kernel.alloc(%s0, %cols) : memref<?x?xf32>
    kernel.launch @copy(%mm, %s0, %s1, %s2) outs(%out) : (memref<?x?xf32>, index, index, index) -> (memref<?x?xf32>)
    kernel.return %out : memref<?x?xf32>
  }}
}}
"""


def test_extern_result_of_proven_element_count_is_reshaped_for_in_place() -> None:
    """Dynamic shapes: the matmul's ``(s0*s1) x s2`` result (its body says so: an
    ``as_strided`` view of ``s0*s1`` rows) holds as many elements as the ``s0 x (s1*s2)``
    output, so the extern reshapes it to the output's sizes and the kernel writes over
    it (MobileNet-v2's 1x1 convolutions as ``mm``, feeding their batch norms). When its
    rows are ``s0*s1 + 1`` (the kernel reads a prefix), nothing changes."""
    x, w = torch.randn(7, 8), torch.randn(8, 5)
    s0, s1, s2 = 2, 3, 5
    want = (x[: s0 * s1] @ w).reshape(s0, s1 * s2) * 2
    for rows, in_place in (("%rows", True), ("%more", False)):
        module = parse(_product_copy(rows))
        (before,), _ = run_program(module, [x[: s0 * s1 + (not in_place)], w, s0, s1, s2])
        schedule(module, "buffer-reuse")
        (launch,) = ops(module, LaunchOp)
        assert isinstance(launch, LaunchOp)
        assert (launch.outs[0] is launch.args[0]) is in_place, program(module)
        assert ("aten.reshape.default" in str(module)) is in_place
        (after,), _ = run_program(module, [x[: s0 * s1 + (not in_place)], w, s0, s1, s2])
        torch.testing.assert_close(before, want)
        torch.testing.assert_close(after, want)


DYNAMIC_CHAIN = """
builtin.module {
  kernel.kernel @split pointwise ["8*s0"] x [1] (%a: memref<?x8xf32>, %s0: index) -> (memref<?x8xf32>, memref<?x8xf32>) {
    %p = loop.pointwise ["s0", 8] (%a) syms(%s0) {kernel.vars = [#loop.expr<"d0 // 8">, #loop.expr<"d0 % 8">]} : (memref<?x8xf32>, index) -> memref<?x8xf32> {
    ^bb0(%d0: index, %d1: index, %in0: memref<?x8xf32>):
      %0 = loop.load %in0["8*d0 + d1"] : memref<?x8xf32>
      %1 = arith.addf %0, %0 : f32
      loop.yield %1 : f32
    }
    %q = loop.pointwise ["s0", 8] (%a) syms(%s0) {kernel.vars = [#loop.expr<"d0 // 8">, #loop.expr<"d0 % 8">]} : (memref<?x8xf32>, index) -> memref<?x8xf32> {
    ^bb0(%d0: index, %d1: index, %in0: memref<?x8xf32>):
      %0 = loop.load %in0["8*d0 + d1"] : memref<?x8xf32>
      %1 = arith.mulf %0, %0 : f32
      loop.yield %1 : f32
    }
    kernel.yield %p, %q : memref<?x8xf32>, memref<?x8xf32>
  }
  kernel.kernel @add pointwise ["8*s0"] x [1] (%a: memref<?x8xf32>, %b: memref<?x8xf32>, %s0: index) -> (memref<?x8xf32>) {
    %v = loop.pointwise ["s0", 8] (%a, %b) syms(%s0) {kernel.vars = [#loop.expr<"d0 // 8">, #loop.expr<"d0 % 8">]} : (memref<?x8xf32>, memref<?x8xf32>, index) -> memref<?x8xf32> {
    ^bb0(%d0: index, %d1: index, %in0: memref<?x8xf32>, %in1: memref<?x8xf32>):
      %0 = loop.load %in0["8*d0 + d1"] : memref<?x8xf32>
      %1 = loop.load %in1["8*d0 + d1"] : memref<?x8xf32>
      %2 = arith.addf %0, %1 : f32
      loop.yield %2 : f32
    }
    kernel.yield %v : memref<?x8xf32>
  }
  kernel.program @forward(%x: memref<?x8xf32>, %n: index) -> memref<?x8xf32> {
    %c1 = arith.constant 1 : index
    %p = kernel.alloc(%n) : memref<?x8xf32>
    %q = kernel.alloc(%n) : memref<?x8xf32>
    kernel.launch @split(%x, %n) outs(%p, %q) : (memref<?x8xf32>, index) -> (memref<?x8xf32>, memref<?x8xf32>)
    %s = kernel.alloc(%n) : memref<?x8xf32>
    kernel.launch @add(%p, %q, %n) outs(%s) : (memref<?x8xf32>, memref<?x8xf32>, index) -> (memref<?x8xf32>)
    %m = arith.muli %n, %c1 : index
    %p2 = kernel.alloc(%m) : memref<?x8xf32>
    %q2 = kernel.alloc(%m) : memref<?x8xf32>
    kernel.launch @split(%s, %m) outs(%p2, %q2) : (memref<?x8xf32>, index) -> (memref<?x8xf32>, memref<?x8xf32>)
    %s2 = kernel.alloc(%m) : memref<?x8xf32>
    kernel.launch @add(%p2, %q2, %m) outs(%s2) : (memref<?x8xf32>, memref<?x8xf32>, index) -> (memref<?x8xf32>)
    kernel.return %s2 : memref<?x8xf32>
  }
}
"""


def test_dynamic_buffers_of_provably_equal_sizes_are_reused() -> None:
    """Buffers of symbolic sizes: a freed one is reused by a later allocation of the same
    type whose sizes are provably equal (``n * 1`` and ``n``), also with a launch or
    another allocation in between (the wrapper of a dynamic ViT allocated 73 buffers a
    call against the static one's 38: the rule was "the same size operands, freed right
    before"). The numbers stay (the interpreter poisons reused memory)."""
    before = parse(DYNAMIC_CHAIN)
    after = schedule(before.clone(), "buffer-reuse{in-place=false}")
    assert len(ops(after, ReuseOp)) == 3  # p2, q2 and s2 take p, q and s
    x = torch.randn(5, 8)
    (expected,), _ = run_program(before, [x.clone(), 5], "forward")
    (got,), _ = run_program(after, [x.clone(), 5], "forward")
    torch.testing.assert_close(got, expected)


EMBEDDING_BAG = """
func.func @forward(%w: tensor<10x5xf32>, %i: tensor<25xi64>, %off: tensor<5xi64>, %psw: tensor<25xf32>) -> (tensor<5x5xf32>, tensor<25xi64>) {
  %out, %offset2bag, %bag_size, %max_indices = aten._embedding_bag.default(%w, %i, %off, per_sample_weights = %psw) : (tensor<10x5xf32>, tensor<25xi64>, tensor<5xi64>, tensor<25xf32>) -> (tensor<5x5xf32>, tensor<25xi64>, tensor<5xi64>, tensor<0xi64>)
  %n = aten.add.Tensor(%offset2bag, %i) : (tensor<25xi64>, tensor<25xi64>) -> tensor<25xi64>
  %m = aten.mul.Tensor(%n, %n) : (tensor<25xi64>, tensor<25xi64>) -> tensor<25xi64>
  func.return %out, %m : tensor<5x5xf32>, tensor<25xi64>
}
"""


def test_results_eager_makes_smaller_than_their_meta_are_never_reused() -> None:
    """``_embedding_bag``'s ``offset2bag`` is empty in eager (sum mode, per-sample
    weights) though its type says 25 elements: a kernel written into its memory wrote
    past its end (a segfault in the OpInfo gradient sweep, bfloat16 ``embedding_bag``)."""
    module = parse(lowered(EMBEDDING_BAG))
    schedule(module, "fuse,tile,buffer-reuse")
    (bag,) = [
        op
        for op in program(module).body.block.ops
        if isinstance(op, ExternOp) and "_embedding_bag" in str(op)
    ]
    for op in program(module).body.block.ops:
        if isinstance(op, ReuseOp):
            assert op.source.owner is not bag, program(module)
        if isinstance(op, LaunchOp):
            assert not any(out.owner is bag for out in op.outs), program(module)
