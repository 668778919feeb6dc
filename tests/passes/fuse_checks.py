"""Shared checks for the scheduling passes (fuse, tile, buffer-reuse).

``schedule`` runs a pipeline on parsed IR; ``assert_schedule_preserves`` runs the loop
function before and the kernel program after through their interpreters on the same
random (non-zero) inputs and compares them with dtype tolerances, and checks every
kernel can run point by point (:func:`~kiln.dialects.kernel.consistency.kernel_problems`); ``capture_args``
gives a captured model's inputs in the order of the imported function.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch.testing import assert_close
from xdsl.dialects.builtin import DictionaryAttr, MemRefType, ModuleOp, StringAttr, TensorType
from xdsl.dialects.func import FuncOp
from xdsl.parser import Parser
from xdsl.passes import PassPipeline

from kiln.dialects.kernel import KernelOp, LaunchOp, ProgramOp
from kiln.dialects.kernel.consistency import kernel_problems
from kiln.dialects.kernel.interpreter import MemoryTrace, run_program
from kiln.dialects.loop.body_eval import torch_dtype
from kiln.dialects.loop.interpreter import run_function
from kiln.frontends.capture import Capture
from kiln.frontends.fx import GET_ATTR_ATTR
from kiln.registry import default_registry


def parse(text: str) -> ModuleOp:
    module = Parser(default_registry().make_context(), text).parse_module()
    module.verify()
    return module


def schedule(module: ModuleOp, pipeline: str) -> ModuleOp:
    """Run ``pipeline`` (``-p`` syntax) on ``module`` in place, verifying the result."""
    registry = default_registry()
    ctx = registry.make_context()
    PassPipeline.parse_spec(registry.passes, pipeline).apply(ctx, module)
    module.verify()
    return module


def random_inputs(types: Sequence[Any], seed: int = 0) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    out: list[torch.Tensor] = []
    for ty in types:
        assert isinstance(ty, MemRefType | TensorType), f"give explicit inputs for {ty}"
        shape = list(ty.get_shape())
        dtype = torch_dtype(ty.element_type)
        if dtype.is_floating_point:
            out.append(torch.randn(shape, generator=generator).to(dtype))
        elif dtype == torch.bool:
            out.append(torch.randint(0, 2, shape, generator=generator).bool())
        else:
            out.append(torch.randint(1, 5, shape, generator=generator).to(dtype))
    return out


def function(module: ModuleOp, name: str = "forward") -> FuncOp:
    return next(op for op in module.ops if isinstance(op, FuncOp) and op.sym_name.data == name)


def program(module: ModuleOp, name: str = "forward") -> ProgramOp:
    return next(op for op in module.ops if isinstance(op, ProgramOp) and op.sym_name.data == name)


def kernels(module: ModuleOp) -> list[KernelOp]:
    return [op for op in module.ops if isinstance(op, KernelOp)]


def launches(module: ModuleOp, name: str = "forward") -> list[LaunchOp]:
    return [op for op in program(module, name).body.block.ops if isinstance(op, LaunchOp)]


def assert_results_close(got: Sequence[object], expected: Sequence[object]) -> None:
    assert len(got) == len(expected)
    for a, b in zip(got, expected, strict=True):
        if isinstance(b, torch.Tensor):
            assert isinstance(a, torch.Tensor)
            assert_close(a, b, equal_nan=False)
        else:
            assert a == b


def assert_schedule_preserves(
    loop_module: ModuleOp,
    pipeline: str,
    name: str = "forward",
    inputs: Sequence[torch.Tensor] | None = None,
) -> tuple[ModuleOp, MemoryTrace]:
    """Schedule a loop-level module and check the program computes what the function did."""
    func = function(loop_module, name)
    args = list(inputs) if inputs is not None else random_inputs(func.function_type.inputs.data)
    expected = run_function(loop_module, [a.clone() for a in args], name)
    scheduled = schedule(loop_module.clone(), pipeline)
    got, trace = run_program(scheduled, [a.clone() for a in args], name)
    assert_results_close(got, expected)
    assert_runnable_point_by_point(scheduled)
    return scheduled, trace


def assert_runnable_point_by_point(module: ModuleOp) -> None:
    """Every kernel reads kernel-local values only where they are computed."""
    problems = [p for k in kernels(module) for p in kernel_problems(k)]
    assert not problems, problems


def capture_args(module: ModuleOp, capture: Capture) -> list[Any]:
    """The capture's inputs, then the ``get_attr`` tensors the importer made arguments."""
    args = [v.clone() if isinstance(v, torch.Tensor) else v for v in capture.example_inputs]
    func = next(op for op in module.ops if isinstance(op, FuncOp))
    attrs = func.arg_attrs
    for attr in attrs.data[len(args) :] if attrs is not None else ():
        assert isinstance(attr, DictionaryAttr)
        target = attr.data[GET_ATTR_ATTR]
        assert isinstance(target, StringAttr)
        value: Any = capture.gm
        for part in target.data.split("."):
            value = getattr(value, part)
        args.append(value.detach().clone())
    return args
