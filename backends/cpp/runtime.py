"""What the C++ wrapper calls at run time besides its kernels and the host helpers
(:mod:`kiln.backends.host.runtime`): error reporting and allocation.

Only torch is imported here (the IR modules only when a kernel fails), so that a graph
from the graph cache (:mod:`kiln.backends.cpp.saved`) runs without loading kiln's IR
modules; :mod:`kiln.backends.cpp.wrapper` re-exports these.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

ERROR_INDEX = 1
ERROR_DIV_ZERO = 2


def kernel_failed(kernel: str, code: int) -> None:
    if code & ERROR_INDEX:
        # IndexError and RuntimeError both: eager raises either, depending on the op.
        from kiln.dialects.loop.body_ops import IndexOutOfBounds  # only on a failure

        raise IndexOutOfBounds(
            f"kiln: {kernel}: index out of bounds (an indirect index is outside the "
            "dimension it indexes)"
        )
    if code & ERROR_DIV_ZERO:
        raise ZeroDivisionError(f"kiln: {kernel}: integer division by zero")
    raise RuntimeError(f"kiln: {kernel} failed with error flags {code}")


def bad_argument(position: int, expected: str, value: Any) -> None:
    got = (
        f"a {value.dtype} tensor of shape {list(value.shape)} on {value.device}"
        if isinstance(value, torch.Tensor)
        else f"{type(value).__name__} {value!r}"
    )
    raise TypeError(f"kiln: argument #{position} must be {expected}, got {got}")


def _empty_strided_fallback(
    size: tuple[int, ...], stride: tuple[int, ...], dtype: torch.dtype
) -> torch.Tensor:
    return torch.empty_strided(size, stride, dtype=dtype)


EMPTY_STRIDED_CPU: Callable[[tuple[int, ...], tuple[int, ...], torch.dtype], torch.Tensor] = (
    getattr(
        torch._C._dynamo.guards,  # pyright: ignore[reportPrivateUsage, reportAttributeAccessIssue]
        "_empty_strided_cpu",
        _empty_strided_fallback,
    )
)
"""A CPU allocation without ``torch.empty``'s argument parsing (what Inductor's CPU
wrappers call; a third of the cost)."""


PROFILER_ON: Callable[[], bool] = torch._C._autograd._profiler_enabled  # pyright: ignore[reportPrivateUsage, reportAttributeAccessIssue]
"""Whether ``torch.profiler`` (or ``torch.autograd.profiler``) is recording: the wrapper
asks once per call, and only then names its kernel launches."""


def record_kernel(kernel: str) -> torch.autograd.profiler.record_function:
    """The profiler range of one launch of ``kernel`` (``kiln::<symbol>``): without it
    the profiler sees kiln's C++ kernels as the time between the ATen calls around them."""
    return torch.autograd.profiler.record_function(f"kiln::{kernel}")


__all__ = [
    "EMPTY_STRIDED_CPU",
    "ERROR_DIV_ZERO",
    "ERROR_INDEX",
    "PROFILER_ON",
    "bad_argument",
    "kernel_failed",
    "record_kernel",
]
