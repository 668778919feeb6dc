"""``decompose``'s size-generic traces: one trace of a decomposition for every size.

Tracing a decomposition costs ~5 ms on fake tensors and ~50 ms on symbolic ones (torch
2.13, the 2-core VM), and a CNN has the same op at many sizes: MobileNet-v3 traced
``hardswish`` ten times and inference batch norm seventeen, once per channel count, 1.3
s of its ``dynamic=True`` compile. For ops whose decomposition computes the same
graph whatever the sizes (elementwise ops, inference batch norm), ``decompose`` traces
once per *size pattern* instead: each operand dim becomes a distinct large prime per
distinct size (``1`` stays ``1``: it broadcasts), the op is traced on fake tensors of
those sizes, and the body is given each use's real sizes (static or symbolic) by
mapping the primes back (``with_sizes``).

A body that read a size shows it: a prime, or a multiple of one, in an op's arguments
(``view(x, [1009, 1013])``) or in a type that is not a traced dim (a flattened
``1009*1013``): such a body is not size-generic (``is_size_generic``), and the op is
traced at its own sizes as before. What cannot show is a decomposition that branches on
a size; hence only the ops listed here, whose decompositions do not.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from xdsl.dialects.builtin import DYNAMIC_INDEX, TensorType
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.rewriter import Rewriter

from kiln.dialects.aten import AtenOp
from kiln.dialects.aten.size_symbols import TRACED_SIZES_ATTR
from kiln.dialects.aten.traits import Pointwise, has_aten_trait

PRIMES = (1009, 1013, 1019, 1021, 1031, 1033, 1039, 1049, 1051, 1061, 1063, 1069, 1087, 1091)
"""The traced sizes of a size pattern's distinct dims: primes no decomposition writes
itself, so that a size baked into the body shows."""

_UNTAGGED_ELEMENTWISE = frozenset(
    {
        "elu_backward",
        "hardsigmoid_backward",
        "hardswish",
        "hardswish_backward",
        "hardtanh_backward",
        "infinitely_differentiable_gelu_backward",
        "leaky_relu_backward",
        "mish_backward",
        "softplus_backward",
    }
)
"""Elementwise ops torch does not tag ``pointwise`` (their ``default`` overloads)."""

_SIZE_GENERIC = frozenset({"_native_batch_norm_legit_no_training"})
"""Other ops whose decompositions do not branch on sizes (their ``default`` overloads;
batch norm in training divides by a baked element count: not here)."""

_INTEGER = re.compile(r"\d+")


def _default_aten_name(op: Operation) -> str | None:
    if not isinstance(op, AtenOp):
        return None
    schema = op.op_schema()
    if schema.namespace != "aten" or schema.overload != "default":
        return None
    return schema.name


def applies(op: AtenOp) -> bool:
    """Whether ``op``'s decomposition is traced once per size pattern."""
    if has_aten_trait(op, Pointwise):
        return True
    name = _default_aten_name(op)
    return name in _UNTAGGED_ELEMENTWISE or name in _SIZE_GENERIC


def size_pattern(shapes: Sequence[tuple[int, ...]]) -> tuple[tuple[int, ...], ...] | None:
    """Per operand, per dim: ``1`` for a size-1 dim, else ``-1 - k`` for the ``k``-th
    distinct size (``shapes``: static sizes, or ``-1 - s`` for symbol ``s`` as
    ``decompose``'s ``SymbolicDims`` numbers them, so symbols are told from sizes).
    None: an empty dim, or more distinct sizes than :data:`PRIMES`."""
    classes: dict[int, int] = {}
    pattern: list[tuple[int, ...]] = []
    for shape in shapes:
        dims: list[int] = []
        for d in shape:
            if d == 0:
                return None
            if d == 1:
                dims.append(1)
                continue
            key = d if d > 0 else -(10**9) + d  # a symbol never equals a static size
            if key not in classes:
                if len(classes) == len(PRIMES):
                    return None
                classes[key] = len(classes)
            dims.append(-1 - classes[key])
        pattern.append(tuple(dims))
    return tuple(pattern)


def traced_shapes(pattern: tuple[tuple[int, ...], ...]) -> list[list[int]]:
    """The sizes to trace ``pattern`` at."""
    return [[d if d > 0 else PRIMES[-1 - d] for d in dims] for dims in pattern]


def real_sizes(
    pattern: tuple[tuple[int, ...], ...], shapes: Sequence[tuple[int, ...]]
) -> dict[int, int]:
    """Each traced prime's size in ``shapes`` (static, or ``DYNAMIC_INDEX``: symbolic)."""
    sizes: dict[int, int] = {}
    for dims, shape in zip(pattern, shapes, strict=True):
        for d, real in zip(dims, shape, strict=True):
            if d < 0:
                sizes[PRIMES[-1 - d]] = real if real >= 0 else DYNAMIC_INDEX
    return sizes


def _baked(value: int, primes: Sequence[int]) -> bool:
    return value >= primes[0] and any(value % p == 0 for p in primes) if primes else False


def is_size_generic(func: FuncOp, pattern: tuple[tuple[int, ...], ...]) -> bool:
    """Whether the body traced at ``pattern`` holds for every size: every dim of its
    tensors is a traced prime or a constant of its own, and no argument of its ops holds a
    prime or a multiple of one."""
    primes = PRIMES[: max((-d for dims in pattern for d in dims if d < 0), default=0)]
    for inner in func.body.block.ops:
        if isinstance(inner, ReturnOp):
            continue
        for result in inner.results:
            if not isinstance(result.type, TensorType):
                return False
            if any(d not in primes and _baked(d, primes) for d in result.type.get_shape()):
                return False
        texts = (*map(str, inner.properties.values()), *map(str, inner.attributes.values()))
        for text in texts:
            if any(_baked(int(m), primes) for m in _INTEGER.findall(text)):
                return False
    return True


def with_sizes(func: FuncOp, sizes: dict[int, int]) -> FuncOp:
    """A copy of a size-generic body with each traced prime replaced by its real size."""
    func = func.clone()
    values: list[SSAValue] = [*func.body.block.args]
    for inner in func.body.block.ops:
        values.extend(inner.results)
        inner.attributes.pop(TRACED_SIZES_ATTR, None)
    for value in values:
        ty = value.type
        if isinstance(ty, TensorType) and any(d in sizes for d in ty.get_shape()):
            shape = [sizes.get(d, d) for d in ty.get_shape()]
            Rewriter.replace_value_with_new_type(value, TensorType(ty.element_type, shape))
    func.update_function_type()
    return func


def pattern_key(op: AtenOp, pattern: tuple[tuple[int, ...], ...]) -> tuple[Any, ...]:
    """What a size-generic trace depends on besides ``op``'s arguments: its overload and
    types with sizes replaced by ``pattern`` (result types by rank and element type)."""

    def element(ty: Attribute) -> str:
        if isinstance(ty, TensorType):
            return f"{len(ty.get_shape())}:{ty.element_type}"
        return str(ty)

    return (
        "size-generic",
        op.overload_name,
        pattern,
        tuple(element(t) for t in op.operand_types),
        tuple(element(t) for t in op.result_types),
    )


__all__ = [
    "PRIMES",
    "applies",
    "is_size_generic",
    "pattern_key",
    "real_sizes",
    "size_pattern",
    "traced_shapes",
    "with_sizes",
]
