"""Lowering of ``_c10d_functional.wait_tensor``: an ATen call that keeps the collective's
input alive.

A collective (``all_reduce``, ``all_gather_into_tensor``, ...) has no lowering of its own:
it runs as a ``loop.extern`` calling the functional collective, which starts the
communication and returns at once. Until the matching ``wait_tensor``, the collective may
still read its input (gloo sends from it asynchronously), so that input buffer must not
be freed, reused or overwritten in place before the wait. The wait's extern therefore
takes the collective's input buffers as extra inputs its body does not read: to every
later pass (liveness, ``buffer-reuse``, ``reorder-collectives``) they are live until the
wait, which is what the data flow of the program says.

```mlir
%r = loop.extern (%x) : (memref<8xf32>) -> memref<8xf32> {
^bb0(%0: tensor<8xf32>):
  %1 = aten._c10d_functional.all_reduce.default(%0, reduce_op = "sum", group_name = "0") : ...
  loop.yield %1 : tensor<8xf32>
}
%w = loop.extern (%r, %x) : (memref<8xf32>, memref<8xf32>) -> memref<8xf32> {
^bb0(%0: tensor<8xf32>, %1: tensor<8xf32>):
  %2 = aten._c10d_functional.wait_tensor.default(%0) : ...
  loop.yield %2 : tensor<8xf32>
}
```
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.ir import SSAValue

from kiln.dialects.aten.ops import AtenOp
from kiln.dialects.aten.traits import Collective, has_aten_trait
from kiln.passes.aten_to_loop.context import Lowered, Lowering, LoweringContext, OpArgs
from kiln.passes.aten_to_loop.tensors import TensorRef


def collective_inputs(ctx: LoweringContext, waited: SSAValue) -> list[SSAValue]:
    """The buffers the collective that made ``waited`` reads (none if another op made it)."""
    source = waited.owner
    if not isinstance(source, AtenOp) or not has_aten_trait(source, Collective):
        return []
    buffers: list[SSAValue] = []
    for operand in source.operands:
        lowered = ctx.values.get(operand)
        if isinstance(lowered, TensorRef) and lowered.buffer not in buffers:
            buffers.append(lowered.buffer)
    return buffers


def lower_wait_tensor(ctx: LoweringContext, args: OpArgs) -> Sequence[Lowered]:
    op = args.op
    return ctx.extern(op, keep_alive=collective_inputs(ctx, op.operands[0]))


LOWERINGS: dict[str, Lowering] = {
    "_c10d_functional::wait_tensor": lower_wait_tensor,
}
