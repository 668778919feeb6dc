"""Running ``kernel.extern`` bodies (ATen calls: mm, convolution, fallbacks) at run time.

Each body becomes Python calling ATen directly, with the constant arguments decoded
once at build time: lines of the wrapper itself (:func:`inline_extern`, no call
frame, tuple or result check in between; both backends' wrappers use it)::

    t0 = _reinterpret_tensor(a, (128, 128), (128, 1), 0)  # as_strided, as a cheap view
    t1 = _reinterpret_tensor(w, (128, 128), (1, 128), 0)
    mm = _mm(t0, t1)                          # torch.mm: a fresh contiguous result
    del t0, t1

or, for :class:`ExternCall`, a small generated function returning the results.

The ops that externs are mostly made of (``mm``, ``bmm``, ``addmm``, ``convolution``,
``as_strided``) are called through their Python bindings, which skip the boxed
dispatcher (about 3 microseconds per op here); any other op through its ``OpOverload``;
an op with symbolic arguments through the aten interpreter's call plan; a body with
non-aten ops through the interpreter. Tensor results are made buffers the kernels
can index: contiguous from offset 0 and never an alias of an input (ATen may return
views).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, MemRefType, ModuleOp, TensorType, i1
from xdsl.interpreter import (
    Interpreter,
    InterpreterFunctions,
    PythonValues,
    ReturnedValues,
    TerminatorValue,
    impl_terminator,
    register_impls,
)
from xdsl.ir import Attribute, BlockArgument, Operation, SSAValue

from kiln.backends.host.runtime import FAST_CALLS as FAST_CALLS
from kiln.backends.host.runtime import REINTERPRET as REINTERPRET
from kiln.backends.host.runtime import as_buffer as as_buffer
from kiln.backends.host.runtime import reinterpret_fallback
from kiln.dialects.aten.attributes import OpaqueDtypeType, SymRefAttr
from kiln.dialects.aten.call_plan import build_plan, dense_to_tensor, torch_overload
from kiln.dialects.aten.dialect import ConstantOp
from kiln.dialects.aten.encoding import collect_sym_refs, decode_value
from kiln.dialects.aten.layout_constraints import adapted_overload
from kiln.dialects.aten.ops import AtenOp
from kiln.dialects.aten.prepack import is_prepacked, linear_weight, prepack_min_rows
from kiln.dialects.aten.schema import ArgKind
from kiln.dialects.kernel.kernel_ops import YieldOp
from kiln.dialects.kernel.program_ops import ExternOp

PrepackedSite = Callable[[AtenOp], Callable[..., Any] | None]
"""A backend's call site for a ``kiln.prepack`` convolution (called as
``site(input, weight, bias)``), or None to run it as a plain convolution."""


FRESH_RESULTS = frozenset(
    {
        "aten::mm.default",
        "aten::bmm.default",
        "aten::addmm.default",
        "aten::baddbmm.default",
        "aten::convolution.default",
    }
)
"""Overloads whose result is a newly allocated tensor, never a view of an input."""


IN_PLACE: dict[str, str] = {
    "aten::index_put.default": "aten::index_put_.default",
    "aten::_unsafe_index_put.default": "aten::index_put_.default",
    "aten::index_add.default": "aten::index_add_.default",
    "aten::index_copy.default": "aten::index_copy_.default",
    "aten::scatter_add.default": "aten::scatter_add_.default",
    "aten::scatter.src": "aten::scatter_.src",
    "aten::scatter.value": "aten::scatter_.value",
    "aten::scatter_reduce.two": "aten::scatter_reduce_.two",
}
"""Functional updates that copy their whole ``self`` first, and the in-place overload
(the same arguments) that updates ``self`` itself. An extern that is one of them, whose
``self`` buffer the program allocated and frees right there, runs in place
(:func:`inline_extern`'s ``donated``): the embedding gradient of a language model,
``index_put(zeros, [ids], grad, accumulate=True)``, was otherwise held twice at the end
of its backward, where every other gradient is live too."""


RESHAPES = frozenset({"aten::reshape.default", "aten::view.default"})
"""Reshapes that passes append to an extern body (copy elision, in place through reshapes):
of a contiguous fresh result they are a view of fresh memory."""


def _made_fresh(value: SSAValue, overloads: frozenset[str]) -> bool:
    """``value`` comes from one of ``overloads``, directly or through a reshape."""
    owner = value.owner
    if not isinstance(owner, AtenOp):
        return False
    if owner.overload_name in RESHAPES and owner.operands:
        return _made_fresh(owner.operands[0], overloads - {"aten::convolution.default"})
    return owner.overload_name in overloads


class _Body:
    """Writes one extern body as Python source.

    Stand-alone (``compile_body``) its values are ``t0``, ``t1``, ...; written into the
    wrapper (:func:`inline_extern`) they take the wrapper's names and constants."""

    def __init__(
        self,
        namespace: dict[str, Any] | None = None,
        temporary: Callable[[], str] | None = None,
        prepacked: PrepackedSite | None = None,
    ) -> None:
        self.prepacked = prepacked
        self.lines: list[str] = []
        self.names: dict[SSAValue, str] = {}
        self.namespace: dict[str, Any] = {} if namespace is None else namespace
        self.temporary = temporary or (lambda: f"t{len(self.names)}")
        self.temporaries: list[str] = []

    def name(self, value: SSAValue) -> str:
        if value not in self.names:
            self.names[value] = self.temporary()
            self.temporaries.append(self.names[value])
        return self.names[value]

    def constant(self, value: Any) -> str:
        if value is None or isinstance(value, bool | int):
            return repr(value)
        if isinstance(value, float) and math.isfinite(value):
            return repr(value)
        if isinstance(value, list | tuple) and all(
            isinstance(v, int) and not isinstance(v, bool)
            for v in value  # pyright: ignore[reportUnknownVariableType]
        ):
            return repr(tuple(value))  # pyright: ignore[reportUnknownArgumentType]
        if callable(value) and not isinstance(value, torch.Tensor):
            # ATen bindings by their own names (``_mm``), so the source reads.
            readable = "_" + "".join(
                c if c.isalnum() else "_" for c in getattr(value, "__name__", "")
            ).strip("_")
            if readable != "_" and self.namespace.setdefault(readable, value) is value:
                return readable
        k = len(self.namespace)
        while f"_c{k}" in self.namespace:
            k += 1
        self.namespace[f"_c{k}"] = value
        return f"_c{k}"

    def op(self, op: Operation) -> bool:
        """Write ``op``; False if only the interpreter can run it."""
        if isinstance(op, ConstantOp):
            tensor = dense_to_tensor(op.value, torch.device("cpu"))
            self.lines.append(f"{self.name(op.result)} = {self.constant(tensor)}")
            return True
        if not isinstance(op, AtenOp):
            return False
        prepacked = self._prepacked_call(op)
        call = prepacked or self._direct_call(op)
        returns_tuple = call is None or (prepacked is not None and len(op.results) > 1)
        if call is None:
            plan = self.constant(build_plan(op))
            operands = ", ".join(self.name(v) for v in op.operands)
            call = f"{plan}.run(({operands}{',' if len(op.operands) == 1 else ''}))"
        if returns_tuple:
            targets = ", ".join(self.name(r) for r in op.results)
            self.lines.append(f"({targets}{',' if len(op.results) == 1 else ''}) = {call}")
        else:
            self.lines.append(f"{self.name(op.results[0])} = {call}")
        return True

    def _prepacked_call(self, op: AtenOp) -> str | None:
        """A ``kiln.prepack`` convolution (or, on the GPU, ``convolution_backward``)
        through the backend's call site (the C++ wrapper's cached oneDNN-packed weight,
        the Triton wrapper's channels-last copy); None where the backend has none."""
        if self.prepacked is None or not is_prepacked(op):
            return None
        site = self.prepacked(op)
        if site is None:
            return None
        tensors = op.tensor_operands()
        if op.overload_name == "aten::convolution.default":
            operands = [tensors["input"], tensors["weight"], tensors.get("bias", [])]
        elif op.overload_name == "aten::convolution_backward.default":
            operands = [tensors["grad_output"], tensors["input"], tensors["weight"]]
        else:  # mm / addmm of a weight (or its transpose): the site takes the weight itself
            read = linear_weight(tensors["mat2"][0])
            if read is None:
                return None
            weight = read[0]
            if op.overload_name == "aten::addmm.default":
                operands = [tensors["mat1"], [weight], tensors["self"]]
            else:
                operands = [tensors["self"], [weight], []]
        names: list[str] = []
        for values in operands:
            value = values[0] if values else None
            names.append("None" if value is None else self.name(value))
        call = f"{self.constant(site)}({', '.join(names)})"
        min_rows = prepack_min_rows(op)
        direct = self._direct_call(op) if min_rows else None
        if direct is None:
            return call
        # Symbolic rows: below the threshold the product runs as written (on the views
        # the wrapper made, no call into the site, no transpose of the weight).
        return f"({direct} if {names[0]}.shape[0] < {min_rows} else {call})"

    def _sym_ints(self, kind: ArgKind, attr: Attribute, op: AtenOp) -> str | None:
        """An ``int`` / ``int[]`` argument holding symbolic sizes, as Python text over the
        wrapper's names for them (``(s0, 3, s1)``: the sizes of an ``as_strided`` under
        dynamic shapes, a direct call rather than the interpreter's call plan); None for
        any other kind."""
        syms = op.sym_operands()
        if kind is ArgKind.INT and isinstance(attr, SymRefAttr):
            return self.name(syms[attr.data])
        if kind is not ArgKind.INT_LIST or not isinstance(attr, ArrayAttr):
            return None
        items: list[str] = []
        for item in attr.data:
            if isinstance(item, SymRefAttr):
                items.append(self.name(syms[item.data]))
            elif isinstance(item, IntegerAttr) and item.type != i1:
                items.append(repr(int(item.value.data)))  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
            else:
                return None
        return f"({', '.join(items)}{',' if len(items) == 1 else ''})"

    def _direct_call(self, op: AtenOp, in_place: str | None = None) -> str | None:
        """A direct call for an op with one tensor result and constant arguments
        (``in_place``: call this overload instead, which takes the same arguments)."""
        schema = op.op_schema()
        if (
            len(op.results) != 1
            or len(schema.returns) != 1
            or schema.returns[0].kind is not ArgKind.TENSOR
        ):
            return None
        tensors = op.tensor_operands()
        positional: list[str] = []
        keywords: list[str] = []
        by_keyword = False
        for spec in schema.arguments:
            if spec.mutable:
                return None
            if spec.kind.is_tensor:
                if spec.kind in (ArgKind.TENSOR_LIST, ArgKind.OPT_TENSOR_LIST):
                    items = tensors[spec.name]
                    text = (
                        "[" + ", ".join("None" if v is None else self.name(v) for v in items) + "]"
                    )
                elif tensors[spec.name]:
                    value = tensors[spec.name][0]
                    assert value is not None
                    text = self.name(value)
                elif spec.has_default:
                    by_keyword = True
                    continue
                else:
                    text = "None"
            else:
                attr = op.arg_attr(spec.name)
                if attr is None:
                    if spec.has_default:
                        by_keyword = True
                        continue
                    text = "None"
                elif collect_sym_refs(attr):
                    symbolic = self._sym_ints(spec.kind, attr, op)
                    if symbolic is None:
                        return None
                    text = symbolic
                else:
                    text = self.constant(decode_value(spec, attr, ()))
            if spec.kwarg_only or by_keyword:
                keywords.append(f"{spec.name}={text}")
            else:
                positional.append(text)
        if in_place is not None:
            return f"{self.constant(torch_overload(in_place))}({', '.join(positional + keywords)})"
        overload = f"{schema.namespace}::{schema.qualified_name}"
        if overload == "aten::as_strided.default" and not keywords:
            offset = positional[3] if len(positional) > 3 and positional[3] != "None" else "0"
            # _reinterpret_tensor crashes on quantized tensors (opaque element types).
            source = op.operands[0].type
            opaque = isinstance(source, TensorType) and isinstance(
                source.element_type, OpaqueDtypeType
            )
            reinterpret = self.constant(reinterpret_fallback if opaque else REINTERPRET)
            return f"{reinterpret}({', '.join(positional[:3])}, {offset})"
        function = FAST_CALLS.get(overload) if not keywords else None
        function = adapted_overload(overload, op) or function
        callee = self.constant(function if function is not None else torch_overload(overload))
        return f"{callee}({', '.join(positional + keywords)})"


def compile_body(op: ExternOp) -> Callable[..., tuple[Any, ...]] | None:
    """The body as a Python function of the inputs, or None if it needs the interpreter."""
    writer = _Body()
    block = op.body.block
    args = [writer.name(a) for a in block.args]
    for inner in block.ops:
        if isinstance(inner, YieldOp):
            values = ", ".join(writer.name(v) for v in inner.values)
            writer.lines.append(f"return ({values}{',' if len(inner.values) == 1 else ''})")
            break
        if not writer.op(inner):
            return None
    source = f"def extern({', '.join(args)}):\n" + "".join(f"    {line}\n" for line in writer.lines)
    namespace = dict(writer.namespace)
    exec(compile(source, "<kiln extern>", "exec"), namespace)
    function = namespace["extern"]
    function.source = source
    return function


def inline_extern(
    op: ExternOp,
    inputs: Sequence[str],
    outputs: Sequence[str],
    namespace: dict[str, Any],
    temporary: Callable[[], str],
    donated: Sequence[bool] = (),
    prepacked: PrepackedSite | None = None,
) -> list[str] | None:
    """The body as lines of the wrapper: ``inputs`` name the extern's operands and
    ``outputs`` its results; None if the body needs the interpreter.

    ``donated`` (per buffer input): the input is fresh memory of the program's own that
    nothing reads after this extern; a body that is one :data:`IN_PLACE` update of such
    an input then updates it in place and yields it.

    A buffer result yielded straight from mm/bmm/addmm/baddbmm (or a reshape of one) is
    the fresh contiguous tensor ATen made; one from convolution is made contiguous if ATen chose another
    layout; so is a permute or reshape of one of them (the NHWC buffer of a channels-last
    convolution: a view of fresh memory, contiguous unless ATen chose another layout);
    any other goes through :func:`as_buffer` (it may be a view of an input).
    ``prepacked`` gives the backend's call site for a ``kiln.prepack`` convolution.
    Temporaries are deleted at the end: a name left behind would keep an extern's
    result alive after the program frees it."""
    writer = _Body(namespace, temporary, prepacked)
    block = op.body.block
    for arg, name in zip(block.args, inputs, strict=True):
        writer.names[arg] = name
    yielded = block.last_op
    assert isinstance(yielded, YieldOp)
    in_place = _in_place_call(op, donated, writer)
    if in_place is not None:
        return [f"{outputs[0]} = {in_place}"]
    # A value yielded once, straight from the op that makes it, takes the result's name.
    for value, result, name in zip(yielded.values, op.outputs, outputs, strict=True):
        if (
            value not in writer.names
            and (_made_fresh(value, _CONTIGUOUS_RESULTS) or _fresh_memory(value))
            and isinstance(result.type, MemRefType)
            and list(yielded.values).count(value) == 1
        ):
            writer.names[value] = name
    for inner in block.ops:
        if inner is yielded:
            break
        if not writer.op(inner):
            return None
    lines = writer.lines
    as_buffer_name: str | None = None
    buffers = inputs[: len(op.inputs)]
    arguments = f"({', '.join(buffers)}{',' if len(buffers) == 1 else ''})"
    for value, result, name in zip(yielded.values, op.outputs, outputs, strict=True):
        source = writer.name(value)
        if source == name:
            if not _made_fresh(value, _DENSE_RESULTS):  # fresh memory, any layout
                lines.append(f"if not {name}.is_contiguous(): {name} = {name}.contiguous()")
        elif isinstance(result.type, MemRefType):
            if as_buffer_name is None:
                as_buffer_name = writer.constant(as_buffer)
            dtype = writer.constant(declared_dtype(result.type))
            lines.append(f"{name} = {as_buffer_name}({source}, {arguments}, False, {dtype})")
        else:
            lines.append(f"{name} = {source}")
    if writer.temporaries:
        lines.append(f"del {', '.join(writer.temporaries)}")
    return lines


def _in_place_call(op: ExternOp, donated: Sequence[bool], writer: _Body) -> str | None:
    """The in-place call for a body that is one :data:`IN_PLACE` update of a donated
    input (see :func:`inline_extern`), else None."""
    block = op.body.block
    body = list(block.ops)
    if len(body) != 2 or len(op.outputs) != 1:
        return None
    inner, yielded = body
    if (
        not isinstance(inner, AtenOp)
        or inner.overload_name not in IN_PLACE
        or len(inner.results) != 1
        or not isinstance(yielded, YieldOp)
        or list(yielded.values) != [inner.results[0]]
    ):
        return None
    target = inner.tensor_operands().get("self", [])
    if len(target) != 1:
        return None
    argument = target[0]
    if not isinstance(argument, BlockArgument) or argument.block is not block:
        return None
    position = argument.index
    if position >= min(len(op.inputs), len(donated)) or not donated[position]:
        return None
    buffer = op.inputs[position]
    if (
        list(op.inputs).count(buffer) != 1  # also read as the values or an index
        or sum(1 for _ in argument.uses) != 1
        or buffer.type != op.outputs[0].type
    ):
        return None
    return writer._direct_call(inner, IN_PLACE[inner.overload_name])  # pyright: ignore[reportPrivateUsage]


def _fresh_memory(value: SSAValue) -> bool:
    """``value`` lies in memory an op of :data:`FRESH_RESULTS` just made (offset 0, no
    input aliases it), maybe not contiguously: that op's result, a permute of it (the
    NHWC buffer of a channels-last convolution), or a reshape of either (which is a view
    or a fresh copy). A contiguity check is all :func:`as_buffer` would add."""
    owner = value.owner
    if not isinstance(owner, AtenOp):
        return False
    if owner.overload_name in FRESH_RESULTS:
        return True
    if owner.overload_name in RESHAPES or owner.overload_name == "aten::permute.default":
        return bool(owner.operands) and _fresh_memory(owner.operands[0])
    return False


_DENSE_RESULTS = FRESH_RESULTS - {"aten::convolution.default"}
"""Fresh results that are always contiguous (a convolution's follows its input's layout)."""

_CONTIGUOUS_RESULTS = FRESH_RESULTS
"""Overloads whose (only) result is a new tensor of its own: contiguous from offset 0,
except that convolution may choose a channels-last layout."""


class ExternCall:
    """A compiled ``kernel.extern``: ``call(*inputs)`` returns its results as a tuple."""

    def __init__(self, op: ExternOp, module: ModuleOp) -> None:
        self.name = (
            ", ".join(
                inner.overload_name for inner in op.body.block.ops if isinstance(inner, AtenOp)
            )
            or "extern"
        )
        self.buffer_results = tuple(isinstance(r.type, MemRefType) for r in op.outputs)
        self.fresh_results = _fresh_results(op)
        self.dtypes = tuple(declared_dtype(r.type) for r in op.outputs)
        self._body = compile_body(op)
        self._op = op
        self._module = module

    def __call__(self, *inputs: Any) -> tuple[Any, ...]:
        values = self._body(*inputs) if self._body is not None else self._interpret(inputs)
        return tuple(
            as_buffer(v, inputs, fresh, dtype) if is_buffer and isinstance(v, torch.Tensor) else v
            for v, is_buffer, fresh, dtype in zip(
                values, self.buffer_results, self.fresh_results, self.dtypes, strict=True
            )
        )

    def _interpret(self, inputs: Sequence[Any]) -> tuple[Any, ...]:
        # Tensors the body makes (constants, factories) go where its inputs are: the
        # GPU in a Triton program, as eager would make them.
        device = next((x.device for x in inputs if isinstance(x, torch.Tensor)), None)
        # Imported here: the interpreter pulls in xDSL's whole interpreter package.
        from kiln.dialects.aten.interpreter import make_interpreter

        interpreter = make_interpreter(self._module, device)
        interpreter.register_implementations(_KernelYield())
        return tuple(interpreter.run_ssacfg_region(self._op.body, tuple(inputs), "extern"))


def declared_dtype(result_type: Attribute) -> torch.dtype | None:
    """The torch dtype of a buffer result's declared element type (None: not a buffer,
    or a type torch has no dtype for, such as a quantized one)."""
    from kiln.dialects.aten.dtypes import UnsupportedDtype, type_to_dtype

    if not isinstance(result_type, MemRefType) or isinstance(
        result_type.element_type, OpaqueDtypeType
    ):
        return None
    try:
        return type_to_dtype(result_type.element_type)
    except UnsupportedDtype:
        return None


def _fresh_results(op: ExternOp) -> tuple[bool, ...]:
    """Per output: whether it is yielded straight from an op in :data:`FRESH_RESULTS`
    (or a reshape of one)."""
    yielded = op.body.block.last_op
    if not isinstance(yielded, YieldOp):
        return tuple(False for _ in op.outputs)
    return tuple(_made_fresh(v, FRESH_RESULTS) for v in yielded.values)


@register_impls
class _KernelYield(InterpreterFunctions):
    """``kernel.yield`` ends an extern body (for the interpreter fallback)."""

    @impl_terminator(YieldOp)
    def run_yield(
        self, interpreter: Interpreter, op: YieldOp, args: PythonValues
    ) -> tuple[TerminatorValue, PythonValues]:
        return ReturnedValues(args), ()


__all__ = [
    "FAST_CALLS",
    "IN_PLACE",
    "REINTERPRET",
    "ExternCall",
    "as_buffer",
    "compile_body",
    "inline_extern",
]
