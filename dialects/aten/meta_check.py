"""The aten verifier's shape check: an op's declared result types must be what torch
computes for its operand types.

The generated ops check arguments against the schema, not shapes: ``aten.mm`` of 2x3 by
4x5, or ``aten.sum.default(tensor<2x3xf32>) -> tensor<7xf64>``, verified and lowered to
code that wrote only ``out[0]``. Torch's own shape functions decide instead: the op runs
once on meta tensors of its operand types (meta kernels: no data; factory ops are made
on the meta device, so they allocate nothing) and its results' dtypes and shapes must
match the declared types. Plain meta tensors, not ``FakeTensorMode``: that would import
Dynamo, seconds for every ``kiln-opt`` run.

Fully static ops (no dynamic dims, no symbolic arguments) are checked in full. Ops with
dynamic dims or symbolic arguments have their result element types checked: a view or an
in-place result must keep the element type of the tensor it aliases (the schema says which),
and the op runs once more on stand-ins (every dynamic dim and symbolic argument
:data:`STAND_IN`) whose result dtypes must be the declared ones; where torch rejects the
stand-ins (a view whose sizes must multiply out), no verdict. An op torch cannot run on meta
tensors (no meta kernel, a data-dependent or scalar result) is not checked. Verdicts are
cached per op class, operand types, properties and result types, so a pipeline that verifies
after every pass pays for each distinct op once.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from xdsl.dialects.builtin import TensorType
from xdsl.ir import Attribute

from kiln.dialects.aten.norm_statistics import (
    NORMALIZATIONS,
    STATISTICS,
    bind_arguments,
    eager_statistics_dtype,
)
from kiln.dialects.aten.ops import AtenOp

_VERDICTS: dict[Hashable, str | None] = {}
_ENABLED = [True]

STAND_IN = 7
"""The size every dynamic dim and symbolic integer takes in the element-type check: not 0
or 1, which torch treats specially (broadcasting, squeezing, empty tensors)."""

_DTYPE_KEEPING_VIEWS = frozenset(
    {
        "_conj", "_neg_view", "_reshape_alias", "_unsafe_view", "adjoint", "alias",
        "as_strided", "broadcast_to", "chunk", "conj", "contiguous", "detach", "diagonal",
        "dsplit", "expand", "expand_as", "flatten", "hsplit", "lift_fresh", "linalg_diagonal",
        "mH", "mT", "matrix_H", "moveaxis", "movedim", "narrow", "numpy_T", "permute",
        "positive", "ravel", "reshape", "reshape_as", "resolve_conj", "resolve_neg", "select",
        "slice", "slice_inverse", "split", "split_with_sizes", "squeeze", "swapaxes",
        "swapdims", "t", "tensor_split", "transpose", "unbind", "unflatten", "unfold",
        "unsqueeze", "view", "view_as", "vsplit",
    }
)  # fmt: skip
"""Ops whose results are views of ``self`` in its element type (``view.dtype``, ``real``,
``to`` and the other aliasing ops that may change it are not here)."""


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


def _element_text(dtype: Any) -> str:
    from kiln.dialects.aten.dtypes import UnsupportedDtype, dtype_to_type

    try:
        return str(dtype_to_type(dtype))
    except UnsupportedDtype:
        return str(dtype)


def _type_text(value: Any) -> str:
    import torch

    if not isinstance(value, torch.Tensor):
        return type(value).__name__
    return f"tensor<{''.join(f'{d}x' for d in value.shape)}{_element_text(value.dtype)}>"


def _check(op: AtenOp, stand_in: bool) -> str | None:
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
    if any(
        isinstance(t, TensorType) and isinstance(t.element_type, OpaqueDtypeType)
        for t in (*op.operand_types, *op.result_types)
    ):
        return None  # meta tensors report quantized values as float32: no verdict
    mismatch = _run_meta(op, plan, dtypes, declared, device is not None, stand_in)
    if mismatch is not None and lifted_scalar_operands(op):
        # A 0-dim constant operand may be a Python scalar the tracer lifted (a wrapped
        # number to type promotion: ``rsub(x, 0.5)`` as ``sub(0.5, x)``): the IR holds
        # if it does for one of the two readings (the interpreter runs it the same way).
        if _run_meta(op, plan, dtypes, declared, device is not None, stand_in, True) is None:
            return None
    return mismatch


def lifted_scalar_operands(op: AtenOp) -> list[int]:
    """Operands that are 0-dim ``aten.constant`` values: perhaps Python scalars the tracer
    lifted, which type promotion reads as wrapped numbers (the verifier and the
    interpreter try that reading where the tensor one contradicts the declared types)."""
    from kiln.dialects.aten.dialect import ConstantOp

    return [
        k
        for k, v in enumerate(op.operands)
        if isinstance(v.owner, ConstantOp)
        and isinstance(v.type, TensorType)
        and not v.type.get_shape()
    ]


def _alias_mismatch(op: AtenOp) -> str | None:
    """A result that aliases an operand (a view of ``self``, an in-place or ``out=``
    result) declared in another element type."""
    schema = op.op_schema()
    keeps_view = schema.name in _DTYPE_KEEPING_VIEWS and schema.qualified_name != "view.dtype"
    for k, (ret, result) in enumerate(zip(_returns_per_result(op), op.results, strict=False)):
        letter = _alias_letter(ret.type_str)
        if letter is None or not isinstance(result.type, TensorType):
            continue
        if "!" not in ret.type_str and not keeps_view:
            continue
        spec = next(
            (
                a
                for a in schema.arguments
                if a.kind.is_tensor and _alias_letter(a.type_str) == letter
            ),
            None,
        )
        values = op.tensor_operands().get(spec.name, ()) if spec is not None else ()
        source = values[0] if len(values) == 1 else None
        if source is None or not isinstance(source.type, TensorType):
            continue
        if source.type.element_type != result.type.element_type:
            return (
                f"result #{k} is declared {result.type}, but it aliases '{spec.name}' "  # pyright: ignore[reportOptionalMemberAccess]
                f"({source.type}) and keeps its element type"
            )
    return None


def _alias_letter(type_str: str) -> str | None:
    start = type_str.find("(")
    return type_str[start + 1 : type_str.find(")")].strip(" !") or None if start >= 0 else None


def _returns_per_result(op: AtenOp) -> list[Any]:
    """The schema return each result stands for (a list return, ``Tensor(a)[]``, stands
    for every result; none where a list return sits among others)."""
    returns = op.op_schema().returns
    if len(returns) == 1 and len(op.results) != 1:
        return [returns[0]] * len(op.results)
    return list(returns) if len(returns) == len(op.results) else []


def _stand_in_values(
    op: AtenOp, dtypes: Sequence[Any], scalars: Sequence[int] = ()
) -> list[Any] | None:
    """Meta tensors for the tensor operands, dynamic dims :data:`STAND_IN`; a symbolic
    operand is the stand-in as an int or float (None: an operand of another type); the
    operands at ``scalars`` (0-dim tensors) as Python numbers of their dtype's kind."""
    import torch
    from xdsl.dialects.builtin import AnyFloat, IndexType, IntegerType

    meta = torch.device("meta")
    values: list[Any] = []
    for k, (t, d) in enumerate(zip(op.operand_types, dtypes, strict=True)):
        if k in scalars:
            values.append(torch.ones((), dtype=d).item())  # pyright: ignore[reportArgumentType]
        elif isinstance(t, TensorType):
            shape = tuple(STAND_IN if n < 0 else n for n in t.get_shape())
            values.append(torch.empty(shape, dtype=d, device=meta))  # pyright: ignore[reportArgumentType]
        elif isinstance(t, IndexType | IntegerType):
            values.append(STAND_IN)
        elif isinstance(t, AnyFloat):
            values.append(float(STAND_IN))
        else:
            return None
    return values


def _run_meta(
    op: AtenOp,
    plan: Any,
    dtypes: Sequence[Any],
    declared: Sequence[tuple[int, Any, tuple[int, ...]]],
    has_device: bool,
    stand_in: bool,
    wrapped_constants: bool = False,
) -> str | None:
    import torch
    from torch.utils._python_dispatch import _disable_current_modes

    meta = torch.device("meta")
    with _disable_current_modes():
        scalars = lifted_scalar_operands(op) if wrapped_constants else ()
        values = _stand_in_values(op, dtypes, scalars)
        if values is None:
            return None
        args = [get(values) for get in plan.positional]
        kwargs = {name: get(values) for name, get in plan.keywords}
        if has_device:  # factory ops: make nothing, anywhere
            kwargs["device"] = meta
            if "pin_memory" in kwargs:
                kwargs["pin_memory"] = None
        try:
            results = plan.unpack(plan.target(*args, **kwargs))
            results = _as_eager_statistics(op, args, kwargs, results)
        except NotImplementedError:
            return None  # no meta kernel (nonzero, unique, ...)
        except (RuntimeError, ValueError, IndexError, TypeError) as e:
            if stand_in:
                return None  # the stand-ins are not sizes these operands can have
            text = str(e).strip()
            if "meta" in text.lower():
                return None  # needs data or a device, not a shape problem
            first = text.splitlines()[0] if text else type(e).__name__
            return f"torch rejects these operand types: {first}"
    for k, dtype, shape in declared:
        got = results[k] if k < len(results) else None
        if stand_in:
            if isinstance(got, torch.Tensor) and got.dtype != dtype:
                return (
                    f"result #{k} is declared {op.result_types[k]}, but for these operand "
                    f"types torch computes element type {_element_text(got.dtype)}"
                )
            continue
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


def _as_eager_statistics(
    op: AtenOp, args: Sequence[Any], kwargs: dict[str, Any], results: Sequence[Any]
) -> Sequence[Any]:
    """``results`` with a normalization's saved statistics in the dtype eager's kernels
    give them where torch's meta says otherwise and the IR declares eager's (see
    ``norm_statistics``): the IR holds for either reading."""
    if op.name not in NORMALIZATIONS:
        return results
    from kiln.dialects.aten.dtypes import type_to_dtype

    dtype = eager_statistics_dtype(op.name, bind_arguments(op.op_schema(), args, kwargs))
    if dtype is None:
        return results
    corrected = list(results)
    for k in STATISTICS:
        declared = op.result_types[k]
        if (
            k < len(corrected)
            and isinstance(declared, TensorType)
            and type_to_dtype(declared.element_type) == dtype
        ):
            corrected[k] = corrected[k].to(dtype)
    return corrected


def shape_mismatch(op: AtenOp) -> str | None:
    """Why ``op``'s declared result types are not what torch computes (None: they are,
    or the op cannot be checked)."""
    if not _ENABLED[0]:
        return None
    key = (type(op), tuple(op.operand_types), tuple(op.result_types))
    try:
        key = (*key, tuple(sorted(op.properties.items())))
        hash(key)
    except TypeError:  # an unhashable property: check without caching
        return _verdict(op)
    if key not in _VERDICTS:
        _VERDICTS[key] = _verdict(op)
    return _VERDICTS[key]


def _verdict(op: AtenOp) -> str | None:
    """``shape_mismatch`` uncached: the alias check, then torch's, in full or (dynamic
    dims, symbolic arguments) on stand-ins."""
    if (mismatch := _alias_mismatch(op)) is not None:
        return mismatch
    stand_in = bool(op.sym_operands()) or not (
        _static(op.operand_types) and _static(op.result_types)
    )
    return _check(op, stand_in)


__all__ = ["shape_checks", "shape_mismatch"]
