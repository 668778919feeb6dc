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
from kiln.passes.scheduling import inline, inline_cost

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
    assert not inline_cost._index_blowup(producer, [consumer])
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
    assert inline_cost._index_blowup(producer, [consumer])
    assert not inline.worth_inlining(producer, [consumer], cpu=True)


SWAPPED = FLAT.replace("d1*", "dX*").replace("96*d2", "96*d1").replace("dX*", "d2*")
"""FLAT with h and w swapped: a transposed read (a permutation of the loop variables)."""


def test_in_order_and_permuted_reads_are_decided_without_composing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A read at the producer's own row-major position is its own index, and one at a
    permutation of the consumer's variables (a channels-last mean over h, w reads its
    producer at (d0, r0, r1, d1)) renames it: no composition (EfficientNet-b0 under
    symbolic sizes: 451 checks 0.76 s -> 0.21 s; MobileNet-v3's permuted reads 0.37 s
    -> 0.17 s)."""

    def refuse(*args: object) -> None:
        raise AssertionError("composed")

    monkeypatch.setattr(inline_cost, "unflatten", refuse)
    for read in (FLAT, SWAPPED):
        producer, consumer = _pair(_module(FLAT, read))
        assert not inline_cost._index_blowup(producer, [consumer])
    # A read one row further on is composed.
    producer, consumer = _pair(_module(FLAT, FLAT + " + 96"))
    with pytest.raises(AssertionError, match="composed"):
        inline_cost._index_blowup(producer, [consumer])


def test_a_permuted_read_inlines_as_the_producers_index_renamed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    inlined: list[list[sympy.Expr]] = []
    for permuted in (True, False):  # renamed, and composed through unflatten
        if not permuted:
            monkeypatch.setattr(inline, "permuted_read", lambda *args: None)  # pyright: ignore[reportUnknownLambdaType]
        producer, consumer = _pair(_module(FLAT, SWAPPED))
        inline.inline_into(producer, consumer)
        loads = [op for op in consumer.body.walk() if isinstance(op, LoadOp)]
        inlined.append([sympy.expand(op.index.data) for op in loads])
        assert not any(isinstance(op, IndexOp) for op in consumer.body.walk())
    assert (
        inlined[0]
        == inlined[1]
        == [
            sympy.expand(parse_expr(SWAPPED)),
            parse_expr("d3"),
            parse_expr("d3"),
        ]
    )


SHUFFLED = FLAT.replace("96*d2 + d3", "96*d2 + d3 // 2 + 48*(d3 % 2)")
"""FLAT at a channel shuffle's position (ShuffleNet-v2: ``view(n, 2, 48, h, w)``,
``transpose(1, 2)``, flattened back, channels-last)."""


def test_a_shuffled_read_is_read_off_its_terms_without_unflattening(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each term of the read a multiple of one dim's stride, and the channel coordinate
    ``d3 // 2 + 48*(d3 % 2)`` provably within 96: the producer's coordinates, with no
    division by the symbolic strides (ShuffleNet-v2 under symbolic sizes: ~30 ms of
    sympy a read)."""

    def refuse(*args: object) -> None:
        raise AssertionError("unflattened")

    monkeypatch.setattr(inline_cost, "unflatten", refuse)
    monkeypatch.setattr(inline, "unflatten", refuse)
    producer, consumer = _pair(_module(FLAT, SHUFFLED))
    assert not inline_cost._index_blowup(producer, [consumer])
    inline.inline_into(producer, consumer)
    loads = [op for op in consumer.body.walk() if isinstance(op, LoadOp)]
    assert [sympy.expand(op.index.data) for op in loads] == [
        sympy.expand(parse_expr(SHUFFLED)),
        sympy.expand(parse_expr("d3 // 2 + 48*(d3 % 2)")),
        parse_expr("d3"),
    ]
    # Past the dim (a channel 96 and up for odd d3): unflattened after all.
    producer, consumer = _pair(
        _module(FLAT, FLAT.replace("96*d2 + d3", "96*d2 + d3 // 2 + 49*(d3 % 2)"))
    )
    with pytest.raises(AssertionError, match="unflattened"):
        inline_cost._index_blowup(producer, [consumer])
