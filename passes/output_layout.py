"""``output-layout``: return tensors with the strides eager PyTorch gives them.

kiln's buffers are contiguous, but eager returns ``x.t() * 2`` with the transposed
strides of ``x`` (TensorIterator keeps the input's layout), and code after a compiled
region may depend on them (``.view`` succeeds or fails by strides). The importer records
eager's strides of each output (``kiln.output_strides``); for an output whose strides
are a dense permutation of a contiguous layout, this pass returns the permuted tensor
instead (materialised contiguous, usually by the kernel that computes it: the permute
costs nothing) and records in ``kiln.outputs`` that the caller sees it through the
inverse permutation, a view with exactly eager's strides::

    func.func @f(%x: tensor<4x8xf32>) -> tensor<8x4xf32>
        attributes {kiln.outputs = "(0,)", kiln.output_strides = [[1, 8]]} {
      %t = aten.t.default(%x) : (tensor<4x8xf32>) -> tensor<8x4xf32>
      %y = aten.mul.Scalar(%t, other = 2) : (tensor<8x4xf32>) -> tensor<8x4xf32>
      func.return %y : tensor<8x4xf32>
    }

becomes::

    func.func @f(%x: tensor<4x8xf32>) -> tensor<4x8xf32>
        attributes {kiln.outputs = "(permute(0, (1, 0)),)"} {
      ...
      %0 = aten.permute.default(%y, dims = [1, 0]) : (tensor<8x4xf32>) -> tensor<4x8xf32>
      func.return %0 : tensor<4x8xf32>
    }

Outputs that are function arguments, have symbolic sizes or overlapping / non-dense
strides are returned contiguous, as before.

An output that is a view of another output (``y = x + 1; return y, y.view(-1)``) must
share its storage, as in eager: writing ``y`` in place after the call changes the view.
kiln's buffers would hold it as a separate copy, so such an output is instead returned as
the other output seen through the same ATen view ops, replayed on it at run time
(``alias("aten::view.default", 0, "{'size': [-1]}")`` in ``kiln.outputs``, with the
result index as a fourth argument for list-returning views such as split; see
:mod:`kiln.dialects.aten.fx.outputs`), and the copy is not computed. Views whose arguments
are symbolic, or not Python literals, stay copies. (Outputs that alias graph *inputs* are
AOTAutograd's to regenerate; this handles aliases between outputs, which are the
compiler's job.)
"""

from __future__ import annotations

import ast
import itertools
import math
from collections.abc import Sequence
from copy import deepcopy
from dataclasses import dataclass

import torch
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr, TensorType
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import BlockArgument, OpResult, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from kiln.dialects.aten.dialect import op_class
from kiln.dialects.aten.encoding import collect_sym_refs, decode_value
from kiln.dialects.aten.function_attrs import (
    OUTPUT_STRIDES_ATTR,
    OUTPUTS_ATTR,
    contiguous_strides,
    output_strides,
)
from kiln.dialects.aten.ops import AtenOp, returns_tensor_list
from kiln.dialects.aten.result_layout import stride_order, with_unit_dims
from kiln.dialects.aten.shapes import static_shape
from kiln.dialects.aten.traits import AliasingView, has_aten_trait
from kiln.output_structure import replay_view, structure_builder


def _inverse(order: Sequence[int]) -> tuple[int, ...]:
    inverse = [0] * len(order)
    for position, dim in enumerate(order):
        inverse[dim] = position
    return tuple(inverse)


class _Rewrap(ast.NodeTransformer):
    """Wraps leaf ``k`` of a ``kiln.outputs`` expression in ``permute(k, dims)``."""

    def __init__(self, dims: dict[int, tuple[int, ...]]) -> None:
        self.dims = dims

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        if type(node.value) is int and node.value in self.dims:
            dims = ast.Tuple([ast.Constant(d) for d in self.dims[node.value]], ast.Load())
            return ast.Call(ast.Name("permute", ast.Load()), [node, dims], [])
        return node


def _literal_arguments(op: AtenOp) -> str | None:
    """The op's non-tensor arguments as the text of a Python dict literal (None when one
    is symbolic or has no literal, such as a dtype)."""
    arguments: dict[str, object] = {}
    for spec in op.op_schema().arguments:
        if spec.kind.is_tensor:
            continue
        attr = op.arg_attr(spec.name)
        if attr is None:
            continue
        if collect_sym_refs(attr):
            return None
        value = decode_value(spec, attr, ())
        try:
            if ast.literal_eval(repr(value)) != value:
                return None
        except (ValueError, SyntaxError):
            return None
        arguments[spec.name] = value
    return repr(arguments)


# One view op of a chain: its overload, its literal arguments, and which of its results
# (None for an op returning one tensor; split/unbind return a list of views, of one
# piece too: ``split(x, 1, dim)`` of a size-1 dim).
ViewCall = tuple[str, str, int | None]


def view_chain(value: SSAValue) -> tuple[SSAValue, list[ViewCall]]:
    """The value ``value`` is a view of (through ATen view ops with literal arguments),
    and those ops, outermost first."""
    calls: list[ViewCall] = []
    while True:
        op = value.owner
        if not isinstance(op, AtenOp) or op.sym_operands() or not has_aten_trait(op, AliasingView):
            return value, calls
        tensors = [v for vs in op.tensor_operands().values() for v in vs if v is not None]
        arguments = _literal_arguments(op)
        if len(tensors) != 1 or arguments is None:
            return value, calls
        assert isinstance(value, OpResult)
        # split/unbind return a list even of one piece: which one is returned, always
        listed = returns_tensor_list(op.op_schema())
        piece = value.index if listed or len(op.results) > 1 else None
        calls.append((op.overload_name, arguments, piece))
        value = tensors[0]


def alias_expr(base: int, calls: Sequence[ViewCall]) -> ast.expr:
    node: ast.expr = ast.Constant(base)
    for overload, arguments, result in reversed(calls):
        args: list[ast.expr] = [ast.Constant(overload), node, ast.Constant(arguments)]
        if result is not None:
            args.append(ast.Constant(result))
        node = ast.Call(ast.Name("alias", ast.Load()), args, [])
    return node


class _Substitute(ast.NodeTransformer):
    """Replaces leaf ``k`` of a ``kiln.outputs`` expression by ``exprs[k]`` (whose base
    is never itself an alias: it is a chain's root)."""

    def __init__(self, exprs: dict[int, ast.expr]) -> None:
        self.exprs = exprs

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        if type(node.value) is int and node.value in self.exprs:
            return self.exprs[node.value]
        return node


def _replays_eager_strides(
    root: SSAValue, calls: Sequence[ViewCall], recorded: Sequence[int] | None
) -> bool:
    """Whether the view chain ``calls`` replayed on ``root`` returned contiguous gives a
    tensor of ``root``'s size with eager's strides ``recorded``: then returning ``root``
    and the view costs nothing, where a copy of the view costs a kernel (a transposed
    matmul result that the forward saves for the backward: ``addmm(...).view(1, 32, 4,
    32).transpose(1, 2)``)."""
    ty = root.type
    if recorded is None or not isinstance(ty, TensorType):
        return False
    shape = list(ty.get_shape())
    if any(d < 0 for d in shape):
        return False
    from kiln.output_structure import replay_view

    view = torch.empty(shape, dtype=torch.float32, device="meta")
    try:
        for overload, arguments, result in reversed(calls):
            view = replay_view(view, overload, arguments, result)
    except Exception:  # a view torch rejects here is left as it was: a copy
        return False
    # The same element count: a view of part of its base would keep all of it alive.
    return view.numel() == math.prod(shape) and tuple(view.stride()) == tuple(recorded)


def _aliases(
    values: list[SSAValue], strided: set[int], recorded: Sequence[Sequence[int] | None]
) -> dict[int, ast.expr]:
    """Outputs that are views of a tensor another output is, or is a view of, as
    ``alias(...)`` expressions over that tensor's index. A base no output returns as is
    is appended to ``values`` (returned, but reached only through the aliases). The
    outputs in ``strided`` (eager's strides neither contiguous nor a dense permutation:
    an ``expand``, a stepped slice) are such views even when they are their base's only
    one: the view replayed on the base has eager's strides, a copy would be contiguous.
    So is the only view of a base that, replayed on the base, gives eager's strides over
    all of it (:func:`_replays_eager_strides`): no copy at all."""
    returned: dict[SSAValue, int] = {}
    for k, value in enumerate(values):
        returned.setdefault(value, k)
    groups: dict[SSAValue, list[tuple[int, list[ViewCall]]]] = {}
    for k, value in enumerate(values):
        # A view returned twice (``v = y.unsqueeze(2); return v, v.contiguous(...)``,
        # where eager's contiguous returns ``v``): two views of one base, every place.
        if isinstance(value.type, TensorType):
            root, calls = view_chain(value)
            if calls and not isinstance(root, BlockArgument):  # inputs: AOTAutograd's job
                groups.setdefault(root, []).append((k, calls))
    exprs: dict[int, ast.expr] = {}
    for root, views in groups.items():
        base = returned.get(root)
        if base is None:
            only, calls = views[0]
            if (
                len(views) < 2
                and only not in strided
                and not _replays_eager_strides(root, calls, recorded[only])
            ):
                continue  # the only view of its base, which a copy lays out as eager
            base = len(values)
            values.append(root)
        for k, calls in views:
            exprs[k] = alias_expr(base, calls)
    return exprs


def _apply(func: FuncOp) -> None:
    strides = output_strides(func)
    ret = func.body.block.last_op
    structure = func.attributes.get(OUTPUTS_ATTR)
    if not isinstance(ret, ReturnOp) or not isinstance(structure, StringAttr):
        return
    permute_class = op_class("permute.default")
    assert permute_class is not None
    views: dict[int, tuple[int, ...]] = {}
    values = list(ret.arguments)
    n_outputs = len(values)
    strided = {
        k
        for k, (value, recorded) in enumerate(zip(values, strides or [], strict=False))
        if recorded is not None
        and isinstance(value.type, TensorType)
        and all(d >= 0 for d in value.type.get_shape())  # symbolic: contiguous, as before
        and stride_order(list(value.type.get_shape()), recorded) is None
    }
    aliases = _aliases(values, strided, strides or [None] * n_outputs)
    recorded_strides = [*(strides or [None] * n_outputs), *[None] * (len(values) - n_outputs)]
    for k, expr in aliases.items():
        base = _base_index(expr)
        view_strides = recorded_strides[k]
        if base >= n_outputs and recorded_strides[base] is None and view_strides is not None:
            recorded_strides[base] = _base_strides(values[base], values[k], view_strides)
    for k, (value, recorded) in enumerate(zip(values, recorded_strides, strict=True)):
        ty = value.type
        if (
            recorded is None
            or k in aliases
            or not isinstance(ty, TensorType)
            or isinstance(value, BlockArgument)
        ):
            continue
        shape = list(ty.get_shape())
        order = stride_order(shape, recorded)
        if order is None or order == list(range(len(shape))):
            continue
        permuted = TensorType(ty.element_type, [shape[d] for d in order])
        permute = permute_class.from_args({"self": value, "dims": order}, [permuted])
        permute.location = ret.location
        Rewriter.insert_op(permute, InsertPoint.before(ret))
        values[k] = permute.results[0]
        views[k] = _inverse(order)
    if strides is not None:
        del func.attributes[OUTPUT_STRIDES_ATTR]
    if not views and not aliases:
        return
    for k, expr in aliases.items():
        # Nothing reads the copy any more: return its base twice, and DCE drops the view.
        values[k] = values[_base_index(expr)]
    tree = ast.parse(structure.data, mode="eval")
    tree = _Rewrap(views).visit(_Substitute(aliases).visit(tree))
    func.attributes[OUTPUTS_ATTR] = StringAttr(ast.unparse(ast.fix_missing_locations(tree)))
    Rewriter.replace_op(ret, ReturnOp(*values))
    func.function_type = func.function_type.__class__.from_lists(
        list(func.function_type.inputs.data), [v.type for v in values]
    )


_ORDER_KEEPING_VIEWS = frozenset({"aten::slice.Tensor", "aten::alias.default"})
"""Views whose result lays its dims out in the order of its base's strides."""


def _base_strides(base: SSAValue, view: SSAValue, view_strides: Sequence[int]) -> list[int] | None:
    """Eager's strides of ``base``, a tensor no output returns as is but returned for the
    views of it that are outputs, read off one view's recorded strides where its chain of
    views keeps the base's dim order (slices): ``x.contiguous(memory_format=channels_last)
    [..., ::2]`` returns strides ``(125, 1, 25, 10)``, so its base is channels-last. None
    otherwise (the base is returned contiguous)."""
    _, calls = view_chain(view)
    if not calls or any(overload not in _ORDER_KEEPING_VIEWS for overload, _, _ in calls):
        return None
    if not isinstance(base.type, TensorType):
        return None
    shape = list(base.type.get_shape())
    if any(d < 0 for d in shape) or len(shape) != len(view_strides):
        return None
    big = sorted(
        (k for k in range(len(shape)) if shape[k] > 1), key=lambda k: (-view_strides[k], k)
    )
    order = with_unit_dims(big, shape)
    dense = contiguous_strides([shape[d] for d in order])
    strides = [0] * len(shape)
    for position, dim in enumerate(order):
        strides[dim] = dense[position]
    return strides


def _base_index(expr: ast.expr) -> int:
    while isinstance(expr, ast.Call):
        expr = expr.args[1]
    assert isinstance(expr, ast.Constant)
    assert type(expr.value) is int
    return expr.value


def _alias_leaves(
    node: ast.expr, through_alias: bool, found: list[tuple[ast.Constant, bool]]
) -> None:
    """The returned-value indices of a ``kiln.outputs`` expression, each with whether the
    caller sees it only as the base of an ``alias(...)`` view (not as itself)."""
    if isinstance(node, ast.Constant):
        if type(node.value) is int:
            found.append((node, through_alias))
        return
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        if node.func.id == "alias":
            _alias_leaves(node.args[1], True, found)
            return
        if node.func.id == "permute":
            _alias_leaves(node.args[0], False, found)
            return
    children = node.values if isinstance(node, ast.Dict) else ast.iter_child_nodes(node)
    for child in children:
        if isinstance(child, ast.expr):
            _alias_leaves(child, False, found)


class _ReplaceNodes(ast.NodeTransformer):
    def __init__(self, replacements: dict[int, ast.expr]) -> None:
        self.replacements = replacements  # by id() of the node replaced

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        return self.replacements.get(id(node), node)


def _substituted(tree: ast.Expression, replacements: dict[int, ast.expr]) -> str:
    """The text of ``tree`` with the nodes ``replacements`` names (by ``id``) replaced
    (``tree`` itself unchanged)."""
    copy = deepcopy(tree)
    twins = {id(a): b for a, b in zip(ast.walk(tree), ast.walk(copy), strict=True)}
    by_copy = {id(twins[k]): expr for k, expr in replacements.items()}
    replaced = _ReplaceNodes(by_copy).visit(copy)
    return ast.unparse(ast.fix_missing_locations(replaced))


def _replays(structure: str, values: Sequence[SSAValue]) -> bool:
    """Whether every view ``structure`` replays succeeds on tensors of ``values``' shapes."""
    tensors: list[torch.Tensor | None] = []
    for value in values:
        shape = static_shape(value)
        tensors.append(None if shape is None else torch.empty(shape, device="meta"))
    try:
        structure_builder(structure)(tensors)
    except Exception:  # a view torch rejects on the padded rows
        return False
    return True


def _row_major(strides: Sequence[int], shape: Sequence[int]) -> bool:
    """Whether dims of more than one element are laid out outermost first."""
    big = [stride for stride, size in zip(strides, shape, strict=True) if size > 1]
    return all(a > b for a, b in itertools.pairwise(big))


def _returned_view(root: SSAValue, calls: Sequence[ViewCall], bare: bool) -> bool:
    """Whether the views ``calls`` replay on the padded product ``root`` (torch accepts
    every one on its padded rows), in eager's stride order when the caller sees the
    result itself (``bare``: eager returned it contiguous)."""
    shape = static_shape(root)
    if shape is None:
        return False
    view = torch.empty(shape, device="meta")
    try:
        for overload, arguments, index in reversed(calls):
            view = replay_view(view, overload, arguments, index)
    except Exception:  # a view torch rejects on the padded rows: keep the copy
        return False
    return not bare or _row_major(view.stride(), view.shape)


def return_views_of_roots(
    func: FuncOp, sliced: Sequence[SSAValue], clone_bare_roots: bool = True
) -> None:
    """Return ``func``'s values that are views of the roots of ``sliced`` (a padded product
    sliced to its size, ``pad-mm``; a merged product's slices, ``merge-products``) as
    those roots, seen through the views by ``kiln.outputs``, instead of copying each out of
    the root's buffer; where eager returns a value of ``sliced`` itself, a ``clone``
    (``clone_bare_roots``: its strides are not eager's) or, without, the root seen
    through its slice (a row slice of a contiguous product has eager's strides).

    Inductor requires a view output's stride *order* only (``GraphLowering.run_node``:
    ``require_stride_order`` for an output whose FX node is a view, exact strides
    otherwise), so GPT-2's logits ``mm(...).view(8, 512, 50257)`` come back as the view
    of the padded product (a row is ``N`` plus the padding long). kiln does the same: a
    returned view of a padded product (``output-layout`` left it as the returned value,
    or as the base of ``alias(...)`` views in ``kiln.outputs``) becomes the padded
    product, returned, with the slice and the views replayed on it by ``kiln.outputs``
    (``alias``). That saves the copy of the whole product: 217 us of GPT-2 large's 1.37
    ms bfloat16 inference call on the H200. The product itself returned (``return x @
    w``) keeps eager's exact, contiguous strides: an explicit ``clone`` (one kernel)."""
    ret = func.body.block.last_op
    structure = func.attributes.get(OUTPUTS_ATTR)
    if not isinstance(ret, ReturnOp):
        return
    # Without kiln.outputs the caller sees every returned value itself.
    text = structure.data if isinstance(structure, StringAttr) else None
    tree = ast.parse(text or "0", mode="eval")
    found: list[tuple[ast.Constant, bool]] = []
    if text is not None:
        _alias_leaves(tree.body, False, found)
    else:
        found = [(ast.Constant(k), False) for k in range(len(ret.arguments))]
    leaves: dict[int, list[tuple[ast.Constant, bool]]] = {}
    for leaf, through in found:
        index = leaf.value
        assert isinstance(index, int)
        leaves.setdefault(index, []).append((leaf, through))
    roots = {view_chain(value)[0]: value for value in sliced}
    values = list(ret.arguments)
    old = list(values)
    replacements: dict[int, ast.expr] = {}
    clones: list[int] = []
    # (index, root, its leaves' alias expressions, whether a clone stands in if it fails)
    candidates: list[tuple[int, SSAValue, dict[int, ast.expr], bool]] = []
    for k, value in enumerate(values):
        root, calls = view_chain(value)
        if root not in roots or not leaves.get(k):
            continue
        bare = not all(through for _, through in leaves[k])
        if value is roots[root] and bare and clone_bare_roots:
            clones.append(k)  # the product itself: eager's exact strides
            continue
        if text is None or not _returned_view(root, calls, bare):
            if value is roots[root] and clone_bare_roots:
                clones.append(k)
            continue  # lower-aten copies the view, as before
        exprs = {id(leaf): alias_expr(k, calls) for leaf, _ in leaves[k]}
        # a view of an alias base cannot see the padded rows: a clone then
        candidates.append((k, root, exprs, value is roots[root] and clone_bare_roots))
    # All at once first: one replay of the structure, not one per candidate (a
    # backward returning a hundred merged weight gradients).
    together = [*values]
    for k, root, _, _ in candidates:
        together[k] = root
    everything = {key: e for _, _, exprs, _ in candidates for key, e in exprs.items()}
    if candidates and _replays(_substituted(tree, everything), together):
        values, replacements = together, everything
        candidates = []
    for k, root, exprs, clone_if_not in candidates:
        trial = {**replacements, **exprs}
        if not _replays(_substituted(tree, trial), [*values[:k], root, *values[k + 1 :]]):
            if clone_if_not:
                clones.append(k)
            continue
        values[k] = root
        replacements = trial
    clone_class = op_class("clone.default")
    assert clone_class is not None
    for k in sorted(clones):
        clone = clone_class.from_args({"self": values[k]}, [values[k].type])
        clone.location = ret.location
        Rewriter.insert_op(clone, InsertPoint.before(ret))
        values[k] = clone.results[0]
    if values == old:
        return
    Rewriter.replace_op(ret, ReturnOp(*values))
    for value in old:  # the views no return reads any more
        while isinstance(value, OpResult) and not value.uses and value not in roots:
            owner = value.owner
            if not isinstance(owner, AtenOp) or any(r.uses for r in owner.results):
                break
            source = owner.operands[0] if owner.operands else None
            Rewriter.erase_op(owner)
            if source is None:
                break
            value = source
    if replacements:
        func.attributes[OUTPUTS_ATTR] = StringAttr(_substituted(tree, replacements))
    func.function_type = func.function_type.__class__.from_lists(
        list(func.function_type.inputs.data), [v.type for v in values]
    )


@dataclass(frozen=True)
class OutputLayoutPass(ModulePass):
    """Return outputs with eager's strides (see the module docstring)."""

    name = "output-layout"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for func in [f for f in op.ops if isinstance(f, FuncOp)]:
            _apply(func)


__all__ = [
    "OutputLayoutPass",
    "ViewCall",
    "alias_expr",
    "return_views_of_roots",
    "stride_order",
    "view_chain",
]
