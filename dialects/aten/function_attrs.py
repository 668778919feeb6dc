"""Attributes of an aten-level ``func.func`` that record the graph's calling convention.

The FX importer writes them and passes rewrite them (``output-layout``), so they live
here, below both, rather than in the frontend. ``kiln.outputs`` is the Python structure of
the graph's outputs (see :mod:`kiln.dialects.aten.fx.outputs` for its grammar);
``kiln.output_strides`` records the strides eager gives each returned value (``[]``: not
a tensor, or unknown), written only when some output is not contiguous.
``kiln.free_layout_outputs`` lists the returned values whose strides are the compiler's
to choose (a training forward's activations saved for the backward only: AOTAutograd
re-strides the backward's arguments to the strides the driver reports), set by the
driver. ``kiln.guarded_arguments`` (unit), set by the driver, says that the caller guards
every argument's type, device and shape before each call (Dynamo's guards do, for the
graphs AOTAutograd hands over), so the wrapper need not check them again.
``kiln.device``, on the module, is the device the program runs on (``cuda:0``), set by
the driver: passes that only pay on one device ask :func:`module_device`.
``kiln.tf32_matmul`` (unit), on the module, set by the driver for a GPU program compiled
while torch lets float32 matrix products run in TF32 (``torch.backends.cuda.matmul``,
``torch.set_float32_matmul_precision``): ATen's float32 products then run on the tensor
cores, whose alignment rules ``pad-mm`` serves (:func:`tf32_matmul`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, StringAttr
from xdsl.ir import Operation

OUTPUTS_ATTR = "kiln.outputs"
OUTPUT_STRIDES_ATTR = "kiln.output_strides"
DEVICE_ATTR = "kiln.device"
FREE_LAYOUT_OUTPUTS_ATTR = "kiln.free_layout_outputs"
GUARDED_ARGUMENTS_ATTR = "kiln.guarded_arguments"
TF32_MATMUL_ATTR = "kiln.tf32_matmul"


def free_layout_attr(indices: Sequence[int]) -> ArrayAttr[Any]:
    return ArrayAttr([IntegerAttr(k, 64) for k in indices])


def free_layout_outputs(func: Operation) -> frozenset[int]:
    """The returned values (indices) whose layout is free (``kiln.free_layout_outputs``)."""
    attr = func.attributes.get(FREE_LAYOUT_OUTPUTS_ATTR)
    if not isinstance(attr, ArrayAttr):
        return frozenset()
    return frozenset(int(i.value.data) for i in attr.data if isinstance(i, IntegerAttr))  # pyright: ignore


def module_device(module: Operation | None) -> str:
    """The device ``module``'s program runs on (``kiln.device``; ``cpu`` when absent)."""
    attr = module.attributes.get(DEVICE_ATTR) if module is not None else None
    return attr.data if isinstance(attr, StringAttr) else "cpu"


def tf32_matmul(module: Operation | None) -> bool:
    """Whether ``module``'s float32 matrix products run in TF32 (``kiln.tf32_matmul``)."""
    return module is not None and TF32_MATMUL_ATTR in module.attributes


def runs_on_cpu(module: Operation | None) -> bool:
    """Whether ``module``'s program runs on the CPU (C++ kernels) rather than a GPU."""
    return module_device(module).startswith("cpu")


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    strides: list[int] = []
    stride = 1
    for size in reversed(shape):
        strides.append(stride)
        stride *= max(size, 1)
    return tuple(reversed(strides))


def output_strides_attr(strides: Sequence[Sequence[int] | None]) -> ArrayAttr[Any]:
    return ArrayAttr(
        [
            ArrayAttr([IntegerAttr(s, 64) for s in entry] if entry is not None else [])
            for entry in strides
        ]
    )


def output_strides(func: Operation) -> list[tuple[int, ...] | None] | None:
    """The recorded strides of each returned value (None: not recorded)."""
    attr = func.attributes.get(OUTPUT_STRIDES_ATTR)
    if not isinstance(attr, ArrayAttr):
        return None
    out: list[tuple[int, ...] | None] = []
    for entry in attr.data:  # pyright: ignore[reportUnknownVariableType]
        items = [int(i.value.data) for i in entry.data]  # pyright: ignore
        out.append(tuple(items) if items else None)
    return out


__all__ = [
    "FREE_LAYOUT_OUTPUTS_ATTR",
    "OUTPUTS_ATTR",
    "OUTPUT_STRIDES_ATTR",
    "contiguous_strides",
    "free_layout_attr",
    "free_layout_outputs",
    "output_strides",
    "output_strides_attr",
]
