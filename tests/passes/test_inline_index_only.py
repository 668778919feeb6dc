"""inline-producers for producers that read no buffer (functions of their position:
``arange`` and what position ids and masks compute from it), recomputed in every
consumer, even where a consumer gathers them (``MAX_INDEX_ONLY_READS``).

The prologue of transformers' decoders (LLaMA, Mistral, Qwen2, GPT-2): ``cache_position``
is an ``arange`` (plus 0), the packed-sequence check takes ``diff(position) != 1`` (a
``cat`` and a shifted ``sub``), and its ``cumsum`` numbers the sequences; the causal mask
gathers ``cache_position`` at positions it computes. Each of those was a kernel of 32
points on the H200, 1 us apiece, before the cumsum's own; Inductor runs one.
"""

from __future__ import annotations

import pytest
from fuse_checks import assert_schedule_preserves, kernels, parse, schedule

from kiln.dialects.loop.ops import PointwiseOp

PROLOGUE = """
builtin.module attributes {kiln.device = "DEVICE"} {
  func.func @forward(%x: memref<32xi64>) -> (memref<1x32xi64>, memref<32xi64>) {
    %arange = loop.pointwise [32] () : () -> memref<32xi64> {
    ^bb0(%d0: index):
      %0 = loop.index "d0"
      %1 = arith.index_cast %0 : index to i64
      loop.yield %1 : i64
    }
    %add = loop.pointwise [32] (%arange) : (memref<32xi64>) -> memref<32xi64> {
    ^bb0(%d0: index, %in0: memref<32xi64>):
      %0 = loop.load %in0["d0"] : memref<32xi64>
      %1 = arith.constant 0 : i64
      %2 = arith.addi %0, %1 : i64
      loop.yield %2 : i64
    }
    %sub = loop.pointwise [1, 1] (%add) : (memref<32xi64>) -> memref<1x1xi64> {
    ^bb0(%d0: index, %d1: index, %in0: memref<32xi64>):
      %0 = loop.load %in0["d1"] : memref<32xi64>
      %1 = arith.constant 1 : i64
      %2 = arith.subi %0, %1 : i64
      loop.yield %2 : i64
    }
    %cat = loop.pointwise [1, 33] (%sub, %add) : (memref<1x1xi64>, memref<32xi64>) -> memref<1x33xi64> {
    ^bb0(%d0: index, %d1: index, %in0: memref<1x1xi64>, %in1: memref<32xi64>):
      %0 = loop.index "d1"
      %1 = loop.index "1"
      %2 = arith.cmpi slt, %0, %1 : index
      %3 = loop.load %in0["d0 + d1"] if %2 else 0 : memref<1x1xi64>
      %4 = arith.cmpi sge, %0, %1 : index
      %5 = loop.load %in1["d1 - 1"] if %4 else 0 : memref<32xi64>
      %6 = arith.select %2, %3, %5 : i64
      loop.yield %6 : i64
    }
    %sub1 = loop.pointwise [1, 32] (%cat) : (memref<1x33xi64>) -> memref<1x32xi64> {
    ^bb0(%d0: index, %d1: index, %in0: memref<1x33xi64>):
      %0 = loop.load %in0["33*d0 + d1 + 1"] : memref<1x33xi64>
      %1 = loop.load %in0["33*d0 + d1"] : memref<1x33xi64>
      %2 = arith.subi %0, %1 : i64
      loop.yield %2 : i64
    }
    %ne = loop.pointwise [1, 32] (%sub1) : (memref<1x32xi64>) -> memref<1x32xi1> {
    ^bb0(%d0: index, %d1: index, %in0: memref<1x32xi64>):
      %0 = loop.load %in0["32*d0 + d1"] : memref<1x32xi64>
      %1 = arith.constant 1 : i64
      %2 = arith.cmpi ne, %0, %1 : i64
      loop.yield %2 : i1
    }
    %cumsum = loop.reduction sum [1, 32] reduce [32] (%ne) : (memref<1x32xi1>) -> memref<1x32xi64> {
    ^bb0(%d0: index, %d1: index, %r0: index, %in0: memref<1x32xi1>):
      %0 = loop.index "r0"
      %1 = loop.index "d1"
      %2 = arith.cmpi sle, %0, %1 : index
      %3 = loop.load %in0["32*d0 + r0"] : memref<1x32xi1>
      %4 = arith.extui %3 : i1 to i64
      %5 = arith.constant 0 : i64
      %6 = arith.select %2, %4, %5 : i64
      loop.yield %6 : i64
    }
    %gather = loop.pointwise [32] (%x, %add) : (memref<32xi64>, memref<32xi64>) -> memref<32xi64> {
    ^bb0(%d0: index, %in0: memref<32xi64>, %in1: memref<32xi64>):
      %0 = loop.load %in0["d0"] : memref<32xi64>
      %1 = arith.index_cast %0 : i64 to index
      %2 = loop.check_index %1 < "32"
      %3 = loop.load %in1["i0"](%2) : memref<32xi64>
      %4 = arith.constant 3 : i64
      %5 = arith.muli %3, %4 : i64
      loop.yield %5 : i64
    }
    func.return %cumsum, %gather : memref<1x32xi64>, memref<32xi64>
  }
}
"""


@pytest.mark.parametrize(
    ("device", "kept"),
    [
        ("cuda", ["gather"]),
        # The CPU keeps the usual bounds (a kernel call costs next to nothing there): the
        # cat's body, grown by what went into it, stays a node.
        ("cpu", ["cat", "gather"]),
    ],
)
def test_position_only_chain_is_recomputed_in_its_consumers(device: str, kept: list[str]) -> None:
    module = schedule(parse(PROLOGUE.replace("DEVICE", device)), "inline-producers")
    pointwise = [op.result.name_hint for op in module.walk() if isinstance(op, PointwiseOp)]
    # On a GPU only the gather is left: the arange chain went into the cumsum and the
    # gather (the arange's value at the gathered position is the position itself).
    assert pointwise == kept


@pytest.mark.parametrize("device", ["cuda", "cpu"])
def test_prologue_computes_the_same(device: str) -> None:
    module, _ = assert_schedule_preserves(parse(PROLOGUE.replace("DEVICE", device)), "fuse,tile")
    if device == "cuda":
        assert len(kernels(module)) == 2


def _prologue_over_an_input() -> str:
    """PROLOGUE with the positions a buffer (GPT-2's: the embedding kernel writes them)."""
    start = PROLOGUE.index("    %arange = ")
    end = PROLOGUE.index("    %sub = ")
    text = PROLOGUE[:start] + PROLOGUE[end:]
    return text.replace(
        "@forward(%x: memref<32xi64>)", "@forward(%x: memref<32xi64>, %add: memref<32xi64>)"
    )


@pytest.mark.parametrize(
    ("device", "kept"),
    [
        # Tiny (every buffer at most TINY_INLINE_BYTES): the chain from the positions to
        # the cumsum is recomputed in it, as one that reads no buffer is.
        ("cuda", ["gather"]),
        ("cpu", ["ne", "gather"]),
    ],
)
def test_tiny_chain_over_a_buffer_is_recomputed_in_its_consumers(
    device: str, kept: list[str]
) -> None:
    module = schedule(
        parse(_prologue_over_an_input().replace("DEVICE", device)), "inline-producers"
    )
    pointwise = [op.result.name_hint for op in module.walk() if isinstance(op, PointwiseOp)]
    assert pointwise == kept


def test_tiny_chain_over_a_buffer_computes_the_same() -> None:
    module, _ = assert_schedule_preserves(
        parse(_prologue_over_an_input().replace("DEVICE", "cuda")), "fuse,tile"
    )
    # One kernel: the gather joins the cumsum's once the ``ne`` is in it (two before).
    assert len(kernels(module)) == 1


def test_a_chain_over_a_large_buffer_keeps_the_usual_bounds() -> None:
    # 1,024 positions (8 KB): not tiny, so the chain's grown body stays a node of its own.
    text = _prologue_over_an_input().replace("DEVICE", "cuda")
    text = text.replace("memref<32xi64>", "memref<1024xi64>").replace("[32]", "[1024]")
    text = text.replace("memref<1x33xi64>", "memref<1x1025xi64>").replace("[1, 33]", "[1, 1025]")
    text = text.replace("memref<1x32xi64>", "memref<1x1024xi64>").replace("[1, 32]", "[1, 1024]")
    text = text.replace("memref<1x32xi1>", "memref<1x1024xi1>").replace(
        "reduce [32]", "reduce [1024]"
    )
    text = (
        text.replace('"33*d0', '"1025*d0')
        .replace('"32*d0', '"1024*d0')
        .replace('< "32"', '< "1024"')
    )
    module = schedule(parse(text), "inline-producers")
    pointwise = [op.result.name_hint for op in module.walk() if isinstance(op, PointwiseOp)]
    assert "gather" in pointwise
    assert len(pointwise) > 1
