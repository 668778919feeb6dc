"""What a host wrapper calls at run time, apart from its kernels: scalar and size-check
helpers, the extern helpers (cheap views, buffers, ATen bindings) and ATen overloads by
name.

Only torch and the standard library are imported here: a graph from the graph cache
(:mod:`kiln.graph_cache`, :mod:`kiln.backends.cpp.saved`) rebuilds its wrapper's
namespace from these objects without loading kiln's IR modules. The modules that write
the wrappers (:mod:`~kiln.backends.host.scalars`, :mod:`~kiln.backends.host.size_checks`,
:mod:`~kiln.backends.host.externs`) re-export them (the same objects: a saved namespace
refers to them by name).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

# --- host scalar arithmetic (kiln.backends.host.scalars) -----------------------------


def _divsi(a: int, b: int) -> int:
    """C's truncating integer division (``arith.divsi``)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _remsi(a: int, b: int) -> int:
    return a - b * _divsi(a, b)


def _divf(a: float, b: float) -> float:
    """IEEE division (Python raises on a zero divisor)."""
    if b == 0.0:
        if a == 0.0 or math.isnan(a):
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


def _powf(a: float, b: float) -> float:
    try:
        return math.pow(a, b)
    except (ValueError, OverflowError):
        return math.nan if a < 0 else math.inf


def _maximumf(a: float, b: float) -> float:
    return math.nan if math.isnan(a) or math.isnan(b) else max(a, b)


def _minimumf(a: float, b: float) -> float:
    return math.nan if math.isnan(a) or math.isnan(b) else min(a, b)


# --- size checks (kiln.backends.host.size_checks) ---------------------------------


class SizeMismatch(ValueError):
    """Arguments that the compiled graph was traced with equal sizes differ at the call."""


def _size_mismatch(symbol: str, places: tuple[str, ...], values: tuple[int, ...]) -> None:
    got = ", ".join(f"{p} = {v}" for p, v in zip(places, values, strict=True))
    raise SizeMismatch(
        f"kiln: the graph was compiled with these sizes equal (the symbol {symbol}), "
        f"but the call has {got}; recompile for these shapes (torch.compile does, "
        "through its guards)"
    )


SIZE_CHECK_HELPERS: dict[str, Callable[..., Any]] = {"_host_size_mismatch": _size_mismatch}
"""The size checks' helpers (:mod:`kiln.backends.host.size_checks`)."""


SCALAR_HELPERS: dict[str, Callable[..., Any]] = {
    "_host_divsi": _divsi,
    "_host_remsi": _remsi,
    "_host_divf": _divf,
    "_host_powf": _powf,
    "_host_maximumf": _maximumf,
    "_host_minimumf": _minimumf,
    "_host_floor": math.floor,
    "_host_ceil": math.ceil,
    "_host_trunc": math.trunc,
    "_host_sqrt": math.sqrt,
    **SIZE_CHECK_HELPERS,
}
"""Names :func:`kiln.backends.host.scalars.scalar_python` uses, for the wrapper's namespace."""


# --- externs (kiln.backends.host.externs) --------------------------------------------

FAST_CALLS: dict[str, Callable[..., Any]] = {
    "aten::mm.default": torch.mm,
    "aten::bmm.default": torch.bmm,
    "aten::addmm.default": torch.addmm,
    "aten::baddbmm.default": torch.baddbmm,
    "aten::convolution.default": torch.convolution,
    "aten::permute.default": torch.permute,
    # An extern result reshaped for its consumer (copy elision, in place through reshapes):
    # the binding is about 4 microseconds cheaper per call than the OpOverload here.
    "aten::reshape.default": torch.reshape,
    "aten::view.default": torch.Tensor.view,
}
"""Overloads whose Python binding takes exactly the schema's arguments."""


def as_buffer(
    value: torch.Tensor | None,
    inputs: Sequence[Any],
    fresh: bool = False,
    dtype: torch.dtype | None = None,
) -> torch.Tensor | None:
    """``value`` as a buffer a kernel may read and later overwrite (``fresh``: it cannot
    alias an input, so only its layout is checked). ``None`` stays ``None``: an optional
    output ATen left undefined (cuDNN attention's ``cum_seq_q``) although the FakeTensor
    the graph was traced with is a tensor.

    ``dtype``: the result's declared element type. A few ATen kernels return another
    than the meta function the graph was traced with declares (mixed-precision
    ``native_group_norm_backward``: a bfloat16 input gradient, declared float32); the
    kernels after it read the buffer as declared, so it is converted, as the next ATen
    op would convert it, never reinterpreted."""
    if value is None:
        return None
    if dtype is not None and value.dtype != dtype:
        return value.to(dtype, memory_format=torch.contiguous_format)
    if value.is_contiguous() and value.storage_offset() == 0:
        if fresh:
            return value
        storage = value.untyped_storage().data_ptr()
        if not any(
            isinstance(x, torch.Tensor) and x.untyped_storage().data_ptr() == storage
            for x in inputs
        ):
            return value
    return value.clone(memory_format=torch.contiguous_format)


def reinterpret_fallback(
    tensor: torch.Tensor, size: Sequence[int], stride: Sequence[int], offset: int
) -> torch.Tensor:
    return tensor.as_strided(size, stride, tensor.storage_offset() + offset)


REINTERPRET: Callable[[torch.Tensor, Sequence[int], Sequence[int], int], torch.Tensor] = getattr(
    torch._C._dynamo.guards,  # pyright: ignore[reportPrivateUsage, reportAttributeAccessIssue]
    "_reinterpret_tensor",
    reinterpret_fallback,
)
"""``REINTERPRET(t, size, stride, offset)``: a view of ``t``'s memory, ``offset`` elements
past ``t``'s own start (what Inductor's ``reinterpret_tensor`` calls: a third of the
cost of ``Tensor.as_strided``, whose explicit offset would count from the storage's
start instead, wrong for an argument that is a slice of a larger tensor)."""


def overload_by_name(overload: str) -> Callable[..., Any]:
    """``torch.ops.aten.add.Tensor`` for ``aten::add.Tensor``; LookupError when torch has
    no such operator. (The dialects' own, :func:`kiln.dialects.aten.call_plan.torch_overload`,
    raises the interpreter's error and cannot live here: dialects import no backend.)"""
    namespace, _, rest = overload.partition("::")
    name, _, overload_name = rest.partition(".")
    try:
        return getattr(getattr(getattr(torch.ops, namespace), name), overload_name or "default")
    except (AttributeError, RuntimeError):
        raise LookupError(f"torch has no operator {overload}") from None


__all__ = [
    "FAST_CALLS",
    "REINTERPRET",
    "SCALAR_HELPERS",
    "SIZE_CHECK_HELPERS",
    "SizeMismatch",
    "as_buffer",
    "overload_by_name",
    "reinterpret_fallback",
]
