"""How to call torch for one aten op: the overload lookup and the per-op call plan.

Shared by the aten reference interpreter (:mod:`kiln.dialects.aten.interpreter`) and by
the compile path (the dtype probe of :mod:`kiln.dialects.aten.dtype_support`, the meta
check, output rebuilding). Kept apart from the interpreter so that compiling a graph does
not import xDSL's interpreter package (every upstream interpreter, RISC-V included: about a
second per process).
"""

from __future__ import annotations

import operator
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import torch
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, TensorType
from xdsl.interpreter import PythonValues
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.utils.exceptions import InterpretationError

from kiln.dialects.aten.dtypes import UnsupportedDtype, type_to_dtype
from kiln.dialects.aten.encoding import collect_sym_refs, decode_value
from kiln.dialects.aten.layout_constraints import adapted_overload
from kiln.dialects.aten.ops import AtenOp
from kiln.dialects.aten.schema import ArgKind, ArgSpec, OpSchema

# --- torch overload lookup -------------------------------------------------------


@cache
def torch_overload(overload: str) -> Callable[..., Any]:
    """``torch.ops.aten.add.Tensor`` for ``aten::add.Tensor`` (a pure lookup, cached)."""
    namespace, _, rest = overload.partition("::")
    name, _, overload_name = rest.partition(".")
    try:
        return getattr(getattr(getattr(torch.ops, namespace), name), overload_name or "default")
    except (AttributeError, RuntimeError):
        raise InterpretationError(f"torch has no operator {overload}") from None


# --- per-op call plans -----------------------------------------------------------

Getter = Callable[[PythonValues], object]
"""Reads one Python argument for torch from the op's operand values."""


def _constant(value: object) -> Getter:
    return lambda _values: value


def _cloned(index: int) -> Getter:
    return lambda values: values[index].clone()


def _tensor_list(indices: Sequence[int | None], clone: bool) -> Getter:
    frozen = tuple(indices)
    if clone:
        return lambda values: [None if i is None else values[i].clone() for i in frozen]
    return lambda values: [None if i is None else values[i] for i in frozen]


def _symbolic(spec: ArgSpec, attr: Attribute, sym_indices: tuple[int, ...]) -> Getter:
    def get(values: PythonValues) -> object:
        return decode_value(spec, attr, [values[i] for i in sym_indices])

    return get


@dataclass(frozen=True, slots=True)
class _TensorCheck:
    """What the declared type of one result promises about its runtime tensor."""

    index: int
    dtype: torch.dtype
    shape: tuple[int, ...]
    """Declared sizes; negative (xDSL's DYNAMIC_INDEX) where dynamic."""


@dataclass(frozen=True, slots=True)
class CallPlan:
    """How to call torch for one op: argument getters and result unpacking."""

    target: Callable[..., Any]
    positional: tuple[Getter, ...]
    keywords: tuple[tuple[str, Getter], ...]
    unpack: Callable[[Any], PythonValues]
    checks: tuple[_TensorCheck, ...]

    def run(self, values: PythonValues) -> PythonValues:
        args = [get(values) for get in self.positional]
        kwargs = {name: get(values) for name, get in self.keywords}
        return self.unpack(self.target(*args, **kwargs))


def _unpacker(schema: OpSchema) -> Callable[[Any], PythonValues]:
    returns = schema.returns
    if len(returns) == 1 and returns[0].kind is ArgKind.TENSOR_LIST:
        return tuple  # split, unbind: the list spreads over the variadic results
    if len(returns) == 1:
        return lambda out: (out,)
    if not returns:
        return lambda _out: ()
    if any(r.kind is ArgKind.TENSOR_LIST for r in returns):
        # (Tensor, Tensor[]): aten.generic's variadic results hold the lists flattened.
        return lambda out: tuple(
            v for item in out for v in (item if isinstance(item, list) else [item])
        )
    return tuple


def _tensor_getter(
    spec: ArgSpec, values: list[SSAValue | None], index_of: dict[SSAValue, int]
) -> Getter | None:
    """The getter for a tensor argument, or None when it is absent."""
    indices = [None if v is None else index_of[v] for v in values]
    if spec.kind in (ArgKind.TENSOR, ArgKind.OPT_TENSOR):
        if not indices:
            return None
        index = indices[0]
        assert index is not None
        return _cloned(index) if spec.mutable else operator.itemgetter(index)
    return _tensor_list(indices, clone=spec.mutable)


def _property_getter(
    spec: ArgSpec, attr: Attribute | None, sym_indices: tuple[int, ...]
) -> Getter | None:
    """The getter for a non-tensor argument, or None when it is absent."""
    if attr is None:
        return None
    if collect_sym_refs(attr):
        return _symbolic(spec, attr, sym_indices)
    return _constant(decode_value(spec, attr, ()))


def _result_checks(op: Operation) -> tuple[_TensorCheck, ...]:
    checks: list[_TensorCheck] = []
    for i, ty in enumerate(op.result_types):
        if not isinstance(ty, TensorType):
            continue
        try:
            dtype = type_to_dtype(ty.element_type)
        except UnsupportedDtype:
            continue
        checks.append(_TensorCheck(i, dtype, tuple(ty.get_shape())))
    return tuple(checks)


def build_plan(op: AtenOp) -> CallPlan:
    """Precompute everything about calling torch for ``op`` that does not depend on values."""
    schema = op.op_schema()
    index_of: dict[SSAValue, int] = {}
    for i, operand in enumerate(op.operands):
        index_of.setdefault(operand, i)
    sym_indices = tuple(index_of[v] for v in op.sym_operands())
    tensors = op.tensor_operands()
    positional: list[Getter] = []
    keywords: list[tuple[str, Getter]] = []
    by_keyword = False
    for spec in schema.arguments:
        if spec.kind.is_tensor:
            getter = _tensor_getter(spec, tensors[spec.name], index_of)
        else:
            getter = _property_getter(spec, op.arg_attr(spec.name), sym_indices)
        if getter is None:
            if spec.has_default:
                # Let torch apply its own default; later arguments can no longer be positional.
                by_keyword = True
                continue
            getter = _constant(None)
        if spec.kwarg_only or by_keyword:
            keywords.append((spec.name, getter))
        else:
            positional.append(getter)
    overload = f"{schema.namespace}::{schema.qualified_name}"
    return CallPlan(
        target=adapted_overload(overload, op) or torch_overload(overload),
        positional=tuple(positional),
        keywords=tuple(keywords),
        unpack=_unpacker(schema),
        checks=_result_checks(op),
    )


def shape_fits(declared: tuple[int, ...], actual: tuple[int, ...]) -> bool:
    """Same rank, and equal sizes where the declared size is static."""
    return len(declared) == len(actual) and all(
        want < 0 or want == got for want, got in zip(declared, actual, strict=True)
    )


def check_results(op: Operation, checks: tuple[_TensorCheck, ...], results: PythonValues) -> None:
    for check in checks:
        value = results[check.index]
        if not isinstance(value, torch.Tensor):
            raise InterpretationError(
                f"{op.name}: result #{check.index} should be a tensor, torch returned {type(value).__name__}"
            )
        shape = tuple(value.shape)
        if value.dtype != check.dtype or not shape_fits(check.shape, shape):
            raise InterpretationError(
                f"{op.name}: result #{check.index} is declared {op.result_types[check.index]}, "
                f"but torch computed {value.dtype} with shape {list(shape)}"
            )


# --- constants -------------------------------------------------------------------


def dense_to_tensor(attr: DenseIntOrFPElementsAttr, device: torch.device) -> torch.Tensor:
    """The tensor a dense elements attribute holds (xDSL stores it little-endian)."""
    ty = attr.type
    assert isinstance(ty, TensorType)
    dtype = type_to_dtype(ty.element_type)
    shape = tuple(ty.get_shape())
    raw = bytearray(attr.data.data)
    if not raw:
        return torch.empty(shape, dtype=dtype, device=device)
    # xDSL packs i1 as one byte per element, 0xff for true.
    storage_dtype = torch.uint8 if dtype == torch.bool else dtype
    flat = torch.frombuffer(raw, dtype=storage_dtype)
    if sys.byteorder == "big" and flat.element_size() > 1:
        flat = (
            flat.view(torch.uint8)
            .view(-1, flat.element_size())
            .flip(-1)
            .reshape(-1)
            .view(storage_dtype)
        )
    if dtype == torch.bool:
        flat = flat != 0
    count = 1
    for size in shape:
        count *= size
    tensor = flat.expand(count) if flat.numel() == 1 and count != 1 else flat
    return tensor.reshape(shape).clone().to(device)


__all__ = [
    "CallPlan",
    "build_plan",
    "check_results",
    "dense_to_tensor",
    "shape_fits",
    "torch_overload",
]
