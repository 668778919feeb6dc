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


def _round_bfloat16_to_nearest_even() -> None:
    """Triton's interpreter converts float32 to bfloat16 by truncation; GPUs (and torch)
    round to nearest even; kiln compares with eager, so the interpreter rounds as a GPU
    would (truncation cost exp(exp(x)) two units in the last place)."""
    import numpy as np
    import torch
    import triton.language as tl
    from triton.runtime import interpreter

    builder = getattr(interpreter, "InterpreterBuilder", None)
    truncating = getattr(builder, "cast_impl", None)
    handle = getattr(interpreter, "TensorHandle", None)
    if builder is None or truncating is None or handle is None:
        return  # another interpreter layout: leave it alone

    def cast_impl(self: object, src: object, dst_type: object) -> object:
        source_type = getattr(getattr(src, "dtype", None), "scalar", None)
        if source_type == tl.float32 and getattr(dst_type, "scalar", None) == tl.bfloat16:
            values = torch.from_numpy(np.ascontiguousarray(src.data)).to(torch.bfloat16)  # pyright: ignore[reportAttributeAccessIssue]
            bits = values.view(torch.int16).numpy().view(np.uint16)
            return handle(bits, tl.bfloat16)
        return truncating(self, src, dst_type)

    builder.cast_impl = cast_impl


def _dot_bfloat16_values() -> None:
    """Triton's interpreter keeps bfloat16 blocks as their uint16 bits, and its ``tl.dot``
    multiplies those bits as integers (a bfloat16 dot kernel gave 1e10 where eager gave 3).
    Widened to float32 first (exact), the products are the GPU's: exact in float32,
    summed in float32."""
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter

    builder = getattr(interpreter, "InterpreterBuilder", None)
    raw_dot = getattr(builder, "create_dot", None)
    handle = getattr(interpreter, "TensorHandle", None)
    if builder is None or raw_dot is None or handle is None:
        return  # another interpreter layout: leave it alone

    def widened(block: object) -> object:
        if getattr(getattr(block, "dtype", None), "scalar", None) != tl.bfloat16:
            return block
        bits = np.ascontiguousarray(block.data).astype(np.uint32) << 16  # pyright: ignore[reportAttributeAccessIssue]
        return handle(bits.view(np.float32), tl.float32)

    def create_dot(self: object, a: object, b: object, *rest: object) -> object:
        return raw_dot(self, widened(a), widened(b), *rest)

    builder.create_dot = create_dot


def _bfloat16_constants() -> None:
    """Triton 3.6's and 3.8's interpreter builds no bfloat16 constant (``get_bf16`` is
    missing: a kernel holding ``tl.full([], 1.0, tl.bfloat16)`` raised; 3.9's casts the
    float32 constant). A GPU's compiler rounds the constant to nearest even: so does this
    one."""
    import numpy as np
    import torch
    import triton.language as tl
    from triton.runtime import interpreter

    builder = getattr(interpreter, "InterpreterBuilder", None)
    handle = getattr(interpreter, "TensorHandle", None)
    if builder is None or handle is None or not hasattr(builder, "get_fp16"):
        return  # another interpreter layout: leave it alone

    def get_bf16(self: object, value: float) -> object:
        rounded = torch.tensor([value], dtype=torch.float32).to(torch.bfloat16)
        return handle(rounded.view(torch.int16).numpy().view(np.uint16), tl.bfloat16)

    builder.get_bf16 = get_bf16


@functools.cache
def apply() -> None:
    """Patch Triton's interpreter (once)."""
    _round_bfloat16_to_nearest_even()
    _dot_bfloat16_values()
    _bfloat16_constants()


__all__ = ["apply"]
