"""Elementwise ops with Triton's semantics: operands broadcast, element types match.

Integer ``floordiv`` and ``mod`` are Triton's (C's): division truncates toward zero and
the remainder takes the dividend's sign; float ``mod`` is ``fmod``. ``maximum``/``minimum``
propagate NaN (``tl.PropagateNan.ALL``), ``maxnum``/``minnum`` ignore it. Comparisons of
floats are ordered (false when either side is NaN) except ``ne``, which is unordered.

```mlir
%s = triton.add %a, %b : !triton.block<[XBLOCK, 1], f32>, !triton.block<[XBLOCK, RBLOCK], f32> -> !triton.block<[XBLOCK, RBLOCK], f32>
%m = triton.cmp lt %x, %n : !triton.block<[XBLOCK], i32>, i32 -> !triton.block<[XBLOCK], i1>
%t = triton.math tanh %s : !triton.block<[XBLOCK, RBLOCK], f32> -> !triton.block<[XBLOCK, RBLOCK], f32>
%w = triton.where %m, %a, %c : !triton.block<[XBLOCK], i1>, !triton.block<[XBLOCK], f32>, f32 -> !triton.block<[XBLOCK], f32>
%h = triton.cast %t : !triton.block<[XBLOCK], f32> -> !triton.block<[XBLOCK], f16>
```
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import AnyFloat, IntegerType, StringAttr, UnitAttr, i1
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from kiln.dialects.loop.syntax import Ident
from kiln.dialects.triton.types import (
    broadcast_shapes,
    element_of,
    is_scalar_element,
    shape_of,
    with_shape,
)

# -- shared checks ----------------------------------------------------------------------


def broadcast_result(
    op: IRDLOperation, operands: Sequence[SSAValue], element: Attribute
) -> Attribute:
    """The type of an elementwise result over ``operands`` (blocks of one rank, or scalars)."""
    shapes = [shape_of(v.type) for v in operands]
    ranks = {len(s) for s in shapes if s}
    if len(ranks) > 1:
        raise VerifyException(
            f"{op.name}: operands of different ranks {[str(v.type) for v in operands]}"
        )
    shape = broadcast_shapes(*shapes)
    if shape is None:
        raise VerifyException(
            f"{op.name}: operands do not broadcast: {[str(v.type) for v in operands]}"
        )
    return with_shape(shape, element)


def _is_float(ty: Attribute) -> bool:
    return isinstance(ty, AnyFloat)


def _is_int(ty: Attribute) -> bool:
    return isinstance(ty, IntegerType)


_NUMERIC = (lambda ty: _is_float(ty) or _is_int(ty), "numbers")
_FLOATS = (_is_float, "floats")
_INTS = (_is_int, "integers")


# -- binary -------------------------------------------------------------------------------


class BinaryOp(IRDLOperation):
    """Shared fields, syntax and checks of the binary elementwise ops."""

    lhs = operand_def()
    rhs = operand_def()
    result = result_def()

    traits = traits_def(Pure())

    assembly_format = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)"

    PYTHON: ClassVar[str]
    """How the emitter spells the op: a format string over the operands' text."""
    ACCEPTS: ClassVar[tuple[object, str]] = _NUMERIC

    def __init__(self, lhs: SSAValue, rhs: SSAValue) -> None:
        element = element_of(lhs.type)
        super().__init__(
            operands=[lhs, rhs], result_types=[broadcast_result(self, [lhs, rhs], element)]
        )

    def verify_(self) -> None:
        element = element_of(self.lhs.type)
        if element_of(self.rhs.type) != element:
            raise VerifyException(
                f"{self.name}: element types differ ({self.lhs.type} and {self.rhs.type})"
            )
        check, what = self.ACCEPTS
        if not check(element):  # pyright: ignore[reportCallIssue]
            raise VerifyException(f"{self.name} takes {what}, not {element}")
        expected = broadcast_result(self, [self.lhs, self.rhs], element)
        if self.result.type != expected:
            raise VerifyException(f"{self.name}: result must be {expected}, not {self.result.type}")


BINARY_OPS: dict[str, tuple[str, tuple[object, str]]] = {
    "add": ("{0} + {1}", _NUMERIC),
    "sub": ("{0} - {1}", _NUMERIC),
    "mul": ("{0} * {1}", _NUMERIC),
    "truediv": ("{0} / {1}", _FLOATS),
    "floordiv": ("{0} // {1}", _INTS),
    "mod": ("{0} % {1}", _NUMERIC),
    "and": ("{0} & {1}", _INTS),
    "or": ("{0} | {1}", _INTS),
    "xor": ("{0} ^ {1}", _INTS),
    "shl": ("{0} << {1}", _INTS),
    "shr": ("{0} >> {1}", _INTS),
    "maximum": ("tl.maximum({0}, {1})", _NUMERIC),
    "minimum": ("tl.minimum({0}, {1})", _NUMERIC),
    "maxnum": ("tl.maximum({0}, {1})", _NUMERIC),
    "minnum": ("tl.minimum({0}, {1})", _NUMERIC),
}
"""Binary ops: name -> (Python spelling, element types). ``maximum``/``minimum`` of
floats add ``tl.PropagateNan.ALL`` (see the emitter)."""


def _binary_class(name: str, python: str, accepts: tuple[object, str]) -> type[BinaryOp]:
    doc = (
        f"``{python.format('a', 'b')}``\n\n    ```mlir\n    %c = triton.{name} %a, %b : "
        f"!triton.block<[XBLOCK], f32>, f32 -> !triton.block<[XBLOCK], f32>\n    ```\n    "
    )
    cls = type(
        f"{name.capitalize()}Op",
        (BinaryOp,),
        {
            "name": f"triton.{name}",
            "PYTHON": python,
            "ACCEPTS": accepts,
            "__doc__": doc,
            "__annotations__": {"PYTHON": ClassVar[str], "ACCEPTS": ClassVar[tuple[object, str]]},
        },
    )
    return irdl_op_definition(cls)


BINARY_CLASSES: dict[str, type[BinaryOp]] = {
    name: _binary_class(name, python, accepts) for name, (python, accepts) in BINARY_OPS.items()
}

AddOp = BINARY_CLASSES["add"]
SubOp = BINARY_CLASSES["sub"]
MulOp = BINARY_CLASSES["mul"]
TrueDivOp = BINARY_CLASSES["truediv"]
FloorDivOp = BINARY_CLASSES["floordiv"]
ModOp = BINARY_CLASSES["mod"]
AndOp = BINARY_CLASSES["and"]
OrOp = BINARY_CLASSES["or"]
XorOp = BINARY_CLASSES["xor"]
MaximumOp = BINARY_CLASSES["maximum"]
MinimumOp = BINARY_CLASSES["minimum"]


# -- comparisons ---------------------------------------------------------------------------

PREDICATES = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


@irdl_op_definition
class CmpOp(IRDLOperation):
    """``a < b`` and friends: an ``i1`` block (signed for integers; see the module doc for NaN).

    ```mlir
    %m = triton.cmp lt %x, %n : !triton.block<[XBLOCK], i32>, i32 -> !triton.block<[XBLOCK], i1>
    ```
    """

    name = "triton.cmp"

    predicate = prop_def(StringAttr)
    lhs = operand_def()
    rhs = operand_def()
    result = result_def()

    traits = traits_def(Pure())

    def __init__(self, predicate: str, lhs: SSAValue, rhs: SSAValue) -> None:
        super().__init__(
            operands=[lhs, rhs],
            properties={"predicate": StringAttr(predicate)},
            result_types=[broadcast_result(self, [lhs, rhs], i1)],
        )

    def verify_(self) -> None:
        if self.predicate.data not in PREDICATES:
            raise VerifyException(f"{self.name}: predicate must be one of {list(PREDICATES)}")
        if element_of(self.lhs.type) != element_of(self.rhs.type):
            raise VerifyException(f"{self.name}: element types differ")
        expected = broadcast_result(self, [self.lhs, self.rhs], i1)
        if self.result.type != expected:
            raise VerifyException(f"{self.name}: result must be {expected}")

    assembly_format = (
        "custom<Ident>($predicate) $lhs `,` $rhs attr-dict "
        "`:` type($lhs) `,` type($rhs) `->` type($result)"
    )
    custom_directives = (Ident,)


# -- unary, math, where, cast ---------------------------------------------------------------

MATH_FUNCTIONS: dict[str, tuple[str, int]] = {
    "neg": ("-{0}", 1),
    "not": ("~{0}", 1),
    "abs": ("tl.abs({0})", 1),
    "exp": ("tl.exp({0})", 1),
    "exp2": ("tl.exp2({0})", 1),
    "log": ("tl.log({0})", 1),
    "log2": ("tl.log2({0})", 1),
    "sqrt": ("tl.sqrt({0})", 1),
    "rsqrt": ("tl.rsqrt({0})", 1),
    "erf": ("tl.erf({0})", 1),
    "sin": ("tl.sin({0})", 1),
    "cos": ("tl.cos({0})", 1),
    "floor": ("tl.floor({0})", 1),
    "ceil": ("tl.ceil({0})", 1),
    "fma": ("tl.fma({0}, {1}, {2})", 3),
    "tanh": ("libdevice.tanh({0})", 1),
    "expm1": ("libdevice.expm1({0})", 1),
    "log1p": ("libdevice.log1p({0})", 1),
    "log10": ("libdevice.log10({0})", 1),
    "tan": ("libdevice.tan({0})", 1),
    "asin": ("libdevice.asin({0})", 1),
    "acos": ("libdevice.acos({0})", 1),
    "atan": ("libdevice.atan({0})", 1),
    "sinh": ("libdevice.sinh({0})", 1),
    "cosh": ("libdevice.cosh({0})", 1),
    "asinh": ("libdevice.asinh({0})", 1),
    "acosh": ("libdevice.acosh({0})", 1),
    "atanh": ("libdevice.atanh({0})", 1),
    "cbrt": ("libdevice.cbrt({0})", 1),
    "round": ("libdevice.round({0})", 1),
    "rint": ("libdevice.rint({0})", 1),
    "trunc": ("libdevice.trunc({0})", 1),
    "atan2": ("libdevice.atan2({0}, {1})", 2),
    "pow": ("libdevice.pow({0}, {1})", 2),
    "copysign": ("libdevice.copysign({0}, {1})", 2),
}
"""Functions of ``triton.math``: name -> (Python spelling, arity). ``round`` rounds half
away from zero, ``rint`` half to even. ``neg``, ``not`` and ``abs`` take integers too
(``not``: integers only); the others take floats."""

_INTEGER_FUNCTIONS = frozenset({"neg", "abs", "not"})


@irdl_op_definition
class MathOp(IRDLOperation):
    """An elementwise function of ``tl`` or ``libdevice`` (see :data:`MATH_FUNCTIONS`).

    ```mlir
    %y = triton.math tanh %x : !triton.block<[XBLOCK], f32> -> !triton.block<[XBLOCK], f32>
    %z = triton.math atan2 %a, %b : !triton.block<[XBLOCK], f32>, f32 -> !triton.block<[XBLOCK], f32>
    ```
    """

    name = "triton.math"

    fn = prop_def(StringAttr)
    args = var_operand_def()
    result = result_def()

    traits = traits_def(Pure())

    def __init__(self, fn: str, *args: SSAValue) -> None:
        element = element_of(args[0].type)
        super().__init__(
            operands=[list(args)],
            properties={"fn": StringAttr(fn)},
            result_types=[broadcast_result(self, args, element)],
        )

    def verify_(self) -> None:
        fn = self.fn.data
        if fn not in MATH_FUNCTIONS:
            raise VerifyException(f"{self.name}: unknown function '{fn}'")
        arity = MATH_FUNCTIONS[fn][1]
        if len(self.args) != arity:
            raise VerifyException(
                f"{self.name} {fn} takes {arity} operand(s), got {len(self.args)}"
            )
        element = element_of(self.args[0].type)
        if any(element_of(a.type) != element for a in self.args):
            raise VerifyException(f"{self.name} {fn}: element types differ")
        if fn == "not":
            ok = _is_int(element)
        elif fn in _INTEGER_FUNCTIONS:
            ok = _is_int(element) or _is_float(element)
        else:
            ok = _is_float(element)
        if not ok:
            raise VerifyException(f"{self.name} {fn} does not take {element}")
        expected = broadcast_result(self, self.args, element)
        if self.result.type != expected:
            raise VerifyException(f"{self.name} {fn}: result must be {expected}")

    assembly_format = "custom<Ident>($fn) $args attr-dict `:` type($args) `->` type($result)"
    custom_directives = (Ident,)


@irdl_op_definition
class WhereOp(IRDLOperation):
    """``tl.where(cond, a, b)``.

    ```mlir
    %w = triton.where %m, %a, %b : !triton.block<[XBLOCK], i1>, !triton.block<[XBLOCK], f32>, f32 -> !triton.block<[XBLOCK], f32>
    ```
    """

    name = "triton.where"

    cond = operand_def()
    true_value = operand_def()
    false_value = operand_def()
    result = result_def()

    traits = traits_def(Pure())

    assembly_format = (
        "$cond `,` $true_value `,` $false_value attr-dict `:` type($cond) `,` "
        "type($true_value) `,` type($false_value) `->` type($result)"
    )

    def __init__(self, cond: SSAValue, true_value: SSAValue, false_value: SSAValue) -> None:
        element = element_of(true_value.type)
        super().__init__(
            operands=[cond, true_value, false_value],
            result_types=[broadcast_result(self, [cond, true_value, false_value], element)],
        )

    def verify_(self) -> None:
        if element_of(self.cond.type) != i1:
            raise VerifyException(f"{self.name}: the condition must be i1")
        element = element_of(self.true_value.type)
        if element_of(self.false_value.type) != element:
            raise VerifyException(f"{self.name}: the two values have different element types")
        expected = broadcast_result(self, [self.cond, self.true_value, self.false_value], element)
        if self.result.type != expected:
            raise VerifyException(f"{self.name}: result must be {expected}")


@irdl_op_definition
class CastOp(IRDLOperation):
    """``x.to(dtype)`` (``bitcast``: ``x.to(dtype, bitcast=True)``, same bit width).

    Float to integer truncates toward zero; to ``i1`` is ``x != 0``.

    ```mlir
    %f = triton.cast %h : !triton.block<[XBLOCK], f16> -> !triton.block<[XBLOCK], f32>
    ```
    """

    name = "triton.cast"

    source = operand_def()
    bitcast = opt_prop_def(UnitAttr)
    result = result_def()

    traits = traits_def(Pure())

    assembly_format = (
        "$source (`bitcast` $bitcast^)? attr-dict `:` type($source) `->` type($result)"
    )

    def __init__(self, source: SSAValue, element: Attribute, bitcast: bool = False) -> None:
        super().__init__(
            operands=[source],
            properties={"bitcast": UnitAttr()} if bitcast else {},
            result_types=[with_shape(shape_of(source.type), element)],
        )

    def verify_(self) -> None:
        src, dst = element_of(self.source.type), element_of(self.result.type)
        if not (is_scalar_element(src) and is_scalar_element(dst)):
            raise VerifyException(f"{self.name}: cannot cast {src} to {dst}")
        if shape_of(self.source.type) != shape_of(self.result.type):
            raise VerifyException(f"{self.name}: a cast keeps the shape")
        if self.bitcast is not None and _bits(src) != _bits(dst):
            raise VerifyException(
                f"{self.name}: bitcast between {src} and {dst} of different widths"
            )


def _bits(ty: Attribute) -> int:
    if isinstance(ty, IntegerType):
        return ty.width.data
    assert isinstance(ty, AnyFloat)
    return ty.bitwidth


__all__ = [
    "BINARY_CLASSES",
    "BINARY_OPS",
    "MATH_FUNCTIONS",
    "PREDICATES",
    "AddOp",
    "AndOp",
    "BinaryOp",
    "CastOp",
    "CmpOp",
    "FloorDivOp",
    "MathOp",
    "MaximumOp",
    "MinimumOp",
    "ModOp",
    "MulOp",
    "OrOp",
    "SubOp",
    "TrueDivOp",
    "WhereOp",
    "XorOp",
    "broadcast_result",
]
