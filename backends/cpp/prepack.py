"""Convolutions on cached oneDNN-prepacked weights (``kiln.prepack``, pass ``prepack-weights``).

One :class:`PackedConvolution` per marked call site, made when the wrapper is written
(stride, padding, dilation, groups and the input size decoded once). A call compares the
weight it is given with the one it packed last: the same tensor object (a weak
reference, so a dead weight whose address is reused never matches), the same version
counter (``Tensor._version``: every in-place update bumps it) and the same data pointer
(``set_``, ``.data =``). On a match it runs ``mkldnn._convolution_pointwise`` on the
packed copy; otherwise it repacks (``mkldnn._reorder_convolution_weight``, what ATen's
``mkldnn_convolution`` does on every call) first. What Inductor does under
``freezing``, without freezing: the parameters stay graph inputs.

oneDNN picks the packed layout for the input size it is given, and a copy packed for
another size is slow (up to 50x on a 512-channel 3x3 layer at 2x2 against a pack for
64x64, measured here). A site whose input size is symbolic (``dynamic=True``) therefore
keeps one packed copy per input size it has seen, at most :data:`SIZES_KEPT` (the oldest
goes first): a new size costs one reorder, what the plain call pays every time.

Falls back to ``torch.convolution`` (what the site ran before) when this torch has no
oneDNN, or when grad mode is on and the weight requires grad (a packed copy would cut
the autograd graph; AOTAutograd's inference graphs never see that, a direct caller
might).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

import torch

from kiln.backends.cpp.gemm_calibration import linear_available
from kiln.dialects.aten.encoding import decode_value
from kiln.dialects.aten.ops import AtenOp
from kiln.dialects.aten.prepack import linear_weight, prepack_min_rows

SIZES_KEPT = 4
"""Input sizes a site with a symbolic input size keeps packed copies for (memory: that
many copies of the weight)."""


def available() -> bool:
    """Whether this torch runs oneDNN convolutions on prepacked weights."""
    return bool(
        torch.backends.mkldnn.is_available()
        and hasattr(torch.ops.mkldnn, "_convolution_pointwise")
        and hasattr(torch.ops.mkldnn, "_reorder_convolution_weight")
    )


class PackedConvolution:
    """``site(x, weight, bias)``: one convolution call site with its packed weight.
    ``input_size`` None: the input's size is symbolic, packed copies are kept per size."""

    __slots__ = (
        "__weakref__",
        "by_size",
        "dilation",
        "groups",
        "input_size",
        "packed",
        "padding",
        "pointer",
        "pointwise",
        "reorder",
        "repacks",
        "stride",
        "version",
        "weight",
    )

    def __init__(
        self,
        stride: Sequence[int],
        padding: Sequence[int],
        dilation: Sequence[int],
        groups: int,
        input_size: Sequence[int] | None,
    ) -> None:
        self.stride = list(stride)
        self.padding = list(padding)
        self.dilation = list(dilation)
        self.groups = groups
        self.input_size = None if input_size is None else tuple(input_size)
        self.weight: weakref.ref[torch.Tensor] | None = None
        self.version = -1
        self.pointer = 0
        self.packed: torch.Tensor | None = None
        """The copy for ``input_size`` (a static site)."""
        self.by_size: dict[tuple[int, ...], torch.Tensor] = {}
        """The copies by input size (a symbolic site), oldest first."""
        self.repacks = 0
        """How often the weight was (re)packed: tests and benchmarks read it."""
        # The bound C++ entry points (skip OpOverload.__call__'s Python frame).
        self.pointwise: Any = torch.ops.mkldnn._convolution_pointwise.default._op  # pyright: ignore[reportPrivateUsage]
        self.reorder: Any = torch.ops.mkldnn._reorder_convolution_weight.default._op  # pyright: ignore[reportPrivateUsage]

    @classmethod
    def for_op(cls, op: AtenOp) -> PackedConvolution:
        """The site of a ``kiln.prepack`` convolution (its constants decoded once)."""
        args = {a.name: a for a in op.op_schema().arguments}

        def value(name: str) -> Any:
            return decode_value(args[name], op.arg_attr(name), ())

        x = op.tensor_operands()["input"][0]
        assert x is not None
        shape: Sequence[int] = x.type.get_shape()  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType, reportUnknownVariableType]
        return cls(
            value("stride"),
            value("padding"),
            value("dilation"),
            value("groups"),
            None if any(d < 0 for d in shape) else shape,  # pyright: ignore[reportUnknownArgumentType, reportUnknownVariableType]
        )

    def __call__(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> Any:
        ref = self.weight
        if (
            ref is None
            or ref() is not weight
            or weight._version != self.version
            or weight.data_ptr() != self.pointer
        ):
            if weight.requires_grad and torch.is_grad_enabled():
                return torch.convolution(
                    x, weight, bias, self.stride, self.padding, self.dilation, False, [0, 0],
                    self.groups,
                )  # fmt: skip
            self.adopt(weight)
        packed = self.packed
        if packed is None:  # a symbolic input size: the copy for this one
            size = tuple(x.shape)
            packed = self.by_size.get(size)
            if packed is None:
                packed = self.pack(weight, size)
        return self.pointwise(
            x,
            packed,
            bias,
            self.padding,
            self.stride,
            self.dilation,
            self.groups,
            "none",
            [],
            "",
        )

    def adopt(self, weight: torch.Tensor) -> None:
        """Drop the copies of the previous weight (or of its previous values); pack
        ``weight`` now when the input size is static."""
        self.weight = weakref.ref(weight)
        self.version = weight._version
        self.pointer = weight.data_ptr()
        self.by_size.clear()
        self.packed = None
        if self.input_size is not None:
            self.packed = self.pack(weight, self.input_size)

    def pack(self, weight: torch.Tensor, input_size: tuple[int, ...]) -> torch.Tensor:
        """``weight`` packed for ``input_size`` (kept in ``by_size`` for a symbolic site)."""
        with torch.no_grad():
            packed = self.reorder(
                weight, self.padding, self.stride, self.dilation, self.groups, list(input_size)
            )
        if self.input_size is None:
            if len(self.by_size) >= SIZES_KEPT:
                del self.by_size[next(iter(self.by_size))]
            self.by_size[input_size] = packed
        self.repacks += 1
        return packed


class PackedLinear:
    """``site(x, weight, bias)``: ``x @ weight.T (+ bias)`` for a ``kiln.prepack``
    ``mm``/``addmm`` whose second operand is the transpose of a weight argument (2-D, or
    a 1x1 convolution's ``[O, C, 1, 1]``), or ``x @ weight (+ bias)`` of a ``[C, O]``
    weight read as it is (``transposed=False``: GPT-2's ``Conv1D``), on the
    weight packed for this site's row count by oneDNN (``mkldnn._reorder_linear_weight``,
    ``mkldnn._linear_pointwise``: what Inductor's freezing emits where it does not use
    MKL's packed GEMM; measured faster than MKL's here, docs/benchmarks/cpu-profile.md)."""

    __slots__ = (
        "__weakref__",
        "batch",
        "linear",
        "min_rows",
        "packed",
        "pointer",
        "reorder",
        "repacks",
        "transposed",
        "version",
        "weight",
    )

    def __init__(self, batch: int | None, min_rows: int = 0, transposed: bool = True) -> None:
        self.batch = batch
        """The row count the weight is packed for (None: symbolic, any row count)."""
        self.min_rows = min_rows
        """Calls with fewer rows run ATen's product (``kiln.prepack_min_rows``)."""
        self.transposed = transposed
        """The product reads ``weight.T`` (an ``[O, C]`` weight); else ``weight`` (``[C, O]``)."""
        self.weight: weakref.ref[torch.Tensor] | None = None
        self.version = -1
        self.pointer = 0
        self.packed: torch.Tensor | None = None
        self.repacks = 0
        self.linear: Any = torch.ops.mkldnn._linear_pointwise.default._op  # pyright: ignore[reportPrivateUsage]
        self.reorder: Any = torch.ops.mkldnn._reorder_linear_weight.default._op  # pyright: ignore[reportPrivateUsage]

    def __call__(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> Any:
        if x.shape[0] < self.min_rows:
            return _plain_linear(x, weight, bias, self.transposed)
        ref = self.weight
        if (
            ref is None
            or ref() is not weight
            or weight._version != self.version
            or weight.data_ptr() != self.pointer
        ):
            if (weight.requires_grad and torch.is_grad_enabled()) or not _stays_put(weight):
                return _plain_linear(x, weight, bias, self.transposed)
            with torch.no_grad():
                self.packed = self.reorder(_matrix(weight, self.transposed), self.batch)
            self.weight = weakref.ref(weight)
            self.version = weight._version
            self.pointer = weight.data_ptr()
            self.repacks += 1
        return self.linear(x, self.packed, bias, "none", [], "")


def _stays_put(weight: torch.Tensor) -> bool:
    """Whether ``weight`` is a parameter or a buffer (Dynamo's static inputs): worth
    packing once. Any other argument (``a @ b`` of two user inputs) is likely new at the
    next call, and packing it at every call would cost more than the packed GEMM saves
    on few rows."""
    return isinstance(weight, torch.nn.Parameter) or bool(
        getattr(weight, "_dynamo_static_input_type", None)
    )


def _matrix(weight: torch.Tensor, transposed: bool) -> torch.Tensor:
    """The ``[O, C]`` matrix oneDNN packs: a 1x1 convolution's ``[O, C, 1, 1]`` weight
    (conv1x1-to-mm) viewed as one, a 2-D weight as it is, or the transpose of a ``[C, O]``
    weight the product reads as it is."""
    if not transposed:
        return weight.t()
    return weight if weight.dim() == 2 else weight.view(weight.shape[0], -1)


def _plain_linear(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, transposed: bool
) -> Any:
    """The product by ATen, on the plain weight."""
    rhs = _matrix(weight, transposed).t()
    return torch.mm(x, rhs) if bias is None else torch.addmm(bias, x, rhs)


def prepacked_site(op: AtenOp) -> PackedConvolution | PackedLinear | None:
    """The call site of a ``kiln.prepack`` op (None: run it as it is written)."""
    if op.overload_name == "aten::convolution.default":
        return PackedConvolution.for_op(op) if available() else None
    if op.overload_name not in ("aten::mm.default", "aten::addmm.default"):
        return None  # a GPU-only mark (convolution_backward)
    if not linear_available():
        return None
    tensors = op.tensor_operands()
    x = tensors["mat1" if op.overload_name == "aten::addmm.default" else "self"][0]
    assert x is not None
    rows: int = x.type.get_shape()[0]  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType, reportUnknownVariableType]
    read = linear_weight(tensors["mat2"][0])
    if read is None:
        return None
    # Symbolic rows: packed for any row count (oneDNN's batch size None), as Inductor does.
    return PackedLinear(rows if rows >= 0 else None, prepack_min_rows(op), read[1])  # pyright: ignore[reportUnknownArgumentType]


__all__ = [
    "SIZES_KEPT",
    "PackedConvolution",
    "PackedLinear",
    "available",
    "linear_available",
    "prepacked_site",
]
