"""``libdevice`` for generated kernels: Triton's on a GPU, NumPy's under the interpreter.

Generated modules say ``from kiln.backends.triton.libdevice import libdevice`` and call
``libdevice.tanh(x)``. Compiled, that is ``triton.language.extra.libdevice`` (CUDA's or
HIP's libdevice). Triton's interpreter (``TRITON_INTERPRET=1``, used by the CPU tests)
cannot run extern elementwise functions, so there ``libdevice`` is a namespace of the
same functions computed with NumPy on the interpreter's tensors, in the inputs' dtype.
The generated source is the same in both modes.
"""

from __future__ import annotations

import os
import types
from collections.abc import Callable
from typing import Any

import numpy as np


def _interpreted() -> types.SimpleNamespace:
    import triton.language as tl
    from triton.runtime.interpreter import TensorHandle

    def wrap(fn: Callable[..., np.ndarray]) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            first = next(a for a in args if isinstance(a, tl.tensor))
            scalar = first.dtype
            arrays = [a.handle.data if isinstance(a, tl.tensor) else np.asarray(a) for a in args]
            with np.errstate(all="ignore"):
                data = np.asarray(fn(*arrays)).astype(arrays[0].dtype, copy=False)
            # The interpreter keeps a 0-d value as a 1-element array: the result is a
            # block only if an argument is (pow of two scalars stores to a scalar).
            block = any(
                isinstance(a, tl.tensor) and isinstance(a.type, tl.block_type) for a in args
            )
            ty = tl.block_type(scalar, list(data.shape)) if block and data.shape else scalar
            return tl.tensor(TensorHandle(data, scalar), ty)

        return call

    def round_half_away(x: np.ndarray) -> np.ndarray:
        whole = np.trunc(x)
        frac = x - whole  # exact in floating point
        return whole + np.where(np.abs(frac) >= 0.5, np.sign(x), 0).astype(x.dtype)

    functions: dict[str, Callable[..., np.ndarray]] = {
        "tanh": np.tanh,
        "expm1": np.expm1,
        "log1p": np.log1p,
        "log10": np.log10,
        "tan": np.tan,
        "asin": np.arcsin,
        "acos": np.arccos,
        "atan": np.arctan,
        "sinh": np.sinh,
        "cosh": np.cosh,
        "asinh": np.arcsinh,
        "acosh": np.arccosh,
        "atanh": np.arctanh,
        "cbrt": np.cbrt,
        "round": round_half_away,
        "rint": np.rint,
        "trunc": np.trunc,
        "atan2": np.arctan2,
        "pow": np.power,
        "copysign": np.copysign,
    }
    return types.SimpleNamespace(**{name: wrap(fn) for name, fn in functions.items()})


def _load() -> Any:
    if os.environ.get("TRITON_INTERPRET") == "1":
        return _interpreted()
    from triton.language.extra import libdevice as device_libdevice

    return device_libdevice


libdevice: Any = _load()
"""The libdevice namespace generated kernels call (see the module docstring)."""

__all__ = ["libdevice"]
