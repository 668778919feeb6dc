"""Ops that live in loop bodies: loads, index values and the terminator.

Scalar math in a body is xDSL's ``arith`` and ``math``; these ops connect it to buffers
and to the iteration space.

```mlir
%a = loop.load %x["8*d0 + d1"] : memref<4x8xf32>
%b = loop.load %w["16*i0 + d1"](%row) : memref<10x16xf32>      // indirect (gather)
%c = loop.load %x["d0 - 2"] if %inside else 0.0 : memref<8xf32>  // masked, with fill
%i = loop.index "d0 + 3"                                          // index as a value
%j = loop.check_index %k < "s0"                                   // 0 <= %k < s0, or raise
loop.yield %c : f32
```
"""

from __future__ import annotations

from xdsl.dialects.builtin import (
    FloatAttr,
    IndexType,
    IntegerAttr,
    MemRefType,
    i1,
)
from xdsl.ir import Operation, SSAValue
from xdsl.irdl import (
    AnyAttr,
    AttrSizedOperandSegments,
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.traits import IsTerminator, Pure
from xdsl.utils.exceptions import VerifyException

from kiln.dialects.loop.attributes import IndexExprAttr
from kiln.dialects.loop.expr import var_kind
from kiln.dialects.loop.syntax import (
    Below,
    Expr,
    Fill,
    FilledBuffer,
    Subscript,
    fill_attr,
    fill_text,
    parse_fill,
)


def enclosing_loop_op(op: Operation) -> Operation | None:
    """The nearest ``loop.pointwise``/``loop.reduction`` around ``op`` (None if detached)."""
    from kiln.dialects.loop.ops import LoopNestOp

    parent = op.parent_op()
    while parent is not None and not isinstance(parent, LoopNestOp):
        parent = parent.parent_op()
    return parent


def check_expr_vars(op: Operation, expr: IndexExprAttr, n_indirect: int) -> None:
    """Every symbol of ``expr`` must name a variable the enclosing loop op defines."""
    from kiln.dialects.loop.ops import LoopNestOp

    nest = enclosing_loop_op(op)
    if nest is None:
        if op.parent_op() is not None:
            raise VerifyException(f"{op.name} must be inside a loop.pointwise or loop.reduction")
        return
    assert isinstance(nest, LoopNestOp)
    limits = {
        "d": len(nest.sizes.data),
        "r": len(nest.reduction_sizes_list()),
        "s": len(nest.syms),
        "i": n_indirect,
    }
    for symbol in sorted(expr.data.free_symbols, key=str):
        kind, k = var_kind(symbol)  # pyright: ignore[reportArgumentType]
        if k >= limits[kind]:
            raise VerifyException(
                f"{op.name}: index '{expr.text}' uses {symbol}, but only {limits[kind]} "
                f"{'index' if kind == 'd' else {'r': 'reduction', 's': 'size', 'i': 'indirect'}[kind]}"
                f" variable(s) exist here"
            )


@irdl_op_definition
class LoadOp(IRDLOperation):
    """Reads a buffer's flat storage at an index expression.

    The expression may use ``i<k>``, the k-th ``indirect`` operand (an index computed
    in the body, e.g. from a loaded value). With a mask, lanes where the mask is false
    read nothing and give the fill value instead.

    ```mlir
    %v = loop.load %x["d0 - 1"](%j) if %m else -inf : memref<8xf32>
    ```
    """

    name = "loop.load"

    buffer = operand_def(MemRefType)
    indirect = var_operand_def(IndexType)
    mask = opt_operand_def(i1)
    index = prop_def(IndexExprAttr)
    fill = opt_prop_def(AnyAttr())
    result = result_def()

    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(Pure())

    def verify_(self) -> None:
        ty = self.buffer.type
        assert isinstance(ty, MemRefType)
        if self.result.type != ty.element_type:
            raise VerifyException(
                f"{self.name}: result {self.result.type} is not the element type of {ty}"
            )
        if (self.mask is None) != (self.fill is None):
            raise VerifyException(f"{self.name}: a mask needs a fill value and vice versa")
        if self.fill is not None:
            fill_type = getattr(self.fill, "type", None)
            if not isinstance(self.fill, IntegerAttr | FloatAttr) or fill_type != ty.element_type:
                raise VerifyException(
                    f"{self.name}: fill {self.fill} must be a {ty.element_type} constant"
                )
        check_expr_vars(self, self.index, len(self.indirect))
        nest = enclosing_loop_op(self)
        if nest is not None:
            from kiln.dialects.loop.ops import LoopNestOp

            assert isinstance(nest, LoopNestOp)
            if self.buffer not in nest.input_args():
                raise VerifyException(
                    f"{self.name}: the buffer must be an input block argument of the enclosing "
                    f"{nest.name}"
                )

    assembly_format = (
        "$buffer custom<Subscript>($index, $indirect) (`if` $mask^ `else` custom<Fill>($fill))? "
        "attr-dict `:` custom<FilledBuffer>(type($buffer), type($result), ref($fill))"
    )
    custom_directives = (Subscript, Fill, FilledBuffer)


@irdl_op_definition
class IndexOp(IRDLOperation):
    """An index expression over the loop variables and sizes, as an ``index`` value.

    ```mlir
    %i = loop.index "d0 + 3"
    %x = arith.index_cast %i : index to i64
    ```
    """

    name = "loop.index"

    expr = prop_def(IndexExprAttr)
    result = result_def(IndexType)

    traits = traits_def(Pure())

    def verify_(self) -> None:
        check_expr_vars(self, self.expr, 0)

    assembly_format = "custom<Expr>($expr) attr-dict"
    custom_directives = (Expr,)


class IndexOutOfBounds(IndexError, RuntimeError):
    """An indirect index outside the dimension it indexes (``loop.check_index`` failed).

    Eager raises ``IndexError`` for some ops (``index_select``, ``embedding``,
    ``nll_loss``, advanced indexing) and ``RuntimeError`` for others (``gather``); Inductor
    raises ``RuntimeError``. This is both, so that code catching either still catches it.
    """


@irdl_op_definition
class CheckIndexOp(IRDLOperation):
    """Asserts that an indirect index lies inside the dimension it indexes, and gives it.

    Every index loaded from a tensor (``gather``, ``index_select``, ``embedding``,
    ``x[idx]``) goes through it before it reaches a ``loop.load``, so that every executor
    raises where eager does (:class:`IndexOutOfBounds`), rather than read another row
    of the buffer or wrap a negative index. ``size`` is the dimension's size, an
    expression over the op's sizes (``s<k>``) only.

    ```mlir
    %j = loop.check_index %i < "s0"
    ```
    """

    name = "loop.check_index"

    index = operand_def(IndexType)
    size = prop_def(IndexExprAttr)
    result = result_def(IndexType)

    # Pure: it computes nothing observable but the error, so it may be CSE'd, and dropped
    # with the load it guards (Inductor checks only indices that are used too).
    traits = traits_def(Pure())

    def __init__(self, index: SSAValue, size: IndexExprAttr) -> None:
        super().__init__(operands=[index], properties={"size": size}, result_types=[IndexType()])

    def verify_(self) -> None:
        if (symbol := self.size.foreign_symbol("s")) is not None:
            raise VerifyException(
                f"{self.name}: the size '{self.size.text}' may only use size variables "
                f"(s<k>), not {symbol}"
            )
        check_expr_vars(self, self.size, 0)

    assembly_format = "$index custom<Below>($size) attr-dict"
    custom_directives = (Below,)


@irdl_op_definition
class YieldOp(IRDLOperation):
    """Ends a loop body with its value(s).

    ```mlir
    loop.yield %v : f32
    ```
    """

    name = "loop.yield"

    values = var_operand_def()

    traits = traits_def(IsTerminator(), Pure())

    assembly_format = "attr-dict ($values^ `:` type($values))?"

    def __init__(self, *values: SSAValue) -> None:
        super().__init__(operands=[list(values)])

    def verify_(self) -> None:
        from kiln.dialects.loop.ops import ExternOp, LoopNestOp

        parent = self.parent_op()
        if parent is not None and not isinstance(parent, LoopNestOp | ExternOp):
            raise VerifyException(
                f"{self.name} must end the body of loop.pointwise, loop.reduction or loop.extern"
            )


__all__ = [
    "CheckIndexOp",
    "IndexOp",
    "IndexOutOfBounds",
    "LoadOp",
    "YieldOp",
    "enclosing_loop_op",
    "fill_attr",
    "fill_text",
    "parse_fill",
]
