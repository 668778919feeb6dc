"""Canonicalization patterns for aten ops, dispatched on the op name through one dict.

Every generated aten op carries :class:`~kiln.dialects.aten.ops.AtenCanonicalization`,
whose only pattern is :class:`AtenCanonicalizationPattern`: it looks the op name up in
``_REWRITES`` and runs that rewrite, so canonicalizing costs one dict lookup per op
however many rewrites exist (trying N patterns in turn costs N matches per op).

Every rewrite here is exact in eager PyTorch: same values, and the same aliasing and
strides, because kiln's IR does not record strides and a consumer such as ``view`` or a
graph output can observe them. That is why ``clone(x)`` is only dropped when ``x`` is a
fresh single-use result, and why ``x + 0`` is left alone (``-0.0 + 0 == +0.0``).

```mlir
%1 = aten.view.default(%0, size = [32]) : (tensor<8x4xf32>) -> tensor<32xf32>
// when %0 = aten.view.default(%x, ...): view(view(x)) -> view(x)
%1 = aten.view.default(%x, size = [32]) : (tensor<4x8xf32>) -> tensor<32xf32>
```

==========================================  ==========================================
pattern                                     result
==========================================  ==========================================
view / _unsafe_view / reshape to x's shape  x
view(view(x, s1), s2)                       view(x, s2) (also with ``_unsafe_view``)
expand to x's shape                         x
alias(x), detach(x)                         x
permute(x, identity)                        x
permute(permute(x, p), q)                   permute(x, p∘q), or x if that is the identity
transpose.int(x, d, d)                      x
t(t(x)), t(x) for rank < 2                  x
squeeze.dim(x, d), x.shape[d] != 1          x
squeeze.dim(unsqueeze(x, d), d)             x
unsqueeze(squeeze.dim(x, d), d), size 1     x
slice.Tensor over the whole dim             x
to.dtype(x, x's dtype) without copy         x
dropout(x, p, train=false), or p == 0       x
clone(y) / _to_copy(y, same dtype)          y, when y is a fresh single-use aten result
clone(clone(x))                             clone(x)
contiguous(contiguous(x))                   contiguous(x)
==========================================  ==========================================
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache

from xdsl.dialects.builtin import (
    DenseArrayBase,
    FloatAttr,
    IntegerAttr,
    StringAttr,
    TensorType,
)
from xdsl.ir import Attribute, Operation, OpResult, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from kiln.dialects.aten.ops import AtenOp, GenericOp
from kiln.dialects.aten.shapes import static_shape

Rewrite = Callable[[AtenOp, PatternRewriter], None]

INT64_MAX = 2**63 - 1


# --- reading the IR -------------------------------------------------------------------


def _self(op: Operation) -> SSAValue:
    """The ``self`` tensor: the first operand of every op handled here."""
    return op.operands[0]


def _rank(value: SSAValue) -> int | None:
    ty = value.type
    return ty.get_num_dims() if isinstance(ty, TensorType) else None


def _int(op: Operation, name: str, default: int | None) -> int | None:
    """A static int argument; None when symbolic or absent without a default."""
    attr = op.properties.get(name)
    if attr is None:
        return default
    if isinstance(attr, IntegerAttr):
        return attr.value.data
    return None


def _ints(op: Operation, name: str) -> list[int] | None:
    attr = op.properties.get(name)
    if isinstance(attr, DenseArrayBase):
        return [int(v) for v in attr.get_values()]  # pyright: ignore[reportUnknownVariableType, reportUnknownMemberType, reportUnknownArgumentType]
    return None


def _float(op: Operation, name: str) -> float | None:
    attr = op.properties.get(name)
    if isinstance(attr, FloatAttr | IntegerAttr):
        return float(attr.value.data)  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
    return None


def _bool(op: Operation, name: str, default: bool) -> bool:
    attr = op.properties.get(name)
    if isinstance(attr, IntegerAttr):
        return bool(attr.value.data)
    return default


def _only_props(op: Operation, allowed: Sequence[str]) -> bool:
    """The op stores no argument besides ``allowed`` (absent means the default)."""
    return all(name in allowed for name in op.properties)


def _preserves_format(op: Operation) -> bool:
    attr = op.properties.get("memory_format")
    return attr is None or (isinstance(attr, StringAttr) and attr.data == "preserve_format")


def _element_type(value: SSAValue) -> Attribute | None:
    ty = value.type
    return ty.element_type if isinstance(ty, TensorType) else None


def _norm_dim(dim: int, rank: int) -> int | None:
    wrapped = dim + rank if dim < 0 else dim
    return wrapped if 0 <= wrapped < max(rank, 1) else None


def _producer(value: SSAValue, *names: str) -> AtenOp | None:
    """The op defining ``value`` when it is one of the aten ops ``names``."""
    owner = value.owner
    if isinstance(owner, AtenOp) and owner.name in names:
        return owner
    return None


def _is_fresh_single_use(value: SSAValue) -> bool:
    """``value`` is a new tensor that nothing else reads.

    It is produced by a generated aten op whose schema gives that result its own
    storage (no alias annotation such as ``Tensor(a)``), and has no other use. Such a
    tensor is dense with the strides its producer chose, so a ``clone`` of it adds
    nothing observable.
    """
    if not isinstance(value, OpResult) or not value.has_one_use():
        return False
    owner = value.op
    if not isinstance(owner, AtenOp) or isinstance(owner, GenericOp):
        return False
    if owner.name in _MAY_BE_NON_DENSE:
        return False
    returns = owner.op_schema().returns
    if len(returns) == 1:
        type_str = returns[0].type_str
    elif value.index < len(returns):
        type_str = returns[value.index].type_str
    else:
        return False
    return "(" not in type_str


_MAY_BE_NON_DENSE = frozenset({"aten.empty_strided.default"})


# --- rewriting ---------------------------------------------------------------------------


def _forward(op: AtenOp, value: SSAValue, rewriter: PatternRewriter) -> None:
    """Replace ``op``'s only result by ``value`` (when the types agree exactly)."""
    if op.results[0].type == value.type:
        rewriter.replace(op, [], [value])


def _with_self(op: AtenOp, value: SSAValue, rewriter: PatternRewriter) -> None:
    """Replace ``op`` by a copy that reads ``value`` instead of its ``self``."""
    new = op.clone()
    new.operands = (value, *new.operands[1:])
    rewriter.replace(op, new)


# --- the rewrites, one per op -----------------------------------------------------------

_VIEWS = ("aten.view.default", "aten._unsafe_view.default")


def _view(op: AtenOp, rewriter: PatternRewriter) -> None:
    x = _self(op)
    shape = static_shape(x)
    if shape is not None and shape == static_shape(op.results[0]):
        _forward(op, x, rewriter)
        return
    # Both are views: the result maps each logical index to the same address as x.
    if (inner := _producer(x, *_VIEWS)) is not None:
        _with_self(op, _self(inner), rewriter)


def _reshape(op: AtenOp, rewriter: PatternRewriter) -> None:
    x = _self(op)
    shape = static_shape(x)
    if shape is not None and shape == static_shape(op.results[0]):
        _forward(op, x, rewriter)


def _expand(op: AtenOp, rewriter: PatternRewriter) -> None:
    x = _self(op)
    shape = static_shape(x)
    if shape is not None and shape == static_shape(op.results[0]):
        _forward(op, x, rewriter)


def _identity(op: AtenOp, rewriter: PatternRewriter) -> None:
    _forward(op, _self(op), rewriter)


def _permute(op: AtenOp, rewriter: PatternRewriter) -> None:
    x = _self(op)
    rank = _rank(x)
    dims = _ints(op, "dims")
    if rank is None or dims is None or len(dims) != rank:
        return
    perm = [_norm_dim(d, rank) for d in dims]
    if any(p is None for p in perm):
        return
    if perm == list(range(rank)):
        _forward(op, x, rewriter)
        return
    inner = _producer(x, "aten.permute.default")
    inner_dims = None if inner is None else _ints(inner, "dims")
    if inner is None or inner_dims is None:
        return
    source = _self(inner)
    inner_perm = [_norm_dim(d, rank) for d in inner_dims]
    if len(inner_perm) != rank or any(p is None for p in inner_perm):
        return
    # out.dim(k) = x.dim(perm[k]) = source.dim(inner_perm[perm[k]])
    composed = [inner_perm[p] for p in perm]  # pyright: ignore[reportArgumentType, reportCallIssue]
    if composed == list(range(rank)):
        _forward(op, source, rewriter)
        return
    new = type(op).from_args({"self": source, "dims": composed}, [op.results[0].type])
    rewriter.replace(op, new)


def _transpose(op: AtenOp, rewriter: PatternRewriter) -> None:
    rank = _rank(_self(op))
    dim0, dim1 = _int(op, "dim0", None), _int(op, "dim1", None)
    if rank is None or dim0 is None or dim1 is None:
        return
    if _norm_dim(dim0, rank) is not None and _norm_dim(dim0, rank) == _norm_dim(dim1, rank):
        _forward(op, _self(op), rewriter)


def _t(op: AtenOp, rewriter: PatternRewriter) -> None:
    rank = _rank(_self(op))
    if rank is not None and rank < 2:
        _forward(op, _self(op), rewriter)  # t of a 0-D or 1-D tensor returns it as is
        return
    if (inner := _producer(_self(op), "aten.t.default")) is not None:
        _forward(op, _self(inner), rewriter)


def _squeeze_dim(op: AtenOp, rewriter: PatternRewriter) -> None:
    x = _self(op)
    rank = _rank(x)
    dim = _int(op, "dim", None)
    if rank is None or dim is None or (d := _norm_dim(dim, rank)) is None:
        return
    shape = static_shape(x)
    if rank == 0 or (shape is not None and shape[d] != 1):
        _forward(op, x, rewriter)  # squeezing a dim that is not 1 is a no-op view
        return
    inner = _producer(x, "aten.unsqueeze.default")
    inner_dim = None if inner is None else _int(inner, "dim", None)
    if inner is not None and inner_dim is not None and _norm_dim(inner_dim, rank) == d:
        _forward(op, _self(inner), rewriter)


def _unsqueeze(op: AtenOp, rewriter: PatternRewriter) -> None:
    rank = _rank(op.results[0])
    dim = _int(op, "dim", None)
    inner = _producer(_self(op), "aten.squeeze.dim")
    if rank is None or dim is None or inner is None:
        return
    source = _self(inner)
    inner_dim = _int(inner, "dim", None)
    shape = static_shape(source)
    if inner_dim is None or shape is None or _rank(source) != rank:
        return
    d = _norm_dim(dim, rank)
    if d is not None and d == _norm_dim(inner_dim, rank) and shape[d] == 1:
        _forward(op, source, rewriter)


def _slice(op: AtenOp, rewriter: PatternRewriter) -> None:
    x = _self(op)
    shape = static_shape(x)
    rank = _rank(x)
    dim = _int(op, "dim", 0)
    if shape is None or rank is None or rank == 0 or dim is None:
        return
    if (d := _norm_dim(dim, rank)) is None:
        return
    start = _int(op, "start", 0)
    end = _int(op, "end", INT64_MAX)
    step = _int(op, "step", 1)
    if start == 0 and step == 1 and end is not None and end >= shape[d]:
        _forward(op, x, rewriter)


def _to_dtype(op: AtenOp, rewriter: PatternRewriter) -> None:
    # Tensor.to returns self itself when nothing changes and no copy is asked for.
    x = _self(op)
    if (
        not _bool(op, "copy", False)
        and "memory_format" not in op.properties
        and op.properties.get("dtype") == _element_type(x)
    ):
        _forward(op, x, rewriter)


def _dropout(op: AtenOp, rewriter: PatternRewriter) -> None:
    # ATen returns the input itself (no random numbers drawn) when not training or p == 0.
    if not _bool(op, "train", True) or _float(op, "p") == 0.0:
        _forward(op, _self(op), rewriter)


def _clone(op: AtenOp, rewriter: PatternRewriter) -> None:
    if not _preserves_format(op):
        return
    x = _self(op)
    if _is_fresh_single_use(x):
        _forward(op, x, rewriter)
        return
    # clone(clone(x)): the inner clone is already a fresh tensor with clone's strides.
    inner = _producer(x, "aten.clone.default")
    if inner is not None and _preserves_format(inner):
        _with_self(op, _self(inner), rewriter)


def _to_copy(op: AtenOp, rewriter: PatternRewriter) -> None:
    x = _self(op)
    if not _only_props(op, ("dtype", "non_blocking")):
        return
    dtype = op.properties.get("dtype")
    if (dtype is None or dtype == _element_type(x)) and _is_fresh_single_use(x):
        _forward(op, x, rewriter)


def _contiguous(op: AtenOp, rewriter: PatternRewriter) -> None:
    inner = _producer(_self(op), "aten.contiguous.default")
    if inner is not None and inner.properties == op.properties:
        _forward(op, _self(op), rewriter)


_REWRITES: dict[str, Rewrite] = {
    "aten.view.default": _view,
    "aten._unsafe_view.default": _view,
    "aten.reshape.default": _reshape,
    "aten.expand.default": _expand,
    "aten.alias.default": _identity,
    "aten.detach.default": _identity,
    "aten.permute.default": _permute,
    "aten.transpose.int": _transpose,
    "aten.t.default": _t,
    "aten.squeeze.dim": _squeeze_dim,
    "aten.unsqueeze.default": _unsqueeze,
    "aten.slice.Tensor": _slice,
    "aten.to.dtype": _to_dtype,
    "aten.dropout.default": _dropout,
    "aten.clone.default": _clone,
    "aten._to_copy.default": _to_copy,
    "aten.contiguous.default": _contiguous,
}


class AtenCanonicalizationPattern(RewritePattern):
    """Runs the rewrite registered for the op's name, if any (one dict lookup)."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /) -> None:
        rewrite = _REWRITES.get(op.name)
        if rewrite is not None and isinstance(op, AtenOp):
            rewrite(op, rewriter)


@cache
def canonicalization_patterns() -> tuple[RewritePattern, ...]:
    """The patterns :class:`~kiln.dialects.aten.ops.AtenCanonicalization` hands to xDSL."""
    return (AtenCanonicalizationPattern(),)


def canonicalized_ops() -> frozenset[str]:
    """Names of the aten ops that have a canonicalization."""
    return frozenset(_REWRITES)
