"""The loop dialect: custom and generic syntax round trips, and verifier errors."""

from __future__ import annotations

import pytest
import sympy
from xdsl.dialects import arith
from xdsl.dialects.builtin import ArrayAttr, IndexType, MemRefType, ModuleOp, f32, i1
from xdsl.ir import Block, Region
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import ParseError, VerifyException

from kiln.dialects.loop import IndexExprAttr, LoadOp, PointwiseOp, YieldOp
from kiln.dialects.loop.expr import var
from kiln.registry import make_context

PROGRAM = """\
builtin.module {
  func.func @forward(%x: memref<4x8xf32>, %w: memref<10x8xf32>, %t: memref<4xi64>, %n: index) -> (memref<8x4xf32>, memref<4xi64>, memref<4xf32>, memref<4x8xf32>, memref<?xf32>) {
    %0 = loop.pointwise [8, 4] (%x) : (memref<4x8xf32>) -> memref<8x4xf32> {
    ^bb0(%d0: index, %d1: index, %in0: memref<4x8xf32>):
      %1 = loop.load %in0["d0 + 8*d1"] : memref<4x8xf32>
      %2 = loop.index "d0 - 1"
      %3 = arith.constant 0 : index
      %4 = arith.cmpi sge, %2, %3 : index
      %5 = loop.load %in0["d0 + 8*d1 - 1"] if %4 else -inf : memref<4x8xf32>
      %6 = arith.maximumf %1, %5 : f32
      loop.yield %6 : f32
    }
    %1 = loop.reduction argmax [4] reduce [8] (%x) : (memref<4x8xf32>) -> memref<4xi64> {
    ^bb0(%d0: index, %r0: index, %in0: memref<4x8xf32>):
      %2 = loop.load %in0["8*d0 + r0"] : memref<4x8xf32>
      loop.yield %2 : f32
    }
    %2, %3, %4 = loop.reduction welford [4] reduce [8] (%x) : (memref<4x8xf32>) -> (memref<4xf32>, memref<4xf32>, memref<4xf32>) {
    ^bb0(%d0: index, %r0: index, %in0: memref<4x8xf32>):
      %5 = loop.load %in0["8*d0 + r0"] : memref<4x8xf32>
      loop.yield %5 : f32
    }
    %5 = loop.pointwise [4, 8] (%w, %t) : (memref<10x8xf32>, memref<4xi64>) -> memref<4x8xf32> {
    ^bb0(%d0: index, %d1: index, %in0: memref<10x8xf32>, %in1: memref<4xi64>):
      %6 = loop.load %in1["d0"] : memref<4xi64>
      %7 = arith.index_cast %6 : i64 to index
      %8 = loop.load %in0["d1 + 8*i0"](%7) : memref<10x8xf32>
      loop.yield %8 : f32
    }
    %6 = loop.pointwise ["s0"] (%x) syms(%n) : (memref<4x8xf32>, index) -> memref<?xf32> {
    ^bb0(%d0: index, %in0: memref<4x8xf32>):
      %7 = loop.load %in0["d0 % 32"] : memref<4x8xf32>
      loop.yield %7 : f32
    }
    %7 = loop.extern (%x) : (memref<4x8xf32>) -> memref<4xf32> {
    ^bb0(%8: tensor<4x8xf32>):
      %9 = aten.as_strided.default(%8, size = [8, 4], stride = [1, 8]) : (tensor<4x8xf32>) -> tensor<8x4xf32>
      %10 = aten.sum.dim_IntList(%9, dim = [0]) : (tensor<8x4xf32>) -> tensor<4xf32>
      loop.yield %10 : tensor<4xf32>
    }
    func.return %0, %1, %7, %5, %6 : memref<8x4xf32>, memref<4xi64>, memref<4xf32>, memref<4x8xf32>, memref<?xf32>
  }
}"""


def parse(text: str) -> ModuleOp:
    return Parser(make_context(), text).parse_module()


def generic(module: ModuleOp) -> str:
    from io import StringIO

    out = StringIO()
    Printer(stream=out, print_generic_format=True).print_op(module)
    return out.getvalue()


def test_custom_syntax_round_trips() -> None:
    module = parse(PROGRAM)
    module.verify()
    assert str(module) == PROGRAM
    assert parse(str(module)).is_structurally_equivalent(module)


def test_generic_syntax_round_trips() -> None:
    module = parse(PROGRAM)
    text = generic(module)
    assert '#loop.expr<"d0 + 8*d1">' in text
    assert "#loop<reduction_kind welford>" in text
    again = parse(text)
    again.verify()
    assert str(again) == PROGRAM


def test_expr_attribute_prints_and_parses() -> None:
    attr = IndexExprAttr(8 * var("d0") + var("d1"))
    assert str(attr) == '#loop.expr<"8*d0 + d1">'
    parsed = Parser(make_context(), '#loop.expr<"(d0 + 3) // 4 % 2">').parse_attribute()
    assert isinstance(parsed, IndexExprAttr)
    assert parsed.text == "(d0 + 3) // 4 % 2"


# --- verifier errors ----------------------------------------------------------------


def _pointwise(body: str, sizes: str = "[4]", result: str = "memref<4xf32>", args: str = "") -> str:
    return f"""
func.func @f(%x: memref<4xf32>, %n: index) -> {result} {{
  %0 = loop.pointwise {sizes} (%x) {args}: (memref<4xf32>) -> {result} {{
  ^bb0(%d0: index, %in0: memref<4xf32>):
{body}
  }}
  func.return %0 : {result}
}}"""


BAD_IR = {
    "index variable out of range": (
        _pointwise('    %1 = loop.load %in0["d1"] : memref<4xf32>\n    loop.yield %1 : f32'),
        "uses d1, but only 1 index variable(s) exist here",
    ),
    "indirect variable without operand": (
        _pointwise('    %1 = loop.load %in0["i0"] : memref<4xf32>\n    loop.yield %1 : f32'),
        "uses i0, but only 0 indirect variable(s) exist here",
    ),
    "size symbol without syms": (
        _pointwise('    %1 = loop.load %in0["s0"] : memref<4xf32>\n    loop.yield %1 : f32'),
        "uses s0, but only 0 size variable(s) exist here",
    ),
    "yield type differs from buffer": (
        _pointwise("    %1 = arith.constant 1 : i64\n    loop.yield %1 : i64"),
        "body yields i64 but the buffer holds f32",
    ),
    "sizes differ from result type": (
        _pointwise(
            '    %1 = loop.load %in0["d0"] : memref<4xf32>\n    loop.yield %1 : f32',
            sizes="[5]",
        ),
        "size 5 does not match result type memref<4xf32>",
    ),
    "symbolic size without syms": (
        _pointwise(
            '    %1 = loop.load %in0["d0"] : memref<4xf32>\n    loop.yield %1 : f32',
            sizes='["s0"]',
            result="memref<?xf32>",
        ),
        "uses a symbol but the op has no syms",
    ),
    "missing terminator value": (
        _pointwise("    loop.yield"),
        "body must end with 'loop.yield' of one value",
    ),
    "argmax into a float buffer": (
        """
func.func @f(%x: memref<4x8xf32>) -> memref<4xf32> {
  %0 = loop.reduction argmax [4] reduce [8] (%x) : (memref<4x8xf32>) -> memref<4xf32> {
  ^bb0(%d0: index, %r0: index, %in0: memref<4x8xf32>):
    %1 = loop.load %in0["8*d0 + r0"] : memref<4x8xf32>
    loop.yield %1 : f32
  }
  func.return %0 : memref<4xf32>
}""",
        "argmax produces i64, not f32",
    ),
    "welford with one result": (
        """
func.func @f(%x: memref<4x8xf32>) -> memref<4xf32> {
  %0 = loop.reduction welford [4] reduce [8] (%x) : (memref<4x8xf32>) -> memref<4xf32> {
  ^bb0(%d0: index, %r0: index, %in0: memref<4x8xf32>):
    %1 = loop.load %in0["8*d0 + r0"] : memref<4x8xf32>
    loop.yield %1 : f32
  }
  func.return %0 : memref<4xf32>
}""",
        "welford has 3 result(s), got 1",
    ),
    "reduction variables missing from the body": (
        """
func.func @f(%x: memref<4x8xf32>) -> memref<4xf32> {
  %0 = loop.reduction sum [4] reduce [8] (%x) : (memref<4x8xf32>) -> memref<4xf32> {
  ^bb0(%d0: index, %in0: memref<4x8xf32>):
    %1 = arith.constant 1.0 : f32
    loop.yield %1 : f32
  }
  func.return %0 : memref<4xf32>
}""",
        "body arguments must be 2 index variables followed by the 1 input buffers' types",
    ),
    "extern body argument of another shape": (
        """
func.func @f(%x: memref<4xf32>) -> memref<4xf32> {
  %0 = loop.extern (%x) : (memref<4xf32>) -> memref<4xf32> {
  ^bb0(%a: tensor<5xf32>):
    %1 = aten.slice.Tensor(%a, dim = 0, start = 0, end = 4) : (tensor<5xf32>) -> tensor<4xf32>
    loop.yield %1 : tensor<4xf32>
  }
  func.return %0 : memref<4xf32>
}""",
        "body arguments must be the inputs as tensors and then the syms",
    ),
    "load outside a loop op": (
        """
func.func @f(%x: memref<4xf32>) -> f32 {
  %0 = loop.load %x["0"] : memref<4xf32>
  func.return %0 : f32
}""",
        "must be inside a loop.pointwise or loop.reduction",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_IR))
def test_verifier_rejects(case: str) -> None:
    text, message = BAD_IR[case]
    module = parse(text)
    with pytest.raises(VerifyException, match=message.replace("(", r"\(").replace(")", r"\)")):
        module.verify()


BAD_SYNTAX = {
    "bad index expression": (
        _pointwise('    %1 = loop.load %in0["d0 +"] : memref<4xf32>\n    loop.yield %1 : f32'),
        "bad index expression 'd0 +': unexpected end of index expression",
    ),
    "unknown reduction kind": (
        """
func.func @f(%x: memref<4xf32>) -> memref<f32> {
  %0 = loop.reduction mean [] reduce [4] (%x) : (memref<4xf32>) -> memref<f32> {
  ^bb0(%r0: index, %in0: memref<4xf32>):
    %1 = loop.load %in0["r0"] : memref<4xf32>
    loop.yield %1 : f32
  }
  func.return %0 : memref<f32>
}""",
        "unknown reduction kind 'mean'",
    ),
    "load of a tensor": (
        _pointwise('    %1 = loop.load %in0["d0"] : tensor<4xf32>\n    loop.yield %1 : f32'),
        "loop.load reads a memref, not tensor<4xf32>",
    ),
    "integer fill for a non-integer value": (
        """
func.func @f(%x: memref<4xi64>) -> memref<4xi64> {
  %0 = loop.pointwise [4] (%x) : (memref<4xi64>) -> memref<4xi64> {
  ^bb0(%d0: index, %in0: memref<4xi64>):
    %m = arith.constant true
    %1 = loop.load %in0["d0"] if %m else 0.5 : memref<4xi64>
    loop.yield %1 : i64
  }
  func.return %0 : memref<4xi64>
}""",
        "fill 0.5 is not an integer",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_SYNTAX))
def test_parser_rejects(case: str) -> None:
    text, message = BAD_SYNTAX[case]
    with pytest.raises(ParseError, match=message.replace("(", r"\(").replace("+", r"\+")):
        parse(text)


def test_load_needs_fill_with_mask() -> None:
    """A mask without a fill value can only be built programmatically."""
    buffer_type = MemRefType(f32, [4])
    block = Block(arg_types=[IndexType(), buffer_type])
    mask = arith.ConstantOp.from_int_and_width(1, i1)
    load = LoadOp.build(
        operands=[block.args[1], [], [mask.result]],
        result_types=[f32],
        properties={"index": IndexExprAttr(sympy.Integer(0))},
    )
    block.add_ops([mask, load, YieldOp(load.result)])
    op = PointwiseOp.build(
        operands=[[], []],
        result_types=[buffer_type],
        properties={"sizes": ArrayAttr([IndexExprAttr(sympy.Integer(4))])},
        regions=[Region(block)],
    )
    with pytest.raises(VerifyException, match="a mask needs a fill value"):
        load.verify()
    with pytest.raises(VerifyException, match="body arguments must be 1 index variables"):
        op.verify_()
