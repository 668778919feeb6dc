"""``tile``: how each kernel is cut into blocks, recorded for the backends.

For every ``kernel.kernel`` (after ``fuse``), chooses with the heuristics of
:mod:`kiln.passes.scheduling.tiling`:

* the reduction strategy: ``persistent`` (the whole reduction in one block: ``rnumel`` up
  to 1024 for inner reductions, 512 for outer ones), ``looped`` (a loop over ``RBLOCK``
  chunks), or ``split`` (a large reduction with a small output becomes two kernels, see
  :mod:`kiln.passes.scheduling.split_reduction`; the program launches both);
* ``reduction_hint``: ``inner`` (contiguous along the reduction) or ``outer``;
* 2-D tiles (``ynumel``, ``YBLOCK`` x ``XBLOCK``) for pointwise kernels whose loads are
  contiguous along another dimension than their stores (transposes);
* ``matmul`` kernels (a matrix product, :mod:`kiln.dialects.loop.dot`, with its
  epilogue): ``YBLOCK`` x ``XBLOCK`` output tiles over the product's rows (``ynumel``)
  and ``RBLOCK`` chunks of its inner dimension, never split;
* ``tiling``, the chosen :class:`~kiln.dialects.kernel.attributes.ConfigAttr`, and
  ``configs``, the candidates an autotuner benchmarks.

```mlir
kernel.kernel @kernel0 persistent [4] x [8] (...) -> (...) attributes {configs = [...], reduction_hint = "inner", tiling = #kernel.config<XBLOCK = 1, RBLOCK = 8, num_warps = 1, num_stages = 1>} {...}
```

Options: ``sm-count`` (parallel units of the target, for the split decision; an H100
has 132), ``split=false`` never splits reductions. A module marked for a GPU
(``kiln.device``) splits outer reductions into shorter chunks than one for the CPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, ModuleOp, StringAttr
from xdsl.ir import SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import DiagnosticException

from kiln.dialects.aten.function_attrs import runs_on_cpu
from kiln.dialects.kernel.attributes import KernelKind, KernelKindAttr
from kiln.dialects.kernel.kernel_ops import KernelOp
from kiln.dialects.kernel.program_ops import AllocOp, LaunchOp, ProgramOp
from kiln.dialects.loop.attributes import IndexExprAttr
from kiln.passes.scheduling.levels import require_kernel_level
from kiln.passes.scheduling.split_reduction import SplitKernels, can_split, split_kernel
from kiln.passes.scheduling.tiling import (
    GPU_SM_COUNT,
    OUTER_XBLOCK,
    Tiling,
    dot_node,
    hint,
    matmul_tiling,
    pointwise_tiling,
    reduction_hint,
    reduction_tiling,
    split_factor,
)


class TileError(DiagnosticException):
    """Input the tiler cannot handle."""


def annotate(kernel: KernelOp, tiling: Tiling) -> None:
    kernel.kind = KernelKindAttr(tiling.kind)
    kernel.tiling = tiling.chosen
    kernel.configs = ArrayAttr(tiling.candidates)
    if tiling.reduction_hint is not None:
        kernel.reduction_hint = StringAttr(tiling.reduction_hint)
    if tiling.ynumel is not None:
        kernel.ynumel = IndexExprAttr(tiling.ynumel)


def _rewrite_launches(module: ModuleOp, kernel: KernelOp, split: SplitKernels) -> None:
    name = kernel.sym_name.data
    for program in [p for p in module.ops if isinstance(p, ProgramOp)]:
        block = program.body.block
        for launch in [op for op in block.ops if isinstance(op, LaunchOp)]:
            if launch.kernel.string_value() != name:
                continue
            args, outs = list(launch.args), list(launch.outs)
            allocs = [AllocOp(t) for t in split.partial_types]
            for alloc in allocs:
                alloc.result.name_hint = "partials"
            partials = [a.result for a in allocs]
            first_outs: list[SSAValue] = [outs[k] for k in split.first_outputs]
            first = LaunchOp(split.first.sym_name.data, args, [*first_outs, *partials])
            remaining = iter(partials)
            second_args = [next(remaining) if k is None else args[k] for k in split.second_inputs]
            second = LaunchOp(
                split.second.sym_name.data, second_args, [outs[k] for k in split.second_outputs]
            )
            block.insert_ops_before([*allocs, first, second], launch)
            block.erase_op(launch)


@dataclass(frozen=True)
class TilePass(ModulePass):
    """Choose block sizes, reduction strategies and candidate configs for every kernel."""

    name: ClassVar[str] = "tile"  # pyright: ignore[reportIncompatibleVariableOverride]

    sm_count: int = GPU_SM_COUNT
    """Parallel units (streaming multiprocessors, cores) the split decision aims to fill."""
    split: bool = True
    """Split large reductions with small outputs into two kernels."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.sm_count < 1:
            raise TileError(f"tile: sm-count must be positive, got {self.sm_count}")
        require_kernel_level(op, self.name)
        names = {k.sym_name.data for k in op.ops if isinstance(k, KernelOp)}
        gpu = not runs_on_cpu(op)
        for kernel in [k for k in op.ops if isinstance(k, KernelOp)]:
            if kernel.tiling is not None:
                continue  # tiled already
            product = dot_node(kernel)
            if product is not None:
                annotate(kernel, matmul_tiling(kernel, product))
                continue
            kind = kernel.kernel_kind
            if kind is KernelKind.POINTWISE:
                annotate(kernel, pointwise_tiling(kernel))
                continue
            splits = 1
            outer = reduction_hint(kernel) == "outer"
            if self.split and kind is KernelKind.REDUCTION and can_split(kernel, outer):
                per_program = OUTER_XBLOCK if outer else 1
                splits = split_factor(
                    hint(kernel.numel.data),
                    hint(kernel.rnumel.data),
                    self.sm_count,
                    per_program,
                    gpu,
                )
            if splits > 1:
                self._split(op, kernel, splits, names)
            else:
                annotate(kernel, reduction_tiling(kernel))

    def _split(self, module: ModuleOp, kernel: KernelOp, splits: int, names: set[str]) -> None:
        base = kernel.sym_name.data
        first_name, second_name = f"{base}_split", f"{base}_combine"
        if first_name in names or second_name in names:
            raise TileError(f"tile: kernel names @{first_name} / @{second_name} are taken")
        names.update({first_name, second_name})
        outer = reduction_hint(kernel) == "outer"
        split = split_kernel(kernel, splits, (first_name, second_name), outer)
        annotate(split.first, reduction_tiling(split.first, KernelKind.SPLIT))
        annotate(split.second, reduction_tiling(split.second))
        block = module.body.block
        block.insert_ops_before([split.first, split.second], kernel)
        _rewrite_launches(module, kernel, split)
        block.erase_op(kernel)
