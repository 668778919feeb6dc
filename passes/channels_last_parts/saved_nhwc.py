"""``channels-last``'s saved NHWC activations: free-layout results returned as their NHWC
tensors (and ``kiln.outputs`` rewritten for them), a backward's channels-last arguments and
the results the importer records as laid out NHWC."""

from __future__ import annotations

import ast
from collections.abc import Sequence

from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, StringAttr, TensorType
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Attribute, BlockArgument, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from kiln.dialects.aten.arg_layout import arg_strides
from kiln.dialects.aten.function_attrs import OUTPUTS_ATTR
from kiln.dialects.aten.memory_format import NCHW, NHWC
from kiln.dialects.aten.ops import AtenOp
from kiln.dialects.aten.result_layout import RESULT_ORDERS_ATTR, result_order
from kiln.passes.channels_last_parts.aten_helpers import is_elementwise, tensor_rank, tensor_shape
from kiln.passes.channels_last_parts.rewrite_state import RewriteState
from kiln.passes.output_layout import ViewCall, view_chain

_CONVOLUTION_BACKWARD = "aten::convolution_backward.default"

_INDEX_ARGUMENT = {"permute": 0, "alias": 1}
"""The argument of a ``kiln.outputs`` call that is a returned value's index (or an
expression over one): a ``permute``'s first, an ``alias``'s base."""


class SavedNhwc(RewriteState):
    """Free-layout results returned NHWC, and values a backward receives or ATen returns
    channels-last."""

    def _recorded_nhwc(self, op: AtenOp) -> None:
        """4-D results the importer records as laid out NHWC (``kiln.result_orders``: a
        backward's ``convolution_backward`` or pool backward on channels-last tensors),
        which ``lower-aten`` yields as NHWC buffers."""
        if is_elementwise(op):
            return  # lowered to a kernel, which writes the order it is given
        if op.overload_name == _CONVOLUTION_BACKWARD:
            self._image_for_weight_gradient(op)
        for k, result in enumerate(op.results):
            if tensor_rank(result) == 4 and result_order(op, k) == tuple(NHWC):
                self.channels_last.add(result)

    def _image_for_weight_gradient(self, op: AtenOp) -> None:
        """The first convolution's weight gradient reads a channels-last output gradient
        and the NCHW image (a function argument, saved as it came): ATen would copy the
        gradient to the image's layout, so the image (3 channels, the smaller tensor) is
        copied channels-last instead, as the forward does. Only where no input gradient
        is computed: its recorded layout (NCHW) would cost a copy of it."""
        grad_output, x = op.operands[0], op.operands[1]
        if (
            self.convert_inputs
            and grad_output in self.channels_last
            and isinstance(x, BlockArgument)
            and x not in self.channels_last
            and tensor_rank(x) == 4
            and not isinstance(op.results[0].type, TensorType)
        ):
            # Right before its reader: the copy is not held through the whole backward.
            op.operands[1] = self._channels_last_clone(x, InsertPoint.before(op), "_nhwc")
            # ATen then lays the weight gradient out channels-last too: the extern yields
            # it so (the importer recorded it for the NCHW image), no copy at the call.
            _record_result_order(op, 1, NHWC)

    def _return_free_nhwc(self) -> bool:
        """Returns each free-layout result stored channels-last as its NHWC tensor (no copy
        back to NCHW); ``returned_nhwc`` lists them."""
        ret = self.block.last_op
        if not isinstance(ret, ReturnOp):
            return False
        for k, value in enumerate(ret.operands):
            if (
                k in self.free_outputs
                and value in self.channels_last
                and value not in self.keep_nchw
                and not isinstance(value, BlockArgument)
                and tensor_rank(value) == 4
            ):
                ret.operands[k] = self.nhwc_of(value)
                self.returned_nhwc.append(k)
        return bool(self.returned_nhwc)

    def _return_compact_copies(self) -> bool:
        """Returns each free-layout result that ``kiln.outputs`` replays as a view of
        another result (``alias(...)``, from ``output-layout``) and that a convolution
        reads through a compact NHWC copy (``compact_copies``) as that copy instead, the
        same numbers: the backward then gets it channels-last, as it gets the gradients,
        and cuDNN's backward convolutions read both without ATen copying the NCHW view
        (ShuffleNet-v2's saved channel slices on the GPU)."""
        ret = self.block.last_op
        func = self.block.parent_op()
        if not self.compact_copies or func is None or not isinstance(ret, ReturnOp):
            return False
        structure = func.attributes.get(OUTPUTS_ATTR)
        if not isinstance(structure, StringAttr):
            return False
        copies: dict[tuple[SSAValue, tuple[ViewCall, ...]], SSAValue] = {}
        for value, copy in self.compact_copies.items():
            root, calls = view_chain(value)
            if calls:
                copies[root, tuple(calls)] = copy
        tree = ast.parse(structure.data, mode="eval")
        if not copies or not isinstance(tree.body, ast.Tuple):
            return False
        operands = list(ret.operands)
        replaced = False
        for k, leaf in enumerate(tree.body.elts):
            chain = _alias_chain(leaf) if k in self.free_outputs else None
            if chain is None or k >= len(operands) or not 0 <= chain[0] < len(operands):
                continue
            copy = copies.get((operands[chain[0]], chain[1]))
            if copy is None:
                continue
            # Slot k returned the view's base only to keep the indices (output-layout).
            operands[k] = self.nhwc_of(copy)
            tree.body.elts[k] = ast.Constant(k)
            self.returned_nhwc.append(k)
            replaced = True
        if not replaced:
            return False
        operands = _drop_unreferenced_bases(tree, operands)
        func.attributes[OUTPUTS_ATTR] = StringAttr(ast.unparse(tree))
        Rewriter.replace_op(ret, ReturnOp(*operands))
        return True


def _drop_unreferenced_bases(tree: ast.Expression, operands: list[SSAValue]) -> list[SSAValue]:
    """``operands`` without the bases ``output-layout`` appended after the outputs that no
    leaf of ``tree`` (a flat tuple, renumbered in place) reads any more: a returned
    buffer is one ``buffer-reuse`` cannot give to a later value."""
    assert isinstance(tree.body, ast.Tuple)
    outputs = len(tree.body.elts)
    read = {node.value for node in _leaves(tree.body) if type(node.value) is int}
    kept = [k for k in range(len(operands)) if k < outputs or k in read]
    if len(kept) == len(operands):
        return operands
    index = {old: new for new, old in enumerate(kept)}
    for node in _leaves(tree.body):
        if type(node.value) is int:
            node.value = index[node.value]
    return [operands[k] for k in kept]


def _leaves(node: ast.expr) -> list[ast.Constant]:
    """The constants of a ``kiln.outputs`` expression that are returned values' indices:
    tuple items, a ``permute``'s first argument, an ``alias``'s base (not the dims of a
    permute, nor an alias's result index)."""
    if isinstance(node, ast.Constant):
        return [node]
    if isinstance(node, ast.Tuple | ast.List):
        return [leaf for item in node.elts for leaf in _leaves(item)]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        position = _INDEX_ARGUMENT.get(node.func.id)
        if position is not None and len(node.args) > position:
            return _leaves(node.args[position])
    return []


def _alias_chain(leaf: ast.expr) -> tuple[int, tuple[ViewCall, ...]] | None:
    """A ``kiln.outputs`` leaf ``alias(overload, base, arguments[, result])`` as its base's
    index and its view calls, outermost first (as :func:`view_chain` gives them)."""
    calls: list[ViewCall] = []
    node = leaf
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        if node.func.id != "alias" or len(node.args) not in (3, 4):
            return None
        overload, arguments = _constant(node.args[0]), _constant(node.args[2])
        result = _constant(node.args[3]) if len(node.args) == 4 else None
        if not isinstance(overload, str) or not isinstance(arguments, str):
            return None
        if result is not None and type(result) is not int:
            return None
        calls.append((overload, arguments, result))
        node = node.args[1]
    if not calls or not isinstance(node, ast.Constant) or type(node.value) is not int:
        return None
    return node.value, tuple(calls)


def _constant(node: ast.expr) -> object:
    return node.value if isinstance(node, ast.Constant) else None


def _record_result_order(op: AtenOp, index: int, order: Sequence[int]) -> None:
    """Records in ``kiln.result_orders`` that ATen lays ``op``'s result ``index`` out in
    ``order`` (a wrong record costs a copy, never a wrong number)."""
    found = op.attributes.get(RESULT_ORDERS_ATTR)
    entries: list[Attribute] = (
        list(found.data) if isinstance(found, ArrayAttr) else [ArrayAttr([])] * len(op.results)  # pyright: ignore[reportUnknownArgumentType]
    )
    entries[index] = ArrayAttr([IntegerAttr(d, 64) for d in order])
    op.attributes[RESULT_ORDERS_ATTR] = ArrayAttr(entries)


def channels_last_args(func: FuncOp) -> list[SSAValue]:
    """The 4-D arguments the importer records with channels-last strides."""
    args = func.body.block.args
    found: list[SSAValue] = []
    for k, arg in enumerate(args):
        shape = tensor_shape(arg)
        attrs = func.arg_attrs.data[k] if func.arg_attrs is not None else None
        strides = arg_strides(attrs)
        if shape is not None and strides is not None and _is_channels_last(shape, strides):
            found.append(arg)
    return found


def _is_channels_last(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """Whether static ``strides`` lay a 4-D ``shape`` out densely in NHWC order (dims of
    size 1 are free)."""
    if len(shape) != 4 or any(d < 0 for d in shape):
        return False
    expected = 1
    for dim in reversed(NHWC):
        if shape[dim] != 1 and strides[dim] != expected:
            return False
        expected *= shape[dim]
    return True


def alias_bases(func: FuncOp) -> frozenset[int]:
    """The returned values that ``kiln.outputs`` replays views on (``alias(...)``, from
    ``output-layout``): a view op such as ``view`` may need its base contiguous."""
    structure = func.attributes.get(OUTPUTS_ATTR)
    if not isinstance(structure, StringAttr) or "alias(" not in structure.data:
        return frozenset()
    bases: set[int] = set()
    for node in ast.walk(ast.parse(structure.data, mode="eval")):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id == "alias" and len(node.args) > 1:
                base = node.args[1]
                if isinstance(base, ast.Constant) and type(base.value) is int:
                    bases.add(base.value)
    return frozenset(bases)


def permute_returned(func: FuncOp, indices: Sequence[int]) -> None:
    """The function's type and ``kiln.outputs`` after results ``indices`` became NHWC."""
    ret = func.body.block.last_op
    assert isinstance(ret, ReturnOp)
    func.function_type = func.function_type.__class__.from_lists(
        list(func.function_type.inputs.data), [v.type for v in ret.operands]
    )
    structure = func.attributes.get(OUTPUTS_ATTR)
    leaves = set(indices)
    text = structure.data if isinstance(structure, StringAttr) else None
    tree = ast.parse(
        text if text is not None else f"({', '.join(map(str, range(len(ret.operands))))},)",
        mode="eval",
    )
    tree = PermuteLeaves(leaves).visit(tree)
    func.attributes[OUTPUTS_ATTR] = StringAttr(ast.unparse(ast.fix_missing_locations(tree)))


class PermuteLeaves(ast.NodeTransformer):
    """Wraps each leaf ``k`` (a returned value's index) of a ``kiln.outputs`` expression in
    ``permute(k, (0, 3, 1, 2))``: only leaves, not the dims of a ``permute`` or the
    result index of an ``alias``."""

    def __init__(self, leaves: set[int]) -> None:
        self.leaves = leaves

    def visit_Call(self, node: ast.Call) -> ast.AST:
        name = node.func.id if isinstance(node.func, ast.Name) else None
        position = _INDEX_ARGUMENT.get(name or "")
        if position is None:
            return self.generic_visit(node)
        node.args[position] = self.visit(node.args[position])
        return node

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        if type(node.value) is int and node.value in self.leaves:
            dims = ast.Tuple([ast.Constant(d) for d in NCHW], ast.Load())
            return ast.Call(ast.Name("permute", ast.Load()), [node, dims], [])
        return node
