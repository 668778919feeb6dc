"""``cse``: common subexpression elimination.

xDSL's driver (``xdsl.transforms.common_subexpression_elimination``), registered under
kiln's registry. Two ops are merged when they have the same name, operands,
properties, attributes and result types and are free of side effects: aten ops are
``Pure`` unless their schema mutates an argument or draws random numbers
(``nondeterministic_seeded``: ``aten.rand``, ``aten.dropout``, ...), and
``aten.generic`` is opaque, so those are never merged. Returned values that were distinct
before stay distinct tensors: a merged duplicate is returned as an ``aten.clone`` (eager
returns two tensors; an in-place update of one must not change the other).

```mlir
%0 = aten.neg.default(%x) : (tensor<4xf32>) -> tensor<4xf32>
%1 = aten.neg.default(%x) : (tensor<4xf32>) -> tensor<4xf32>
%2 = aten.add.Tensor(%0, %1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// kiln-opt --cse:
%0 = aten.neg.default(%x) : (tensor<4xf32>) -> tensor<4xf32>
%2 = aten.add.Tensor(%0, %0) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
```
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.dialects.func import ReturnOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.transforms.common_subexpression_elimination import cse

from kiln.dialects.aten.dialect import op_class
from kiln.dialects.aten.traits import AliasingView


@dataclass(frozen=True)
class CSEPass(ModulePass):
    """Merge identical side-effect-free ops (see the module docstring)."""

    name = "cse"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        returned = {ret: list(ret.operands) for ret in op.walk() if isinstance(ret, ReturnOp)}
        cse(op)
        for ret, before in returned.items():
            _unmerge_outputs(ret, before)


def _is_view(value: SSAValue) -> bool:
    # Two views of one tensor share its storage either way: returning one of them twice
    # keeps eager's aliasing, and a copy would break the alias with the input.
    owner = value.owner
    return isinstance(owner, Operation) and owner.has_trait(AliasingView)


def _unmerge_outputs(ret: ReturnOp, before: list[SSAValue]) -> None:
    """Outputs that were distinct tensors stay distinct: two returned values that cse
    merged come back as the value and a copy of it (eager returns two tensors; one
    tensor twice would make an in-place update of one change the other; found by the
    program-batch fuzzer). A value returned twice before cse stays one tensor."""
    first: dict[SSAValue, SSAValue] = {}  # value now -> the value it stood for first
    for k, (now, was) in enumerate(zip(ret.operands, before, strict=True)):
        seen = first.setdefault(now, was)
        if seen is was or not isinstance(now.type, TensorType) or _is_view(now):
            continue
        clone_class = op_class("clone.default")
        assert clone_class is not None
        clone = clone_class.from_args({"self": now}, [now.type])
        clone.location = ret.location
        assert ret.parent is not None
        ret.parent.insert_op_before(clone, ret)
        ret.operands[k] = clone.results[0]
