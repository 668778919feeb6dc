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
    "kiln-cublas",
)
CUDA_ONLY = frozenset({"inductor-ro", "kiln-cg", "kiln-at", "kiln-cublas"})
OPT_IN = frozenset({"kiln-static", "kiln-cublas"})
"""Backends run only when named (``--backends``)."""
