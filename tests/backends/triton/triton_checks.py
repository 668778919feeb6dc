"""Running functions through kiln's Triton backend and comparing with eager.

On the CI machine kernels run in Triton's interpreter (``TRITON_INTERPRET=1``, set by
conftest.py); with ``KILN_TRITON_DEVICE=cuda`` the same tests compile real kernels and
run them on the GPU.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.utils._pytree as pytree
from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, ModuleOp, StringAttr

from kiln.backends.triton.runtime import TritonOptions
from kiln.dialects.aten.function_attrs import DEVICE_ATTR
from kiln.dialects.aten.fx import GET_ATTR_ATTR, import_graph
from kiln.dialects.kernel.attributes import ConfigAttr, KernelKind, KernelKindAttr
from kiln.dialects.kernel.kernel_ops import KernelOp
from kiln.dialects.kernel.program_ops import find_program
from kiln.frontends.capture import Capture, capture_make_fx
from kiln.registry import default_registry
from kiln.targets import build_triton_program

DEVICE = torch.device("cuda" if os.environ.get("KILN_TRITON_DEVICE") == "cuda" else "cpu")

PIPELINE = ("decompose", "canonicalize", "cse", "dce", "lower-aten", "fuse", "tile", "buffer-reuse")

TOLERANCE = {
    torch.float32: (1e-4, 1e-5),
    torch.float64: (1e-7, 1e-9),
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (5e-2, 5e-2),
}
"""(rtol, atol) by dtype."""

Retile = Callable[[KernelOp], None]


def run_pipeline(module: ModuleOp, passes: Sequence[str] = PIPELINE) -> None:
    registry = default_registry()
    ctx = registry.make_context()
    for name in passes:
        registry.get_pass(name)().apply(ctx, module)


def program_arguments(module: ModuleOp, capture: Capture) -> list[Any]:
    """The capture's inputs, then the ``get_attr`` tensors the importer made arguments."""
    args: list[Any] = [
        v.clone().to(DEVICE) if isinstance(v, torch.Tensor) else v for v in capture.example_inputs
    ]
    program = find_program(module)
    attrs = program.arg_attrs
    for attr in attrs.data[len(args) :] if attrs is not None else ():
        assert isinstance(attr, DictionaryAttr)
        target = attr.data[GET_ATTR_ATTR]
        assert isinstance(target, StringAttr)
        value: Any = capture.gm
        for part in target.data.split("."):
            value = getattr(value, part)
        args.append(value.detach().clone().to(DEVICE))
    return args


@dataclass
class Compiled:
    program: Any
    module: ModuleOp
    args: list[Any]
    expected: tuple[Any, ...]
    """What the graph returns, flattened (as :meth:`run` returns it)."""

    def run(self, args: Sequence[Any] | None = None) -> tuple[Any, ...]:
        """Run the program; its results in the graph's output structure, flattened."""
        from kiln.dialects.aten.fx.outputs import OUTPUTS_ATTR, rebuild_structure

        args = self.args if args is None else args
        outputs = self.program([a.clone() if isinstance(a, torch.Tensor) else a for a in args])
        structure = find_program(self.module).attributes.get(OUTPUTS_ATTR)
        if isinstance(structure, StringAttr):
            outputs = rebuild_structure(structure.data, outputs)
        return tuple(pytree.tree_leaves(outputs, is_leaf=lambda v: v is None))


def compile_capture(
    capture: Capture,
    passes: Sequence[str] = PIPELINE,
    retile: Retile | None = None,
    options: TritonOptions | None = None,
    gpu_decisions: bool = False,
) -> Compiled:
    """``gpu_decisions``: schedule as for a GPU (``kiln.device = "cuda"``: column-major
    producers, recomputed masks, merged tiny kernels) wherever the kernels run."""
    module = import_graph(capture.gm)
    if gpu_decisions:
        module.attributes[DEVICE_ATTR] = StringAttr("cuda")
    run_pipeline(module, passes)
    if retile is not None:
        for op in module.ops:
            if isinstance(op, KernelOp):
                retile(op)
    args = program_arguments(module, capture)
    expected = capture.gm(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
    expected = tuple(
        v.detach().cpu() if isinstance(v, torch.Tensor) else v
        for v in pytree.tree_leaves(expected, is_leaf=lambda v: v is None)
    )
    program = build_triton_program(module, options=options)
    return Compiled(program, module, args, expected)


@functools.cache
def runs_bfloat16_constants() -> bool:
    """Whether a kernel storing a bfloat16 constant runs here: always on a GPU; in
    Triton's interpreter only where it builds bf16 constants (3.6's has no ``get_bf16``)."""
    if DEVICE.type == "cuda":
        return True
    import triton
    import triton.language as tl

    @triton.jit
    def fill(out: Any) -> None:
        tl.store(out + tl.arange(0, 2), tl.full([2], 2.5, tl.bfloat16))

    out = torch.zeros(2, dtype=torch.bfloat16)
    try:
        fill[(1,)](out)
    except Exception:
        return False
    return bool((out == 2.5).all())


def assert_close(actual: Any, expected: Any) -> None:
    if (
        isinstance(expected, torch.Tensor)
        and isinstance(actual, int | float)
        and expected.dim() == 0
    ):
        actual = torch.tensor(actual, dtype=expected.dtype)
    if not isinstance(expected, torch.Tensor):
        assert actual == expected
        return
    assert isinstance(actual, torch.Tensor)
    actual, expected = actual.cpu(), expected.cpu()
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    rtol, atol = TOLERANCE.get(expected.dtype, (0.0, 0.0))
    torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=True)


def check(
    fn: Callable[..., Any],
    *inputs: Any,
    passes: Sequence[str] = PIPELINE,
    retile: Retile | None = None,
    options: TritonOptions | None = None,
) -> Compiled:
    """Compile ``fn`` for ``inputs`` with Triton, run it, compare with eager; returns it."""
    compiled = compile_capture(capture(fn, *inputs), passes, retile, options)
    outputs = compiled.run()
    assert len(outputs) == len(compiled.expected)
    for actual, expected in zip(outputs, compiled.expected, strict=True):
        assert_close(actual, expected)
    return compiled


def to_device(value: Any) -> Any:
    if isinstance(value, torch.Tensor | torch.nn.Module):
        return value.to(DEVICE)
    return value


def capture(fn: Callable[..., Any], *inputs: Any, dynamic: bool = False) -> Capture:
    """``capture_make_fx`` on :data:`DEVICE` (ATen picks device-specific overloads)."""
    return capture_make_fx(to_device(fn), *(to_device(x) for x in inputs), dynamic=dynamic)


def _config(values: dict[str, int]) -> ConfigAttr:
    return ConfigAttr.of({**values, "num_warps": 2, "num_stages": 1})


def looped(rblock: int, xblock: int = 2) -> Retile:
    """Make every reduction kernel loop over ``rblock``-wide chunks."""

    def apply(kernel: KernelOp) -> None:
        if not kernel.kernel_kind.reduces:
            return
        config = _config({"XBLOCK": xblock, "RBLOCK": rblock})
        if kernel.kernel_kind is not KernelKind.SPLIT:
            kernel.kind = KernelKindAttr(KernelKind.LOOPED)
        kernel.tiling = config
        kernel.configs = ArrayAttr([config])

    return apply


def persistent(xblock: int = 2) -> Retile:
    """Make every reduction kernel hold its whole (static) reduction in one block."""

    def apply(kernel: KernelOp) -> None:
        if not kernel.kernel_kind.reduces:
            return
        rnumel = int(kernel.rnumel.data)
        rblock = 1 << max(0, (rnumel - 1).bit_length())
        config = _config({"XBLOCK": xblock, "RBLOCK": rblock})
        kernel.kind = KernelKindAttr(KernelKind.PERSISTENT)
        kernel.tiling = config
        kernel.configs = ArrayAttr([config])

    return apply


def kernel_kinds(compiled: Compiled) -> list[str]:
    from kiln.dialects.triton import KernelOp as TritonKernelOp

    return [op.kind.data for op in compiled.module.ops if isinstance(op, TritonKernelOp)]


def randn(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape).to(dtype)


__all__ = [
    "DEVICE",
    "PIPELINE",
    "Compiled",
    "assert_close",
    "capture",
    "check",
    "compile_capture",
    "kernel_kinds",
    "looped",
    "persistent",
    "program_arguments",
    "randn",
    "run_pipeline",
    "to_device",
]
