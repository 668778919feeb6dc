"""``dedup-kernels``: one ``kernel.kernel`` per distinct kernel body.

A model built from N identical layers (a transformer) yields N copies of each of the
layer's kernels after ``fuse``/``tile``: same iteration space, same tiling, same body,
only the symbol names and the SSA names differ. Every copy would be lowered, emitted
and compiled again. This pass keeps the first kernel of each class of structurally
identical kernels, points every ``kernel.launch`` of the others at it and erases them,
so each distinct kernel is lowered and built once per graph.

Two kernels are identical when everything but their symbol name and their SSA value
names is equal (:func:`kernel_key`): op names, operand structure (which value each
operand is, numbered in definition order), result and block argument types,
properties and attributes (exact: a float attribute compares its bits, so ``-0.0`` is not
``0.0``), regions and blocks. A kernel with something the key cannot compare exactly (an
unhashable attribute, successors) is left alone. What a launch adds (which buffers it
passes, whether an input is also an output) is the launch's, not the kernel's, and
stays with each launch.

```mlir
kernel.kernel @kernel0 pointwise [4] x [1] (%a: memref<4xf32>) -> (memref<4xf32>) {...}
kernel.kernel @kernel1 pointwise [4] x [1] (%b: memref<4xf32>) -> (memref<4xf32>) {...}  // same body
kernel.program @forward(%x: memref<4xf32>) -> memref<4xf32> {
  kernel.launch @kernel0(%x) outs(%0) ...
  kernel.launch @kernel1(%0) outs(%1) ...     // becomes kernel.launch @kernel0(%0) outs(%1)
```
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, SymbolRefAttr
from xdsl.ir import Operation, Region, SSAValue
from xdsl.passes import ModulePass

from kiln.dialects.kernel.contract_attrs import IMPLEMENTS
from kiln.dialects.kernel.kernel_ops import KernelOp
from kiln.dialects.kernel.program_ops import LaunchOp

_NAME = "sym_name"


class _NotComparable(Exception):
    """The kernel holds something the structural key cannot compare exactly."""


def kernel_key(kernel: KernelOp) -> Hashable | None:
    """A key equal for two kernels exactly when they are the same kernel up to their
    symbol name and SSA names; None when the kernel cannot be keyed (never merged)."""
    numbering: dict[SSAValue, int] = {}
    items: list[Hashable] = []

    def operand(value: SSAValue) -> int:
        number = numbering.get(value)
        if number is None:  # defined outside the kernel: kernels are isolated, but be safe
            raise _NotComparable
        return number

    def visit_region(region: Region) -> None:
        items.append(len(region.blocks))
        for block in region.blocks:
            items.append(tuple(arg.type for arg in block.args))
            for arg in block.args:
                numbering[arg] = len(numbering)
            for op in block.ops:
                visit_op(op)

    def visit_op(op: Operation, top: bool = False) -> None:
        if op.successors:
            raise _NotComparable
        properties = op.properties.items()
        if top:
            properties = [(k, v) for k, v in properties if k != _NAME]
        items.append(
            (
                op.name,
                tuple(operand(v) for v in op.operands),
                tuple(r.type for r in op.results),
                # The attribute class too: two Data classes can hold equal payloads.
                tuple(sorted((k, type(v), v) for k, v in properties)),
                tuple(sorted((k, type(v), v) for k, v in op.attributes.items() if k != _NAME)),
                len(op.regions),
            )
        )
        for result in op.results:
            numbering[result] = len(numbering)
        for region in op.regions:
            visit_region(region)

    try:
        visit_op(kernel, top=True)
        key = tuple(items)
        hash(key)  # an unhashable attribute (a Data holding a list) cannot be compared here
    except (_NotComparable, TypeError):
        return None
    return key


def dedup_kernels(module: ModuleOp) -> dict[str, str]:
    """Merge identical kernels of ``module`` (in place); returns removed -> kept names."""
    kept: dict[Hashable, KernelOp] = {}
    renamed: dict[str, str] = {}
    # A kernel already lowered to Triton is named by its triton.kernel too: left alone.
    implemented = IMPLEMENTS.implementations(module)
    for kernel in [op for op in module.body.block.ops if isinstance(op, KernelOp)]:
        if kernel.sym_name.data in implemented:
            continue
        key = kernel_key(kernel)
        if key is None:
            continue
        first = kept.setdefault(key, kernel)
        if first is not kernel:
            renamed[kernel.sym_name.data] = first.sym_name.data
    if not renamed:
        return renamed
    for op in module.walk():
        if isinstance(op, LaunchOp) and (target := renamed.get(op.kernel.string_value())):
            op.properties["kernel"] = SymbolRefAttr(target)
    for kernel in [op for op in module.body.block.ops if isinstance(op, KernelOp)]:
        if kernel.sym_name.data in renamed:
            module.body.block.erase_op(kernel)
    return renamed


@dataclass(frozen=True)
class DedupKernelsPass(ModulePass):
    """Keep one ``kernel.kernel`` per distinct body (see the module docstring)."""

    name = "dedup-kernels"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        dedup_kernels(op)


__all__ = ["DedupKernelsPass", "dedup_kernels", "kernel_key"]
