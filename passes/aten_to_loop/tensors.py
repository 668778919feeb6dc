"""What an aten tensor value becomes during lowering: a buffer seen through an index map.

A :class:`TensorRef` says where element ``idx`` of a tensor lives: at
``storage[index(idx)]`` of a loop-level buffer. Views never copy: they only compose a
new index map, which consumers inline into their ``loop.load`` index expressions.
Most views stay *strided* (``offset + sum(stride_k * idx_k)``, like torch's own
tensors), so their index maps are linear; reshapes that torch could not express as a
view fall back to a general map with ``//`` and ``%``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache

import sympy
from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Attribute, SSAValue

from kiln.dialects.aten.memory_format import NHWC
from kiln.dialects.loop.expr import floordiv, mod, same_value
from kiln.dialects.loop.simplify import sample_sizes

Expr = sympy.Expr
IndexMap = Callable[[Sequence[Expr]], Expr]
"""Element index -> storage index."""
DimMap = Callable[[Sequence[Expr]], Sequence[Expr]]
"""Element index of a view -> element index of the tensor it views."""

ZERO = sympy.Integer(0)
ONE = sympy.Integer(1)


def expr(value: int | Expr) -> Expr:
    return value if isinstance(value, sympy.Expr) else sympy.Integer(value)


def contiguous_strides(sizes: Sequence[Expr]) -> tuple[Expr, ...]:
    strides: list[Expr] = []
    running: Expr = ONE
    for size in reversed(sizes):
        strides.append(running)
        running = running * size
    return tuple(reversed(strides))


def safe_mod(value: Expr, size: Expr) -> Expr:
    """``value % size``, or 0 for an empty dim (never indexed)."""
    return ZERO if size == ZERO else mod(value, size)


def numel(sizes: Sequence[Expr]) -> Expr:
    n: Expr = ONE
    for s in sizes:
        n = n * s
    return n


@cache
def strided_index(strides: tuple[Expr, ...], offset: Expr, idx: tuple[Expr, ...]) -> Expr:
    """``offset + sum(stride * i)`` (cached: most loads repeat the same few maps)."""
    total = offset
    for stride, i in zip(strides, idx, strict=True):
        if stride != ZERO and i != ZERO:
            total = total + stride * i
    return total


@dataclass(frozen=True, eq=False)
class TensorRef:
    """A tensor at loop level: ``buffer`` (a memref value) viewed through an index map."""

    buffer: SSAValue
    sizes: tuple[Expr, ...]
    dtype: Attribute
    """Element type."""
    strides: tuple[Expr, ...] | None
    """Set when the map is strided: ``offset + sum(strides[k] * idx[k])``."""
    offset: Expr = ZERO
    general: IndexMap | None = None
    """The map when it is not strided (a reshape of a non-viewable layout)."""
    buffer_sizes: tuple[Expr, ...] | None = None
    """The buffer's own sizes (None: unknown). A view with the buffer's strides may
    still be a part of it (the first chunk of a symbolic split: same strides, fewer
    rows), which only the sizes tell."""

    @staticmethod
    def of_buffer(buffer: SSAValue, sizes: Sequence[Expr]) -> TensorRef:
        ty = buffer.type
        assert isinstance(ty, MemRefType)
        sizes = tuple(sizes)
        return TensorRef(
            buffer, sizes, ty.element_type, contiguous_strides(sizes), ZERO, None, sizes
        )

    @property
    def rank(self) -> int:
        return len(self.sizes)

    def storage_index(self, idx: Sequence[Expr]) -> Expr:
        if self.strides is not None:
            return strided_index(self.strides, self.offset, tuple(idx))
        assert self.general is not None
        return self.general(idx)

    def is_plain(self) -> bool:
        """Whether this is exactly its buffer, element for element (no copy needed)."""
        if self.strides is None or self.offset != ZERO:
            return False
        ty = self.buffer.type
        assert isinstance(ty, MemRefType)
        if len(ty.get_shape()) != len(self.sizes):
            return False
        if self.buffer_sizes is None or not all(
            same_value(s, b) for s, b in zip(self.sizes, self.buffer_sizes, strict=True)
        ):
            return False
        return all(
            s == t or size == ONE
            for s, t, size in zip(
                self.strides, contiguous_strides(self.sizes), self.sizes, strict=True
            )
        ) and all(
            d < 0 or sympy.Integer(d) == size
            for d, size in zip(ty.get_shape(), self.sizes, strict=True)
        )

    def is_channels_last(self) -> bool:
        """Whether this is a 4-D tensor stored channels-last: exactly its NHWC buffer seen
        in NCHW order (torch's ``channels_last`` memory format)."""
        return self.rank == 4 and self.permute(NHWC).is_plain()

    # -- views: each returns a new map over the same buffer -------------------------

    def with_map(self, sizes: Sequence[Expr], fn: DimMap) -> TensorRef:
        """A general view: element ``idx`` of the result is element ``fn(idx)`` of self."""
        inner = self

        def general(idx: Sequence[Expr]) -> Expr:
            return inner.storage_index(fn(idx))

        return TensorRef(
            self.buffer, tuple(sizes), self.dtype, None, ZERO, general, self.buffer_sizes
        )

    def strided(self, sizes: Sequence[Expr], strides: Sequence[Expr], offset: Expr) -> TensorRef:
        return TensorRef(
            self.buffer, tuple(sizes), self.dtype, tuple(strides), offset, None, self.buffer_sizes
        )

    def permute(self, dims: Sequence[int]) -> TensorRef:
        sizes = [self.sizes[d] for d in dims]
        if self.strides is not None:
            return self.strided(sizes, [self.strides[d] for d in dims], self.offset)
        inverse = [0] * len(dims)
        for k, d in enumerate(dims):
            inverse[d] = k
        return self.with_map(sizes, lambda idx: [idx[inverse[d]] for d in range(len(dims))])  # pyright: ignore[reportReturnType]

    def expand(self, sizes: Sequence[Expr]) -> TensorRef:
        """Broadcast to ``sizes`` (new leading dims and size-1 dims get stride 0)."""
        lead = len(sizes) - self.rank
        keep = [not (self.sizes[k] == ONE and sizes[lead + k] != ONE) for k in range(self.rank)]
        if self.strides is not None:
            strides: list[Expr] = [ZERO] * lead + [
                s if kept else ZERO for s, kept in zip(self.strides, keep, strict=True)
            ]
            return self.strided(sizes, strides, self.offset)
        return self.with_map(
            sizes,
            lambda idx: [idx[lead + k] if keep[k] else ZERO for k in range(len(keep))],  # pyright: ignore[reportReturnType]
        )

    def unsqueeze(self, dim: int) -> TensorRef:
        sizes = [*self.sizes[:dim], ONE, *self.sizes[dim:]]
        if self.strides is not None:
            strides = [*self.strides[:dim], ZERO, *self.strides[dim:]]
            return self.strided(sizes, strides, self.offset)
        return self.with_map(sizes, lambda idx: [*idx[:dim], *idx[dim + 1 :]])

    def squeeze(self, dims: Sequence[int]) -> TensorRef:
        """Drop the given dims (each of size 1)."""
        drop = set(dims)
        sizes = [s for k, s in enumerate(self.sizes) if k not in drop]
        if self.strides is not None:
            strides = [s for k, s in enumerate(self.strides) if k not in drop]
            return self.strided(sizes, strides, self.offset)
        kept = [k for k in range(self.rank) if k not in drop]

        def fn(idx: Sequence[Expr]) -> list[Expr]:
            full: list[Expr] = [ZERO] * self.rank
            for pos, k in enumerate(kept):
                full[k] = idx[pos]
            return full

        return self.with_map(sizes, fn)

    def slice(self, dim: int, start: Expr, length: Expr, step: Expr) -> TensorRef:
        sizes = [*self.sizes]
        sizes[dim] = length
        if self.strides is not None:
            strides = [*self.strides]
            strides[dim] = self.strides[dim] * step
            return self.strided(sizes, strides, self.offset + self.strides[dim] * start)
        return self.with_map(
            sizes, lambda idx: [*idx[:dim], start + step * idx[dim], *idx[dim + 1 :]]
        )

    def select(self, dim: int, index: Expr) -> TensorRef:
        sizes = [*self.sizes[:dim], *self.sizes[dim + 1 :]]
        if self.strides is not None:
            strides = [*self.strides[:dim], *self.strides[dim + 1 :]]
            return self.strided(sizes, strides, self.offset + self.strides[dim] * index)
        return self.with_map(sizes, lambda idx: [*idx[:dim], index, *idx[dim:]])

    def diagonal(self, offset: int, dim1: int, dim2: int) -> TensorRef:
        n1, n2 = self.sizes[dim1], self.sizes[dim2]
        if offset >= 0:
            length = sympy.Max(0, sympy.Min(n1, n2 - offset))
        else:
            length = sympy.Max(0, sympy.Min(n1 + offset, n2))
        rest = [k for k in range(self.rank) if k not in (dim1, dim2)]
        sizes = [self.sizes[k] for k in rest] + [length]

        def fn(idx: Sequence[Expr]) -> list[Expr]:
            full: list[Expr] = [ZERO] * self.rank
            for pos, k in enumerate(rest):
                full[k] = idx[pos]
            full[dim1] = idx[-1] + (0 if offset >= 0 else -offset)
            full[dim2] = idx[-1] + (offset if offset >= 0 else 0)
            return full

        if self.strides is not None:
            strides = [self.strides[k] for k in rest] + [self.strides[dim1] + self.strides[dim2]]
            start = self.strides[dim2] * offset if offset >= 0 else -self.strides[dim1] * offset
            return self.strided(sizes, strides, self.offset + start)
        return self.with_map(sizes, fn)

    def reshape(self, sizes: Sequence[Expr]) -> TensorRef:
        """``view``/``reshape``: strided when torch could view it, a general map otherwise."""
        sizes = tuple(sizes)
        if any(s == ZERO for s in (*self.sizes, *sizes)):
            # Nothing is ever loaded from an empty tensor: any map will do.
            return self.strided(sizes, contiguous_strides(sizes), ZERO)
        if self.strides is not None:
            strides = view_strides(self.sizes, self.strides, sizes)
            if strides is not None:
                return self.strided(sizes, strides, self.offset)
        old_sizes = self.sizes
        new_strides = contiguous_strides(sizes)
        old_strides = contiguous_strides(old_sizes)

        def fn(idx: Sequence[Expr]) -> list[Expr]:
            flat = strided_index(new_strides, ZERO, tuple(idx))
            out: list[Expr] = []
            for k, (size, stride) in enumerate(zip(old_sizes, old_strides, strict=True)):
                part = floordiv(flat, stride)
                out.append(part if k == 0 else mod(part, size))
            return out

        return self.with_map(sizes, fn)


def view_strides(
    old_sizes: Sequence[Expr], old_strides: Sequence[Expr], new_sizes: Sequence[Expr]
) -> list[Expr] | None:
    """Strides of ``view(new_sizes)`` on a strided tensor, or None if it needs a copy.

    torch's ``computeStride``: groups of old dims that are contiguous with each other
    can be split and merged freely. Symbolic sizes compare structurally.
    """
    old = [(s, st) for s, st in zip(old_sizes, old_strides, strict=True)]
    if any(s == ZERO for s in old_sizes) or any(s == ZERO for s in new_sizes):
        return list(contiguous_strides(new_sizes))
    new_strides: list[Expr] = [ZERO] * len(new_sizes)
    view_d = len(new_sizes) - 1
    chunk_base_stride = old[-1][1] if old else ONE
    tensor_numel: Expr = ONE
    view_numel: Expr = ONE
    for tensor_d in range(len(old) - 1, -1, -1):
        tensor_numel = tensor_numel * old[tensor_d][0]
        if tensor_d == 0 or (
            old[tensor_d - 1][0] != ONE
            and not _same(old[tensor_d - 1][1], tensor_numel * chunk_base_stride)
        ):
            while view_d >= 0 and (view_numel != tensor_numel or new_sizes[view_d] == ONE):
                new_strides[view_d] = view_numel * chunk_base_stride
                view_numel = view_numel * new_sizes[view_d]
                view_d -= 1
                if _known_greater(view_numel, tensor_numel):
                    return None
            if not _same(view_numel, tensor_numel):
                return None
            if tensor_d > 0:
                chunk_base_stride = old[tensor_d - 1][1]
                tensor_numel = ONE
                view_numel = ONE
    if view_d != -1:
        return None
    return new_strides


def _same(a: Expr, b: Expr) -> bool:
    """Equal sizes (structurally, or after expansion for symbolic products; a sample of
    the sizes refutes most unequal pairs first)."""
    if a == b:
        return True
    if a.is_Integer and b.is_Integer:
        return False
    sample = sample_sizes(a - b)
    return (sample == 0 or sample == math.inf) and same_value(a, b)


def _known_greater(a: Expr, b: Expr) -> bool:
    """``a > b`` for all sizes. A sample of the sizes refutes most calls (a view's
    partial product against the tensor's) before the costly assumption query."""
    if sample_sizes(a - b) <= 0:
        return False
    diff = sympy.expand(a - b)
    return bool(diff.is_Integer and int(diff) > 0) or bool(diff.is_positive)
