"""Convolutions on a cached channels-last copy of their weight (``kiln.prepack`` on the GPU).

cuDNN runs a convolution in one memory format: given an NHWC input (what
``channels-last`` makes of a CNN) and an OIHW weight, ATen copies the weight to
channels-last first, at every call (``weight.contiguous(memory_format=channels_last)``,
an elementwise copy kernel per convolution with a spatial kernel: 17 of ResNet-18's 62
kernels on the H200), and in training again for the backward's ``convolution_backward``
(33 copies, 140 us of a 1.08 ms ResNet-18 training step, session 21; Inductor copies
each weight once in the forward and saves the copy for the backward). Under
AOTAutograd the parameters are program arguments, so kiln keeps the copy instead, as
the C++ wrapper keeps oneDNN-packed weights (:mod:`kiln.backends.cpp.prepack`).

The copies are kept **per weight**, not per call site (:func:`channels_last_copy`): a
training step's backward reads the copy its forward made, and a weight that two
convolutions share is copied once. Each copy is keyed on the weight tensor (held
weakly: it goes with the weight) and remembers the weight's data pointer and version
counter; it is refreshed in place when the version moved (an in-place update: ``copy_``,
``load_state_dict``, an optimizer step: once per training step, in its forward) and
made anew when the pointer moved (``w.data = ...``).

**CUDA graphs.** A graph recorded through a site reads the copy's address. Its instance
pins the copies it read (:meth:`ChannelsLastConvolution.pin`) and, before every replay,
asks each site whether the pinned copy is still the one for the weight now at the
argument's address (:meth:`ChannelsLastConvolution.ready`: refreshed in place when the
weight changed in place); a copy that is no longer the weight's (the weight was
replaced) makes the instance unusable, and the pin keeps its memory alive until the
instance goes. A training forward's graph refreshes its copies itself, at the start of
every replay (:meth:`ChannelsLastConvolution.refresh`, as Inductor converts weights
inside its graphs): the optimizer changes every weight between two steps, and a copy
launched from the host per weight before each replay cost 0.4 ms of ResNet-18's
training step (H100, session 41); the replay then asks only whether the pinned copy is
still the weight's (:meth:`ChannelsLastConvolution.current`) and marks it refreshed
after (:meth:`ChannelsLastConvolution.refreshed`), so the backward reads it as it is.

An update that bypasses the version counter (``w.data.mul_(2)``) is not seen, as with
the CPU's packed weights: turn ``prepack_weights`` off then.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.weak import WeakIdKeyDictionary

from kiln.backends.triton.cudagraphs import stays_put
from kiln.dialects.aten.ops import AtenOp


@dataclass
class _Copy:
    tensor: torch.Tensor
    version: int
    pointer: int


class WeightCopies:
    """Channels-last copies of weights, one per weight tensor (see the module doc)."""

    def __init__(self) -> None:
        self._copies = WeakIdKeyDictionary()

    def of(self, weight: torch.Tensor) -> torch.Tensor:
        """The channels-last copy of ``weight``, made, refreshed in place or remade as
        the weight's version and data pointer say."""
        return self.entry(weight).tensor

    def entry(self, weight: torch.Tensor) -> _Copy:
        """:meth:`of`'s copy, with the version and address it was made at."""
        entry = self._copies.get(weight)
        if (
            not isinstance(entry, _Copy)
            or entry.pointer != weight.data_ptr()
            or entry.tensor.shape != weight.shape
            or entry.tensor.dtype != weight.dtype
        ):
            tensor = weight.detach().contiguous(memory_format=torch.channels_last)
            entry = _Copy(tensor, weight._version, weight.data_ptr())
            self._copies[weight] = entry
            return entry
        if entry.version != weight._version:
            entry.tensor.copy_(weight.detach())
            entry.version = weight._version
        return entry


WEIGHT_COPIES = WeightCopies()
"""The process's copies: every program's sites share them, so that a backward reads the
copy its forward made (programs are compiled apart; the copies live with the weights,
not with a program)."""


def _copies_weight(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """Where ATen would copy the weight: an input laid out channels-last (and
    unambiguously so: an input both contiguous and channels-last, C or H*W of 1, runs
    as it is), a weight that is not; never under grad mode for a weight that requires
    grad (the copy would cut the autograd graph).

    Only a parameter (or an input Dynamo marks static) is copied: a CUDA graph reads
    those at their own address, but copies any other tensor argument into a static input
    at each replay, after the pins were checked, so a copy kept of the static input was
    one call behind (kiln-cg read the previous call's weight). Any other weight is left
    to ATen, whose copy is then part of the graph."""
    return (
        stays_put(weight)
        and x.is_contiguous(memory_format=torch.channels_last)
        and not x.is_contiguous()
        and not weight.is_contiguous(memory_format=torch.channels_last)
        and not (weight.requires_grad and torch.is_grad_enabled())
    )


class ChannelsLastConvolution:
    """One ``kiln.prepack`` convolution of a Triton program: ``site(x, weight, bias)``."""

    def __init__(
        self,
        stride: Sequence[int],
        padding: Sequence[int],
        dilation: Sequence[int],
        groups: int,
        copies: WeightCopies = WEIGHT_COPIES,
    ) -> None:
        self.stride = list(stride)
        self.padding = list(padding)
        self.dilation = list(dilation)
        self.groups = groups
        self.copies = copies
        self.weight: weakref.ref[torch.Tensor] | None = None
        self.pointer = 0
        self.copy: torch.Tensor | None = None
        """The copy the site read last (what a graph recorded now reads)."""
        self.entry: _Copy | None = None
        """``copy``'s entry in ``copies`` (its version, kept without a lookup)."""
        self.ready_version: int | None = None
        """The weight's version when ``ready`` last found the copy current."""

    @classmethod
    def of(cls, op: AtenOp) -> ChannelsLastConvolution:
        values = [op.static_arg(name) for name in ("stride", "padding", "dilation", "groups")]
        return cls(*values)

    def __call__(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> Any:
        if _copies_weight(x, weight):
            weight = self._copy_of(weight)
        return torch.convolution(
            x, weight, bias, self.stride, self.padding, self.dilation, False, [0, 0], self.groups
        )

    def _adopted(self) -> torch.Tensor | None:
        """The weight the copy was made of, if alive and still at the same address."""
        weight = self.weight() if self.weight is not None else None
        return weight if weight is not None and weight.data_ptr() == self.pointer else None

    def _copy_of(self, weight: torch.Tensor) -> torch.Tensor:
        self.weight = weakref.ref(weight)
        self.pointer = weight.data_ptr()
        self.entry = self.copies.entry(weight)
        self.copy = self.entry.tensor
        self.ready_version = None
        return self.copy

    def pin(self) -> torch.Tensor | None:
        """The copy a graph recorded now reads (None: the site made none)."""
        return self.copy

    refreshable = True
    """Whether a graph may refresh this site's copy itself (a forward's convolution:
    the first reader of a weight in a training step)."""

    def refresh(self) -> None:
        """Copy the weight into the copy the site read last (called while a graph is
        recorded: the copy becomes part of every replay)."""
        weight = self._adopted()
        if weight is not None and self.copy is not None:
            with torch.no_grad():
                self.copy.copy_(weight.detach())

    def current(self, pinned: torch.Tensor) -> bool:
        """Whether a graph that read ``pinned``, and refreshes it itself, may replay: it
        is still the copy of a live weight at the same address."""
        return self.copy is pinned and self._adopted() is not None

    def refreshed(self) -> None:
        """Note that a replay refreshed the copy: current for the weight's version."""
        weight = self._adopted()
        if weight is not None and self.entry is not None:
            self.entry.version = self.ready_version = weight._version

    def ready(self, pinned: torch.Tensor) -> bool:
        """Whether a graph that read ``pinned`` may replay: it is still the copy of a
        live weight at the same address; refreshed first if the weight changed in
        place."""
        weight = self._adopted()
        if self.copy is not pinned or weight is None:
            return False
        version = weight._version
        if version == self.ready_version:
            # Unchanged since found current: asked at every replay, for every site
            # (ResNet-18's training step: 40), the copies' weak-keyed lookup cost 0.2 ms.
            return True
        entry = self.entry
        if entry is not None and entry.tensor is pinned and entry.version == version:
            # Refreshed since by another site (the forward's graph, for a backward's).
            self.ready_version = version
            return True
        if self.copies.of(weight) is not pinned:
            return False
        self.ready_version = version
        return True


class ChannelsLastConvolutionBackward(ChannelsLastConvolution):
    """A ``kiln.prepack`` ``convolution_backward``: ``site(grad_output, x, weight)``
    returns its three results, on the weight's cached copy (the forward's)."""

    refreshable = False  # the forward refreshed the copy this reads

    def __init__(
        self,
        bias_sizes: Sequence[int] | None,
        stride: Sequence[int],
        padding: Sequence[int],
        dilation: Sequence[int],
        groups: int,
        output_mask: Sequence[bool],
        copies: WeightCopies = WEIGHT_COPIES,
    ) -> None:
        super().__init__(stride, padding, dilation, groups, copies)
        self.bias_sizes = None if bias_sizes is None else list(bias_sizes)
        self.output_mask = list(output_mask)

    @classmethod
    def of(cls, op: AtenOp) -> ChannelsLastConvolutionBackward:
        names = ("bias_sizes", "stride", "padding", "dilation", "groups", "output_mask")
        return cls(*[op.static_arg(name) for name in names])

    def __call__(  # pyright: ignore[reportIncompatibleMethodOverride]
        self, grad_output: torch.Tensor, x: torch.Tensor, weight: torch.Tensor
    ) -> Any:
        if _copies_weight(x, weight):
            weight = self._copy_of(weight)
        return torch.ops.aten.convolution_backward.default(
            grad_output,
            x,
            weight,
            self.bias_sizes,
            self.stride,
            self.padding,
            self.dilation,
            False,
            [0, 0],
            self.groups,
            self.output_mask,
        )


def prepacked_site(op: AtenOp) -> ChannelsLastConvolution | None:
    """The Triton wrapper's call site of a ``kiln.prepack`` op (None: run it as written)."""
    if op.overload_name == "aten::convolution.default":
        return ChannelsLastConvolution.of(op)
    if op.overload_name == "aten::convolution_backward.default":
        return ChannelsLastConvolutionBackward.of(op)
    return None


def weight_sites(namespace: dict[str, Any]) -> list[ChannelsLastConvolution]:
    """The sites among a generated module's constants."""
    return [v for v in namespace.values() if isinstance(v, ChannelsLastConvolution)]


__all__ = [
    "WEIGHT_COPIES",
    "ChannelsLastConvolution",
    "ChannelsLastConvolutionBackward",
    "WeightCopies",
    "prepacked_site",
    "weight_sites",
]
