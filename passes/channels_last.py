"""``channels-last``: 2-D convolutions on channels-last (NHWC) activations.

oneDNN (CPU) and cuDNN (GPU, tensor cores above all) run convolutions faster on
channels-last tensors, and Inductor converts convolution inputs to channels-last and keeps
the activations between convolutions that way (its layout optimization). This pass does
the same at the aten level, without changing a single number: only where values are
stored changes, never what is computed.

Layouts at the aten level. Tensors have value semantics here, and ``lower-aten`` turns
views (``permute``, ``unsqueeze``) into index maps over their input's buffer, so the
physical layout of a tensor is decided by the op that computes it. This pass therefore
writes the layout into the IR as *logical* NHWC tensors:

* a pointwise op whose input is stored channels-last is rewritten to compute the NHWC
  tensor (``relu(permute(y, [0, 2, 3, 1]))``), so the kernel ``lower-aten`` makes for it
  writes (and reads) NHWC contiguously; its old NCHW result becomes
  ``permute(nhwc, [0, 3, 1, 2])``, a view that costs nothing. Lower-rank operands
  (batch-norm's ``[C, 1, 1]`` scale) are broadcast explicitly (``unsqueeze`` to 4-D, then
  the same permute), again only views;
* a convolution (and the pooling and batch-norm ops with the ``FollowsChannelsLast``
  trait, :mod:`kiln.dialects.aten.traits`, where ``decompose`` leaves them to ATen) whose
  input is stored channels-last is left as it is: ``lower-aten`` passes that input to ATen as a channels-last strided tensor, ATen
  returns a channels-last result (its memory-format propagation), and the extern yields it
  as an NHWC buffer, so no copy is made on either side;
* a convolution reading a function argument (the image) gets
  ``clone(x, memory_format = "channels_last")``, which ``lower-aten`` materializes as one
  NHWC copy (option ``convert-inputs=false`` leaves the image NCHW: the first convolution
  then runs on NCHW and only the kernel after it reads transposed; ``convert-weights=true``
  copies the weights as well);
* on the CPU, ShuffleNet's channel plumbing keeps the layout: a ``cat`` along C of
  channels-last tensors concatenates their NHWC forms along the last dim, a ``split``
  along C splits the NHWC form (the pieces are strided views of its buffer, which
  ``conv1x1-to-mm`` reads as strided rows), and the channel shuffle (``view`` to
  ``[N, g, C/g, H, W]``, ``permute(0, 2, 1, 3, 4)``, ``clone``, ``view`` back) becomes the
  same shuffle of the NHWC form (``[N, H, W, g, C/g]``, ``permute(0, 1, 2, 4, 3)``);
* every other consumer (reductions, views, matmuls, the function's results) reads the
  NCHW view, i.e. the NHWC buffer through strides.

```mlir
%y = aten.convolution.default(%xc, %w, ...) : (...) -> tensor<2x8x6x6xf32>
%r = aten.relu.default(%y) : (tensor<2x8x6x6xf32>) -> tensor<2x8x6x6xf32>
%z = aten.convolution.default(%r, %w2, ...) : (...) -> tensor<2x8x6x6xf32>
```
becomes
```mlir
%y = aten.convolution.default(%xc, %w, ...) : (...) -> tensor<2x8x6x6xf32>
%y_nhwc = aten.permute.default(%y, dims = [0, 2, 3, 1]) : (...) -> tensor<2x6x6x8xf32>
%r = aten.relu.default(%y_nhwc) : (tensor<2x6x6x8xf32>) -> tensor<2x6x6x8xf32>
%r_nchw = aten.permute.default(%r, dims = [0, 3, 1, 2]) : (...) -> tensor<2x8x6x6xf32>
%z = aten.convolution.default(%r_nchw, %w2, ...) : (...) -> tensor<2x8x6x6xf32>
```

Function results are contiguous NCHW buffers, so a returned value stored channels-last
would cost a copy back. The pass keeps every returned 4-D tensor NCHW, and with it the
chain of convolutions, pools, batch norms and views it is computed through (their layout
follows their input), except the results the driver lists in ``kiln.free_layout_outputs``
(a training forward's activations saved for the backward only): one stored channels-last
is returned as its NHWC tensor, seen by the caller through ``permute(k, (0, 3, 1, 2))`` in
``kiln.outputs`` (channels-last strides, no copy), and the driver reports those strides
to AOTAutograd, which compiles the backward for them.

Backward graphs have no ``convolution``: there the values stored channels-last are the
arguments the importer records with channels-last strides (``kiln.arg_strides``, the
saved activations above) and the 4-D results of other ops (``convolution_backward``,
pool backwards: ATen follows their inputs' layout) that the importer records as laid out
NHWC (``kiln.result_orders``); the pointwise ops reading them are rewritten to NHWC as
in the forward. Weights stay NCHW by default: oneDNN and cuDNN reorder them anyway, and without
freezing a copy here would be a kernel per weight per call (``convert-weights=true``).

Why a rewrite of the aten IR rather than a physical-layout pass on kernels: every later
level (loop, kernel, both backends) already handles strided views and fused index maps,
so expressing the layout as permutes needs no support anywhere else, the IR stays
verifiable and printable, and the aten interpreter checks the pass on random inputs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp
from xdsl.passes import ModulePass

from kiln.dialects.aten.function_attrs import (
    FREE_LAYOUT_OUTPUTS_ATTR,
    free_layout_outputs,
    runs_on_cpu,
)
from kiln.passes.channels_last_parts.cpu_heuristics import (
    SAVED_NHWC_CPU_MIN_ELEMENTS,
    has_2d_convolution,
    largest_convolution_output,
    slow_cpu_convolution,
)
from kiln.passes.channels_last_parts.function_rewrite import FunctionRewrite
from kiln.passes.channels_last_parts.saved_nhwc import (
    alias_bases,
    channels_last_args,
    permute_returned,
)


@dataclass(frozen=True)
class ChannelsLastPass(ModulePass):
    """Store the activations of 2-D convolutions channels-last (see the module docstring)."""

    name: ClassVar[str] = "channels-last"  # pyright: ignore[reportIncompatibleVariableOverride]

    convert_inputs: bool = True
    """Copy a function argument a convolution reads to channels-last first."""
    convert_weights: bool = False
    """Copy the weights too (a kernel each per call: there is no freezing), sparing
    oneDNN / cuDNN their reorder of an NCHW weight."""
    pointwise_as_mm: bool = True
    """``conv1x1-to-mm`` runs after this pass (the default pipeline): a 1x1 convolution
    it turns into a matrix product does not run in ``Slow2d``, so it does not keep the
    function NCHW. Set it false when the pipeline leaves that pass out."""

    saved_nhwc: bool = True
    """On the GPU: return the results listed in ``kiln.free_layout_outputs`` (a training
    forward's saved activations) channels-last where they are stored so, and rewrite the
    pointwise ops on channels-last arguments (a backward's saved activations) and on
    results ATen lays out NHWC (``convolution_backward``) to NHWC, so that cuDNN's
    backward convolutions read NHWC (no ``nchwToNhwc`` / ``nhwcToNchw`` transposes).
    On since session 20: H200, float32 training steps, kernel ms off / on (`9fa2354`,
    torch 2.11): ResNet-18 small 1.265 / 1.246, large 6.19 / 4.81, ResNet-50 small 2.67 /
    2.45, MobileNet-v2 small 1.61 / 1.52, ShuffleNet-v2 small 1.49 / 1.53. It was off
    (session 14: 25x slower steps) because the batch norms' per-channel reductions over
    NHWC (``welford`` statistics, ``sum(g)`` with ``sum(g * (x - m))``) ran as one program
    of 64 channels over all N*H*W rows (42 ms a launch): ``tile`` now splits kernels of
    several reductions and welford statistics, and outer reductions keep 32 programs."""
    saved_nhwc_cpu: bool = False
    """The same on the CPU whatever the sizes (by default only for large convolutions:
    ``saved_nhwc_cpu_min_elements``). Small ones lose: a torchvision ResNet-18 training step (batch 8, 96x96,
    1 thread, C++ executor, best of 15) took 342-358 ms so against 283-310 ms without,
    though MobileNet-v2's took 105-115 ms against 140-151 ms and EfficientNet-B0's 166
    against 240 ms (session 13, a loaded 2-core VM). ResNet-18's profile: ATen copies
    each NCHW weight channels-last at every call of a channels-last convolution and its
    backward (about 80 ms a step, the 3x3 512-channel layers above all), and the
    backward of those layers (batch 8, 3x3 pixels) took 28 ms a call NHWC against 18 ms
    NCHW (profiler, 1 thread)."""

    gpu_channel_plumbing: bool = False
    """On the GPU too, keep the layout through ``cat`` and ``split`` along C and
    ShuffleNet's channel shuffle (as on the CPU; a convolution reading a channel slice
    gets a compact NHWC copy of it). Off: in a training forward the split pieces are
    saved for the backward, which keeps the shuffle NCHW anyway (ShuffleNet-v2 on an
    H100: no change; docs/benchmarks/train-kernels.md, "Session 42")."""

    gpu_copy_nchw_inputs: bool = True
    """On the GPU, a convolution whose input is stored NCHW (ShuffleNet's channel slices
    of the NCHW shuffle) reads a compact channels-last copy of it, so that it and what
    follows run NHWC (cuDNN's NHWC depthwise kernels rather than ATen's NCHW ones;
    Inductor's layout optimization copies so). In a training forward that saves the
    slice, the copy is what is saved (the backward reads it channels-last). Not for
    ``[N, C, 1, 1]`` inputs (a squeeze-excite block's), NHWC already. Off until session
    43 (the copies of those inputs made MobileNet-v3 and EfficientNet-b0 slower)."""

    saved_nhwc_cpu_min_elements: int = SAVED_NHWC_CPU_MIN_ELEMENTS
    """On the CPU, a training forward whose largest convolution output has at least this
    many elements saves its activations channels-last (and its backward, which receives
    them so, computes on them NHWC), as with ``saved_nhwc_cpu``: oneDNN's convolutions and
    their backward win over the weight reorders there (figures at
    :data:`~kiln.passes.channels_last_parts.cpu_heuristics.SAVED_NHWC_CPU_MIN_ELEMENTS`)."""

    def _saved_nhwc_on_cpu(self, func: FuncOp, free: frozenset[int]) -> bool:
        if self.saved_nhwc_cpu:
            return True
        if not has_2d_convolution(func):  # a backward: as its forward saved its activations
            return bool(channels_last_args(func))
        # A training forward (its saved activations' layout is free); inference as before.
        return bool(free) and largest_convolution_output(func) >= self.saved_nhwc_cpu_min_elements

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for func in [f for f in op.walk() if isinstance(f, FuncOp)]:
            free = free_layout_outputs(func) - alias_bases(func)
            func.attributes.pop(FREE_LAYOUT_OUTPUTS_ATTR, None)
            if not func.body.blocks:
                continue
            saved_nhwc = self.saved_nhwc if _on_gpu(op) else self._saved_nhwc_on_cpu(func, free)
            nhwc_args = channels_last_args(func) if saved_nhwc else []
            if not has_2d_convolution(func) and not nhwc_args:
                continue
            if not _on_gpu(op) and slow_cpu_convolution(func, self.pointwise_as_mm):
                continue
            rewrite = FunctionRewrite(
                func.body.block,
                self.convert_inputs,
                self.convert_weights,
                _on_gpu(op),
                self.pointwise_as_mm,
                free if saved_nhwc else frozenset(),
                nhwc_args,
                saved_nhwc,
                channel_plumbing=not _on_gpu(op) or self.gpu_channel_plumbing,
                copy_nchw_inputs=_on_gpu(op) and self.gpu_copy_nchw_inputs,
            )
            rewrite.run()
            if rewrite.returned_nhwc:
                permute_returned(func, rewrite.returned_nhwc)


def _on_gpu(module: ModuleOp) -> bool:
    # Defined here, not with the CPU heuristics: ``apply`` looks it up in this module,
    # where ``benchmarks/accuracy_gate.py --gpu-layouts`` replaces it.
    return not runs_on_cpu(module)
