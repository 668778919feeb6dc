"""The dashboard's backends, in the order its pages list them (no torch import: the
renderer reads them too)."""

from __future__ import annotations

BACKENDS = (
    "eager",
    "inductor",
    "inductor-ro",
    "kiln",
    "kiln-static",
    "kiln-cg",
    "kiln-at",
    "kiln-dot",
)
CUDA_ONLY = frozenset({"inductor-ro", "kiln-cg", "kiln-at", "kiln-dot"})
OPT_IN = frozenset({"kiln-static", "kiln-dot"})
"""Backends run only when named (``--backends``)."""
