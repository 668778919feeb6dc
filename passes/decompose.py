"""``decompose``: rewrite composite aten ops into simpler aten ops.

Nothing is re-derived here: each op is decomposed by PyTorch's own decomposition
function, traced on fake tensors of the op's types with ``make_fx`` (recursively, with
the same table), imported by the FX importer and spliced in place of the op::

    %1 = aten._softmax.default(%0, dim = 1, half_to_float = false) : (tensor<4x8xf32>) -> tensor<4x8xf32>

becomes::

    %2 = aten.amax.default(%0, dim = [1], keepdim = true) : (tensor<4x8xf32>) -> tensor<4x1xf32>
    %3 = aten.sub.Tensor(%0, %2) : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
    %4 = aten.exp.default(%3) : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %5 = aten.sum.dim_IntList(%4, dim = [1], keepdim = true) : (tensor<4x8xf32>) -> tensor<4x1xf32>
    %6 = aten.div.Tensor(%4, %5) : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>

Traced decompositions are cached per signature (overload, operand types, arguments).
An op is left alone, never approximated, when its decomposition cannot be traced for
its types (a failing decomposition) or would change its result types.

Symbolic sizes (``tensor<?x8xf32>``, ``dynamic=True``): the decomposition is traced with
a size symbol per distinct traced size (``make_fx`` in symbolic mode; dims the graph's
tracer gave one expression, ``kiln.traced_sizes``, share a symbol), so the traced body
holds for every size: its sizes are read from its inputs (``aten.sym_size.int``). If
tracing had to assume anything about a symbol (a guard such as ``s0 > 1``, or two
different sizes being equal), the op is kept. Ops whose arguments are symbolic values
(``view(x, size = [%s, 8])``) are kept too.

Choosing what to decompose: ``table`` picks a base table (``kiln``: PyTorch's core-ATen
decompositions plus the composites kiln's lowering wants decomposed; CPU flash attention
stays one ATen call from 64 x 64 scores per head on; ``core``: only
PyTorch's core-ATen table; ``inductor``: Inductor's table), ``ops`` restricts it to the
listed overloads (``aten._softmax.default``), ``exclude`` removes overloads. Pass authors
extend it by subclassing and overriding :meth:`DecomposePass.decompositions`.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, cast

import sympy
from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, ModuleOp, StringAttr, TensorType
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Block, BlockArgument, Operation, OpResult, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import Rewriter

from kiln.dialects.aten import AtenOp
from kiln.dialects.aten.dtype_support import eager_rejects
from kiln.dialects.aten.encoding import decode_value
from kiln.dialects.aten.function_attrs import module_device
from kiln.dialects.aten.size_symbols import (
    SIZE_SYMBOLS_ATTR,
    TRACED_SIZES_ATTR,
    size_hints,
    traced_size_texts,
)
from kiln.dialects.loop.expr import ExprSyntaxError, parse_expr
from kiln.passes.decompose_parts import size_generic
from kiln.passes.decompose_parts.tables import (
    Decompositions,
    SizeDependent,
    TableKey,
    base_table,
    table_key,
    with_prims,
)

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class DecomposePass(ModulePass):
    """Decompose composite aten ops with PyTorch's decomposition functions."""

    name = "decompose"

    table: Literal["kiln", "core", "inductor"] = "kiln"
    ops: tuple[str, ...] = ()
    """Only these overloads (``aten._softmax.default``); empty means the whole table."""
    exclude: tuple[str, ...] = ()
    """Overloads never decomposed."""

    def decompositions(self) -> Decompositions:
        """The table in use; override to add or replace decompositions."""
        table = base_table(self.table)
        if not self.ops and not self.exclude:
            return table
        wanted = {_normalise(o) for o in self.ops}
        excluded = {_normalise(o) for o in self.exclude}
        return {
            op: fn
            for op, fn in table.items()
            if (not wanted or str(op) in wanted) and str(op) not in excluded
        }

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        # One walk over the ops there are now (a decomposition is traced recursively with
        # the same table already, so what it emits is not decomposed again).
        pattern = Decompose(self.decompositions(), _module_device(op))
        PatternRewriteWalker(pattern, apply_recursively=False).rewrite_module(op)


class Decompose(RewritePattern):
    """Replace an aten op of ``table`` by its decomposition traced on ``device`` (module
    docstring)."""

    def __init__(self, table: Decompositions, device: str = "cpu") -> None:
        self.table = table
        self.key = table_key(table)
        self.device = device
        self.by_name = {str(k): k for k in table}

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: AtenOp, rewriter: PatternRewriter) -> None:
        overload = self.by_name.get(_torch_name(op))
        if overload is None or eager_rejects(op, pointwise_only=True) is not None:
            # A dtype eager rejects: keep the op, so that it raises as eager does.
            return
        replacement = _decomposed_body(op, overload, self.table, self.key, self.device)
        if replacement is None:
            return
        _splice(op, replacement, rewriter)


def _module_device(module: ModuleOp) -> str:
    """The device the program runs on (``kiln.device``, set by the driver; CPU when
    absent). Decompositions are traced there: one that makes a tensor (``empty_permuted``
    in bf16 ``var_mean``) bakes the tracing device into the IR, and CUDA's variants differ
    (batch norm's saved statistics)."""
    return module_device(module)


def _normalise(name: str) -> str:
    """``aten::_softmax.default`` or ``_softmax.default`` -> ``aten._softmax.default``."""
    name = name.replace("::", ".")
    return name if name.count(".") >= 2 else f"aten.{name}"


def _torch_name(op: AtenOp) -> str:
    """``aten._softmax.default``: how ``str(OpOverload)`` spells the op."""
    return op.overload_name.replace("::", ".")


# --- tracing ---------------------------------------------------------------------------


def _signature(op: AtenOp) -> tuple[Any, ...] | None:
    """A hashable key of everything the decomposition may depend on, or None if the op
    has symbolic arguments (sizes it would have to trace as given values)."""
    if op.sym_operands():
        return None
    for value in op.operands:
        if not isinstance(value.type, TensorType):
            return None
    return (
        op.overload_name,
        tuple(str(v.type) for v in op.operands),
        *_arguments_key(op),
        tuple(str(r.type) for r in op.results),
    )


def _arguments_key(op: AtenOp) -> tuple[tuple[tuple[str, str], ...], ...]:
    """``op``'s properties and attributes (its graph sizes aside) as a hashable key."""
    props = tuple(sorted((k, str(v)) for k, v in op.properties.items()))
    extra = tuple(sorted((k, str(v)) for k, v in op.attributes.items() if k != TRACED_SIZES_ATTR))
    return props, extra


@dataclass(frozen=True)
class Traced:
    """A traced decomposition: its function, and which op results it does not compute."""

    func: FuncOp
    absent: tuple[int, ...]


_TRACE_CACHE: OrderedDict[tuple[Any, ...], Traced | None] = OrderedDict()
"""Traced decompositions by signature and table, least recently used first. A cache of
pure functions of the key: sharing it between passes changes no result, only speed."""

_TRACE_CACHE_SIZE = 4096
"""Most traced decompositions kept (a few KB of IR each)."""


def _decomposed_body(
    op: AtenOp, overload: Any, table: Decompositions, key: TableKey, device: str
) -> Traced | None:
    signature = _signature(op)
    if signature is None:
        return None
    flat_inputs = [v for vs in op.tensor_operands().values() for v in vs if v is not None]
    symbolic = any(
        d < 0 for v in flat_inputs if isinstance(v.type, TensorType) for d in v.type.get_shape()
    )
    dims = symbolic_dims(flat_inputs) if symbolic else None
    if size_generic.applies(op):
        shapes = (
            dims.shapes
            if dims is not None
            else tuple(tuple(cast(TensorType[Any], v.type).get_shape()) for v in flat_inputs)
        )
        generic = _size_generic_body(op, overload, table, key, device, shapes)
        if generic is not None:
            return generic
    if dims is not None and size_generic.lifts_sizes(op):
        lifted = _lifted_body(op, overload, table, key, device, dims)
        if lifted is not None:
            return lifted
    return _cached_trace(
        (*signature, dims, key, device), lambda: _trace(op, overload, table, key, device, dims)
    )


def _size_generic_body(
    op: AtenOp,
    overload: Any,
    table: Decompositions,
    key: TableKey,
    device: str,
    shapes: tuple[tuple[int, ...], ...],
) -> Traced | None:
    """``op``'s decomposition from the trace of its size pattern
    (:mod:`~kiln.passes.decompose_parts.size_generic`), given ``op``'s sizes (None: none
    that holds for them)."""
    pattern = size_generic.size_pattern(shapes)
    if pattern is None:
        return None
    traced = _cached_trace(
        (*size_generic.pattern_key(op, pattern), *_arguments_key(op), key, device),
        lambda: _trace(op, overload, table, key, device, None, pattern),
    )
    if traced is None:
        return None
    func = size_generic.with_sizes(traced.func, size_generic.real_sizes(pattern, shapes))
    ret = func.body.block.last_op
    assert isinstance(ret, ReturnOp)
    present = [i for i in range(len(op.results)) if i not in traced.absent]
    if any(v.type != op.results[i].type for i, v in zip(present, ret.arguments, strict=True)):
        return None
    return Traced(func, traced.absent)


def _lifted_body(
    op: AtenOp,
    overload: Any,
    table: Decompositions,
    key: TableKey,
    device: str,
    dims: SymbolicDims,
) -> Traced | None:
    """``op``'s decomposition at symbolic sizes from two fake traces at primes instead of a
    symbolic one (0.9 s for CPU attention, a third of OPT's ``dynamic=True`` compile),
    with the sizes the body reads lifted into symbolic arguments
    (:func:`~kiln.passes.decompose_parts.size_generic.lift_sizes`). None: no such body."""
    pattern = size_generic.lifted_pattern(dims.shapes)
    if pattern is None:
        return None
    decomposition = table[overload]
    if isinstance(decomposition, SizeDependent):
        hinted = [[d if d >= 0 else dims.hints[-1 - d] for d in shape] for shape in dims.shapes]
        if not decomposition.accepts(hinted):
            return None
        decomposition = decomposition.decomposition

    def trace() -> Traced | None:
        traces: list[tuple[torch.fx.GraphModule, list[int]]] = []
        for primes in (size_generic.PRIMES, size_generic.OTHER_PRIMES):
            traced = _trace_graph(
                op, overload, table, key, device, None, pattern, primes, decomposition
            )
            if traced is None or not size_generic.lift_sizes(traced[0], pattern, primes):
                return None
            traces.append(traced)
        if not size_generic.same_graph(traces[0][0], traces[1][0]):
            return None  # the body reads a size some other way (a float, a size - 1)
        return _import_trace(op, *traces[0], pattern=pattern, lifted=True)

    traced = _cached_trace(
        ("lifted", *size_generic.pattern_key(op, pattern), *_arguments_key(op), key, device),
        trace,
    )
    if traced is None:
        return None
    return _with_results_of(
        op, Traced(size_generic.with_lifted_sizes(traced.func, pattern), traced.absent)
    )


def _cached_trace(entry: tuple[Any, ...], trace: Callable[[], Traced | None]) -> Traced | None:
    if entry in _TRACE_CACHE:
        _TRACE_CACHE.move_to_end(entry)
        return _TRACE_CACHE[entry]
    traced = trace()
    _TRACE_CACHE[entry] = traced
    if len(_TRACE_CACHE) > _TRACE_CACHE_SIZE:
        _TRACE_CACHE.popitem(last=False)
    return traced


def _trace(
    op: AtenOp,
    overload: Any,
    table: Decompositions,
    key: TableKey,
    device: str,
    dims: SymbolicDims | None,
    pattern: tuple[tuple[int, ...], ...] | None = None,
) -> Traced | None:
    """``op``'s decomposition traced at its types (``dims``: at symbolic sizes;
    ``pattern``: at a size pattern's primes, see ``_size_generic_body``)."""
    traced = _trace_graph(op, overload, table, key, device, dims, pattern)
    return None if traced is None else _import_trace(op, *traced, pattern=pattern)


def _trace_graph(
    op: AtenOp,
    overload: Any,
    table: Decompositions,
    key: TableKey,
    device: str,
    dims: SymbolicDims | None,
    pattern: tuple[tuple[int, ...], ...] | None = None,
    primes: tuple[int, ...] = size_generic.PRIMES,
    decomposition: Callable[..., Any] | None = None,
) -> tuple[torch.fx.GraphModule, list[int]] | None:
    """The FX graph of ``op``'s decomposition (``decomposition``, else the table's) and
    the op results it does not compute; None where it does not trace or holds only for
    some sizes."""
    from torch import _guards
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.utils._python_dispatch import _disable_current_modes

    schema = op.op_schema()
    tensors = op.tensor_operands()
    flat_inputs: list[SSAValue] = [v for vs in tensors.values() for v in vs if v is not None]
    decompose = decomposition if decomposition is not None else table[overload]

    def build_args(runtime: list[torch.Tensor]) -> tuple[list[Any], dict[str, Any]]:
        it = iter(runtime)
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        for spec in schema.arguments:
            if spec.kind.is_tensor:
                values = tensors[spec.name]
                if spec.kind.value in ("Tensor", "Tensor?"):
                    value: Any = next(it) if values else None
                else:
                    value = [None if v is None else next(it) for v in values]
            else:
                value = decode_value(spec, op.arg_attr(spec.name), ())
            if spec.kwarg_only:
                kwargs[spec.name] = value
            else:
                args.append(value)
        return args, kwargs

    absent: list[int] = []

    def fn(*runtime: torch.Tensor) -> Any:
        args, kwargs = build_args(list(runtime))
        result = decompose(*args, **kwargs)
        if not isinstance(result, tuple | list):
            return result
        # A plain tuple (a structseq would be traced as a Python call), without the
        # outputs the op does not compute (None under an ``output_mask``).
        absent[:] = [i for i, r in enumerate(result) if r is None]  # pyright: ignore
        return tuple(r for r in result if r is not None)  # pyright: ignore

    try:
        # Outside any ambient tracing context and mode (AOTAutograd's would make shapes
        # symbolic; an active fake mode would claim our example tensors).
        with _guards.tracing(None), _disable_current_modes():
            examples, shape_env = _examples(flat_inputs, dims, device, pattern, primes)
            gm = make_fx(
                fn,
                decomposition_table=with_prims(key),
                tracing_mode="fake" if dims is None else "symbolic",
            )(*examples)
    except Exception:
        # The decomposition does not apply to these types: keep the op.
        return None
    if shape_env is not None and shape_env.guards:
        return None  # the trace holds only for some sizes
    return gm, absent


def _import_trace(
    op: AtenOp,
    gm: torch.fx.GraphModule,
    absent: list[int],
    *,
    pattern: tuple[tuple[int, ...], ...] | None,
    lifted: bool = False,
) -> Traced | None:
    """The traced graph ``gm`` as a function replacing ``op`` (None: it cannot). With
    ``pattern``, traced at its primes: the body must hold for every size (``lifted``:
    the sizes it reads were lifted into arguments, ``size_generic.lift_sizes``)."""
    from kiln.dialects.aten.fx import import_graph

    try:
        module = import_graph(gm)
    except Exception:
        return None
    funcs = [o for o in module.ops if isinstance(o, FuncOp)]
    if len(funcs) != 1:
        return None
    func = funcs[0]
    ret = func.body.block.last_op
    if not isinstance(ret, ReturnOp):
        return None
    present = [i for i in range(len(op.results)) if i not in absent]
    if len(ret.arguments) != len(present):
        return None
    if any(_is_same_op(o, op) for o in func.walk()):
        return None  # the "decomposition" re-emits the op itself
    if pattern is not None:
        # Result types are checked once the body has a use's sizes.
        if not size_generic.is_size_generic(func, pattern, lifted=lifted):
            return None
        func.detach()
        return Traced(func, tuple(absent))
    for inner in func.walk():
        # Sizes of the trace's own shape environment: its symbols are not the graph's.
        inner.attributes.pop(TRACED_SIZES_ATTR, None)
    func.detach()
    return _with_results_of(op, Traced(func, tuple(absent)))


def _with_results_of(op: AtenOp, traced: Traced) -> Traced | None:
    """``traced`` with the results of another type than ``op``'s left out (None: all are):
    the decomposition computes them for the CPU (batch norm's saved statistics are [0]
    there and [C] on CUDA; the math path's attention weights where flash attention
    returns its log-sum-exp); the op is then only replaced where they are unused (see
    _splice)."""
    ret = traced.func.body.block.last_op
    assert isinstance(ret, ReturnOp)
    present = [i for i in range(len(op.results)) if i not in traced.absent]
    kept = [v.type == op.results[i].type for i, v in zip(present, ret.arguments, strict=True)]
    if not any(kept):
        return None
    if all(kept):
        return traced
    absent = sorted([*traced.absent, *(i for i, k in zip(present, kept, strict=True) if not k)])
    values = [v for v, k in zip(ret.arguments, kept, strict=True) if k]
    Rewriter.replace_op(ret, ReturnOp(*values))
    return Traced(traced.func, tuple(absent))


_SYMBOL_HINTS = (67, 71, 73, 79, 83, 89, 97, 101, 103, 107, 109, 113)
"""Example sizes for symbolic dims whose traced size is unknown (or 0 or 1, which PyTorch
specializes): distinct, not 0 or 1, and long for a heuristic that reads them (attention
of unknown length stays flash attention)."""


@dataclass(frozen=True)
class SymbolicDims:
    """The sizes to trace a decomposition at: per tensor operand, per dim, the static size
    or ``-1 - k`` for size symbol ``k``; and each symbol's example size. Dims the graph
    traced as the same size share a symbol (a query and key of one sequence length), so
    the decomposition may use their equality without a guard; each example size is the
    graph's traced size where known (``kiln.size_hints``), made distinct per symbol."""

    shapes: tuple[tuple[int, ...], ...]
    hints: tuple[int, ...]


def symbolic_dims(values: list[SSAValue]) -> SymbolicDims:
    """The :class:`SymbolicDims` of ``values`` (the op's tensor operands, in order)."""
    keys: dict[str, int] = {}
    hints: list[int] = []
    fallback = iter(_SYMBOL_HINTS)
    known = _known_hints(values)
    shapes: list[tuple[int, ...]] = []
    for n, value in enumerate(values):
        assert isinstance(value.type, TensorType)
        texts = _size_texts(value)
        dims: list[int] = []
        for i, d in enumerate(value.type.get_shape()):
            if d >= 0:
                dims.append(d)
                continue
            text = texts[i] if texts is not None and i < len(texts) else None
            key = text if text is not None else f"#{n}.{i}"  # unknown: a symbol of its own
            if key not in keys:
                keys[key] = len(hints)
                hint = _hint_of(text, known) if text is not None else None
                if hint is None or hint < 2:
                    hint = next(h for h in fallback if h not in hints)
                while hint in hints:
                    hint += 1
                hints.append(hint)
            dims.append(-1 - keys[key])
        shapes.append(tuple(dims))
    return SymbolicDims(tuple(shapes), tuple(hints))


def _size_texts(value: SSAValue) -> list[str | None] | None:
    """How the tracer spelled ``value``'s sizes: its defining op's ``kiln.traced_sizes``,
    or a function argument's ``kiln.size_symbols``."""
    if isinstance(value, OpResult):
        return traced_size_texts(value.op, value.index)
    if isinstance(value, BlockArgument):
        function = value.block.parent_op()
        if isinstance(function, FuncOp) and function.arg_attrs is not None:
            names = function.arg_attrs.data[value.index].data.get(SIZE_SYMBOLS_ATTR)
            if isinstance(names, ArrayAttr):
                return [n.data or None for n in names.data if isinstance(n, StringAttr)]
    return None


def _known_hints(values: list[SSAValue]) -> dict[str, int]:
    for value in values:
        op: Operation | None = None
        if isinstance(value, OpResult):
            op = value.op
        elif isinstance(value, BlockArgument):
            op = value.block.parent_op()
        while op is not None and not isinstance(op, FuncOp):
            op = op.parent_op()
        if op is not None:
            return size_hints(op)
    return {}


def _hint_of(text: str, known: dict[str, int]) -> int | None:
    try:
        expr = parse_expr(text)
    except ExprSyntaxError:
        return None
    if any(str(s) not in known for s in expr.free_symbols):
        return None
    value = expr.xreplace({s: sympy.Integer(known[str(s)]) for s in expr.free_symbols})
    return int(cast(sympy.Integer, value)) if value.is_Integer else None


def _examples(
    values: list[SSAValue],
    dims: SymbolicDims | None,
    device: str,
    pattern: tuple[tuple[int, ...], ...] | None = None,
    primes: tuple[int, ...] = size_generic.PRIMES,
) -> tuple[list[Any], Any]:
    """Example inputs for tracing on ``device``: empty tensors (fake ones off the CPU, so
    that no GPU is needed; with ``pattern``, fake ones of its sizes), or, with ``dims``,
    fake tensors of its size symbols (and the shape environment holding those symbols)."""
    import torch

    from kiln.dialects.aten.dtypes import type_to_dtype

    dtypes: list[torch.dtype] = []
    for value in values:
        ty = value.type
        assert isinstance(ty, TensorType)
        dtypes.append(type_to_dtype(ty.element_type))
    from torch._subclasses.fake_tensor import FakeTensorMode

    on_cpu = torch.device(device).type == "cpu"
    if dims is None:
        shapes = (
            size_generic.traced_shapes(pattern, primes)
            if pattern is not None
            else [list(cast(TensorType[Any], v.type).get_shape()) for v in values]
        )
        if on_cpu and pattern is None:
            return [torch.empty(s, dtype=d) for s, d in zip(shapes, dtypes, strict=True)], None
        with FakeTensorMode():
            fakes = [
                torch.empty(s, dtype=d, device=device) for s, d in zip(shapes, dtypes, strict=True)
            ]
        return fakes, None
    from torch._dynamo.source import ConstantSource
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv

    shape_env = ShapeEnv(duck_shape=False)
    symbols: list[Any] = []
    for k, hint in enumerate(dims.hints):
        source = ConstantSource(f"decompose_size_{k}")
        symbol = shape_env.create_symbol(hint, source, dynamic_dim=DimDynamic.DYNAMIC)
        symbols.append(shape_env.create_symintnode(symbol, hint=hint, source=source))
    examples: list[Any] = []
    with FakeTensorMode(shape_env=shape_env):
        for shape, dtype in zip(dims.shapes, dtypes, strict=True):
            sizes = [d if d >= 0 else symbols[-1 - d] for d in shape]
            examples.append(torch.empty(sizes, dtype=dtype, device=device))
    return examples, shape_env


def _is_same_op(candidate: Operation, op: AtenOp) -> bool:
    return isinstance(candidate, AtenOp) and candidate.overload_name == op.overload_name


def _splice(op: AtenOp, traced: Traced, rewriter: PatternRewriter) -> None:
    """Clone the traced body before ``op`` and replace ``op`` with what it returns."""
    if any(op.results[i].uses for i in traced.absent):
        return  # a result the decomposition does not compute is used: keep the op
    block: Block = traced.func.body.block
    operands = [v for vs in op.tensor_operands().values() for v in vs if v is not None]
    value_map: dict[SSAValue, SSAValue] = dict(zip(block.args, operands, strict=True))
    returned: list[SSAValue | None] = []
    clones: list[Operation] = []
    for inner in block.ops:
        if isinstance(inner, ReturnOp):
            values = iter(value_map.get(v, v) for v in inner.arguments)
            returned = [
                None if i in traced.absent else next(values) for i in range(len(op.results))
            ]
            break
        clone = inner.clone(value_mapper=value_map)
        clone.location = op.location
        clones.append(clone)
    _keep_traced_sizes(op, returned, clones)
    rewriter.replace(op, clones, returned)


def _keep_traced_sizes(
    op: AtenOp, returned: list[SSAValue | None], clones: list[Operation]
) -> None:
    """Give the ops that now compute ``op``'s results its ``kiln.traced_sizes`` (the
    body's own were its trace's symbols), so that what reads them next (a decomposition
    of a user, ``lower-aten``) still sees the graph's sizes."""
    if TRACED_SIZES_ATTR not in op.attributes:
        return
    cloned = set(clones)
    texts: dict[Operation, list[list[str]]] = {}
    for i, value in enumerate(returned):
        known = traced_size_texts(op, i)
        if not isinstance(value, OpResult) or value.op not in cloned or known is None:
            continue
        per_result = texts.setdefault(
            value.op,
            [
                [""] * len(cast(TensorType[Any], r.type).get_shape())
                if isinstance(r.type, TensorType)
                else []
                for r in value.op.results
            ],
        )
        if len(per_result[value.index]) == len(known):
            per_result[value.index] = [t or "" for t in known]
    for producer, per_result in texts.items():
        producer.attributes[TRACED_SIZES_ATTR] = ArrayAttr(
            [ArrayAttr([StringAttr(t) for t in dims]) for dims in per_result]
        )
