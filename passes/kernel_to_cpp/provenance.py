"""Where a kernel's code comes from: one line per fused node, for the comment block.

Each line names the node (its result, which the importer named after the FX node),
what it computes, and, when the lower levels carried it, the FX node and source line
from the op's location (``loc("relu"("model.py":12:0))``, see
:mod:`kiln.dialects.aten.fx.locations`)::

    %mul: pointwise [2, 5, 16] <- fx node 'mul' at model.py:12
    %sum1: sum [2, 5] reduce [16]

Backend-neutral: any emitter can put these lines in its comments.
"""

from __future__ import annotations

import os

from xdsl.dialects.builtin import (
    CallSiteLoc,
    FileLineColLoc,
    FusedLoc,
    NameLoc,
    StringAttr,
)
from xdsl.ir import Attribute, Operation

from kiln.dialects.kernel.kernel_ops import KernelOp
from kiln.dialects.loop.ops import LoopNestOp, ReductionOp, ScatterOp

ORIGIN_ATTR = "kiln.origin"
"""Optional attribute (string, or array of strings) a lowering may set on a loop op to
name the aten op(s) it computes, e.g. ``"aten.add.Tensor"``."""


def _file_line(loc: Attribute) -> str | None:
    if isinstance(loc, FileLineColLoc):
        return f"{os.path.basename(loc.filename.data)}:{loc.line.data}"
    if isinstance(loc, CallSiteLoc):
        return _file_line(loc.caller)
    if isinstance(loc, NameLoc):
        return _file_line(loc.location)
    return None


def _location_names(loc: Attribute) -> list[str]:
    """``fx node 'relu' at model.py:12`` for each named location inside ``loc``."""
    if isinstance(loc, NameLoc):
        where = _file_line(loc.location)
        text = f"fx node '{loc.desc.data}'"
        return [f"{text} at {where}" if where else text]
    if isinstance(loc, FusedLoc):
        out: list[str] = []
        for inner in loc.locations.data:  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType, reportUnknownVariableType]
            out += _location_names(inner)  # pyright: ignore[reportUnknownArgumentType]
        return out
    return []


def _origins(op: Operation) -> list[str]:
    attr = op.attributes.get(ORIGIN_ATTR)
    if isinstance(attr, StringAttr):
        return [attr.data]
    data = getattr(attr, "data", None)
    if isinstance(data, tuple):
        return [a.data for a in data if isinstance(a, StringAttr)]  # pyright: ignore[reportUnknownVariableType, reportUnknownMemberType]
    return []


def _sizes(sizes: object) -> str:
    return "[" + ", ".join(s.text for s in sizes) + "]"  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType, reportGeneralTypeIssues, reportAttributeAccessIssue]


def describe_node(node: LoopNestOp) -> str:
    names = ", ".join(f"%{r.name_hint}" if r.name_hint else "%?" for r in node.results)
    if isinstance(node, ReductionOp):
        what = (
            f"{node.kind.data} {_sizes(node.sizes.data)} reduce {_sizes(node.reduction_sizes.data)}"
        )
    elif isinstance(node, ScatterOp):
        what = f"scatter-add {_sizes(node.sizes.data)} into {_sizes(node.out_sizes.data)}"
    else:
        what = f"pointwise {_sizes(node.sizes.data)}"
    sources = _origins(node) + _location_names(node.location)
    return f"{names}: {what}" + (f" <- {', '.join(sources)}" if sources else "")


def kernel_provenance(kernel: KernelOp) -> list[str]:
    """The comment lines for a kernel: its iteration space, then one line per node."""
    head = f"{kernel.sym_name.data}: {kernel.kernel_kind} kernel over [{kernel.numel.text}] x [{kernel.rnumel.text}]"
    return [head, *(describe_node(n) for n in kernel.nodes())]


__all__ = ["ORIGIN_ATTR", "describe_node", "kernel_provenance"]
