"""``channels-last``'s channel plumbing (on the CPU): ``cat`` along C, ``split`` along C
and ShuffleNet's channel shuffle of channels-last tensors, rewritten on their NHWC forms so
that the layout survives them."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import ArrayAttr, StringAttr, TensorType
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from kiln.dialects.aten.encoding import decode_value
from kiln.dialects.aten.memory_format import NCHW, NHWC
from kiln.dialects.aten.ops import AtenOp
from kiln.dialects.aten.size_symbols import TRACED_SIZES_ATTR
from kiln.passes.channels_last_parts.aten_helpers import (
    CLONE,
    PERMUTE,
    RESHAPES,
    arg_value,
    permuted_type,
    tensor_rank,
    tensor_shape,
)
from kiln.passes.channels_last_parts.rewrite_state import RewriteState

CAT = "aten::cat.default"
CHANNEL_SPLITS = frozenset({"aten::split_with_sizes.default", "aten::split.Tensor"})
"""Splits whose pieces are views of their input (``chunk`` decomposes to them)."""
_SHUFFLE_PERMUTE = (0, 2, 1, 3, 4)
"""``[N, groups, C / groups, H, W] -> [N, C / groups, groups, H, W]``: ShuffleNet's
channel shuffle (``view``, ``transpose(1, 2)``, ``contiguous``, ``view``)."""


def _copy_traced(source: Operation, target: Operation, dims: Sequence[int]) -> None:
    """``source``'s ``kiln.traced_sizes`` (one result) on ``target``, its dims permuted."""
    traced = source.attributes.get(TRACED_SIZES_ATTR)
    if not isinstance(traced, ArrayAttr) or len(traced.data) != 1:
        return
    (sizes,) = traced.data
    if isinstance(sizes, ArrayAttr) and len(sizes.data) == len(dims):
        target.attributes[TRACED_SIZES_ATTR] = ArrayAttr([ArrayAttr([sizes.data[d] for d in dims])])


def _element_type(value: SSAValue) -> Attribute:
    ty = value.type
    assert isinstance(ty, TensorType)
    return ty.element_type  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]


class ChannelPlumbing(RewriteState):
    """``cat``, ``split`` and channel shuffles of channels-last tensors, on their NHWC forms."""

    def _keeps_nchw(self, op: Operation) -> bool:
        return any(r in self.keep_nchw for r in op.results)

    def _store_nhwc(self, old: SSAValue, nhwc: SSAValue, point: InsertPoint) -> SSAValue:
        """Replace ``old`` (NCHW) by the NCHW permute of ``nhwc``, its logical NHWC form."""
        nchw = self._permute(nhwc, NCHW, point)
        sizes = self.sizes(old)
        if sizes is not None:
            self.traced[nchw] = sizes
        if old.name_hint:
            nhwc.name_hint = old.name_hint
            nchw.name_hint = f"{old.name_hint}_nchw"
        old.replace_all_uses_with(nchw)
        self.channels_last.add(nchw)
        self.nhwc[nchw] = nhwc
        return nchw

    def _cat(self, op: AtenOp) -> bool:
        """``cat`` of 4-D tensors along C, one of them channels-last: the NHWC tensors
        concatenated along their last dim (ShuffleNet's branches), so the copy kernel
        writes NHWC and what follows stays channels-last."""
        tensors = [t for t in op.tensor_operands().get("tensors") or [] if t is not None]
        dim = arg_value(op, "dim")
        if (
            len(op.results) != 1
            or tensor_rank(op.results[0]) != 4
            or dim not in (1, -3)
            or not tensors
            or any(tensor_rank(t) != 4 for t in tensors)
            or not any(t in self.channels_last for t in tensors)
            or self._keeps_nchw(op)
        ):
            return False
        point = InsertPoint.before(op)
        inputs = [
            self.nhwc_of(t) if t in self.channels_last else self._permute(t, NHWC, point)
            for t in tensors
        ]
        (result,) = op.results
        cat = type(op).from_args({"tensors": inputs, "dim": 3}, [permuted_type(result.type, NHWC)])
        self._insert(cat, point)
        cat.location = op.location
        self._store_nhwc(result, cat.results[0], point)
        Rewriter.erase_op(op)
        return True

    def _channel_split(self, op: AtenOp) -> bool:
        """``split`` of a channels-last tensor along C: the same split of its NHWC form
        along the last dim. The pieces are strided views of the NHWC buffer
        (``channel_slices``)."""
        x = op.operands[0]
        if (
            x not in self.channels_last
            or op.sym_operands()  # symbolic split sizes: left as they are
            or arg_value(op, "dim") not in (1, -3)
            or any(tensor_rank(r) != 4 for r in op.results)
            or self._keeps_nchw(op)
        ):
            return False
        point = InsertPoint.before(op)
        args = {
            a.name: arg_value(op, a.name)
            for a in op.op_schema().arguments
            if a.name not in ("self",)
        }
        split = type(op).from_args(
            {**args, "self": self.nhwc_of(x), "dim": 3},
            [permuted_type(r.type, NHWC) for r in op.results],
        )
        split.location = op.location
        self._insert(split, point)
        for old, piece in zip(op.results, split.results, strict=True):
            self.channel_slices.add(self._store_nhwc(old, piece, point))
        Rewriter.erase_op(op)
        return True

    def _channel_shuffle(self, op: AtenOp) -> bool:
        """ShuffleNet's channel shuffle of a channels-last tensor, ``view`` to
        ``[N, g, C/g, H, W]``, ``permute(0, 2, 1, 3, 4)``, ``clone``, ``view`` back to
        ``[N, C, H, W]``, as the same shuffle of its NHWC form: ``view`` to
        ``[N, H, W, g, C/g]``, ``permute(0, 1, 2, 4, 3)``, ``clone``, ``view`` to
        ``[N, H, W, C]``, then ``clone(..., memory_format = "channels_last")`` of its
        NCHW permute, which ``lower-aten`` materializes as an NHWC buffer. One copy kernel
        either way; this one keeps the NHWC layout."""
        chain = self._shuffle_chain(op)
        if chain is None:
            return False
        split_view, permute, clone, merge_view = chain
        x = op.operands[0]
        x_shape = tensor_shape(x)
        assert x_shape is not None
        # The sizes as the views take them: ints, and the split view's own SSA sizes
        # where they are symbolic (the same as x's, ``_shuffle_chain`` checked).
        spec = next(a for a in split_view.op_schema().arguments if a.name == "size")
        n, groups, per_group, h, w = decode_value(
            spec, split_view.arg_attr("size"), split_view.sym_operands()
        )
        c = x_shape[1]
        dims = {"n": x_shape[0], "h": x_shape[2], "w": x_shape[3]}
        point = InsertPoint.before(merge_view)
        element = _element_type(x)
        view = type(split_view).from_args(
            {"self": self.nhwc_of(x), "size": [n, h, w, groups, per_group]},
            [TensorType(element, [dims["n"], dims["h"], dims["w"], groups, per_group])],
        )
        _copy_traced(split_view, view, (0, 3, 4, 1, 2))
        self._insert(view, point)
        swapped = self._permute(view.results[0], (0, 1, 2, 4, 3), point)
        copy = type(clone).from_args(
            {"self": swapped, "memory_format": "contiguous_format"}, [swapped.type]
        )
        _copy_traced(clone, copy, (0, 3, 4, 1, 2))
        self._insert(copy, point)
        merged = type(merge_view).from_args(
            {"self": copy.results[0], "size": [n, h, w, c]},
            [TensorType(element, [dims["n"], dims["h"], dims["w"], c])],
        )
        _copy_traced(merge_view, merged, NHWC)
        self._insert(merged, point)
        # Materialized NHWC (a ``channels_last`` clone is a copy in ``lower-aten``; the
        # other clone is an alias there): the shuffle is one copy kernel, and what
        # reads it (a strided convolution's input, a channel slice's rows for
        # conv1x1-to-mm) gets a plain NHWC buffer rather than a copy of its own each.
        nchw_view = self._permute(merged.results[0], NCHW, point)
        stored = type(clone).from_args(
            {"self": nchw_view, "memory_format": "channels_last"}, [merge_view.results[0].type]
        )
        _copy_traced(merge_view, stored, (0, 1, 2, 3))
        self._insert(stored, point)
        for new, old in ((view, split_view), (copy, clone), (merged, merge_view), (stored, clone)):
            new.location = old.location
        result = merge_view.results[0]
        if result.name_hint:
            stored.results[0].name_hint = result.name_hint
        result.replace_all_uses_with(stored.results[0])
        self.channels_last.add(stored.results[0])
        for old in (merge_view, clone, permute, split_view):
            Rewriter.erase_op(old)
        return True

    def _shuffle_chain(self, op: AtenOp) -> tuple[AtenOp, AtenOp, AtenOp, AtenOp] | None:
        """``(view, permute, clone, view)`` when ``op`` starts a channel shuffle of a
        channels-last tensor whose steps have no other users, else None."""
        x = op.operands[0]
        x_sizes, sizes5 = self.sizes(x), self.sizes(op.results[0])
        if x not in self.channels_last or x_sizes is None or sizes5 is None:
            return None
        if len(x_sizes) != 4 or len(sizes5) != 5:
            return None
        n, c, h, w = x_sizes
        groups, per_group = sizes5[1:3]
        if not all(isinstance(d, int) for d in (c, groups, per_group)):
            return None
        if sizes5[0] != n or sizes5[3:] != (h, w) or groups * per_group != c:  # pyright: ignore[reportOperatorIssue]
            return None
        steps: list[AtenOp] = [op]
        for expected in (PERMUTE, CLONE, RESHAPES):
            users = {u.operation for u in steps[-1].results[0].uses}
            (user,) = users if len(users) == 1 else (None,)
            if not isinstance(user, AtenOp) or user.operands[0] is not steps[-1].results[0]:
                return None
            names = expected if isinstance(expected, frozenset) else {expected}
            if user.overload_name not in names:
                return None
            steps.append(user)
        view, permute, clone, merge = steps
        if tuple(arg_value(permute, "dims")) != _SHUFFLE_PERMUTE:
            return None
        memory_format = clone.arg_attr("memory_format")
        if isinstance(memory_format, StringAttr) and memory_format.data == "channels_last":
            return None
        if self.sizes(merge.results[0]) != x_sizes or self._keeps_nchw(merge):
            return None
        return view, permute, clone, merge
