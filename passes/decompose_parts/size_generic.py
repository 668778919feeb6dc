"""``decompose``'s size-generic traces: one trace of a decomposition for every size.

Tracing a decomposition costs ~5 ms on fake tensors and ~50 ms on symbolic ones (torch
2.13, the 2-core VM), and a CNN has the same op at many sizes: MobileNet-v3 traced
``hardswish`` ten times and inference batch norm seventeen, once per channel count, 1.3
s of its ``dynamic=True`` compile. For ops whose decomposition computes the same
graph whatever the sizes (elementwise ops, inference batch norm), ``decompose`` traces
once per *size pattern* instead: each operand dim becomes a distinct large prime per
distinct size (``1`` stays ``1``: it broadcasts), the op is traced on fake tensors of
those sizes, and the body is given each use's real sizes (static or symbolic) by
mapping the primes back (``with_sizes``).

A body that read a size shows it: a prime, or a multiple of one, in an op's arguments
(``view(x, [1009, 1013])``) or in a type that is not a traced dim (a flattened
``1009*1013``): such a body is not size-generic (``is_size_generic``), and the op is
traced at its own sizes as before. What cannot show is a decomposition that branches on
a size; hence only the ops listed here, whose decompositions do not.

**Lifted sizes.** A few ops' decompositions do read sizes into their arguments (CPU
attention views ``[B * H, L, E]``) but branch on none. With symbolic sizes, the symbolic
trace they took cost 0.9 s for CPU attention (``make_fx`` in symbolic mode), a third of
OPT's ``dynamic=True`` compile. They are traced on fake tensors instead, each symbol a
prime (static sizes stay), and every argument that is a product of those primes becomes
the product of the sizes read from the inputs (``lift_sizes``: ``aten.sym_size.int``
and ``operator.mul`` nodes, as a symbolic trace writes them). Whatever else of a size
the body holds (a float such as ``1 / sqrt(E)``, a ``size - 1``) cannot show as a
prime; so the op is traced twice, at two sets of primes, and the lifted graphs must be
the same (``same_graph``), or the symbolic trace is taken as before.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from xdsl.dialects.builtin import DYNAMIC_INDEX, IndexType, TensorType
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.rewriter import Rewriter

from kiln.dialects.aten import AtenOp
from kiln.dialects.aten.size_symbols import TRACED_SIZES_ATTR
from kiln.dialects.aten.traits import Pointwise, has_aten_trait

if TYPE_CHECKING:
    import torch

PRIMES = (1009, 1013, 1019, 1021, 1031, 1033, 1039, 1049, 1051, 1061, 1063, 1069, 1087, 1091)
"""The traced sizes of a size pattern's distinct dims: primes no decomposition writes
itself, so that a size baked into the body shows."""

_UNTAGGED_ELEMENTWISE = frozenset(
    {
        "elu_backward",
        "hardsigmoid_backward",
        "hardswish",
        "hardswish_backward",
        "hardtanh_backward",
        "infinitely_differentiable_gelu_backward",
        "leaky_relu_backward",
        "mish_backward",
        "softplus_backward",
    }
)
"""Elementwise ops torch does not tag ``pointwise`` (their ``default`` overloads)."""

_SIZE_GENERIC = frozenset({"_native_batch_norm_legit_no_training"})
"""Other ops whose decompositions do not branch on sizes (their ``default`` overloads;
batch norm in training divides by a baked element count: not here)."""

OTHER_PRIMES = (1093, 1097, 1103, 1109, 1117, 1123, 1129, 1151, 1153, 1163, 1171, 1181, 1187, 1193)
"""The second set of primes a lifted-size body is traced at (see the module docstring)."""

_LIFTS_SIZES = frozenset({"_scaled_dot_product_flash_attention_for_cpu"})
"""Ops whose decompositions read sizes into their arguments but branch on no size,
only on ranks, dtypes and whether two head counts differ (reviewed, torch 2.11-2.13:
the decomposition's checks and ``_scaled_dot_product_attention_math``, whose
``matmul`` folds by rank): traced with lifted sizes (module docstring)."""

_INTEGER = re.compile(r"\d+")


def _default_aten_name(op: Operation) -> str | None:
    if not isinstance(op, AtenOp):
        return None
    schema = op.op_schema()
    if schema.namespace != "aten" or schema.overload != "default":
        return None
    return schema.name


def applies(op: AtenOp) -> bool:
    """Whether ``op``'s decomposition is traced once per size pattern."""
    if has_aten_trait(op, Pointwise):
        return True
    name = _default_aten_name(op)
    return name in _UNTAGGED_ELEMENTWISE or name in _SIZE_GENERIC


def lifts_sizes(op: AtenOp) -> bool:
    """Whether ``op``'s decomposition is traced with lifted sizes at symbolic sizes."""
    return _default_aten_name(op) in _LIFTS_SIZES


def size_pattern(shapes: Sequence[tuple[int, ...]]) -> tuple[tuple[int, ...], ...] | None:
    """Per operand, per dim: ``1`` for a size-1 dim, else ``-1 - k`` for the ``k``-th
    distinct size (``shapes``: static sizes, or ``-1 - s`` for symbol ``s`` as
    ``decompose``'s ``SymbolicDims`` numbers them, so symbols are told from sizes).
    None: an empty dim, or more distinct sizes than :data:`PRIMES`."""
    classes: dict[int, int] = {}
    pattern: list[tuple[int, ...]] = []
    for shape in shapes:
        dims: list[int] = []
        for d in shape:
            if d == 0:
                return None
            if d == 1:
                dims.append(1)
                continue
            key = d if d > 0 else -(10**9) + d  # a symbol never equals a static size
            if key not in classes:
                if len(classes) == len(PRIMES):
                    return None
                classes[key] = len(classes)
            dims.append(-1 - classes[key])
        pattern.append(tuple(dims))
    return tuple(pattern)


def traced_shapes(
    pattern: tuple[tuple[int, ...], ...], primes: Sequence[int] = PRIMES
) -> list[list[int]]:
    """The sizes to trace ``pattern`` at."""
    return [[d if d >= 0 else primes[-1 - d] for d in dims] for dims in pattern]


def real_sizes(
    pattern: tuple[tuple[int, ...], ...], shapes: Sequence[tuple[int, ...]]
) -> dict[int, int]:
    """Each traced prime's size in ``shapes`` (static, or ``DYNAMIC_INDEX``: symbolic)."""
    sizes: dict[int, int] = {}
    for dims, shape in zip(pattern, shapes, strict=True):
        for d, real in zip(dims, shape, strict=True):
            if d < 0:
                sizes[PRIMES[-1 - d]] = real if real >= 0 else DYNAMIC_INDEX
    return sizes


def _baked(value: int, primes: Sequence[int]) -> bool:
    value = abs(value)
    return value >= primes[0] and any(value % p == 0 for p in primes) if primes else False


def is_size_generic(
    func: FuncOp, pattern: tuple[tuple[int, ...], ...], *, lifted: bool = False
) -> bool:
    """Whether the body traced at ``pattern`` holds for every size: every dim of its
    tensors is a traced prime or a constant of its own (``lifted``: or a product of
    primes, and sizes are ``index`` values), and no argument of its ops holds a prime or
    a multiple of one."""
    primes = _primes_of(pattern)
    for inner in func.body.block.ops:
        if isinstance(inner, ReturnOp):
            continue
        for result in inner.results:
            if lifted and isinstance(result.type, IndexType):
                continue
            if not isinstance(result.type, TensorType):
                return False
            if lifted:
                continue
            if any(d not in primes and _baked(d, primes) for d in result.type.get_shape()):
                return False
        texts = (*map(str, inner.properties.values()), *map(str, inner.attributes.values()))
        for text in texts:
            if any(_baked(int(m), primes) for m in _INTEGER.findall(text)):
                return False
    return True


def with_sizes(func: FuncOp, sizes: dict[int, int]) -> FuncOp:
    """A copy of a size-generic body with each traced prime replaced by its real size."""
    return _resized(func, lambda d: sizes.get(d, d))


def _resized(func: FuncOp, size_of: Callable[[int], int]) -> FuncOp:
    """A copy of a traced body with each dim ``d`` of its tensors ``size_of(d)`` (and
    the trace's own sizes dropped)."""
    func = func.clone()
    values: list[SSAValue] = [*func.body.block.args]
    for inner in func.body.block.ops:
        values.extend(inner.results)
        inner.attributes.pop(TRACED_SIZES_ATTR, None)
    for value in values:
        ty = value.type
        if isinstance(ty, TensorType):
            shape = [size_of(d) for d in ty.get_shape()]
            if shape != list(ty.get_shape()):
                Rewriter.replace_value_with_new_type(value, TensorType(ty.element_type, shape))
    func.update_function_type()
    return func


def _primes_of(pattern: tuple[tuple[int, ...], ...]) -> tuple[int, ...]:
    return PRIMES[: max((-d for dims in pattern for d in dims if d < 0), default=0)]


def lifted_pattern(shapes: Sequence[tuple[int, ...]]) -> tuple[tuple[int, ...], ...] | None:
    """The pattern a lifted-size trace is made at for ``shapes`` (``decompose``'s
    ``SymbolicDims``: static sizes, ``-1 - k`` for symbol ``k``): the shapes themselves,
    symbols traced as primes. None: more symbols than primes, or a static size that a
    product of primes could be mistaken for."""
    pattern = tuple(tuple(shape) for shape in shapes)
    count = max((-d for dims in pattern for d in dims if d < 0), default=0)
    if count > len(PRIMES):
        return None
    both = (*PRIMES[:count], *OTHER_PRIMES[:count])
    if any(d >= 0 and _baked(d, both) for dims in pattern for d in dims):
        return None
    return pattern


def lift_sizes(
    gm: torch.fx.GraphModule, pattern: tuple[tuple[int, ...], ...], primes: Sequence[int]
) -> bool:
    """Replace each argument of ``gm``'s calls that is a product of ``primes`` (the trace's
    symbolic sizes, ``pattern``'s symbols) by the product of the input sizes it stands
    for, read with ``aten.sym_size.int``. False: ``gm`` holds what cannot be told apart
    from a size this way (a tensor constant)."""
    import operator

    import torch
    from torch.fx.node import map_aggregate

    graph = gm.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(pattern) or any(n.op == "get_attr" for n in graph.nodes):
        return False
    used = primes[: len(_primes_of(pattern))]
    source: dict[int, tuple[torch.fx.Node, int]] = {}
    for node, dims in zip(placeholders, pattern, strict=True):
        for i, d in enumerate(dims):
            if d < 0:
                source.setdefault(primes[-1 - d], (node, i))
    first = next(n for n in graph.nodes if n.op != "placeholder")
    sizes: dict[int, torch.fx.Node] = {}

    def size_of(prime: int) -> torch.fx.Node:
        if prime not in sizes:
            node, dim = source[prime]
            with graph.inserting_before(first):
                read = graph.call_function(torch.ops.aten.sym_size.int, (node, dim))
            read.meta["val"] = prime
            sizes[prime] = read
        return sizes[prime]

    def times(a: torch.fx.Node, b: torch.fx.Node | int) -> torch.fx.Node:
        product = graph.call_function(operator.mul, (a, b))
        product.meta["val"] = a.meta["val"] * (b if isinstance(b, int) else b.meta["val"])
        return product

    for node in list(graph.nodes):  # the trace's own nodes: the reads and products come after
        if node.op != "call_function":
            continue

        def lift(value: Any, node: torch.fx.Node = node) -> Any:
            if type(value) is not int or not _baked(value, used):
                return value
            rest, term = value, None
            with graph.inserting_before(node):
                for prime in used:
                    while rest % prime == 0:
                        rest //= prime
                        term = size_of(prime) if term is None else times(term, size_of(prime))
                assert term is not None
                return term if rest == 1 else times(term, rest)

        node.args = map_aggregate(node.args, lift)
        node.kwargs = map_aggregate(node.kwargs, lift)
    graph.lint()
    return True


def same_graph(a: torch.fx.GraphModule, b: torch.fx.GraphModule) -> bool:
    """Whether two lifted traces are one program: the same calls with the same arguments
    (nodes by name)."""
    import torch
    from torch.fx.node import map_aggregate

    def named(value: Any) -> Any:
        return ("node", value.name) if isinstance(value, torch.fx.Node) else value

    def calls(gm: torch.fx.GraphModule) -> list[tuple[Any, ...]]:
        return [
            (n.op, n.name, n.target, map_aggregate(n.args, named), map_aggregate(n.kwargs, named))
            for n in gm.graph.nodes
        ]

    return calls(a) == calls(b)


def with_lifted_sizes(func: FuncOp, pattern: tuple[tuple[int, ...], ...]) -> FuncOp:
    """A copy of a lifted-size body with each traced size, or product of them, symbolic."""
    primes = _primes_of(pattern)
    return _resized(func, lambda d: DYNAMIC_INDEX if _baked(d, primes) else d)


def pattern_key(op: AtenOp, pattern: tuple[tuple[int, ...], ...]) -> tuple[Any, ...]:
    """What a size-generic trace depends on besides ``op``'s arguments: its overload and
    types with sizes replaced by ``pattern`` (result types by rank and element type)."""

    def element(ty: Attribute) -> str:
        if isinstance(ty, TensorType):
            return f"{len(ty.get_shape())}:{ty.element_type}"
        return str(ty)

    return (
        "size-generic",
        op.overload_name,
        pattern,
        tuple(element(t) for t in op.operand_types),
        tuple(element(t) for t in op.result_types),
    )


__all__ = [
    "OTHER_PRIMES",
    "PRIMES",
    "applies",
    "is_size_generic",
    "lift_sizes",
    "lifted_pattern",
    "lifts_sizes",
    "pattern_key",
    "real_sizes",
    "same_graph",
    "size_pattern",
    "traced_shapes",
    "with_lifted_sizes",
    "with_sizes",
]
