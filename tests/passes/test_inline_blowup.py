"""``_index_blowup`` under symbolic sizes: a consumer reading a producer's buffer where
the producer writes it (the layers of a CNN, channels last) composes back to the
producer's own index, and is inlined; indices that do not simplify are refused."""

from __future__ import annotations

import pytest
import sympy
from fuse_checks import parse
from xdsl.dialects.func import FuncOp

from kiln.dialects.loop.body_ops import IndexOp, LoadOp
from kiln.dialects.loop.expr import expr_nodes, parse_expr
from kiln.dialects.loop.ops import LoopNestOp, PointwiseOp
from kiln.passes.scheduling import inline

SIZES = '["s0", "(s1 - 1) // 4 + 1", "(s1 - 1) // 4 + 1", 96]'
FLAT = (
    "d0*((s1 - 1) // 4 + 1)*(96*((s1 - 1) // 4) + 96) + d1*(96*((s1 - 1) // 4) + 96) + 96*d2 + d3"
)
TYPE = "memref<?x?x?x96xf32>"


def _module(producer_index: str, consumer_index: str) -> str:
    return f"""
builtin.module {{
  func.func @forward(%x: {TYPE}, %w: memref<96xf32>, %n: index, %h: index) -> {TYPE} {{
    %p = loop.pointwise {SIZES} (%x, %w) syms(%n, %h) : ({TYPE}, memref<96xf32>, index, index) -> {TYPE} {{
    ^bb0(%d0: index, %d1: index, %d2: index, %d3: index, %in0: {TYPE}, %in1: memref<96xf32>):
      %0 = loop.load %in0["{producer_index}"] : {TYPE}
      %1 = loop.load %in1["d3"] : memref<96xf32>
      %2 = arith.subf %0, %1 : f32
      loop.yield %2 : f32
    }}
    %c = loop.pointwise {SIZES} (%p, %w) syms(%n, %h) : ({TYPE}, memref<96xf32>, index, index) -> {TYPE} {{
    ^bb0(%d0: index, %d1: index, %d2: index, %d3: index, %in0: {TYPE}, %in1: memref<96xf32>):
      %0 = loop.load %in0["{consumer_index}"] : {TYPE}
      %1 = loop.load %in1["d3"] : memref<96xf32>
      %2 = arith.mulf %0, %1 : f32
      loop.yield %2 : f32
    }}
    func.return %c : {TYPE}
  }}
}}
"""


def _pair(text: str) -> tuple[PointwiseOp, LoopNestOp]:
    func = next(op for op in parse(text).ops if isinstance(op, FuncOp))
    producer, consumer = [op for op in func.body.block.ops if isinstance(op, PointwiseOp)][:2]
    return producer, consumer


def test_contiguous_read_composes_back_to_the_producers_index() -> None:
    producer, consumer = _pair(_module(FLAT, FLAT))
    # The cheap bound does not decide: the composition is computed.
    assert expr_nodes(parse_expr(FLAT)) * (expr_nodes(parse_expr(FLAT)) + 4) > 256
    assert not inline._index_blowup(producer, [consumer])
    assert inline.worth_inlining(producer, [consumer], cpu=True)
    inline.inline_into(producer, consumer)
    loads = [op for op in consumer.body.walk() if isinstance(op, LoadOp)]
    assert [sympy.expand(op.index.data) for op in loads] == [
        sympy.expand(parse_expr(FLAT)),
        parse_expr("d3"),
        parse_expr("d3"),
    ]
    assert not any(isinstance(op, IndexOp) for op in consumer.body.walk())


def test_index_that_does_not_simplify_is_refused() -> None:
    # Reads that divide and wrap by sizes the ranges cannot decide: composed, the
    # producer's index nests the consumer's in every coordinate.
    index = " + ".join(f"((d0*s1 + {k}*d1 + d2*d3) // s0) % (s1 + {k})" for k in range(1, 6))
    producer, consumer = _pair(_module(index, index))
    assert inline._index_blowup(producer, [consumer])
    assert not inline.worth_inlining(producer, [consumer], cpu=True)


def test_in_order_read_is_decided_without_composing(monkeypatch: pytest.MonkeyPatch) -> None:
    """A read at the producer's own row-major position is its own index: no composition
    (EfficientNet-b0 under symbolic sizes: 451 checks 0.76 s -> 0.21 s)."""
    producer, consumer = _pair(_module(FLAT, FLAT))

    def refuse(*args: object) -> None:
        raise AssertionError("composed")

    monkeypatch.setattr(inline, "unflatten", refuse)
    assert not inline._index_blowup(producer, [consumer])
    # Another order (d1 and d2 swapped) is composed.
    swapped = FLAT.replace("d1*", "dX*").replace("96*d2", "96*d1").replace("dX*", "d2*")
    producer, consumer = _pair(_module(FLAT, swapped))
    with pytest.raises(AssertionError, match="composed"):
        inline._index_blowup(producer, [consumer])
