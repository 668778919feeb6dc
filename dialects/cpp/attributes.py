"""Attributes of the cpp dialect: how a ``cpp.for`` loop runs."""

from __future__ import annotations

from enum import auto

from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import SpacedOpaqueSyntaxAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.utils.str_enum import StrEnum


class LoopKind(StrEnum):
    """How a ``cpp.for`` runs its iterations.

    ``serial`` is a plain ``for``; ``parallel`` shares the iterations out among OpenMP
    threads (``#pragma omp parallel for``, ``collapse(n)`` over its n induction
    variables); ``simd`` promises that iterations are independent so that the compiler
    vectorizes them (``#pragma omp simd``); ``parallel_simd`` does both to one loop
    (``#pragma omp parallel for simd``: each thread runs a vectorized chunk).
    """

    SERIAL = auto()
    PARALLEL = auto()
    SIMD = auto()
    PARALLEL_SIMD = auto()

    @property
    def is_parallel(self) -> bool:
        return self in (LoopKind.PARALLEL, LoopKind.PARALLEL_SIMD)


@irdl_attr_definition
class LoopKindAttr(EnumAttribute[LoopKind], SpacedOpaqueSyntaxAttribute):
    """``#cpp<loop_kind simd>`` (in ``cpp.for``'s syntax just ``simd``)."""

    name = "cpp.loop_kind"


__all__ = ["LoopKind", "LoopKindAttr"]
