"""Compile a function with the C++ backend and compare it with eager PyTorch.

``check(fn, make_inputs)`` captures ``fn`` with ``make_fx`` on one set of random inputs,
runs the pipeline (by default the whole CPU pipeline, ending in ``lower-to-cpp``),
compiles the kernels, and compares the compiled program with eager ``fn`` on *fresh*
random inputs from ``make_inputs()``, with a tolerance for the output's dtype.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import PassPipeline

from kiln.backends.cpp.wrapper import CppProgram
from kiln.frontends.capture import capture_make_fx
from kiln.frontends.fx import import_graph
from kiln.registry import default_registry
from kiln.targets import build_cpp_program

PIPELINE = "decompose,canonicalize,cse,dce,lower-aten,fuse,tile,buffer-reuse"

TOLERANCE: dict[torch.dtype, tuple[float, float]] = {
    torch.float64: (1e-10, 1e-10),
    torch.float32: (1e-5, 1e-5),
    torch.float16: (2e-3, 2e-3),
    torch.bfloat16: (2e-2, 2e-2),
}


def lower(fn: Callable[..., Any], inputs: Sequence[Any], pipeline: str = PIPELINE) -> ModuleOp:
    """Capture ``fn`` on ``inputs`` and run the pipeline on it."""
    return lower_graph(capture_make_fx(fn, *inputs).gm, pipeline)


def lower_graph(gm: torch.fx.GraphModule, pipeline: str = PIPELINE) -> ModuleOp:
    module = import_graph(gm)
    registry = default_registry()
    PassPipeline.parse_spec(registry.passes, pipeline).apply(registry.make_context(), module)
    module.verify()
    return module


def flat_outputs(value: Any) -> list[Any]:
    if isinstance(value, list | tuple):
        return [v for item in value for v in flat_outputs(item)]
    return [value]


MODEL_TOLERANCE = (1e-4, 1e-4)
"""float32 tolerance for whole models: rounding accumulates over dozens of ops (measured:
kiln's and eager's float32 results deviate from a float64 run by the same amount)."""


def assert_matches(
    actual: Any, expected: Any, tolerance: tuple[float, float] | None = None
) -> None:
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), f"expected a tensor, got {type(actual).__name__}"
        atol, rtol = TOLERANCE.get(expected.dtype, (0.0, 0.0))
        if tolerance is not None and expected.dtype == torch.float32:
            atol, rtol = tolerance
        torch.testing.assert_close(actual, expected, atol=atol, rtol=rtol, equal_nan=True)
    else:
        assert actual == expected


def check(
    fn: Callable[..., Any],
    make_inputs: Callable[[], Sequence[Any]],
    pipeline: str = PIPELINE,
    threads: int = 0,
    runs: int = 1,
    tolerance: tuple[float, float] | None = None,
) -> CppProgram:
    """Compile ``fn`` and compare it with eager on ``runs`` fresh sets of inputs
    (``tolerance``: float32 (atol, rtol) when the default is too tight for the op)."""
    module = lower(fn, make_inputs(), pipeline)
    program = build_cpp_program(module, threads=threads)
    for _ in range(runs):
        inputs = list(make_inputs())
        expected = flat_outputs(
            fn(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
        )
        actual = program(inputs)
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected, strict=True):
            assert_matches(a, e, tolerance)
    return program


def randn(*shape: int, dtype: torch.dtype = torch.float32) -> Callable[[], torch.Tensor]:
    return lambda: torch.randn(*shape, dtype=dtype)
