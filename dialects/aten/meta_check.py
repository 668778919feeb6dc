"""The aten verifier's shape check: an op's declared result types must be what torch
computes for its operand types.

The generated ops check arguments against the schema, not shapes: ``aten.mm`` of 2x3 by
4x5, or ``aten.sum.default(tensor<2x3xf32>) -> tensor<7xf64>``, verified and lowered to
code that wrote only ``out[0]``. Torch's own shape functions decide instead: the op runs
once on meta tensors of its operand types (meta kernels: no data; factory ops are made
on the meta device, so they allocate nothing) and its results' dtypes and shapes must
match the declared types. Plain meta tensors, not ``FakeTensorMode``: that would import
Dynamo, seconds for every ``kiln-opt`` run.

Only fully static ops are checked (no dynamic dims, no symbolic arguments); an op torch
cannot run on meta tensors (no meta kernel, a data-dependent or scalar result) is not. Verdicts
are cached per op class, operand types, properties and result types, so a pipeline that
verifies after every pass pays for each distinct op once.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from xdsl.dialects.builtin import TensorType
from xdsl.ir import Attribute

from kiln.dialects.aten.ops import AtenOp

_VERDICTS: dict[Hashable, str | None] = {}
_ENABLED = [True]


@contextmanager
def shape_checks(enabled: bool) -> Iterator[None]:
    """Turn the check on or off inside the block (for IR built to test syntax alone,
    such as every generated op applied to arbitrary operands)."""
    saved = _ENABLED[0]
    _ENABLED[0] = enabled
    try:
        yield
    finally:
        _ENABLED[0] = saved


def _static(types: Sequence[Attribute]) -> bool:
    return all(not isinstance(t, TensorType) or all(d >= 0 for d in t.get_shape()) for t in types)


def _type_text(value: Any) -> str:
    import torch

    if not isinstance(value, torch.Tensor):
        return type(value).__name__
    from kiln.dialects.aten.dtypes import UnsupportedDtype, dtype_to_type

    try:
        element = str(dtype_to_type(value.dtype))
    except UnsupportedDtype:
        element = str(value.dtype)
    return f"tensor<{''.join(f'{d}x' for d in value.shape)}{element}>"


def _check(op: AtenOp) -> str | None:
    from kiln.dialects.aten.call_plan import build_plan
    from kiln.dialects.aten.dtypes import OpaqueDtypeType, type_to_dtype
    from kiln.dialects.aten.traits import Collective, has_aten_trait

    schema = op.op_schema()
    if not schema.returns or any(not r.kind.is_tensor for r in schema.returns):
        return None  # a scalar result (item) needs data
    if has_aten_trait(op, Collective):
        return None  # its meta kernel looks the process group up: only where it exists
    device = next((a for a in schema.arguments if a.name == "device"), None)
    if device is not None and not device.kwarg_only:
        return None  # a positional device (to.device): cannot be made meta
    try:
        plan = build_plan(op)
        dtypes = [
            type_to_dtype(t.element_type) if isinstance(t, TensorType) else None
            for t in op.operand_types
        ]
        declared = [
            (k, type_to_dtype(t.element_type), tuple(t.get_shape()))
            for k, t in enumerate(op.result_types)
            if isinstance(t, TensorType)
        ]
    except Exception:  # a dtype (UnsupportedDtype) or op torch cannot stand for: no verdict
        return None
    if any(d is None for d in dtypes):
        return None
    if any(
        isinstance(t, TensorType) and isinstance(t.element_type, OpaqueDtypeType)
        for t in (*op.operand_types, *op.result_types)
    ):
        return None  # meta tensors report quantized values as float32: no verdict
    return _run_meta(op, plan, dtypes, declared, device is not None)


def _run_meta(
    op: AtenOp,
    plan: Any,
    dtypes: Sequence[Any],
    declared: Sequence[tuple[int, Any, tuple[int, ...]]],
    has_device: bool,
) -> str | None:
    import torch
    from torch.utils._python_dispatch import _disable_current_modes

    meta = torch.device("meta")
    with _disable_current_modes():
        values = [
            torch.empty(tuple(t.get_shape()), dtype=d, device=meta)  # pyright: ignore[reportAttributeAccessIssue]
            for t, d in zip(op.operand_types, dtypes, strict=True)
        ]
        args = [get(values) for get in plan.positional]
        kwargs = {name: get(values) for name, get in plan.keywords}
        if has_device:  # factory ops: make nothing, anywhere
            kwargs["device"] = meta
            if "pin_memory" in kwargs:
                kwargs["pin_memory"] = None
        try:
            results = plan.unpack(plan.target(*args, **kwargs))
        except NotImplementedError:
            return None  # no meta kernel (nonzero, unique, ...)
        except (RuntimeError, ValueError, IndexError, TypeError) as e:
            text = str(e).strip()
            if "meta" in text.lower():
                return None  # needs data or a device, not a shape problem
            first = text.splitlines()[0] if text else type(e).__name__
            return f"torch rejects these operand types: {first}"
    for k, dtype, shape in declared:
        got = results[k] if k < len(results) else None
        if k > 0 and isinstance(got, torch.Tensor) and got.dtype == dtype and 0 in shape:
            # A secondary result declared empty: CPU kernels return empty saved statistics
            # where the meta function sizes them (batch norm in inference).
            continue
        if not isinstance(got, torch.Tensor) or got.dtype != dtype or tuple(got.shape) != shape:
            return (
                f"result #{k} is declared {op.result_types[k]}, but for these operands "
                f"torch computes {_type_text(got)}"
            )
    return None


def shape_mismatch(op: AtenOp) -> str | None:
    """Why ``op``'s declared result types are not what torch computes (None: they are,
    or the op cannot be checked)."""
    if not _ENABLED[0]:
        return None
    if op.sym_operands() or not _static(op.operand_types) or not _static(op.result_types):
        return None
    key = (type(op), tuple(op.operand_types), tuple(op.result_types))
    try:
        key = (*key, tuple(sorted(op.properties.items())))
        hash(key)
    except TypeError:  # an unhashable property: check without caching
        return _check(op)
    if key not in _VERDICTS:
        _VERDICTS[key] = _check(op)
    return _VERDICTS[key]


__all__ = ["shape_checks", "shape_mismatch"]
