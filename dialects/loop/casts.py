"""The scalar cast ops a loop body may hold, for every evaluator and code generator.

The reference interpreter (:mod:`kiln.dialects.loop.body_eval`) and the C++ emitter
(:mod:`kiln.backends.cpp.scalar_ops`) dispatch on this one tuple, so an op added here
is handled (or rejected) by both rather than silently missing from one.
"""

from __future__ import annotations

from xdsl.dialects import arith

CAST_OPS = (
    arith.ExtFOp,
    arith.TruncFOp,
    arith.SIToFPOp,
    arith.UIToFPOp,
    arith.FPToSIOp,
    arith.FPToUIOp,
    arith.ExtSIOp,
    arith.ExtUIOp,
    arith.TruncIOp,
    arith.IndexCastOp,
)

__all__ = ["CAST_OPS"]
