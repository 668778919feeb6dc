"""Lowerings that first ask ATen whether it accepts the op's dtypes
(:func:`kiln.dialects.aten.dtype_support.eager_rejects`); if not, the op runs as
``loop.extern`` and raises eager's error at run time instead of computing something."""

from __future__ import annotations

from collections.abc import Sequence
from functools import wraps

from kiln.dialects.aten.dtype_support import eager_rejects
from kiln.passes.aten_to_loop.context import Lowered, Lowering, LoweringContext, OpArgs
from kiln.passes.aten_to_loop.types import NoLowering


def guarded(lowering: Lowering) -> Lowering:
    """``lowering``, after checking that eager accepts the op's dtypes."""

    @wraps(lowering)
    def lower(ctx: LoweringContext, args: OpArgs) -> Sequence[Lowered]:
        error = eager_rejects(args.op)
        if error is not None:
            raise NoLowering(f"eager rejects these dtypes: {error}")
        return lowering(ctx, args)

    return lower


__all__ = ["guarded"]
