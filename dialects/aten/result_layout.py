"""``kiln.result_orders``: how eager lays out the results of an ATen op in memory.

A few ATen kernels return dense results that are not contiguous: fused attention writes
its output as (batch, length, heads, dim) and returns it as (batch, heads, length, dim),
and its backward returns the gradients of q, k and v so. kiln's buffers are contiguous:
the extern's wrapper copied each such result into one, and the kernels reading it as
attention had laid it out (a saved output, a gradient reshaped for a matmul) copied it
back. The FX importer records, per result, the order of its dims from outermost to
innermost in memory where that is not the identity (``[]`` where it is, or unknown)::

    %o, %lse = aten._scaled_dot_product_flash_attention_for_cpu.default(%q, %k, %v)
        {kiln.result_orders = [[0, 2, 1, 3], []]} : ...

and ``lower-aten`` has such an extern yield the result permuted to that order (ATen's
own memory, contiguous: no copy), which it then reads through the inverse permutation.
Layouts only: a result laid out otherwise at run time is copied, never misread.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from xdsl.dialects.builtin import ArrayAttr, IntegerAttr
from xdsl.ir import Attribute, Operation

from kiln.dialects.aten.function_attrs import contiguous_strides

RESULT_ORDERS_ATTR = "kiln.result_orders"


def stride_order(shape: Sequence[int], strides: Sequence[int]) -> list[int] | None:
    """The dims from outermost to innermost when ``strides`` are a dense permuted layout
    of ``shape`` (None otherwise; the identity when they are contiguous)."""
    if any(d < 0 for d in shape) or len(shape) != len(strides):
        return None
    # Size-1 dims have no meaningful stride: they keep their places among the others.
    big = sorted((k for k in range(len(shape)) if shape[k] > 1), key=lambda k: (-strides[k], k))
    order = with_unit_dims(big, shape)
    permuted = [shape[k] for k in order]
    want = contiguous_strides(permuted)
    if any(permuted[j] > 1 and strides[order[j]] != want[j] for j in range(len(order))):
        return None
    return order


def with_unit_dims(big: list[int], shape: Sequence[int]) -> list[int]:
    """``big`` (dims of size > 1, outer to inner) with the unit dims put back at their
    original positions."""
    it = iter(big)
    return [k if shape[k] <= 1 else next(it) for k in range(len(shape))]


def _permuted_order(value: object) -> list[int] | None:
    """The memory order of a FakeTensor with static sizes and strides, when dense and not
    the identity."""
    if not isinstance(value, torch.Tensor):
        return None
    shape, strides = value.shape, value.stride()
    if not all(isinstance(n, int) for n in (*shape, *strides)):
        return None
    order = stride_order([int(n) for n in shape], [int(s) for s in strides])
    return None if order is None or order == sorted(order) else order


def result_orders_attrs(val: object) -> dict[str, Attribute]:
    """The attribute for an op whose result(s) ``val`` (FakeTensors) eager lays out
    permuted; empty when none is."""
    values = list(val) if isinstance(val, list | tuple) else [val]  # pyright: ignore[reportUnknownArgumentType]
    orders = [_permuted_order(v) for v in values]
    if all(order is None for order in orders):
        return {}
    return {
        RESULT_ORDERS_ATTR: ArrayAttr(
            [ArrayAttr([IntegerAttr(d, 64) for d in order or ()]) for order in orders]
        )
    }


def result_order(op: Operation, index: int) -> tuple[int, ...] | None:
    """The recorded memory order of ``op``'s result ``index`` (None: contiguous or unknown)."""
    attr = op.attributes.get(RESULT_ORDERS_ATTR)
    if not isinstance(attr, ArrayAttr) or index >= len(attr.data):
        return None
    entry = attr.data[index]
    if not isinstance(entry, ArrayAttr) or not entry.data:
        return None
    dims = tuple(int(d.value.data) for d in entry.data if isinstance(d, IntegerAttr))  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
    return dims if sorted(dims) == list(range(len(dims))) else None


__all__ = [
    "RESULT_ORDERS_ATTR",
    "result_order",
    "result_orders_attrs",
    "stride_order",
    "with_unit_dims",
]


SMALLER_THAN_META = frozenset(
    {
        "aten::_embedding_bag.default",
        "aten::_embedding_bag_forward_only.default",
        "aten::native_batch_norm.default",
        "aten::_native_batch_norm_legit.default",
        "aten::_native_batch_norm_legit.no_stats",
        "aten::_native_batch_norm_legit_no_training.default",
        "aten::cudnn_batch_norm.default",
        "aten::miopen_batch_norm.default",
    }
)
"""ATen calls some of whose results eager makes smaller than their FakeTensors (and so
their types) say: ``_embedding_bag``'s ``offset2bag`` is empty in ``sum`` mode with
per-sample weights, where the meta says one entry per index; the CPU's batch-norm
statistics are empty in inference. Their memory must not be given to another value
(``buffer-reuse``), which would be written past its end."""
