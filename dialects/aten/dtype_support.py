"""Dtypes eager rejects, so that passes leave the op to ATen, which raises eager's error.

ATen's meta functions (what Dynamo and the importer trace with) accept dtypes that its
kernels reject: ``abs`` of a bool tensor traces fine but ``abs_cpu`` raises "not
implemented for 'Bool'"; so do ``silu``/``gelu``/``lerp`` of integers, ``bitwise_and``
of floats, ``relu``/``ceil``/``round`` of bools, and more. A lowering written for the
types it expects would compute *something* for these instead of raising. Rather than
keep a table in step with ATen's dispatch macros, ask ATen: call the overload once on
one-element CPU tensors of the operand dtypes (cached per op class, operand types and
properties). If it raises, ``lower-aten`` leaves the op to ``loop.extern`` (which raises
eager's error at run time) and ``decompose`` keeps it (``silu`` of an int tensor must not
become ``x * sigmoid(x)``, which eager accepts).

Only pure ops are probed (a random or mutating op must not run at compile time). The
probe runs on the CPU: an op the CPU kernel accepts but the CUDA one rejects is not
caught.
"""

from __future__ import annotations

from collections.abc import Hashable
from functools import cache

from xdsl.dialects.builtin import AnyFloat, IndexType, IntegerType, TensorType
from xdsl.traits import Pure

from kiln.dialects.aten.ops import AtenOp, GenericOp

_VERDICTS: dict[Hashable, str | None] = {}


@cache
def _is_pointwise(overload: str) -> bool:
    import torch

    from kiln.dialects.aten.call_plan import torch_overload

    try:
        return torch.Tag.pointwise in torch_overload(overload).tags  # pyright: ignore[reportFunctionMemberAccess, reportAttributeAccessIssue]
    except Exception:  # no such overload: no verdict
        return False


def _probe(op: AtenOp) -> str | None:
    """Eager's error for this op on its operand dtypes, or None when eager accepts."""
    import torch
    from torch.utils._python_dispatch import _disable_current_modes

    from kiln.dialects.aten.call_plan import build_plan
    from kiln.dialects.aten.dtypes import UnsupportedDtype, type_to_dtype

    values: list[object] = []
    for operand in op.operands:
        ty = operand.type
        if isinstance(ty, TensorType):
            try:
                dtype = type_to_dtype(ty.element_type)
            except UnsupportedDtype:
                return None
            with _disable_current_modes():
                values.append(torch.ones([1] * ty.get_num_dims(), dtype=dtype))
        elif isinstance(ty, AnyFloat):
            values.append(1.0)
        elif isinstance(ty, IntegerType | IndexType):
            values.append(1)
        else:
            return None
    try:
        plan = build_plan(op)
    except Exception:  # an op the interpreter cannot call: no verdict
        return None
    try:
        # Under torch.compile a FakeTensorMode is active: the probe must run real kernels.
        with _disable_current_modes():
            plan.run(tuple(values))
    except (RuntimeError, NotImplementedError, TypeError, ValueError) as e:
        return str(e).splitlines()[0] if str(e) else type(e).__name__
    return None


def eager_rejects(op: AtenOp, pointwise_only: bool = False) -> str | None:
    """Eager's error for ``op`` on its operand dtypes (None when eager accepts them).

    ``pointwise_only``: give a verdict only for ops torch tags ``pointwise`` (whose
    one-element probe cannot fail on shapes)."""
    if isinstance(op, GenericOp) or not op.has_trait(Pure):
        return None
    if pointwise_only and not _is_pointwise(op.overload_name):
        return None
    key = (type(op), tuple(op.operand_types), tuple(sorted(op.properties.items())))
    try:
        return _VERDICTS[key]
    except KeyError:
        pass
    except TypeError:  # an unhashable property: probe without caching
        return _probe(op)
    verdict = _VERDICTS[key] = _probe(op)
    return verdict


__all__ = ["eager_rejects"]
