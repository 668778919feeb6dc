"""``kernel.program`` as a Python function ``call(args)``: the launch sequence.

Written by the walk both backends share (:mod:`kiln.backends.host.walker`: names,
allocations, frees, reuse, arguments released after their last use, externs inline,
host scalar arithmetic, results); this module adds the Triton hooks:

* the prologue: ``device = default_device`` (the graph's device, fixed at compile time,
  see :mod:`kiln.devices`), ``stream = get_stream(device)``; each tensor argument goes
  through ``as_buffer`` (contiguous, on that device unless only externs read it) right
  before its first use;
* ``kernel.alloc`` -> ``buf0 = empty_strided((2, 5, 16), (80, 16, 1), dtype=..., device=device)``;
* ``kernel.launch @kernel0`` -> ``run_kiln_per_fused_sum_0(stream, x, buf0)``: a runner
  the runtime provides (it picks the grid and launches the compiled kernel);
* ``kernel.reuse`` -> ``buf3 = reinterpret(buf0, shape)``;
* an extern's result that a kernel reads -> ``on_device`` (ATen may make it on the CPU);
* a ``kiln.prepack`` convolution -> its site, which keeps the weight channels-last
  (:mod:`kiln.backends.triton.weight_layouts`).

Program arguments must be contiguous, but for those read through recorded strides
(:mod:`kiln.dialects.aten.arg_layout`): ``as_buffer`` copies those that are not, and
``as_layout`` those not laid out with the recorded strides.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from xdsl.dialects.builtin import MemRefType
from xdsl.ir import SSAValue

from kiln.backends.host.walker import (
    RESERVED,
    ProgramWalker,
    WrapperError,
    contiguous_stride_texts,
    py_tuple,
)
from kiln.dialects.aten.ops import AtenOp
from kiln.dialects.kernel.program_ops import ExternOp, LaunchOp, ProgramOp
from kiln.dialects.loop.body_eval import torch_dtype


@dataclass
class WrapperPrinter(ProgramWalker):
    """The Triton backend's hooks of the shared program walk."""

    runners: dict[str, str] = field(default_factory=dict[str, str])
    """``kernel.kernel`` name -> the name of the runner that launches its Triton kernel."""

    reserved: ClassVar[frozenset[str]] = RESERVED | {
        "device",
        "stream",
        "call",
        "aten",
        "empty_strided",
        "as_buffer",
        "as_layout",
        "on_device",
        "reinterpret",
        "get_stream",
        "default_device",
        "triton",
        "tl",
        "libdevice",
    }
    function_name: ClassVar[str | None] = "call"
    backend: ClassVar[str] = "the Triton"

    def prologue(self) -> None:
        # The graph's device, fixed at compile time (kiln.devices): a graph whose tensors
        # are all made inside it still allocates on the GPU, and a CPU 0-d argument of a
        # CUDA graph is moved there (by ``as_buffer``, at the argument's first use).
        self.line("device = default_device")
        self.line("stream = get_stream(device)")

    def prepare_argument(self, arg: SSAValue) -> None:
        name = self.name(arg)
        # Only ATen reads it: it stays where the caller made it, as in eager. A CPU
        # 0-d tensor (attention's philox seed and offset, saved for the backward)
        # moved to the GPU is a blocking host-to-device copy on every call.
        extern_only = all(isinstance(use.operation, ExternOp) for use in arg.uses)
        strides = self.recorded_strides(arg)
        if strides is not None:
            # Read through its strides in place (a copy only if laid out otherwise).
            where = "None" if extern_only else "device"
            self.line(f"{name} = as_layout({name}, {where}, {strides!r})")
            return
        if extern_only:
            self.line(f"{name} = as_buffer({name})")
            return
        self.line(f"{name} = as_buffer({name}, device)")

    def allocate(self, ty: MemRefType, shape: list[str]) -> str:
        strides = py_tuple(contiguous_stride_texts(shape))
        dtype = torch_dtype(ty.element_type)
        return f"empty_strided({py_tuple(shape)}, {strides}, dtype={dtype}, device=device)"

    def view(self, source: str, ty: MemRefType, shape: list[str]) -> str:
        return f"reinterpret({source}, {py_tuple(shape)})"

    def launch(self, op: LaunchOp) -> None:
        kernel = op.kernel.string_value()
        runner = self.runners.get(kernel)
        if runner is None:
            raise WrapperError(f"no Triton kernel implements @{kernel} (run lower-to-triton)")
        # the kernel's parameters: input buffers, output buffers, then sizes
        buffers = [v for v in op.args if isinstance(v.type, MemRefType)]
        sizes = [v for v in op.args if not isinstance(v.type, MemRefType)]
        args = [self.name(v) for v in (*buffers, *op.outs, *sizes)]
        self.line(f"{runner}(stream, {', '.join(args)})")

    def prepacked_site(self, op: AtenOp) -> Callable[..., Any] | None:
        # Built once per program: the site reads its weight's channels-last copy.
        from kiln.backends.triton.weight_layouts import prepacked_site

        return prepacked_site(op)

    def after_extern(self, op: ExternOp) -> None:
        """An extern's result that a kernel reads is moved to the program's device: ATen
        may make it on the CPU (a wrapped scalar, ``scalar_tensor`` without a device, a
        tensor constant such as the indices of ``x[torch.tensor([0, 2])]``), which eager
        mixes into GPU ops but a Triton kernel cannot read. The move keeps the strides."""
        for result in op.outputs:
            if isinstance(result.type, MemRefType) and any(
                isinstance(use.operation, LaunchOp) for use in result.uses
            ):
                name = self.name(result)
                self.line(f"{name} = on_device({name}, device)")


WRAPPER_HEADER = """aten = torch.ops.aten
empty_strided = torch.empty_strided
# When kiln.backends.triton.runtime loads this module it defines what call() uses
# besides torch: the launchers run_<kernel>, get_stream, as_buffer, as_layout, on_device,
# reinterpret and default_device, and the objects the extern calls use (ATen
# bindings, constant arguments, compiled extern bodies: _c0, _mm, ...)."""


def print_wrapper(program: ProgramOp, runners: dict[str, str]) -> tuple[str, dict[str, Any]]:
    """The ``call`` function's source and the module-level objects it uses (``_c0``, ...)."""
    printer = WrapperPrinter(program, runners=runners)
    source = printer.write()
    return source.rstrip("\n"), printer.namespace


__all__ = ["WRAPPER_HEADER", "WrapperError", "WrapperPrinter", "print_wrapper"]
