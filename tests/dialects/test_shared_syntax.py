"""The syntax directives the lower dialects share (dialects/loop/syntax.py and the triton
literal directives): round trips of the literal-typed ops and the parse errors of each
dialect's enum words and literals."""

from __future__ import annotations

import pytest
from xdsl.parser import Parser
from xdsl.utils.exceptions import ParseError

from kiln.registry import make_context

TRITON = """
triton.kernel @k pointwise [128] x [1] params [in_ptr0] constexprs [XBLOCK] {
^bb0(%in_ptr0: !triton.ptr<f32>):
  %0 = triton.arange XBLOCK : !triton.block<[XBLOCK], i32>
  %p = triton.addptr %in_ptr0, %0 : !triton.ptr<f32>, !triton.block<[XBLOCK], i32> -> !triton.block<[XBLOCK], !triton.ptr<f32>>
  %c = triton.constexpr XBLOCK : i32
  %m = triton.cmp lt %0, %c : !triton.block<[XBLOCK], i32>, i32 -> !triton.block<[XBLOCK], i1>
  %1 = triton.load %p mask %m other -inf : !triton.block<[XBLOCK], !triton.ptr<f32>>, !triton.block<[XBLOCK], i1> -> !triton.block<[XBLOCK], f32>
  %2 = triton.load %p evict_last : !triton.block<[XBLOCK], !triton.ptr<f32>> -> !triton.block<[XBLOCK], f32>
  %3 = triton.load %p mask %m other 0.5 evict_first {tag = 1 : i64} : !triton.block<[XBLOCK], !triton.ptr<f32>>, !triton.block<[XBLOCK], i1> -> !triton.block<[XBLOCK], f32>
  %4 = triton.full -inf : !triton.block<[XBLOCK], f32>
  %5 = triton.full true : !triton.block<[XBLOCK], i1>
  triton.return
}
"""

CPP = """
cpp.func @k(%in_ptr0: memref<4x16xi64>) outs(%out_ptr0: memref<4x16xi64>) {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %true = arith.constant true
  cpp.for serial (%x0) = (%c0) to (%c4) {
    %0 = cpp.load %in_ptr0["16*i0"](%x0) if %true else -3 checked : memref<4x16xi64>
    cpp.store %0, %out_ptr0["16*i0"](%x0) : memref<4x16xi64>
  }
  cpp.return
}
"""


def _round_trip(text: str) -> str:
    ctx = make_context()
    module = Parser(ctx, text).parse_module()
    module.verify()
    printed = str(module)
    assert str(Parser(ctx, printed).parse_module()) == printed
    return printed


def test_literal_typed_ops_round_trip() -> None:
    printed = _round_trip(TRITON) + _round_trip(CPP)
    for line in (
        "triton.load %p mask %m other -inf : ",
        "triton.load %p evict_last : ",
        "other 0.5 evict_first {tag = 1 : i64} : ",
        "triton.full -inf : !triton.block<[XBLOCK], f32>",
        "triton.full true : !triton.block<[XBLOCK], i1>",
        'cpp.load %in_ptr0["16*i0"](%x0) if %true else -3 checked : memref<4x16xi64>',
    ):
        assert line in printed


BAD = {
    "triton kind": (
        TRITON.replace("pointwise [128]", "blocked [128]"),
        "unknown kernel kind 'blocked' (one of pointwise, persistent, looped, split, matmul)",
    ),
    "cpp loop kind": (
        CPP.replace("cpp.for serial", "cpp.for vector"),
        "unknown loop kind 'vector'",
    ),
    "cpp fill": (CPP.replace("else -3", "else 0.5"), "fill 0.5 is not an integer"),
    "cpp type": (
        CPP.replace("checked : memref<4x16xi64>", "checked : tensor<4xf32>"),
        "cpp.load reads a memref, not tensor<4xf32>",
    ),
    "full type": (
        TRITON.replace("-inf : !triton.block<[XBLOCK], f32>\n", "-inf : f32\n"),
        "triton.full makes a !triton.block, not f32",
    ),
    "full literal": (
        TRITON.replace(
            "true : !triton.block<[XBLOCK], i1>", "true : !triton.block<[XBLOCK], !triton.ptr<f32>>"
        ),
        "no literal of type",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_parse_errors_name_the_problem(case: str) -> None:
    text, message = BAD[case]
    with pytest.raises(ParseError) as info:
        Parser(make_context(), text).parse_module()
    assert message in str(info.value)
