"""The channels-last permutations, shared by the pass that writes them (``channels-last``
computes NHWC tensors and rebuilds NCHW results as ``permute(nhwc, NCHW)``) and the one
that reads them back (``lower-aten``), so neither reads the other's modules."""

from __future__ import annotations

NHWC = (0, 2, 3, 1)
"""``permute`` dims from NCHW to channels-last (NHWC) order."""
NCHW = (0, 3, 1, 2)
"""``permute`` dims from NHWC back to NCHW order."""

__all__ = ["NCHW", "NHWC"]
