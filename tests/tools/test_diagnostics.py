"""kiln.diagnostics: op positions from the parser, and how errors are described."""

from __future__ import annotations

from xdsl.dialects.builtin import FileLineColLoc, IntAttr, ModuleOp, StringAttr, i32
from xdsl.dialects.func import FuncOp
from xdsl.passes import ModulePass

from kiln.diagnostics import (
    Diagnostic,
    DiagnosticError,
    LocatingParser,
    OpError,
    SourceLocation,
    pass_error,
    render,
)
from kiln.registry import make_context

IR = """\
func.func @f(%x: tensor<4x8xf32>) -> tensor<4xi64> {
  %v, %i = aten.max.dim(%x, dim = 1) : (tensor<4x8xf32>) -> (tensor<4xf32>, tensor<4xi64>)
  %n:2 = "aten.max.dim"(%x) <{dim = 0 : i64}> : (tensor<4x8xf32>) -> (tensor<8xf32>, tensor<8xi64>)
  func.return %i : tensor<4xi64>
}
"""


def parse() -> tuple[ModuleOp, LocatingParser]:
    parser = LocatingParser(make_context(), IR, "in.mlir")
    return parser.parse_module(), parser


def test_positions_point_at_op_names() -> None:
    module, parser = parse()
    located = {op.name + str(i): parser.source_map.locate(op) for i, op in enumerate(module.walk())}
    locations = [str(loc[0]) for loc in located.values() if loc is not None]
    assert locations == ["in.mlir:1:1", "in.mlir:2:12", "in.mlir:3:10", "in.mlir:4:3"]


def test_format_with_source_line_and_notes() -> None:
    diagnostic = Diagnostic(
        "bad",
        location=SourceLocation("a.mlir", 2, 3),
        source_line="  foo.bar",
        length=7,
        notes=(Diagnostic("see here", "note"),),
    )
    assert diagnostic.format() == "a.mlir:2:3: error: bad\n  foo.bar\n  ^~~~~~~\nnote: see here"
    assert Diagnostic("oops").format("tool") == "tool: error: oops"


def test_op_error_raised_by_a_pass_points_at_the_op() -> None:
    module, parser = parse()
    ret = list(module.walk())[-1]
    error = pass_error("my-pass", OpError(ret, "cannot lower this"), parser.source_map, module)
    text = render(error)
    assert text.startswith(
        "in.mlir:4:3: error: 'func.return' op pass 'my-pass' failed: cannot lower this"
    )


def test_op_created_by_a_pass_with_a_location_attribute() -> None:
    module, parser = parse()
    ret = list(module.walk())[-1]
    x = next(op for op in module.walk() if isinstance(op, FuncOp)).args[0]
    neg = make_context().get_op("aten.neg.default").create(operands=[x], result_types=[i32])
    neg.location = FileLineColLoc(StringAttr("model.py"), IntAttr(7), IntAttr(9))
    ret.parent_block().insert_op_before(neg, ret)  # pyright: ignore[reportOptionalMemberAccess]
    text = render(pass_error("p", OpError(neg, "broken"), parser.source_map, module))
    assert text.startswith("model.py:7:9: error: 'aten.neg.default' op pass 'p' failed: broken")


def test_exception_from_a_pattern_names_the_op_it_was_rewriting() -> None:
    module, parser = parse()
    target = list(module.walk())[2]

    class Failing(ModulePass):
        name = "failing"

        def apply(self, ctx: object, op: ModuleOp) -> None:
            for inner in op.walk():
                if inner is target:
                    self.fail(inner)

        def fail(self, op: object) -> None:
            raise KeyError("no lowering")

    try:
        Failing().apply(make_context(), module)
    except KeyError as e:
        text = render(pass_error("failing", e, parser.source_map, module))
    else:
        raise AssertionError("the pass did not raise")
    assert text.startswith("in.mlir:2:12: error: 'aten.max.dim' op pass 'failing' failed: KeyError")


def test_errors_without_location() -> None:
    assert (
        render(ValueError("Unrecognized passes: ['x']"))
        == "kiln-opt: error: Unrecognized passes: ['x']"
    )
    assert render(RuntimeError("boom")) == "kiln-opt: error: RuntimeError: boom"
    assert isinstance(DiagnosticError(Diagnostic("a")), Exception)
