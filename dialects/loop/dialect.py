"""The ``loop`` Dialect object."""

from __future__ import annotations

from xdsl.ir import Dialect

from kiln.dialects.loop.attributes import IndexExprAttr, ReductionKindAttr
from kiln.dialects.loop.body_ops import CheckIndexOp, IndexOp, LoadOp, YieldOp
from kiln.dialects.loop.ops import ExternOp, PointwiseOp, ReductionOp

Loop = Dialect(
    "loop",
    [PointwiseOp, ReductionOp, ExternOp, LoadOp, IndexOp, CheckIndexOp, YieldOp],
    [IndexExprAttr, ReductionKindAttr],
)
