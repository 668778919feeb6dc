"""How non-tensor schema arguments are stored as properties, printed and parsed.

=============  ==========================================  ==================
schema kind    property                                    custom syntax
=============  ==========================================  ==================
int, SymInt    ``IntegerAttr`` i64                         ``3``
float          ``FloatAttr`` f64                           ``1.0e-05``, ``-inf``
bool           ``IntegerAttr`` i1                          ``true``
Scalar         i64 / f64 / i1 attribute by Python type     ``2``, ``0.5``
               complex: ``complex.number`` f64             ``#complex.number<:f64 0.0, 1.0> : complex<f64>``
int[]          ``array<i64: ...>``                         ``[1, 2]``
float[]        ``array<f64: ...>``                         ``[0.5]``
bool[]         ``array<i1: ...>``                          ``[true, false]``
ScalarType     the element type                            ``f16``
Layout, MemoryFormat, Device, str   ``StringAttr``          ``"cpu"``
Any            ``StringAttr`` (strings only: group names)   ``"0"``
symbolic       ``#aten.sym<k>`` (list: ``ArrayAttr``)       ``%s0``, ``[%s0, 4]``
=============  ==========================================  ==================

Arguments equal to their schema default are not stored, so ``add(x, y)`` and
``add(x, y, alpha=1)`` are the same IR (which CSE relies on).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from xdsl.dialects.builtin import (
    ArrayAttr,
    ComplexType,
    DenseArrayBase,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    StringAttr,
    f64,
    i1,
    i64,
)
from xdsl.dialects.complex import ComplexNumberAttr
from xdsl.ir import Attribute, SSAValue, TypeAttribute
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.printer import Printer

from kiln.dialects.aten.attributes import SymRefAttr
from kiln.dialects.aten.schema import ArgKind, ArgSpec


class ArgEncodingError(ValueError):
    """A Python value cannot be stored for this argument kind."""


# --- Python value -> Attribute ------------------------------------------------

PyValue = Any
"""A Python argument value as FX holds it (int, float, list, torch.dtype, ...)."""


def _enum_name(value: object) -> str:
    return str(value).removeprefix("torch.")


def _scalar_attr(value: object, kind: ArgKind) -> Attribute:
    if kind is ArgKind.BOOL or (kind is ArgKind.SCALAR and isinstance(value, bool)):
        if not isinstance(value, bool | int):
            raise ArgEncodingError(f"expected a bool, got {value!r}")
        return IntegerAttr(int(bool(value)), i1)
    if kind is ArgKind.INT or (kind is ArgKind.SCALAR and isinstance(value, int)):
        if not isinstance(value, int):
            raise ArgEncodingError(f"expected an int, got {value!r}")
        return IntegerAttr(value, i64)
    if kind is ArgKind.SCALAR and isinstance(value, complex):
        # A complex Scalar (a polar or complex-mul backward's ``mul.Scalar(x, 1j)``):
        # eager receives a Python complex, stored exactly as two f64.
        return ComplexNumberAttr(value.real, value.imag, ComplexType(f64))
    if kind in (ArgKind.FLOAT, ArgKind.SCALAR):
        if not isinstance(value, int | float):
            raise ArgEncodingError(f"expected a number, got {value!r}")
        return FloatAttr(float(value), f64)
    raise ArgEncodingError(f"{kind.value} is not a scalar kind")


def encode_value(
    spec: ArgSpec, value: PyValue, add_sym: Callable[[SSAValue], SymRefAttr]
) -> Attribute | None:
    """Encode a non-tensor argument; None means "not stored" (None or default).

    ``add_sym`` registers an SSA scalar operand and returns its reference.
    """
    if value is None:
        return None
    if spec.has_default and _same_value(value, spec.default):
        return None
    kind = spec.kind
    if isinstance(value, SSAValue):
        return add_sym(value)
    if kind in (ArgKind.INT, ArgKind.FLOAT, ArgKind.BOOL, ArgKind.SCALAR):
        return _scalar_attr(value, kind)
    if kind in (ArgKind.INT_LIST, ArgKind.FLOAT_LIST, ArgKind.BOOL_LIST):
        items = list(value) if isinstance(value, list | tuple) else [value] * (spec.fixed_len or 1)
        if any(isinstance(v, SSAValue) for v in items):
            elem = {ArgKind.INT_LIST: ArgKind.INT, ArgKind.FLOAT_LIST: ArgKind.FLOAT}.get(
                kind, ArgKind.BOOL
            )
            return ArrayAttr(
                add_sym(v) if isinstance(v, SSAValue) else _scalar_attr(v, elem) for v in items
            )
        if kind is ArgKind.INT_LIST:
            return DenseArrayBase.from_list(i64, [int(v) for v in items])
        if kind is ArgKind.FLOAT_LIST:
            return DenseArrayBase.from_list(f64, [float(v) for v in items])
        return DenseArrayBase.from_list(i1, [int(bool(v)) for v in items])
    if kind is ArgKind.SCALAR_LIST:
        items = list(value) if isinstance(value, list | tuple) else [value]
        if any(v is None or isinstance(v, SSAValue) for v in items):
            raise ArgEncodingError(f"cannot store {spec.name}={value!r}: constants only")
        return ArrayAttr(_scalar_attr(v, ArgKind.SCALAR) for v in items)
    if kind is ArgKind.SCALAR_TYPE:
        if isinstance(value, TypeAttribute):
            return value
        from kiln.dialects.aten.dtypes import dtype_to_type

        return dtype_to_type(value)
    if kind is ArgKind.ANY:
        # Collectives' group_name: a process group's name is data kiln can store and pass
        # back; a ProcessGroup object (torch.distributed.config.compile_on_one_rank) is not.
        if isinstance(value, str):
            return StringAttr(value)
        raise ArgEncodingError(
            f"cannot store a {type(value).__name__} as the Any argument '{spec.name}' "
            "(only strings, such as process group names)"
        )
    if kind is ArgKind.STR and not isinstance(value, str):
        # str() of an arbitrary object (a ProcessGroup) would be stored as if it were data.
        raise ArgEncodingError(f"expected a string for '{spec.name}', got {type(value).__name__}")
    if kind in (ArgKind.LAYOUT, ArgKind.MEMORY_FORMAT, ArgKind.DEVICE, ArgKind.STR):
        return StringAttr(value if isinstance(value, str) else _enum_name(value))
    raise ArgEncodingError(f"cannot store a {spec.type_str} argument ({spec.name}={value!r})")


def _same_value(value: object, default: object) -> bool:
    if isinstance(value, tuple):
        value = list(value)
    if type(value) is not type(default):
        return False
    if isinstance(value, float) and isinstance(default, float):
        return value == default or (math.isnan(value) and math.isnan(default))
    return value == default


# --- Attribute -> Python value ------------------------------------------------


def decode_value(spec: ArgSpec, attr: Attribute | None, sym_values: Sequence[Any]) -> PyValue:
    """The Python value to pass to torch for a stored (or absent) argument.

    ``sym_values`` are the run-time values of the op's ``sym`` operands.
    """
    if attr is None:
        return spec.default if spec.has_default else None
    if isinstance(attr, SymRefAttr):
        return sym_values[attr.data]
    if isinstance(attr, IntegerAttr):
        value: int = attr.value.data  # pyright: ignore[reportUnknownMemberType]
        if attr.type == i1:
            return bool(value)
        return value
    if isinstance(attr, FloatAttr):
        return float(attr.value.data)  # pyright: ignore[reportUnknownMemberType]
    if isinstance(attr, ComplexNumberAttr):
        return complex(attr.real.data, attr.imag.data)
    if isinstance(attr, DenseArrayBase):
        values = list(attr.get_values())  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
        if attr.elt_type == i1:
            return [bool(v) for v in values]  # pyright: ignore[reportUnknownVariableType]
        return values  # pyright: ignore[reportUnknownVariableType]
    if isinstance(attr, ArrayAttr):
        return [decode_value(spec, a, sym_values) for a in attr.data]
    if isinstance(attr, StringAttr):
        return _decode_string(spec, attr.data)
    if spec.kind is ArgKind.SCALAR_TYPE:
        from kiln.dialects.aten.dtypes import type_to_dtype

        return type_to_dtype(attr)
    raise ArgEncodingError(f"cannot decode {attr} for {spec.name}")


def _decode_string(spec: ArgSpec, text: str) -> PyValue:
    if spec.kind in (ArgKind.LAYOUT, ArgKind.MEMORY_FORMAT):
        import torch

        return getattr(torch, text)
    if spec.kind is ArgKind.DEVICE:
        import torch

        return torch.device(text)
    return text


# --- verification -------------------------------------------------------------

_ALLOWED: dict[ArgKind, Callable[[Attribute], bool]] = {
    ArgKind.INT: lambda a: isinstance(a, IntegerAttr) and a.type == i64,
    ArgKind.FLOAT: lambda a: isinstance(a, FloatAttr),
    ArgKind.BOOL: lambda a: isinstance(a, IntegerAttr) and a.type == i1,
    ArgKind.SCALAR: lambda a: isinstance(a, IntegerAttr | FloatAttr | ComplexNumberAttr),
    ArgKind.INT_LIST: lambda a: isinstance(a, DenseArrayBase) and a.elt_type == i64,
    ArgKind.FLOAT_LIST: lambda a: isinstance(a, DenseArrayBase) and a.elt_type == f64,
    ArgKind.BOOL_LIST: lambda a: isinstance(a, DenseArrayBase) and a.elt_type == i1,
    ArgKind.SCALAR_LIST: lambda a: isinstance(a, ArrayAttr),
    ArgKind.SCALAR_TYPE: lambda a: isinstance(a, TypeAttribute),
    ArgKind.LAYOUT: lambda a: isinstance(a, StringAttr),
    ArgKind.MEMORY_FORMAT: lambda a: isinstance(a, StringAttr),
    ArgKind.DEVICE: lambda a: isinstance(a, StringAttr),
    ArgKind.STR: lambda a: isinstance(a, StringAttr),
    ArgKind.ANY: lambda a: isinstance(a, StringAttr),
}

_ELEMENT_KIND = {
    ArgKind.SCALAR_LIST: ArgKind.SCALAR,
    ArgKind.INT_LIST: ArgKind.INT,
    ArgKind.FLOAT_LIST: ArgKind.FLOAT,
    ArgKind.BOOL_LIST: ArgKind.BOOL,
}


def check_value(spec: ArgSpec, attr: Attribute) -> str | None:
    """An error message if ``attr`` cannot be the value of ``spec``, else None."""
    if isinstance(attr, SymRefAttr):
        return None
    if isinstance(attr, ArrayAttr) and spec.kind in _ELEMENT_KIND:
        elem_check = _ALLOWED[_ELEMENT_KIND[spec.kind]]
        items = attr.data  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        bad = [a for a in items if not isinstance(a, SymRefAttr) and not elem_check(a)]  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
        return f"argument '{spec.name}' ({spec.type_str}) has bad elements {bad}" if bad else None
    check = _ALLOWED.get(spec.kind)
    if check is None or not check(attr):
        return f"argument '{spec.name}' ({spec.type_str}) cannot be {attr}"
    # `int[1]` only means a bare int is accepted; longer fixed sizes are checked.
    if spec.fixed_len is not None and spec.fixed_len > 1 and isinstance(attr, DenseArrayBase):
        n = len(attr)
        if n not in (1, spec.fixed_len):
            return (
                f"argument '{spec.name}' ({spec.type_str}) needs {spec.fixed_len} elements, has {n}"
            )
    return None


def collect_sym_refs(attr: Attribute) -> list[int]:
    if isinstance(attr, SymRefAttr):
        return [attr.data]
    if isinstance(attr, ArrayAttr):
        return [a.data for a in attr.data if isinstance(a, SymRefAttr)]  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    return []


# --- custom syntax: printing ----------------------------------------------------


def format_float(value: float) -> str:
    """A float literal xDSL's lexer reads back as a float (always with a '.')."""
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    text = repr(value)
    if "e" in text and "." not in text:
        mantissa, exp = text.split("e")
        return f"{mantissa}.0e{exp}"
    if "." not in text and "e" not in text:
        return text + ".0"
    return text


def print_value(printer: Printer, attr: Attribute, sym: Sequence[SSAValue]) -> None:
    if isinstance(attr, SymRefAttr):
        printer.print_ssa_value(sym[attr.data])
    elif isinstance(attr, IntegerAttr):
        value: int = attr.value.data  # pyright: ignore[reportUnknownMemberType]
        if attr.type == i1:
            printer.print_string("true" if value else "false")
        else:
            printer.print_string(str(value))
    elif isinstance(attr, FloatAttr):
        printer.print_string(format_float(attr.value.data))  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
    elif isinstance(attr, DenseArrayBase):
        is_bool = attr.elt_type == i1
        is_float = not isinstance(attr.elt_type, IntegerType)
        values = attr.get_values()  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]

        def fmt(v: float | int) -> str:
            if is_bool:
                return "true" if v else "false"
            return format_float(float(v)) if is_float else str(v)

        printer.print_string("[" + ", ".join(fmt(v) for v in values) + "]")  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
    elif isinstance(attr, ArrayAttr):
        printer.print_string("[")
        printer.print_list(attr.data, lambda a: print_value(printer, a, sym))  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
        printer.print_string("]")
    elif isinstance(attr, StringAttr):
        printer.print_string_literal(attr.data)
    else:
        printer.print_attribute(attr)


# --- custom syntax: parsing -------------------------------------------------------

ParsedValue = Any
"""What :func:`parse_value` returns: an UnresolvedOperand, a Python scalar, str,
``None`` (the keyword ``none``), a TypeAttribute, or a list of these."""


def parse_value(parser: Parser) -> ParsedValue:
    """Parse one argument value of the custom syntax, without knowing its kind."""
    if (operand := parser.parse_optional_unresolved_operand()) is not None:
        return operand
    if parser.parse_optional_punctuation("[") is not None:
        if parser.parse_optional_punctuation("]") is not None:
            return []
        items = [parse_value(parser)]
        while parser.parse_optional_punctuation(",") is not None:
            items.append(parse_value(parser))
        parser.parse_punctuation("]")
        return items
    if (flag := parser.parse_optional_boolean()) is not None:
        return flag
    if parser.parse_optional_keyword("none") is not None:
        return None
    if parser.parse_optional_keyword("inf") is not None:
        return math.inf
    if parser.parse_optional_keyword("nan") is not None:
        return math.nan
    if parser.parse_optional_punctuation("-") is not None:
        if parser.parse_optional_keyword("inf") is not None:
            return -math.inf
        number = parser.parse_number()
        return -number
    if (number := parser.parse_optional_number()) is not None:
        return number
    if (text := parser.parse_optional_str_literal()) is not None:
        return text
    if (ty := parser.parse_optional_type()) is not None:
        return ty
    if (attr := parser.parse_optional_attribute()) is not None:
        if isinstance(attr, ComplexNumberAttr):
            return complex(attr.real.data, attr.imag.data)
        parser.raise_error(f"expected an argument value, got the attribute {attr}")
    parser.raise_error("expected an argument value")


def is_unresolved(value: ParsedValue) -> bool:
    return isinstance(value, UnresolvedOperand)
