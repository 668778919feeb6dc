"""Convolutions on a cached channels-last copy of their weight (``kiln.prepack`` on the GPU).

cuDNN runs a convolution in one memory format: given an NHWC input (what
``channels-last`` makes of a CNN) and an OIHW weight, ATen copies the weight to
channels-last first, at every call (``weight.contiguous(memory_format=channels_last)``,
an elementwise copy kernel per convolution with a spatial kernel: 17 of ResNet-18's 62
kernels on the H200). Inductor pays the same copies (as fused Triton kernels) unless
``freezing`` makes the weights constants. Under AOTAutograd the parameters are program
arguments, so kiln keeps the copy per call site instead, as the C++ wrapper keeps
oneDNN-packed weights (:mod:`kiln.backends.cpp.prepack`): a call compares the weight with
the one it copied last (the same object by weak reference, the same data pointer) and
refreshes the copy in place when the weight's version counter moved (an in-place update:
``copy_``, ``load_state_dict``, an optimizer step).

**CUDA graphs.** A graph recorded through a site reads the copy's address. Its instance
pins the copies it read (:meth:`ChannelsLastConvolution.pin`) and, before every replay,
asks each site whether the pinned copy is still the one for the weight now at the
argument's address (:meth:`ChannelsLastConvolution.ready`: refreshed in place when the
weight changed in place); a copy the site has let go of (the weight was replaced) makes
the instance unusable, and the pin keeps its memory alive until the instance goes.

An update that bypasses the version counter (``w.data.mul_(2)``) is not seen, as with
the CPU's packed weights: turn ``prepack_weights`` off then.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

import torch

from kiln.dialects.aten.ops import AtenOp


class ChannelsLastConvolution:
    """One ``kiln.prepack`` convolution of a Triton program: ``site(x, weight, bias)``."""

    def __init__(
        self,
        stride: Sequence[int],
        padding: Sequence[int],
        dilation: Sequence[int],
        groups: int,
    ) -> None:
        self.stride = list(stride)
        self.padding = list(padding)
        self.dilation = list(dilation)
        self.groups = groups
        self.weight: weakref.ref[torch.Tensor] | None = None
        self.version = -1
        self.pointer = 0
        self.copy: torch.Tensor | None = None

    @classmethod
    def of(cls, op: AtenOp) -> ChannelsLastConvolution:
        values = [op.static_arg(name) for name in ("stride", "padding", "dilation", "groups")]
        return cls(*values)

    def __call__(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> Any:
        # Only where ATen would copy the weight: an input laid out channels-last (and
        # unambiguously so: an input both contiguous and channels-last, C or H*W of 1,
        # runs as it is), a weight that is not.
        if (
            x.is_contiguous(memory_format=torch.channels_last)
            and not x.is_contiguous()
            and not weight.is_contiguous(memory_format=torch.channels_last)
            and not (weight.requires_grad and torch.is_grad_enabled())
        ):
            weight = self._copy_of(weight)
        return torch.convolution(
            x, weight, bias, self.stride, self.padding, self.dilation, False, [0, 0], self.groups
        )

    def _adopted(self) -> torch.Tensor | None:
        """The weight the copy was made of, if alive and still at the same address."""
        weight = self.weight() if self.weight is not None else None
        return weight if weight is not None and weight.data_ptr() == self.pointer else None

    def _refresh(self, copy: torch.Tensor, weight: torch.Tensor) -> None:
        """Bring ``copy`` up to an in-place update of ``weight``, in place: a graph
        reading the copy stays valid."""
        if weight._version != self.version:
            copy.copy_(weight)
            self.version = weight._version

    def _copy_of(self, weight: torch.Tensor) -> torch.Tensor:
        copy = self.copy
        if copy is not None and self._adopted() is weight:
            self._refresh(copy, weight)
            return copy
        self.weight = weakref.ref(weight)
        self.pointer = weight.data_ptr()
        self.version = weight._version
        self.copy = weight.contiguous(memory_format=torch.channels_last)
        return self.copy

    def pin(self) -> torch.Tensor | None:
        """The copy a graph recorded now reads (None: the site made none)."""
        return self.copy

    def ready(self, pinned: torch.Tensor) -> bool:
        """Whether a graph that read ``pinned`` may replay: it is still this site's copy,
        of a live weight at the same address; refreshed first if the weight changed in
        place."""
        weight = self._adopted()
        if self.copy is not pinned or weight is None:
            return False
        self._refresh(pinned, weight)
        return True


def weight_sites(namespace: dict[str, Any]) -> list[ChannelsLastConvolution]:
    """The sites among a generated module's constants."""
    return [v for v in namespace.values() if isinstance(v, ChannelsLastConvolution)]


__all__ = ["ChannelsLastConvolution", "weight_sites"]
