"""``lower-to-triton``: every ``kernel.kernel`` gets a ``triton.kernel`` that implements it.

Like MLIR's GPU outlining, the host side stays as it is: ``kernel.program`` still
launches ``@kernel0``, and ``@kernel0`` keeps its loop nodes (the provenance of the
generated code); next to it the pass adds ``triton.kernel @kiln_per_fused_sum_mul_0
implements @kernel0``, the same computation in the Triton language (see
:mod:`kiln.passes.kernel_to_triton`). Kernels are named for what they contain: ``poi``
(pointwise), ``per`` (persistent reduction) or ``red`` (looped reduction), then the
fused nodes' names, then a number. Each carries ``provenance`` (one line per fused node),
the chosen ``config`` and the candidate ``configs`` for autotuning.

```console
$ kiln-opt m.mlir -p 'lower-aten,fuse,tile,lower-to-triton'
triton.kernel @kiln_poi_fused_add_relu_0 pointwise [32] x [1] params [in_ptr0, out_ptr0] constexprs [XBLOCK] attributes {implements = @kernel0, ...} {...}
```

Options: ``cse`` (default on) runs common-subexpression elimination and DCE on the
generated kernels.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, ModuleOp, StringAttr
from xdsl.passes import ModulePass
from xdsl.transforms.common_subexpression_elimination import cse
from xdsl.transforms.dead_code_elimination import region_dce
from xdsl.utils.exceptions import DiagnosticException

from kiln.dialects.kernel.contract_attrs import IMPLEMENTS as IMPLEMENTS_ATTR
from kiln.dialects.kernel.kernel_ops import KernelOp
from kiln.dialects.loop.ops import LoopNestOp, ReductionOp
from kiln.dialects.triton import KernelOp as TritonKernelOp
from kiln.passes.kernel_to_triton.body import BodyLoweringError
from kiln.passes.kernel_to_triton.index import IndexLoweringError
from kiln.passes.kernel_to_triton.kernel import KernelLowering, provenance
from kiln.passes.kernel_to_triton.plan import KernelPlan, PlanError, plan_kernel

IMPLEMENTS = IMPLEMENTS_ATTR.name
"""Attribute of a ``triton.kernel``: the ``kernel.kernel`` it implements (declared in
:mod:`kiln.dialects.kernel.contract_attrs`)."""

_PREFIX = {"pointwise": "poi", "persistent": "per", "looped": "red", "split": "red", "matmul": "mm"}
_MAX_NAMES = 4


class LowerToTritonError(DiagnosticException):
    """A kernel lower-to-triton cannot handle (the message names it)."""


def _node_names(node: LoopNestOp) -> list[str]:
    """What a node is called: its results' names (FX node names, numbering dropped), or
    for an unnamed node its reduction kind or the arithmetic in its body."""
    names: list[str] = []
    for result in node.results:
        base = re.sub(r"[_\d]+$", "", (result.name_hint or "").lower())
        base = re.sub(r"[^a-z0-9_]", "_", base).strip("_")
        if base:
            names.append(base)
    if names:
        return names
    if isinstance(node, ReductionOp):
        return [str(node.kind.data)]
    for op in node.body.walk():
        if op.dialect_name() in ("arith", "math") and op.name not in _PLUMBING:
            short = op.name.split(".", 1)[1]
            names.append(_SHORT.get(short, short))
    return names[:2]


_PLUMBING = frozenset(
    {
        "arith.constant",
        "arith.index_cast",
        "arith.extf",
        "arith.truncf",
        "arith.sitofp",
        "arith.uitofp",
        "arith.fptosi",
        "arith.extsi",
        "arith.extui",
        "arith.trunci",
        "arith.select",
    }
)
_SHORT = {
    "addf": "add",
    "addi": "add",
    "subf": "sub",
    "subi": "sub",
    "mulf": "mul",
    "muli": "mul",
    "divf": "div",
    "maximumf": "max",
    "minimumf": "min",
    "maxnumf": "max",
    "minnumf": "min",
    "negf": "neg",
    "cmpf": "cmp",
    "cmpi": "cmp",
}


def kernel_name(plan: KernelPlan, number: int) -> str:
    """``kiln_<kind>_fused_<names>_<number>``, names from the fused nodes."""
    names: list[str] = []
    for node in plan.nodes:
        for base in _node_names(node.op):
            if base not in names:
                names.append(base)
    fused = "_".join(names[:_MAX_NAMES]) or "kernel"
    return f"kiln_{_PREFIX[plan.kind]}_fused_{fused}_{number}"


def implementations(module: ModuleOp) -> dict[str, TritonKernelOp]:
    """``kernel.kernel`` name -> the ``triton.kernel`` implementing it."""
    return {
        name: op
        for name, op in IMPLEMENTS_ATTR.implementations(module).items()
        if isinstance(op, TritonKernelOp)
    }


def lower_kernel(kernel: KernelOp, number: int, run_cse: bool = True) -> TritonKernelOp:
    """The ``triton.kernel`` for one ``kernel.kernel``."""
    where = f"kernel.kernel @{kernel.sym_name.data}"
    try:
        plan = plan_kernel(kernel)
        lowering = KernelLowering(plan, kernel_name(plan, number))
        op = lowering.lower()
    except (PlanError, BodyLoweringError, IndexLoweringError) as e:
        raise LowerToTritonError(f"lower-to-triton: {where}: {e}") from e
    if run_cse:
        cse(op)
        region_dce(op.body)
    IMPLEMENTS_ATTR.set(op, kernel.sym_name.data)
    op.attributes["config"] = plan.config
    op.attributes["configs"] = ArrayAttr(plan.configs)
    op.attributes["provenance"] = ArrayAttr(provenance(kernel.nodes()))
    if kernel.reduction_hint is not None:
        op.attributes["reduction_hint"] = StringAttr(kernel.reduction_hint.data)
    return op


@dataclass(frozen=True)
class LowerToTritonPass(ModulePass):
    """Add a triton.kernel implementing each kernel.kernel."""

    name: ClassVar[str] = "lower-to-triton"  # pyright: ignore[reportIncompatibleVariableOverride]

    cse: bool = True
    """Run CSE and DCE on the generated kernels."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        done = implementations(op)
        kernels = [k for k in op.ops if isinstance(k, KernelOp)]
        number = len(done)
        for kernel in kernels:
            if kernel.sym_name.data in done:
                continue
            triton_kernel = lower_kernel(kernel, number, self.cse)
            number += 1
            op.body.block.insert_op_after(triton_kernel, kernel)


__all__ = [
    "IMPLEMENTS",
    "LowerToTritonError",
    "LowerToTritonPass",
    "implementations",
    "kernel_name",
    "lower_kernel",
]
