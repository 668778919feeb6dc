"""Parsing of ATen operator schema strings, without importing torch.

The aten dialect is generated from the schema strings torch prints
(``str(torch.ops.aten.add.Tensor._schema)``), e.g.::

    aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor

This module turns such a string into an :class:`OpSchema`: the argument list with
each argument's :class:`ArgKind`, default and keyword-only flag, and the returns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from functools import cached_property


class ArgKind(Enum):
    """How an argument is represented in IR.

    Tensor kinds become SSA operands; every other kind becomes a property
    (or, for symbolic values, a reference to an SSA scalar operand).
    """

    TENSOR = "Tensor"
    OPT_TENSOR = "Tensor?"
    TENSOR_LIST = "Tensor[]"
    OPT_TENSOR_LIST = "Tensor?[]"
    INT = "int"
    INT_LIST = "int[]"
    FLOAT = "float"
    FLOAT_LIST = "float[]"
    BOOL = "bool"
    BOOL_LIST = "bool[]"
    SCALAR = "Scalar"
    SCALAR_LIST = "Scalar?[]"
    """oneDNN's post-op arguments (``mkldnn::_convolution_pointwise``'s ``scalars``)."""
    SCALAR_TYPE = "ScalarType"
    LAYOUT = "Layout"
    MEMORY_FORMAT = "MemoryFormat"
    DEVICE = "Device"
    STR = "str"
    ANY = "Any"
    """``Any``: torch 2.13 types collectives' ``group_name`` so (a name or a ProcessGroup);
    kiln stores names only."""
    GENERATOR = "Generator"
    UNSUPPORTED = "?"

    @property
    def is_tensor(self) -> bool:
        return self in _TENSOR_KINDS

    @property
    def is_list(self) -> bool:
        return self in _LIST_KINDS


_TENSOR_KINDS = frozenset(
    {ArgKind.TENSOR, ArgKind.OPT_TENSOR, ArgKind.TENSOR_LIST, ArgKind.OPT_TENSOR_LIST}
)
_LIST_KINDS = frozenset(
    {
        ArgKind.TENSOR_LIST,
        ArgKind.OPT_TENSOR_LIST,
        ArgKind.INT_LIST,
        ArgKind.FLOAT_LIST,
        ArgKind.BOOL_LIST,
        ArgKind.SCALAR_LIST,
    }
)

_BASE_KINDS: dict[str, ArgKind] = {
    "Tensor": ArgKind.TENSOR,
    "int": ArgKind.INT,
    "SymInt": ArgKind.INT,
    "float": ArgKind.FLOAT,
    "bool": ArgKind.BOOL,
    "Scalar": ArgKind.SCALAR,
    "ScalarType": ArgKind.SCALAR_TYPE,
    "Layout": ArgKind.LAYOUT,
    "MemoryFormat": ArgKind.MEMORY_FORMAT,
    "Device": ArgKind.DEVICE,
    "str": ArgKind.STR,
    "Any": ArgKind.ANY,
    "Generator": ArgKind.GENERATOR,
}
_LIST_OF: dict[ArgKind, ArgKind] = {
    ArgKind.TENSOR: ArgKind.TENSOR_LIST,
    ArgKind.INT: ArgKind.INT_LIST,
    ArgKind.FLOAT: ArgKind.FLOAT_LIST,
    ArgKind.BOOL: ArgKind.BOOL_LIST,
}

NO_DEFAULT = object()
"""Sentinel: the argument has no default and must be given."""

DefaultValue = None | bool | int | float | str | list[int] | list[float] | list[bool]


@dataclass(frozen=True)
class ArgSpec:
    """One schema argument."""

    name: str
    """The schema name (``self``, ``dim``, ...)."""
    type_str: str
    """The type as written in the schema (``SymInt[]``, ``Tensor?``, ...)."""
    kind: ArgKind
    optional: bool
    """``T?``: the argument may be None."""
    default: object
    """The default as a Python value, or :data:`NO_DEFAULT`."""
    kwarg_only: bool
    mutable: bool
    """The schema marks it written (``Tensor(a!)``)."""
    fixed_len: int | None = None
    """``int[2]``: the list has exactly this many elements (a single int broadcasts)."""

    @property
    def symbolic(self) -> bool:
        """The argument may be a SymInt (so an SSA index value in IR)."""
        return "SymInt" in self.type_str

    @property
    def has_default(self) -> bool:
        return self.default is not NO_DEFAULT


@dataclass(frozen=True)
class ReturnSpec:
    name: str
    type_str: str
    kind: ArgKind


@dataclass(frozen=True)
class OpSchema:
    """A parsed ATen schema."""

    namespace: str
    """``aten``, or the namespace of a custom op library."""
    name: str
    """Operator name without overload (``add``)."""
    overload: str
    """Overload name; ``default`` when the schema has none."""
    arguments: tuple[ArgSpec, ...]
    returns: tuple[ReturnSpec, ...]
    text: str
    """The schema string it was parsed from."""

    @property
    def qualified_name(self) -> str:
        """``add.Tensor``: the name an IR op carries after ``aten.``."""
        return f"{self.name}.{self.overload}"

    @property
    def is_mutable(self) -> bool:
        return any(a.mutable for a in self.arguments)

    @cached_property
    def mutable_tensor_args(self) -> tuple[str, ...]:
        """The tensor arguments the op writes (``Tensor(a!)``): asked once per op by
        ``lower-aten``, so computed once per schema."""
        return tuple(a.name for a in self.arguments if a.kind.is_tensor and a.mutable)

    def arg(self, name: str) -> ArgSpec:
        for a in self.arguments:
            if a.name == name:
                return a
        raise KeyError(f"{self.qualified_name} has no argument {name!r}")

    @property
    def supported(self) -> bool:
        """Every argument and return has an IR representation."""
        return all(a.kind is not ArgKind.UNSUPPORTED for a in self.arguments) and all(
            r.kind is not ArgKind.UNSUPPORTED for r in self.returns
        )


class SchemaParseError(ValueError):
    pass


_TYPE_RE = re.compile(
    r"^(?P<base>[A-Za-z_]+)(?P<alias>\([a-z0-9!|*\s\->]+\))?(?P<opt1>\?)?"
    r"(?:\[(?P<len>\d*)\](?P<lalias>\([a-z0-9!|*\s\->]+\))?)?(?P<opt2>\?)?$"
)


def parse_type(type_str: str) -> tuple[ArgKind, bool, bool, int | None]:
    """Return (kind, optional, mutable, fixed_len) for a schema type string."""
    m = _TYPE_RE.match(type_str.strip())
    if m is None:
        return ArgKind.UNSUPPORTED, False, False, None
    base = _BASE_KINDS.get(m["base"], ArgKind.UNSUPPORTED)
    alias = (m["alias"] or "") + (m["lalias"] or "")
    mutable = "!" in alias
    elem_optional = m["opt1"] is not None
    is_list = m["len"] is not None
    fixed_len = int(m["len"]) if m["len"] else None
    if not is_list:
        if base is ArgKind.TENSOR and elem_optional:
            return ArgKind.OPT_TENSOR, True, mutable, None
        return base, elem_optional, mutable, None
    list_optional = m["opt2"] is not None
    if base is ArgKind.TENSOR and elem_optional:
        return ArgKind.OPT_TENSOR_LIST, list_optional, mutable, fixed_len
    if base is ArgKind.SCALAR and elem_optional:
        return ArgKind.SCALAR_LIST, list_optional, mutable, fixed_len
    if elem_optional:
        return ArgKind.UNSUPPORTED, list_optional, mutable, fixed_len
    kind = _LIST_OF.get(base, ArgKind.UNSUPPORTED)
    return kind, list_optional, mutable, fixed_len


def _split_top_level(text: str, sep: str = ",") -> list[str]:
    parts: list[str] = []
    depth = 0
    start = 0
    in_str = False
    for i, ch in enumerate(text):
        if ch == '"':
            in_str = not in_str
        elif in_str:
            continue
        elif ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    tail = text[start:]
    if tail.strip():
        parts.append(tail)
    return [p.strip() for p in parts]


def parse_default(text: str, kind: ArgKind) -> object:
    """Parse a schema default (``1``, ``None``, ``[0, 1]``, ``"mean"``, ``contiguous_format``)."""
    text = text.strip()
    if text == "None":
        return None
    if text == "True":
        return True
    if text == "False":
        return False
    if text.startswith('"') or text.startswith("'"):
        return text[1:-1]
    if text.startswith("["):
        inner = _split_top_level(text[1:-1])
        elem_kind = {
            ArgKind.FLOAT_LIST: ArgKind.FLOAT,
            ArgKind.BOOL_LIST: ArgKind.BOOL,
        }.get(kind, ArgKind.INT)
        return [parse_default(x, elem_kind) for x in inner]
    try:
        if kind in (ArgKind.FLOAT, ArgKind.FLOAT_LIST) or any(c in text for c in ".eE"):
            if text in ("inf", "-inf", "nan"):
                return float(text)
            return float(text) if kind is not ArgKind.INT else int(text)
        return int(text)
    except ValueError:
        # Enum-like defaults: contiguous_format, long, strided, ...
        return text


def parse_schema(text: str) -> OpSchema:
    """Parse ``ns::name.overload(args) -> returns``."""
    text = text.strip()
    head, sep, rest = text.partition("(")
    if not sep or "::" not in head:
        raise SchemaParseError(f"not a schema: {text!r}")
    namespace, _, full_name = head.partition("::")
    name, _, overload = full_name.partition(".")
    depth = 1
    close = -1
    for i, ch in enumerate(rest):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
            if depth == 0:
                close = i
                break
    if close < 0:
        raise SchemaParseError(f"unbalanced parentheses in {text!r}")
    args_text = rest[:close]
    ret_text = rest[close + 1 :].strip()
    if not ret_text.startswith("->"):
        raise SchemaParseError(f"missing '->' in {text!r}")
    ret_text = ret_text[2:].strip()

    arguments: list[ArgSpec] = []
    kwarg_only = False
    for part in _split_top_level(args_text):
        if part == "*":
            kwarg_only = True
            continue
        decl, eq, default_text = part.partition("=")
        type_str, _, arg_name = decl.strip().rpartition(" ")
        kind, optional, mutable, fixed_len = parse_type(type_str)
        default = parse_default(default_text, kind) if eq else NO_DEFAULT
        arguments.append(
            ArgSpec(
                name=arg_name,
                type_str=type_str,
                kind=kind,
                optional=optional,
                default=default,
                kwarg_only=kwarg_only,
                mutable=mutable,
                fixed_len=fixed_len,
            )
        )

    if ret_text.startswith("("):
        ret_parts = _split_top_level(ret_text[1:-1])
    else:
        ret_parts = [ret_text] if ret_text else []
    returns: list[ReturnSpec] = []
    for part in ret_parts:
        type_str, _, ret_name = part.strip().partition(" ")
        kind, _, _, _ = parse_type(type_str)
        if kind is ArgKind.UNSUPPORTED and type_str.startswith(("SymInt", "Scalar")):
            kind = ArgKind.SCALAR
        returns.append(ReturnSpec(ret_name.strip(), type_str, kind))
    return OpSchema(
        namespace=namespace,
        name=name,
        overload=overload or "default",
        arguments=tuple(arguments),
        returns=tuple(returns),
        text=text,
    )
