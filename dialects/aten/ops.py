"""Operations of the aten dialect, generated from ATen schema strings.

Every op is ``aten.<name>.<overload>`` and has one custom syntax, driven by its schema:

```mlir
%2 = aten.add.Tensor(%0, %1, alpha = 2) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
%3 = aten.view.default(%2, size = [%s0, 8]) : (tensor<4x8xf32>, index) -> tensor<?x8xf32>
%4:2 = aten.max.dim(%3, dim = 1) : (tensor<?x8xf32>) -> (tensor<?xf32>, tensor<?xi64>)
```

Required tensor arguments print positionally; every other argument prints as
``name = value`` (see :mod:`kiln.dialects.aten.encoding`); arguments that are None or
equal to their default are omitted. Tensor arguments are operands (one field per
schema argument); non-tensor arguments are properties named after the schema
argument; SymInt/SymFloat values are SSA operands of the trailing ``sym`` group,
referenced from properties with ``#aten.sym<k>``.

An overload kiln does not generate is still representable as ``aten.generic``, which
looks its schema up in torch (see :class:`GenericOp`).
"""

from __future__ import annotations

import keyword
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, ClassVar

from xdsl.dialects.builtin import (
    DenseArrayBase,
    DictionaryAttr,
    IndexType,
    IntegerType,
    NoneType,
    StringAttr,
    TensorType,
    i1,
    i32,
    i64,
)
from xdsl.ir import Attribute, Operation, SSAValue
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
    var_result_def,
)
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.pattern_rewriter import RewritePattern
from xdsl.printer import Printer
from xdsl.traits import HasCanonicalizationPatternsTrait, OpTrait, Pure
from xdsl.utils.exceptions import VerifyException

from kiln.dialects.aten import encoding
from kiln.dialects.aten.attributes import SymRefAttr
from kiln.dialects.aten.schema import ArgKind, ArgSpec, OpSchema, ReturnSpec, parse_schema
from kiln.dialects.aten.traits import derive_traits, is_communication

SYM_GROUP = "sym"
"""Name of the operand group holding SSA scalar arguments."""

_RESERVED = frozenset(dir(IRDLOperation)) | {"name", "traits", "irdl_options", SYM_GROUP}


def field_name(arg_name: str) -> str:
    """The Python attribute for a schema name (``self`` -> ``self_``)."""
    if keyword.iskeyword(arg_name) or arg_name in _RESERVED or arg_name == "self":
        return arg_name + "_"
    return arg_name


def mask_name(arg_name: str) -> str:
    """Property recording which entries of a ``Tensor?[]`` argument are present."""
    return arg_name + "_mask"


ArgValue = Any
"""An argument for :meth:`AtenOp.from_args`: an SSAValue, a list of SSAValue (or None
inside ``Tensor?[]``), or a Python value for non-tensor arguments."""


class AtenOp(IRDLOperation):
    """Base of all aten ops: schema-driven construction, syntax and verification."""

    SCHEMA: ClassVar[OpSchema]

    # -- schema access -----------------------------------------------------------

    def op_schema(self) -> OpSchema:
        return type(self).SCHEMA

    @property
    def overload_name(self) -> str:
        """``aten::add.Tensor``: the torch overload this op calls."""
        s = self.op_schema()
        return f"{s.namespace}::{s.qualified_name}"

    def tensor_operands(self) -> dict[str, list[SSAValue | None]]:
        """Operands per tensor argument (``None`` entries for absent ``Tensor?[]`` items)."""
        out: dict[str, list[SSAValue | None]] = {}
        for spec in self.op_schema().arguments:
            if not spec.kind.is_tensor:
                continue
            values = self._group(spec.name)
            if spec.kind is ArgKind.OPT_TENSOR_LIST:
                mask = self._mask(spec.name)
                it = iter(values)
                out[spec.name] = [next(it) if present else None for present in mask]
            else:
                out[spec.name] = list(values)
        return out

    def sym_operands(self) -> Sequence[SSAValue]:
        return self._group(SYM_GROUP)

    def arg_attr(self, name: str) -> Attribute | None:
        """The stored property for a non-tensor argument (None when absent)."""
        return self.properties.get(name)

    def static_arg(self, name: str) -> Any:
        """A non-tensor argument as the Python value torch receives (its default when
        absent; symbolic parts unresolved: for arguments without ``SymInt``s)."""
        spec = next(a for a in self.op_schema().arguments if a.name == name)
        return encoding.decode_value(spec, self.arg_attr(name), ())

    def _group(self, name: str) -> Sequence[SSAValue]:
        value = getattr(self, field_name(name) if name != SYM_GROUP else SYM_GROUP, None)
        if value is None:
            return ()
        if isinstance(value, SSAValue):
            return (value,)
        return tuple(value)  # pyright: ignore[reportUnknownArgumentType]

    def _mask(self, name: str) -> list[bool]:
        attr = self.arg_attr(mask_name(name))
        if not isinstance(attr, DenseArrayBase):
            return [True] * len(self._group(name))
        return [bool(v) for v in attr.get_values()]  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType, reportUnknownMemberType]

    # -- construction --------------------------------------------------------------

    @classmethod
    def from_args(
        cls,
        args: Mapping[str, ArgValue],
        result_types: Sequence[Attribute],
    ) -> AtenOp:
        """Build from schema argument values (missing arguments take their defaults)."""
        schema = cls.SCHEMA
        known = {a.name for a in schema.arguments}
        unknown = set(args) - known
        if unknown:
            raise encoding.ArgEncodingError(
                f"{schema.qualified_name} has no argument(s) {sorted(unknown)}"
            )
        groups, properties, sym = _encode_args(schema, args)
        return cls._create(groups, sym, properties, result_types)

    @classmethod
    def _create(
        cls,
        groups: list[list[SSAValue]],
        sym: list[SSAValue],
        properties: dict[str, Attribute],
        result_types: Sequence[Attribute],
    ) -> AtenOp:
        operands: list[SSAValue | Sequence[SSAValue]] = []
        for spec, values in zip(_tensor_specs(cls.SCHEMA), groups, strict=True):
            operands.append(values[0] if spec.kind is ArgKind.TENSOR else values)
        if _has_sym_group(cls.SCHEMA):
            operands.append(sym)
        results: list[Attribute | Sequence[Attribute]] = []
        expected = len(cls.SCHEMA.returns)
        if not returns_tensor_list(cls.SCHEMA) and len(result_types) != expected:
            raise encoding.ArgEncodingError(
                f"{cls.SCHEMA.qualified_name}: expected {expected} results, got {len(result_types)}"
            )
        if returns_tensor_list(cls.SCHEMA):
            results.append(list(result_types))
        else:
            results.extend(result_types)
        return cls.build(operands=operands, result_types=results, properties=properties)

    @classmethod
    def create_from_args(
        cls,
        args: Mapping[str, ArgValue],
        result_types: Sequence[Attribute],
    ) -> AtenOp:
        """:meth:`from_args` through ``Operation.create``, for importers building many ops.

        Faster (docs/benchmarks/design-notes.md): the per-class operand layout is
        computed once and IRDL's per-definition argument normalisation is skipped (the
        encoding already follows the schema; ``verify`` checks the result).
        """
        layout = _create_layout(cls)
        if not layout.arg_names.issuperset(args):
            unknown = sorted(set(args) - layout.arg_names)
            raise encoding.ArgEncodingError(
                f"{cls.SCHEMA.qualified_name} has no argument(s) {unknown}"
            )
        groups, properties, sym = _encode_args(cls.SCHEMA, args)
        if layout.result_count is not None and len(result_types) != layout.result_count:
            raise encoding.ArgEncodingError(
                f"{cls.SCHEMA.qualified_name}: expected {layout.result_count} results, "
                f"got {len(result_types)}"
            )
        operands = [value for group in groups for value in group]
        if layout.has_sym:
            operands.extend(sym)
        if layout.segmented:
            sizes = [len(group) for group in groups]
            if layout.has_sym:
                sizes.append(len(sym))
            properties[_SEGMENTS] = DenseArrayBase.from_list(i32, sizes)
        return cls.create(operands=operands, result_types=result_types, properties=properties)

    # -- verification ------------------------------------------------------------

    def verify_(self) -> None:
        schema = self.op_schema()
        sym = self.sym_operands()
        referenced: list[int] = []
        for spec in schema.arguments:
            if spec.kind.is_tensor:
                self._verify_tensor_arg(spec)
                continue
            attr = self.arg_attr(spec.name)
            if attr is None:
                if not spec.optional and not spec.has_default:
                    raise VerifyException(f"{self.name}: missing required argument '{spec.name}'")
                continue
            if (msg := encoding.check_value(spec, attr)) is not None:
                raise VerifyException(f"{self.name}: {msg}")
            referenced.extend(encoding.collect_sym_refs(attr))
        if sorted(referenced) != list(range(len(sym))):
            raise VerifyException(
                f"{self.name}: sym operands {len(sym)} do not match references {sorted(referenced)}"
            )
        for value in sym:
            if not isinstance(value.type, IndexType | IntegerType) and not _is_float(value.type):
                raise VerifyException(
                    f"{self.name}: symbolic argument must be index, integer or float, got {value.type}"
                )
        self._verify_results(schema.returns)
        # Shapes and dtypes as torch computes them (static shapes; see meta_check).
        from kiln.dialects.aten.meta_check import shape_mismatch

        if (mismatch := shape_mismatch(self)) is not None:  # pyright: ignore[reportArgumentType]
            raise VerifyException(f"{self.name}: {mismatch}")

    def _verify_tensor_arg(self, spec: ArgSpec) -> None:
        values = self._group(spec.name)
        for value in values:
            if not isinstance(value.type, TensorType):
                raise VerifyException(
                    f"{self.name}: argument '{spec.name}' must be a tensor, got {value.type}"
                )
        if spec.kind is ArgKind.OPT_TENSOR_LIST:
            mask = self._mask(spec.name)
            if sum(mask) != len(values):
                raise VerifyException(
                    f"{self.name}: '{mask_name(spec.name)}' marks {sum(mask)} present, "
                    f"but {len(values)} operands were given"
                )
        if spec.fixed_len is not None and len(values) != spec.fixed_len:
            raise VerifyException(
                f"{self.name}: argument '{spec.name}' needs {spec.fixed_len} tensors, has {len(values)}"
            )

    def _verify_results(self, returns: Sequence[ReturnSpec]) -> None:
        if returns_tensor_list(self.op_schema()):
            types = self.result_types
            if not all(isinstance(t, TensorType) for t in types):
                raise VerifyException(f"{self.name}: results must be tensors")
            return
        if len(self.results) != len(returns):
            raise VerifyException(
                f"{self.name}: expected {len(returns)} results, got {len(self.results)}"
            )
        for ret, result in zip(returns, self.results, strict=True):
            allowed = TensorType | NoneType if _has_output_mask(self.op_schema()) else TensorType
            if ret.kind is ArgKind.TENSOR and not isinstance(result.type, allowed):
                raise VerifyException(f"{self.name}: result must be a tensor, got {result.type}")

    # -- custom syntax -------------------------------------------------------------

    def print(self, printer: Printer) -> None:
        self._print_prefix(printer)
        printer.print_string("(")
        sym = self.sym_operands()
        tensors = self.tensor_operands()
        first = True
        # Positional tensors first, then keywords, each in schema order.
        ordered = sorted(self.op_schema().arguments, key=lambda a: not _is_positional(a))
        for spec in ordered:
            if spec.kind.is_tensor:
                values = tensors[spec.name]
                if spec.kind is ArgKind.OPT_TENSOR and not values:
                    continue
                undefined = spec.kind is ArgKind.TENSOR and not values
                text_prefix = "" if _is_positional(spec) and not undefined else f"{spec.name} = "
                if not first:
                    printer.print_string(", ")
                printer.print_string(text_prefix)
                if undefined:
                    printer.print_string("none")  # an undefined tensor (aten.generic only)
                elif spec.kind in (ArgKind.TENSOR, ArgKind.OPT_TENSOR):
                    printer.print_ssa_value(values[0])  # pyright: ignore[reportArgumentType]
                else:
                    printer.print_string("[")
                    printer.print_list(
                        values,
                        lambda v: (
                            printer.print_string("none")
                            if v is None
                            else printer.print_ssa_value(v)
                        ),
                    )
                    printer.print_string("]")
                first = False
                continue
            attr = self.arg_attr(spec.name)
            if attr is None:
                continue
            if not first:
                printer.print_string(", ")
            printer.print_string(f"{spec.name} = ")
            encoding.print_value(printer, attr, sym)
            first = False
        printer.print_string(")")
        if self.attributes:
            printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_function_type(self.operand_types, self.result_types)

    def _print_prefix(self, printer: Printer) -> None:
        """Anything between the op name and the argument list (see GenericOp)."""

    @classmethod
    def parse(cls, parser: Parser) -> AtenOp:
        schema = cls._parse_prefix(parser)
        parsed = _parse_arg_list(parser, schema)
        attributes = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        fn_pos = parser.pos
        fn_type = parser.parse_function_type()
        unresolved = _unresolved_in_storage_order(schema, parsed)
        if len(unresolved) != len(fn_type.inputs.data):
            parser.raise_error(
                f"{len(unresolved)} operands but {len(fn_type.inputs.data)} operand types",
                fn_pos,
            )
        resolved = parser.resolve_operands(unresolved, fn_type.inputs.data, fn_pos)
        mapping = dict(zip((id(u) for u in unresolved), resolved, strict=True))
        args = _resolve_parsed(parsed, mapping)
        try:
            op = cls._from_schema_args(schema, args, fn_type.outputs.data)
        except encoding.ArgEncodingError as e:
            parser.raise_error(str(e), fn_pos)
        op.attributes.update(attributes)
        return op

    @classmethod
    def _parse_prefix(cls, parser: Parser) -> OpSchema:
        return cls.SCHEMA

    @classmethod
    def _from_schema_args(
        cls, schema: OpSchema, args: Mapping[str, ArgValue], result_types: Sequence[Attribute]
    ) -> AtenOp:
        return cls.from_args(args, result_types)


def _is_float(ty: Attribute) -> bool:
    from xdsl.dialects.builtin import AnyFloat

    return isinstance(ty, AnyFloat)


def _is_positional(spec: ArgSpec) -> bool:
    return spec.kind is ArgKind.TENSOR and not spec.kwarg_only


def _tensor_specs(schema: OpSchema) -> list[ArgSpec]:
    return [a for a in schema.arguments if a.kind.is_tensor]


def _has_sym_group(schema: OpSchema) -> bool:
    return any(
        a.symbolic or a.kind in (ArgKind.SCALAR, ArgKind.FLOAT, ArgKind.INT, ArgKind.BOOL)
        for a in schema.arguments
    )


_SEGMENTS = "operandSegmentSizes"
"""The property AttrSizedOperandSegments(as_property=True) reads."""


@dataclass(frozen=True)
class _CreateLayout:
    """What :meth:`AtenOp.create_from_args` needs to know about an op class."""

    arg_names: frozenset[str]
    has_sym: bool
    segmented: bool
    result_count: int | None
    """Fixed number of results, or None for a variadic (``Tensor[]``) result."""


@cache
def _create_layout(cls: type[AtenOp]) -> _CreateLayout:
    schema = cls.SCHEMA
    options = cls.get_irdl_definition().options
    return _CreateLayout(
        arg_names=frozenset(a.name for a in schema.arguments),
        has_sym=_has_sym_group(schema),
        segmented=any(isinstance(o, AttrSizedOperandSegments) for o in options),
        result_count=None if returns_tensor_list(schema) else len(schema.returns),
    )


def _has_output_mask(schema: OpSchema) -> bool:
    """Results switched off by ``output_mask`` (convolution_backward, ...) are None in
    torch and have type ``none`` in IR."""
    return any(a.name == "output_mask" for a in schema.arguments)


def returns_tensor_list(schema: OpSchema) -> bool:
    """Whether the op returns one ``Tensor[]`` (split, unbind): its IR results are the
    list's items, however many (one, for a one-piece split)."""
    return len(schema.returns) == 1 and schema.returns[0].kind is ArgKind.TENSOR_LIST


def _encode_args(
    schema: OpSchema, args: Mapping[str, ArgValue], allow_undefined: bool = False
) -> tuple[list[list[SSAValue]], dict[str, Attribute], list[SSAValue]]:
    """Split schema arguments into tensor operand groups, properties and sym operands.

    ``allow_undefined`` (``aten.generic``): a ``Tensor`` argument may be None, an
    undefined tensor, which torch accepts there (``attn_bias`` of
    ``_scaled_dot_product_efficient_attention_backward``); its group is empty.
    """
    groups: list[list[SSAValue]] = []
    properties: dict[str, Attribute] = {}
    sym: list[SSAValue] = []

    def add_sym(value: SSAValue) -> SymRefAttr:
        sym.append(value)
        return SymRefAttr(len(sym) - 1)

    for spec in schema.arguments:
        value = args.get(spec.name)
        if spec.kind.is_tensor:
            if spec.kind is ArgKind.TENSOR:
                if value is None and allow_undefined:
                    groups.append([])
                    continue
                if not isinstance(value, SSAValue):
                    raise encoding.ArgEncodingError(
                        f"{schema.qualified_name}: argument '{spec.name}' needs a tensor value"
                    )
                groups.append([value])
            elif spec.kind is ArgKind.OPT_TENSOR:
                groups.append([value] if isinstance(value, SSAValue) else [])
            else:
                items: list[SSAValue | None] = list(value or [])
                if spec.kind is ArgKind.OPT_TENSOR_LIST:
                    properties[mask_name(spec.name)] = DenseArrayBase.from_list(
                        i1, [int(v is not None) for v in items]
                    )
                groups.append([v for v in items if v is not None])
            continue
        if spec.kind is ArgKind.GENERATOR and value is not None:
            raise encoding.ArgEncodingError(
                f"{schema.qualified_name}: a Generator argument cannot be represented"
            )
        try:
            attr = encoding.encode_value(spec, value, add_sym)
        except encoding.ArgEncodingError as e:
            raise encoding.ArgEncodingError(f"{schema.qualified_name}: {e}") from None
        if attr is not None:
            properties[spec.name] = attr
    return groups, properties, sym


# --- parsing helpers ---------------------------------------------------------------

_Parsed = dict[str, Any]


def _parse_arg_list(parser: Parser, schema: OpSchema) -> _Parsed:
    parsed: _Parsed = {}
    positional = [a for a in schema.arguments if _is_positional(a)]
    parser.parse_punctuation("(")
    if parser.parse_optional_punctuation(")") is not None:
        return parsed
    index = 0
    while True:
        pos = parser.pos
        name = parser.parse_optional_identifier()
        if name is not None:
            parser.parse_punctuation("=", f" after argument name '{name}'")
            if name not in {a.name for a in schema.arguments}:
                parser.raise_error(f"{schema.qualified_name} has no argument '{name}'", pos)
            parsed[name] = encoding.parse_value(parser)
            if index < len(positional) and positional[index].name == name:
                index += 1  # a positional tensor given by name (``attn_bias = none``)
        else:
            if index >= len(positional):
                parser.raise_error(
                    f"{schema.qualified_name} takes {len(positional)} positional tensor arguments",
                    pos,
                )
            operand = parser.parse_unresolved_operand("expected a tensor operand")
            parsed[positional[index].name] = operand
            index += 1
        if parser.parse_optional_punctuation(",") is None:
            break
    parser.parse_punctuation(")")
    return parsed


def _unresolved_in_storage_order(schema: OpSchema, parsed: _Parsed) -> list[UnresolvedOperand]:
    tensors: list[UnresolvedOperand] = []
    sym: list[UnresolvedOperand] = []

    def collect(value: Any, target: list[UnresolvedOperand]) -> None:
        if isinstance(value, UnresolvedOperand):
            target.append(value)
        elif isinstance(value, list):
            for v in value:  # pyright: ignore[reportUnknownVariableType]
                collect(v, target)

    for spec in schema.arguments:
        if spec.name in parsed:
            collect(parsed[spec.name], tensors if spec.kind.is_tensor else sym)
    return tensors + sym


def _resolve_parsed(parsed: _Parsed, mapping: dict[int, SSAValue]) -> dict[str, ArgValue]:
    def resolve(value: Any) -> Any:
        if isinstance(value, UnresolvedOperand):
            return mapping[id(value)]
        if isinstance(value, list):
            return [resolve(v) for v in value]  # pyright: ignore[reportUnknownVariableType]
        return value

    return {name: resolve(v) for name, v in parsed.items()}


# --- op class generation -------------------------------------------------------------


def class_name(schema: OpSchema) -> str:
    """``add.Tensor`` -> ``AddTensorOp``."""
    parts = [schema.name, *([] if schema.overload == "default" else [schema.overload])]
    words = [w for p in parts for w in p.split("_") if w]
    # all_reduce_ (in place) and all_reduce need two names.
    inplace = "Inplace" if schema.name.endswith("_") else ""
    return "".join(w[:1].upper() + w[1:] for w in words) + inplace + "Op"


def _is_pure(schema: OpSchema, tags: Sequence[str], traits: Sequence[OpTrait] = ()) -> bool:
    # An op that returns nothing exists for its side effect (a check that raises):
    # not Pure, so DCE keeps it. Collectives and their waits talk to other processes,
    # which must all see the same ones in the same order: never removed nor merged.
    return (
        bool(schema.returns)
        and not schema.is_mutable
        and "nondeterministic_seeded" not in tags
        and not is_communication(traits)
    )


@dataclass(frozen=True)
class AtenCanonicalization(HasCanonicalizationPatternsTrait):
    """Canonicalization patterns of the generated aten ops, for xDSL's ``canonicalize``.

    One pattern serves every aten op and dispatches on the op name through a dict
    (:mod:`kiln.dialects.aten.canonicalization`), imported on first use because it
    imports this module.
    """

    @classmethod
    def get_canonicalization_patterns(cls) -> tuple[RewritePattern, ...]:
        from kiln.dialects.aten.canonicalization import canonicalization_patterns

        return canonicalization_patterns()


def make_op_class(schema_text: str, tags: Sequence[str] = ()) -> type[AtenOp]:
    """Generate the IRDL op class for one schema string."""
    schema = parse_schema(schema_text)
    if not schema.supported:
        raise ValueError(f"schema has arguments kiln cannot represent: {schema_text}")
    # Another namespace than aten is part of the name: aten._c10d_functional.all_reduce.default.
    namespace = "" if schema.namespace == "aten" else f"{schema.namespace}."
    fields: dict[str, Any] = {
        "name": f"aten.{namespace}{schema.qualified_name}",
        "__doc__": f"`{schema_text}`",
        "__module__": __name__,
    }
    needs_segments = False
    for spec in schema.arguments:
        fname = field_name(spec.name)
        if spec.kind is ArgKind.TENSOR:
            fields[fname] = operand_def(TensorType)
        elif spec.kind is ArgKind.OPT_TENSOR:
            fields[fname] = opt_operand_def(TensorType)
            needs_segments = True
        elif spec.kind in (ArgKind.TENSOR_LIST, ArgKind.OPT_TENSOR_LIST):
            fields[fname] = var_operand_def(TensorType)
            needs_segments = True
            if spec.kind is ArgKind.OPT_TENSOR_LIST:
                fields[field_name(mask_name(spec.name))] = prop_def(
                    DenseArrayBase, prop_name=mask_name(spec.name)
                )
        else:
            fields[fname] = opt_prop_def(AnyAttr(), prop_name=spec.name)
    if _has_sym_group(schema):
        fields[SYM_GROUP] = var_operand_def()
    if needs_segments:
        fields["irdl_options"] = (AttrSizedOperandSegments(as_property=True),)
    used = set(fields)
    if returns_tensor_list(schema):
        fields[_result_field(schema.returns[0], 0, 1, used)] = var_result_def(TensorType)
    else:
        for i, ret in enumerate(schema.returns):
            constraint = AnyAttr()
            if ret.kind is ArgKind.TENSOR:
                constraint = TensorType | NoneType if _has_output_mask(schema) else TensorType
            fields[_result_field(ret, i, len(schema.returns), used)] = result_def(constraint)
    # Semantic traits (pointwise, view-like, ...) that passes ask: see traits.py.
    semantic = derive_traits(schema, tags)
    traits: list[OpTrait] = [AtenCanonicalization(), *semantic]
    if _is_pure(schema, tags, semantic):
        traits.append(Pure())
    fields["traits"] = traits_def(*traits)
    op_cls = irdl_op_definition(type(class_name(schema), (AtenOp,), fields))
    op_cls.SCHEMA = schema  # set after the IRDL definition, which rejects plain constants
    return op_cls


def _result_field(ret: ReturnSpec, index: int, count: int, used: set[str]) -> str:
    name = ret.name or ("result" if count == 1 else f"result{index}")
    name = field_name(name)
    if name in used:
        name = f"result_{name}"
    used.add(name)
    return name


# --- the generic op ---------------------------------------------------------------------


@cache
def torch_schema(overload: str) -> OpSchema:
    """The schema of ``ns::name.overload`` as installed torch knows it."""
    import torch

    namespace, _, rest = overload.partition("::")
    name, _, ov = rest.partition(".")
    try:
        packet = getattr(getattr(torch.ops, namespace), name)
        op = getattr(packet, ov or "default")
    except (AttributeError, RuntimeError):
        raise KeyError(f"torch has no operator {overload}") from None
    return parse_schema(str(op._schema))  # pyright: ignore[reportUnknownArgumentType, reportUnknownMemberType]


@irdl_op_definition
class GenericOp(AtenOp):
    """An ATen (or custom library) overload without a generated op.

    Its schema comes from torch at construction, so any registered operator can be
    imported and run through ATen; passes treat it as opaque (no Pure trait).

    ```mlir
    %1 = aten.generic "aten::_foo.default"(%0, n = 3) : (tensor<4xf32>) -> tensor<4xf32>
    ```
    """

    name = "aten.generic"

    overload = prop_def(StringAttr)
    tensor_counts = prop_def(DenseArrayBase)
    """Operand count per tensor argument of the schema, in schema order."""
    args = prop_def(DictionaryAttr)
    """Non-tensor arguments by schema name, encoded as for generated ops."""
    tensors = var_operand_def()
    sym = var_operand_def()
    outputs = var_result_def()

    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    def op_schema(self) -> OpSchema:
        return torch_schema(self.overload.data)

    def arg_attr(self, name: str) -> Attribute | None:
        return self.args.data.get(name)

    def _group(self, name: str) -> Sequence[SSAValue]:
        if name == SYM_GROUP:
            return tuple(self.sym)
        counts = [int(c) for c in self.tensor_counts.iter_values()]  # pyright: ignore
        specs = _tensor_specs(self.op_schema())
        start = 0
        for spec, count in zip(specs, counts, strict=False):  # pyright: ignore[reportUnknownVariableType]
            if spec.name == name:
                return tuple(self.tensors[start : start + count])
            start += count  # pyright: ignore[reportUnknownVariableType]
        return ()

    def _verify_results(self, returns: Sequence[ReturnSpec]) -> None:
        pass

    def verify_(self) -> None:
        try:
            specs = _tensor_specs(self.op_schema())
        except KeyError as e:
            raise VerifyException(f"aten.generic: {e.args[0]}") from None
        if len(self.tensor_counts) != len(specs):
            raise VerifyException("aten.generic: tensor_counts does not match the schema")
        super().verify_()

    @classmethod
    def build_generic(
        cls, overload: str, args: Mapping[str, ArgValue], result_types: Sequence[Attribute]
    ) -> GenericOp:
        schema = torch_schema(overload)
        groups, arg_attrs, sym = _encode_args(schema, args, allow_undefined=True)
        properties: dict[str, Attribute] = {
            "overload": StringAttr(overload),
            "tensor_counts": DenseArrayBase.from_list(i64, [len(g) for g in groups]),
            "args": DictionaryAttr(arg_attrs),
        }
        return cls.build(
            operands=[[v for g in groups for v in g], sym],
            result_types=[list(result_types)],
            properties=properties,
        )

    def _print_prefix(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_string_literal(self.overload.data)

    @classmethod
    def _parse_prefix(cls, parser: Parser) -> OpSchema:
        pos = parser.pos
        overload = parser.parse_str_literal("expected the overload name")
        try:
            return torch_schema(overload)
        except KeyError as e:
            parser.raise_error(str(e.args[0]), pos)

    @classmethod
    def _from_schema_args(
        cls, schema: OpSchema, args: Mapping[str, ArgValue], result_types: Sequence[Attribute]
    ) -> AtenOp:
        return cls.build_generic(f"{schema.namespace}::{schema.qualified_name}", args, result_types)


def get_arg_values(op: AtenOp) -> dict[str, ArgValue]:
    """The op's arguments by schema name: SSA values for tensors, attributes otherwise."""
    out: dict[str, ArgValue] = {}
    tensors = op.tensor_operands()
    for spec in op.op_schema().arguments:
        if spec.kind.is_tensor:
            out[spec.name] = tensors[spec.name]
        else:
            out[spec.name] = op.arg_attr(spec.name)
    return out


def is_aten_op(op: Operation) -> bool:
    return isinstance(op, AtenOp)


__all__ = [
    "AtenOp",
    "GenericOp",
    "class_name",
    "field_name",
    "make_op_class",
    "returns_tensor_list",
    "torch_schema",
]
