"""The FX graph walk: one IR op per FX node, in graph order, into one ``func.func``."""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch
import torch.fx
import torch.utils._pytree as pytree
from torch.fx.graph import _PyTreeCodeGen  # pyright: ignore[reportPrivateUsage]
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    NameLoc,
    StringAttr,
    TensorType,
    UnknownLoc,
    i1,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue

from kiln.dialects.aten import GenericOp
from kiln.dialects.aten.arg_layout import arg_strides_attrs
from kiln.dialects.aten.encoding import ArgEncodingError
from kiln.dialects.aten.fx.constants import constant_op, embeddable
from kiln.dialects.aten.fx.errors import FxImportError
from kiln.dialects.aten.fx.locations import LocationBuilder
from kiln.dialects.aten.fx.outputs import (
    OUTPUT_STRIDES_ATTR,
    OUTPUTS_ATTR,
    OutputStructureError,
    contiguous_strides,
    encode_structure,
    output_strides_attr,
)
from kiln.dialects.aten.fx.overloads import Overload, OverloadTable
from kiln.dialects.aten.fx.storage import STORAGE_READS, STORAGE_WRITES, storage_operands
from kiln.dialects.aten.fx.symbolic import (
    SYMBOLIC_TARGETS,
    SymbolicLowering,
    UnsupportedSymbolicOp,
    size_symbol_attrs,
    size_symbol_hints,
    traced_size_attrs,
)
from kiln.dialects.aten.fx.types import NONE_TYPE, TypeConverter, UnsupportedValue
from kiln.dialects.aten.result_layout import result_orders_attrs
from kiln.dialects.aten.size_symbols import SIZE_HINTS_ATTR
from kiln.dialects.aten.storage import STORAGE_ATTR

ParamMode = Literal["inputs", "constants"]

NAME_ATTR = "kiln.name"
"""Argument attribute: the FX node (placeholder or get_attr) the argument stands for."""
GET_ATTR_ATTR = "kiln.get_attr"
"""Argument attribute: the GraphModule attribute path (``layer.weight``) of a lifted
``get_attr`` tensor; such arguments follow the placeholders."""

SMALL_CONSTANT_NUMEL = 64
"""``get_attr`` tensors made by tracing (``_tensor_constant0``) up to this many elements
are embedded even when parameters stay inputs: they are literals of the program."""

_TRACED_CONSTANT_PREFIXES = ("_tensor_constant", "_lifted_tensor_constant")

STORAGE_OPS = STORAGE_READS | STORAGE_WRITES
_WITH_EFFECTS = getattr(torch.ops.higher_order, "with_effects", None)

_EXPECTED_ERRORS = (
    UnsupportedValue,
    ArgEncodingError,
    UnsupportedSymbolicOp,
    OutputStructureError,
)


@dataclass(frozen=True)
class _Opaque:
    """A ``get_attr`` of something that is not a tensor (a Generator, the submodule of a
    higher-order op): an error only if a node uses it."""

    what: str


NodeValue = SSAValue | tuple[SSAValue, ...] | _Opaque | None
"""What a node stands for: one SSA value, the results of a multi-result op, an opaque
attribute, or nothing."""


def describe(node: torch.fx.Node) -> str:
    """``node 'view_3' (call_function aten.view.default)``: how errors name a node."""
    target = node.target if isinstance(node.target, str) else _target_name(node.target)
    return f"node '{node.name}' ({node.op} {target})"


def _target_name(target: object) -> str:
    if isinstance(target, torch._ops.OpOverload | torch._ops.OpOverloadPacket):  # pyright: ignore[reportPrivateUsage]
        return str(target)
    module = getattr(target, "__module__", None)
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", repr(target))
    return f"{module}.{name}" if module not in (None, "builtins", "_operator") else str(name)


_NUMBERED = re.compile(r"_(\d+)$")


def _name_hint(fx_name: str) -> str:
    # xDSL drops a trailing `_<n>` from name hints (it is the printer's own
    # disambiguation suffix), which would print FX's `getitem_3` as `%getitem_1`;
    # `%getitem3` keeps the FX number visible and survives print -> parse -> print.
    return _NUMBERED.sub(r"\1", fx_name)


class GraphImporter:
    """Imports one GraphModule; use :func:`kiln.dialects.aten.fx.import_graph`."""

    def __init__(
        self,
        gm: torch.fx.GraphModule,
        params: ParamMode,
        constants: Mapping[str, torch.Tensor],
    ) -> None:
        if params not in ("inputs", "constants"):
            raise ValueError(f"params must be 'inputs' or 'constants', not {params!r}")
        self._gm = gm
        self._params = params
        self._constants = constants
        self._types = TypeConverter()
        self._locations = LocationBuilder()
        self._overloads = OverloadTable()
        self._block = Block()
        self._ops: list[Operation] = []
        self._symbolic = SymbolicLowering(self._ops.append)
        self._values: dict[torch.fx.Node, NodeValue] = {}
        self._arg_attrs: list[DictionaryAttr] = []
        self._handlers: dict[str, Callable[[torch.fx.Node], None]] = {
            "placeholder": self._placeholder,
            "get_attr": self._get_attr,
            "call_function": self._call_function,
            "call_module": self._unsupported_call,
            "call_method": self._unsupported_call,
            "output": self._output,
        }
        self._return: func.ReturnOp | None = None
        self._attributes: dict[str, Attribute] = {}
        self._size_hints: dict[str, int] = {}
        """Traced sizes of the placeholders' size symbols (``kiln.size_hints``)."""
        self._quantized: dict[torch.fx.Node, torch.dtype] = {}
        """Nodes whose tensors are quantized (their FakeTensors say float32)."""

    # -- driver ----------------------------------------------------------------------

    def run(self, func_name: str) -> ModuleOp:
        nodes = self._gm.graph.nodes
        # Placeholders first, so lifted get_attr tensors become arguments after them.
        for node in self._gm.graph.find_nodes(op="placeholder"):
            self._import_node(node, self._placeholder)
        handlers = self._handlers
        for node in nodes:
            if node.op != "placeholder":
                self._import_node(node, handlers[node.op])
        if self._return is None:
            raise FxImportError("graph", "has no output node")
        self._block.add_ops(self._ops)
        self._block.add_op(self._return)
        function = func.FuncOp(
            func_name,
            (self._block.arg_types, self._return.operand_types),
            Region(self._block),
            arg_attrs=ArrayAttr(self._arg_attrs),
        )
        function.attributes.update(self._attributes)
        if self._size_hints:
            function.attributes[SIZE_HINTS_ATTR] = DictionaryAttr(
                {k: IntegerAttr(v, i64) for k, v in sorted(self._size_hints.items())}
            )
        return ModuleOp([function])

    def _import_node(self, node: torch.fx.Node, handler: Callable[[torch.fx.Node], None]) -> None:
        first_new_op = len(self._ops)
        try:
            handler(node)
            # Helper ops a node needed (constants, casts) carry the node's location too.
            for op in self._ops[first_new_op:]:
                if isinstance(op.location, UnknownLoc):
                    op.location = self._location(node)
        except FxImportError:
            raise
        except _EXPECTED_ERRORS as e:
            raise FxImportError(describe(node), str(e)) from e
        except Exception as e:
            # Anything else is a kiln bug or an input we did not anticipate; still name
            # the node so the user can see where, and keep the cause chained for --debug.
            raise FxImportError(
                describe(node), f"internal error while importing: {type(e).__name__}: {e}"
            ) from e

    # -- values ------------------------------------------------------------------------

    def _meta_val(self, node: torch.fx.Node) -> Any:
        if "val" not in node.meta:
            raise UnsupportedValue(
                "has no meta['val']; trace with make_fx/aot_autograd/torch.export, "
                "or run FakeTensorProp on the graph first"
            )
        return node.meta["val"]

    def _new_arg(self, node: torch.fx.Node, ty: Attribute, attrs: dict[str, Attribute]) -> None:
        arg = self._block.insert_arg(ty, len(self._block.args))
        arg.name_hint = _name_hint(node.name)
        arg.location = self._locations.node_location(node.name, None)
        self._arg_attrs.append(DictionaryAttr(attrs))
        self._values[node] = arg

    def _location(self, node: torch.fx.Node) -> NameLoc:
        return self._locations.node_location(node.name, node.meta.get("stack_trace"))

    def _define(self, node: torch.fx.Node, op: Operation) -> None:
        op.location = self._location(node)
        self._ops.append(op)
        if len(op.results) == 1 and not isinstance(node.meta.get("val"), list | tuple):
            result = op.results[0]
            result.name_hint = _name_hint(node.name)
            self._values[node] = result
        elif op.results:
            self._values[node] = tuple(op.results)
        else:
            self._values[node] = None

    def _value_of(self, node: torch.fx.Node) -> SSAValue | tuple[SSAValue, ...]:
        value = self._values[node]
        if value is None:
            raise UnsupportedValue(f"uses '{node.name}', which has no value")
        if isinstance(value, _Opaque):
            raise UnsupportedValue(f"uses '{node.name}', {value.what}, which kiln cannot represent")
        return value

    def _arg(self, value: object) -> Any:
        """An FX argument as :meth:`AtenOp.from_args` takes it."""
        if isinstance(value, torch.fx.Node):
            result = self._value_of(value)
            return list(result) if isinstance(result, tuple) else result
        if isinstance(value, list | tuple):
            return [self._arg(v) for v in value]  # pyright: ignore[reportUnknownVariableType]
        if isinstance(value, torch.SymInt | torch.SymFloat | torch.SymBool):
            raise UnsupportedValue(f"symbolic value {value} is not the result of a graph node")
        return value

    # -- node kinds ----------------------------------------------------------------------

    def _placeholder(self, node: torch.fx.Node) -> None:
        if node.name in self._constants:
            self._define(node, constant_op(self._constants[node.name], self._types))
            return
        if _is_effect_token(node):
            # AOTAutograd's runtime passes None for effect tokens (and drops the
            # returned ones): an argument of type none, which no one reads.
            self._new_arg(node, NONE_TYPE, {NAME_ATTR: StringAttr(node.name)})
            return
        val = self._meta_val(node)
        ty = self._types.value_type(val)
        attrs = {NAME_ATTR: StringAttr(node.name), **size_symbol_attrs(val)}
        self._size_hints.update(size_symbol_hints(val))
        # A strided input (a saved activation of a training step) is read in place
        # (dialects/aten/arg_layout.py).
        attrs.update(arg_strides_attrs(val))
        self._new_arg(node, ty, attrs)

    def _get_attr(self, node: torch.fx.Node) -> None:
        target = str(node.target)
        value = self._constants.get(target)
        if value is None:
            value = _fetch_attr(self._gm, target)
        if not isinstance(value, torch.Tensor):
            self._values[node] = _Opaque(f"a {type(value).__name__} attribute")
            return
        if self._embeds(target, value):
            # Values are read without the ambient FakeTensorMode (see import_graph).
            self._define(node, constant_op(value, self._types))
            return
        ty = self._types.tensor_type(value)
        self._new_arg(
            node, ty, {NAME_ATTR: StringAttr(node.name), GET_ATTR_ATTR: StringAttr(target)}
        )

    def _embeds(self, target: str, value: torch.Tensor) -> bool:
        if self._params == "constants" or target in self._constants:
            return True
        traced_literal = target.rpartition(".")[2].startswith(_TRACED_CONSTANT_PREFIXES)
        return (
            traced_literal
            and not isinstance(value, torch.nn.Parameter)
            and value.numel() <= SMALL_CONSTANT_NUMEL
            and embeddable(value.dtype)
        )

    def _unsupported_call(self, node: torch.fx.Node) -> None:
        raise FxImportError(
            describe(node),
            f"{node.op} nodes are not ATen operations; capture the program with "
            "kiln.frontends.capture (make_fx, AOTAutograd or torch.export) to get an ATen graph",
        )

    def _call_function(self, node: torch.fx.Node) -> None:
        target = node.target
        if isinstance(target, torch._ops.OpOverload):  # pyright: ignore[reportPrivateUsage]
            self._aten(node, target)
        elif target is operator.getitem:
            self._getitem(node)
        elif target in SYMBOLIC_TARGETS:
            self._symbolic_op(node, target)  # pyright: ignore[reportArgumentType]
        elif target is _WITH_EFFECTS:
            self._with_effects(node)
        elif isinstance(target, torch._ops.HigherOrderOperator):  # pyright: ignore[reportPrivateUsage]
            raise UnsupportedValue(
                "higher-order operators (control flow, wrappers) are not supported"
            )
        elif isinstance(target, torch._ops.OpOverloadPacket):  # pyright: ignore[reportPrivateUsage]
            raise UnsupportedValue(
                "calls an operator packet without an overload; "
                "an ATen-level graph (make_fx, AOTAutograd, torch.export) names overloads"
            )
        else:
            raise UnsupportedValue("calls a Python function kiln cannot represent")

    def _aten(self, node: torch.fx.Node, target: torch._ops.OpOverload) -> None:  # pyright: ignore[reportPrivateUsage]
        overload = self._overloads.get(target)
        names = overload.arg_names
        if len(node.args) > len(names):
            raise UnsupportedValue(f"has {len(node.args)} arguments, the schema {len(names)}")
        convert = self._arg
        args = {name: convert(value) for name, value in zip(names, node.args, strict=False)}
        for name, value in node.kwargs.items():
            args[name] = convert(value)
        storage: Attribute | None = None
        if target in STORAGE_OPS:
            # as_strided & co. read eager's storage layout, which kiln's buffers need not have.
            target, storage = storage_operands(node, target, args, self._values)
            overload = self._overloads.get(target)
        scalars = [n for n in overload.tensor_args if _is_scalar(args.get(n))]
        if scalars:
            overload = self._wrap_scalars(target, overload, args, scalars)
        if "val" not in node.meta and not target._schema.returns:  # pyright: ignore[reportPrivateUsage]
            # A side-effect op (_assert_async, _assert_scalar, sym_constrain_range):
            # tracers leave no meta['val'] on it. It returns nothing and is kept (not
            # Pure), so its check runs at run time as an ATen call.
            result_types = []
        else:
            result_types = self._types.result_types(self._meta_val(node))
        qdtype = self._quantized_result(node, target, args)
        if qdtype is not None:
            result_types = [_retyped(t, self._types.element_type(qdtype)) for t in result_types]
        op = overload.build(args, result_types)
        if storage is not None:
            op.attributes[STORAGE_ATTR] = storage
        if "val" in node.meta:
            op.attributes.update(traced_size_attrs(node.meta["val"]))
            if not target.is_view:  # a view's layout is its consumers' index expression
                op.attributes.update(result_orders_attrs(node.meta["val"]))
        self._define(node, op)

    def _quantized_result(
        self,
        node: torch.fx.Node,
        target: torch._ops.OpOverload,  # pyright: ignore[reportPrivateUsage]
        args: dict[str, Any],
    ) -> torch.dtype | None:
        """The quantized dtype of the node's tensor results, or None.

        FakeTensors of quantized tensors claim float32 (torch has no quantized meta
        tensors), so the importer tracks quantized values itself: results of
        ``quantize_per_*`` and ops reading a quantized value are quantized, except
        ``dequantize`` and the accessors of quantization parameters. Their element type
        is then opaque, so everything on them runs through ATen."""
        name = target._schema.name.removeprefix("aten::")  # pyright: ignore[reportPrivateUsage]
        dtype = args.get("dtype")
        if name.startswith("quantize_per_") and isinstance(dtype, torch.dtype):
            qdtype = dtype
        elif name.startswith("_make_per_") and name.endswith("_quantized_tensor"):
            qdtype = _QUANTIZED_OF.get(getattr(self._meta_val(node.args[0]), "dtype", None))  # pyright: ignore[reportArgumentType]
        elif name in _DEQUANTIZING:
            qdtype = None
        else:
            qdtype = next(
                (self._quantized[a] for a in node.all_input_nodes if a in self._quantized), None
            )
        if qdtype is not None:
            self._quantized[node] = qdtype
        return qdtype

    def _with_effects(self, node: torch.fx.Node) -> None:
        """``with_effects(token, op, *args)``: AOTAutograd's wrapper that orders an
        effectful op (torch 2.13 wraps ``_linalg_check_errors`` of linalg.inv, solve,
        cholesky, ... in it). The op runs as an ATen call, kept in program order and never
        removed (``aten.generic`` is not Pure); the token is an empty tensor no one reads,
        passed through as the new token."""
        token, op, *op_args = node.args
        if not isinstance(token, torch.fx.Node) or not isinstance(op, torch._ops.OpOverload):  # pyright: ignore[reportPrivateUsage]
            raise UnsupportedValue("with_effects of something other than an ATen overload")
        overload = self._overloads.get(op)
        if len(op_args) > len(overload.arg_names):
            raise UnsupportedValue(
                f"has {len(op_args)} arguments, the schema {len(overload.arg_names)}"
            )
        args = {n: self._arg(v) for n, v in zip(overload.arg_names, op_args, strict=False)}
        args.update({n: self._arg(v) for n, v in node.kwargs.items()})
        # meta['val'] is (token, *outputs); an op returning nothing gives (token, None).
        val = self._meta_val(node)
        returns = len(op._schema.returns)  # pyright: ignore[reportPrivateUsage]
        outputs = list(val[1:]) if isinstance(val, list | tuple) else []
        if returns > 1 and len(outputs) == 1 and isinstance(outputs[0], list | tuple):
            outputs = list(outputs[0])  # pyright: ignore[reportUnknownArgumentType]
        result_types = self._types.result_types(outputs[:returns]) if returns else []
        generic = GenericOp.build_generic(overload.qualified, args, result_types)
        generic.location = self._location(node)
        self._ops.append(generic)
        token_value = self._value_of(token)
        if isinstance(token_value, tuple):
            raise UnsupportedValue("the effect token is not a single value")
        self._values[node] = (token_value, *generic.results)

    def _wrap_scalars(
        self,
        target: torch._ops.OpOverload,  # pyright: ignore[reportPrivateUsage]
        overload: Overload,
        args: dict[str, Any],
        scalars: list[str],
    ) -> Overload:
        """Handle numbers in tensor arguments: ``add.Tensor(x, 1)``, or ``mul.Tensor(x, n)``
        with ``n`` a SymInt.

        Prefer the ``Scalar`` overload, which ATen defines as the same call; otherwise
        make the 0-d tensor the dispatcher would wrap the number in (int64, float64,
        bool or complex128): a constant, or ``aten.scalar_tensor`` of a symbolic value.
        """
        variant = self._overloads.scalar_variant(target, frozenset(scalars))
        if variant is not None:
            return variant
        for name in scalars:
            value = args[name]
            if isinstance(value, SSAValue):
                dtype = _wrapped_dtype_of_type(value.type)
                result_type = TensorType(self._types.element_type(dtype), [])
                op = self._overloads.get(torch.ops.aten.scalar_tensor.default).build(
                    {"s": value, "dtype": dtype}, [result_type]
                )
            else:
                wrapped = torch.scalar_tensor(value, dtype=_wrapped_dtype(value))
                op = constant_op(wrapped, self._types)
            self._ops.append(op)
            args[name] = op.results[0]
        return overload

    def _getitem(self, node: torch.fx.Node) -> None:
        source, index = node.args
        if not isinstance(source, torch.fx.Node) or not isinstance(index, int):
            raise UnsupportedValue("getitem is supported on the results of a node only")
        results = self._value_of(source)
        if not isinstance(results, tuple):
            raise UnsupportedValue(f"'{source.name}' has a single result; cannot index it")
        value = results[index]
        if value.name_hint is None:
            value.name_hint = _name_hint(node.name)
        self._values[node] = value

    def _symbolic_op(self, node: torch.fx.Node, target: Callable[..., object]) -> None:
        if node.kwargs:
            raise UnsupportedValue("symbolic operators with keyword arguments are not supported")
        args = [self._arg(a) for a in node.args]
        first_new_op = len(self._ops)
        value = self._symbolic.lower(target, args)
        # Name the result after the node unless it is an existing value passed through
        # (math.floor of an int) or a shared constant.
        if value.owner in self._ops[first_new_op:]:
            value.name_hint = _name_hint(node.name)
        self._values[node] = value

    def _output(self, node: torch.fx.Node) -> None:
        returned: list[SSAValue] = []
        strides: list[tuple[int, ...] | None] = []

        def leaf(value: object) -> object:
            if value is None:
                return None
            if isinstance(value, torch.fx.Node):
                result = self._value_of(value)
                if isinstance(result, tuple):
                    returned.extend(result)
                    strides.extend([None] * len(result))
                    return [len(returned) - len(result) + i for i in range(len(result))]
                returned.append(result)
                strides.append(_static_strides(value.meta.get("val")))
                return len(returned) - 1
            if isinstance(value, bool | int | float):
                returned.append(self._symbolic.constant(value, self._types.value_type(value)))
                strides.append(None)
                return len(returned) - 1
            raise UnsupportedValue(f"returns a {type(value).__name__}, which has no IR value")

        structure = _map_structure(node.args[0], leaf)
        out_spec = _output_treespec(self._gm)
        if out_spec is not None:
            # make_fx of a function with pytree outputs: GraphModule.__call__ rebuilds
            # the structure from the flat output list with this spec.
            structure = pytree.tree_unflatten(list(structure), out_spec)  # pyright: ignore[reportArgumentType]
        self._attributes[OUTPUTS_ATTR] = StringAttr(encode_structure(structure))
        if any(not _is_contiguous(s, v) for s, v in zip(strides, returned, strict=True)):
            self._attributes[OUTPUT_STRIDES_ATTR] = output_strides_attr(strides)
        self._return = func.ReturnOp(*returned)
        self._return.location = self._locations.node_location(node.name, None)


_NUMBER = (bool, int, float, complex)


_QUANTIZED_OF = {torch.int8: torch.qint8, torch.uint8: torch.quint8, torch.int32: torch.qint32}
_DEQUANTIZING = frozenset(
    {
        "dequantize",
        "int_repr",
        "q_scale",
        "q_zero_point",
        "q_per_channel_scales",
        "q_per_channel_zero_points",
        "q_per_channel_axis",
        "qscheme",
    }
)


def _retyped(ty: Attribute, element: Attribute) -> Attribute:
    if isinstance(ty, TensorType):
        return TensorType(element, ty.get_shape())  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
    return ty


def _is_effect_token(node: torch.fx.Node) -> bool:
    """A placeholder only ever used as the token of ``with_effects``."""
    users = list(node.users)
    return bool(users) and all(
        u.target is _WITH_EFFECTS and u.args and u.args[0] is node for u in users
    )


def _static_strides(value: object) -> tuple[int, ...] | None:
    """The strides of a FakeTensor output, when they are all static."""
    if not isinstance(value, torch.Tensor):
        return None
    strides = value.stride()
    if not all(isinstance(s, int) for s in strides):
        return None
    return tuple(int(s) for s in strides)


def _is_contiguous(strides: tuple[int, ...] | None, value: SSAValue) -> bool:
    ty = value.type
    if strides is None or not isinstance(ty, TensorType):
        return True
    shape = ty.get_shape()
    expected = contiguous_strides(shape)
    return any(d < 0 for d in shape) or all(
        size <= 1 or got == want for size, got, want in zip(shape, strides, expected, strict=True)
    )


def _is_scalar(value: object) -> bool:
    """A Python number, or a symbolic scalar (an SSA value that is not a tensor)."""
    if isinstance(value, SSAValue):
        return not isinstance(value.type, TensorType)
    return isinstance(value, _NUMBER)


def _wrapped_dtype_of_type(ty: Attribute) -> torch.dtype:
    if ty == i1:
        return torch.bool
    if isinstance(ty, IndexType | IntegerType):
        return torch.int64
    return torch.float64


def _wrapped_dtype(value: bool | int | float | complex) -> torch.dtype:
    if isinstance(value, bool):
        return torch.bool
    if isinstance(value, int):
        return torch.int64
    if isinstance(value, float):
        return torch.float64
    return torch.complex128


def _map_structure(value: object, leaf: Callable[[object], object]) -> object:
    if isinstance(value, tuple):
        return tuple(_map_structure(v, leaf) for v in value)  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
    if isinstance(value, list):
        return [_map_structure(v, leaf) for v in value]  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
    if isinstance(value, dict):
        return {k: _map_structure(v, leaf) for k, v in value.items()}  # pyright: ignore[reportUnknownVariableType]
    return leaf(value)


def _output_treespec(gm: torch.fx.GraphModule) -> pytree.TreeSpec | None:
    codegen = gm.graph._codegen  # pyright: ignore[reportPrivateUsage]
    if not isinstance(codegen, _PyTreeCodeGen):
        return None
    return codegen.pytree_info.out_spec


def _fetch_attr(gm: torch.fx.GraphModule, target: str) -> object:
    value: object = gm
    for part in target.split("."):
        if not hasattr(value, part):
            raise UnsupportedValue(f"the GraphModule has no attribute '{target}'")
        value = getattr(value, part)
    return value


def import_graph(
    gm: torch.fx.GraphModule,
    *,
    func_name: str = "forward",
    params: ParamMode = "inputs",
    constants: Mapping[str, torch.Tensor] | None = None,
) -> ModuleOp:
    """Import an ATen-level FX graph as a module with one ``func.func``.

    ``params="inputs"`` makes ``get_attr`` tensors (parameters and buffers of the
    GraphModule) function arguments after the placeholders, marked with a
    ``kiln.get_attr`` argument attribute; ``params="constants"`` embeds them as
    ``aten.constant``. ``constants`` maps placeholder names or ``get_attr`` targets to
    tensors to embed instead (e.g. the lifted constants of an ExportedProgram).

    Raises :class:`FxImportError` naming the node when a node cannot be represented.
    """
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    # AOTAutograd calls its compilers with its FakeTensorMode still active; constants
    # are real tensors (``_tensor_constant0``, wrapped Python numbers) whose data the
    # importer reads, which that mode would refuse or turn into fake tensors.
    with unset_fake_temporarily():
        return GraphImporter(gm, params, constants or {}).run(func_name)


def lifted_targets(module: ModuleOp) -> list[str]:
    """The ``get_attr`` targets of the arguments that stand for traced constants
    (``kiln.get_attr``), in argument order."""
    function = module.body.block.first_op
    assert isinstance(function, func.FuncOp)
    targets: list[str] = []
    for attrs in function.arg_attrs.data if function.arg_attrs is not None else ():
        target = attrs.data.get(GET_ATTR_ATTR)
        if isinstance(target, StringAttr):
            targets.append(target.data)
    return targets


def lifted_constants(module: ModuleOp, gm: torch.fx.GraphModule) -> list[torch.Tensor]:
    """The tensors to pass after the placeholders: one per argument that stands for a
    ``get_attr`` (``kiln.get_attr``), in argument order, fetched from ``gm``.

    A runner appends them to the graph's inputs, so traced constants that are not
    embedded (large, or of a dtype dense attributes cannot hold) reach the program with
    their real data.
    """
    from torch._subclasses.fake_tensor import FakeTensor

    tensors: list[torch.Tensor] = []
    for target in lifted_targets(module):
        value = _fetch_attr(gm, target)
        if not isinstance(value, torch.Tensor) or isinstance(value, FakeTensor):
            raise FxImportError(
                f"get_attr '{target}'", "has no real tensor data to pass at run time"
            )
        tensors.append(value.detach())
    return tensors


def returned_values(module: ModuleOp) -> Sequence[SSAValue]:
    """The values the imported function returns (in ``kiln.outputs`` index order)."""
    function = module.body.block.first_op
    assert isinstance(function, func.FuncOp)
    terminator = function.body.block.last_op
    assert isinstance(terminator, func.ReturnOp)
    return terminator.arguments
