"""The ``loop`` Dialect object."""

from __future__ import annotations

from xdsl.ir import Dialect

from kiln.dialects.loop.attributes import IndexExprAttr, ReductionKindAttr
from kiln.dialects.loop.body_ops import CheckIndexOp, IndexOp, LoadOp, YieldOp
from kiln.dialects.loop.ops import ExternOp, PointwiseOp, ReductionOp, ScatterOp

Loop = Dialect(
    "loop",
    [PointwiseOp, ReductionOp, ScatterOp, ExternOp, LoadOp, IndexOp, CheckIndexOp, YieldOp],
    [IndexExprAttr, ReductionKindAttr],
)
