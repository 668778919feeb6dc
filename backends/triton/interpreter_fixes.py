"""Fixes to Triton's interpreter (``TRITON_INTERPRET=1``), where kiln runs its Triton
kernels on a machine without a GPU: its bfloat16 arithmetic is not a GPU's.

* ``tl.dot`` of bfloat16 blocks multiplied their raw uint16 bits as integers (a bfloat16
  dot kernel returned 1e11 where eager returned 3): silently wrong numbers for anyone
  who followed kiln's own advice to interpret the kernels on the CPU;
* casts from float32 to bfloat16 truncate where a GPU (and torch) round to nearest even;
* bfloat16 constants (``tl.full([], 1.0, tl.bfloat16)``, which kiln writes for a
  ``slice_scatter`` mask or a ``where`` of bfloat16 values) raised ``AttributeError: no
  attribute 'get_bf16'`` in Triton 3.6 and 3.8 (torchvision's Swin-T in bfloat16).

:func:`apply` patches the interpreter's builder once per process (the Triton runtime calls
it when it loads a program under the interpreter; the test suite's conftest too). A
Triton whose interpreter is laid out otherwise is left alone.
"""

from __future__ import annotations

import functools
from typing import Any


def _interpreter() -> tuple[Any, Any] | None:
    """The interpreter's builder class and tensor handle class; None where Triton lays its
    interpreter out otherwise (then nothing is patched)."""
    from triton.runtime import interpreter

    builder = getattr(interpreter, "InterpreterBuilder", None)
    handle = getattr(interpreter, "TensorHandle", None)
    if builder is None or handle is None:
        return None
    return builder, handle


def _round_bfloat16_to_nearest_even(builder: Any, handle: Any) -> None:
    """Triton's interpreter converts float32 to bfloat16 by truncation; GPUs (and torch)
    round to nearest even; kiln compares with eager, so the interpreter rounds as a GPU
    would (truncation cost exp(exp(x)) two units in the last place)."""
    import numpy as np
    import torch
    import triton.language as tl

    truncating = getattr(builder, "cast_impl", None)
    if truncating is None:
        return

    def cast_impl(self: object, src: Any, dst_type: object) -> object:
        source_type = getattr(getattr(src, "dtype", None), "scalar", None)
        if source_type == tl.float32 and getattr(dst_type, "scalar", None) == tl.bfloat16:
            values = torch.from_numpy(np.ascontiguousarray(src.data)).to(torch.bfloat16)
            bits = values.view(torch.int16).numpy().view(np.uint16)
            return handle(bits, tl.bfloat16)
        return truncating(self, src, dst_type)

    builder.cast_impl = cast_impl


def _dot_bfloat16_values(builder: Any, handle: Any) -> None:
    """Triton's interpreter keeps bfloat16 blocks as their uint16 bits, and its ``tl.dot``
    multiplies those bits as integers (a bfloat16 dot kernel gave 1e10 where eager gave 3).
    Widened to float32 first (exact), the products are the GPU's: exact in float32,
    summed in float32."""
    import numpy as np
    import triton.language as tl

    raw_dot = getattr(builder, "create_dot", None)
    if raw_dot is None:
        return

    def widened(block: Any) -> object:
        if getattr(getattr(block, "dtype", None), "scalar", None) != tl.bfloat16:
            return block
        bits = np.ascontiguousarray(block.data).astype(np.uint32) << 16
        return handle(bits.view(np.float32), tl.float32)

    def create_dot(self: object, a: object, b: object, *rest: object) -> object:
        return raw_dot(self, widened(a), widened(b), *rest)

    builder.create_dot = create_dot


def _bfloat16_constants(builder: Any) -> None:
    """Triton 3.6's and 3.8's interpreter builds no bfloat16 constant (``get_bf16`` is
    missing: a kernel holding ``tl.full([], 1.0, tl.bfloat16)`` raised; 3.9's casts the
    float32 constant). A GPU's compiler rounds the constant to nearest even: here the
    float32 constant goes through the cast above, which does."""
    import triton.language as tl

    if not hasattr(builder, "get_fp32") or not hasattr(builder, "cast_impl"):
        return

    def get_bf16(self: Any, value: float) -> object:
        return self.cast_impl(self.get_fp32(value), tl.bfloat16)

    builder.get_bf16 = get_bf16


@functools.cache
def apply() -> None:
    """Patch Triton's interpreter (once)."""
    found = _interpreter()
    if found is None:
        return  # another interpreter layout: leave it alone
    builder, handle = found
    _round_bfloat16_to_nearest_even(builder, handle)
    _dot_bfloat16_values(builder, handle)
    _bfloat16_constants(builder)


__all__ = ["apply"]
