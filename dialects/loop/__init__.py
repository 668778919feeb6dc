"""The loop dialect: Inductor's loop-level IR, explicit, printable and executable.

One region op per output buffer (``loop.pointwise``, ``loop.reduction``,
``loop.scatter``, ``loop.extern``); bodies are scalar ``arith``/``math`` with ``loop.load`` at sympy index
expressions (:mod:`kiln.dialects.loop.expr`). See :mod:`kiln.dialects.loop.ops` for the
syntax and :mod:`kiln.dialects.loop.interpreter` to run it.
"""

from kiln.dialects.loop.attributes import IndexExprAttr, ReductionKind, ReductionKindAttr
from kiln.dialects.loop.body_ops import CheckIndexOp, IndexOp, LoadOp, YieldOp
from kiln.dialects.loop.dialect import Loop
from kiln.dialects.loop.ops import ExternOp, LoopNestOp, PointwiseOp, ReductionOp, ScatterOp

__all__ = [
    "CheckIndexOp",
    "ExternOp",
    "IndexExprAttr",
    "IndexOp",
    "LoadOp",
    "Loop",
    "LoopNestOp",
    "PointwiseOp",
    "ReductionKind",
    "ReductionKindAttr",
    "ReductionOp",
    "ScatterOp",
    "YieldOp",
]
