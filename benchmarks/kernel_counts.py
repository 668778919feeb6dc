"""Kernels per model: kiln's scheduler against TorchInductor, on the same graphs.

For every model of the zoo (``tests/models.py``), the make_fx graph is compiled two ways:

* kiln: ``decompose, lower-aten, fuse, tile, buffer-reuse``; counts loop nodes before
  fusion, kernels and extern (ATen) calls after, checks the kernel interpreter equals
  eager, and reports peak memory of the program as written, with frees at last use,
  and after buffer reuse and in-place updates (static shapes, bytes), and allocator
  calls before and after;
* Inductor: ``torch.compile(graph)`` on the CPU (caches off), counting the C++ kernels
  in the generated wrapper (``async_compile.cpp_pybinding`` definitions), the extern
  calls, and ``torch._inductor.metrics.generated_kernel_count`` (which on the CPU counts
  loop nests: one C++ kernel holds several).

    python benchmarks/kernel_counts.py [--models gpt_block,layer_norm] [--no-inductor]

An Inductor C++ kernel may hold several loop nests over different iteration spaces (one
OpenMP parallel region); a kiln kernel has one iteration space, like a Triton kernel.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.utils._pytree as pytree
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import PassPipeline

from kiln.dialects.kernel import ExternOp, KernelOp, ProgramOp
from kiln.dialects.kernel.interpreter import run_program
from kiln.dialects.loop import LoopNestOp
from kiln.frontends.capture import Capture, capture_make_fx
from kiln.frontends.fx import GET_ATTR_ATTR, import_graph, rebuild_outputs
from kiln.passes.buffer_reuse import plan_program
from kiln.registry import default_registry


def _zoo() -> dict[str, Callable[[], tuple[torch.nn.Module, tuple[torch.Tensor, ...]]]]:
    """The test zoo's models (tests/models.py; benchmarks/suite_models.py is another module)."""
    spec = importlib.util.spec_from_file_location(
        "kiln_test_models", Path(__file__).parents[1] / "tests" / "models.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.ALL_MODELS


ALL_MODELS = _zoo()


@dataclass
class KilnCounts:
    loop_nodes: int
    kernels: int
    externs: int
    seconds: float
    correct: bool
    peak_written: int
    peak_frees: int
    peak_after: int
    allocations_written: int
    allocations_after: int


@dataclass
class InductorCounts:
    kernels: int
    externs: int
    loop_nests: int
    seconds: float


def _arguments(module: ModuleOp, capture: Capture) -> list[Any]:
    from xdsl.dialects.builtin import DictionaryAttr, StringAttr
    from xdsl.dialects.func import FuncOp

    args = [v.clone() if isinstance(v, torch.Tensor) else v for v in capture.example_inputs]
    func = next(op for op in module.ops if isinstance(op, FuncOp))
    for attr in func.arg_attrs.data[len(args) :] if func.arg_attrs is not None else ():
        assert isinstance(attr, DictionaryAttr)
        target = attr.data[GET_ATTR_ATTR]
        assert isinstance(target, StringAttr)
        value: Any = capture.gm
        for part in target.data.split("."):
            value = getattr(value, part)
        args.append(value.detach().clone())
    return args


def _run(module: ModuleOp, pipeline: str) -> None:
    registry = default_registry()
    PassPipeline.parse_spec(registry.passes, pipeline).apply(registry.make_context(), module)


def kiln_counts(capture: Capture) -> KilnCounts:
    module = import_graph(capture.gm)
    args = _arguments(module, capture)
    expected = capture.gm(*[a.clone() for a in args[: len(capture.example_inputs)]])
    func = next(iter(module.ops))
    start = time.perf_counter()
    _run(module, "decompose,lower-aten")
    loop_nodes = sum(1 for op in module.walk() if isinstance(op, LoopNestOp))
    _run(module, "fuse,tile")
    program = next(op for op in module.ops if isinstance(op, ProgramOp))
    kernels = {op.sym_name.data: op for op in module.ops if isinstance(op, KernelOp)}
    stats = plan_program(program, kernels)
    seconds = time.perf_counter() - start
    module.verify()
    results, _ = run_program(module, args)
    got = rebuild_outputs(func, results)  # pyright: ignore[reportArgumentType]
    pairs = zip(pytree.tree_leaves(got), pytree.tree_leaves(expected), strict=True)
    correct = all(
        torch.allclose(a, b, rtol=1e-4, atol=1e-4) if isinstance(b, torch.Tensor) else a == b
        for a, b in pairs
    )
    externs = sum(1 for op in program.body.block.ops if isinstance(op, ExternOp))
    return KilnCounts(
        loop_nodes,
        len(kernels),
        externs,
        seconds,
        correct,
        stats.as_written.peak,
        stats.with_frees.peak,
        stats.after.peak,
        stats.as_written.allocations,
        stats.after.allocations,
    )


def inductor_counts(capture: Capture) -> InductorCounts:
    import torch._inductor.config as config
    import torch._inductor.metrics as metrics
    from torch._inductor.utils import run_and_get_code

    config.fx_graph_cache = False
    torch._dynamo.reset()
    metrics.reset()
    start = time.perf_counter()
    _, sources = run_and_get_code(torch.compile(capture.gm), *capture.example_inputs)
    seconds = time.perf_counter() - start
    code = "\n".join(sources)
    kernels = len(re.findall(r"= async_compile\.(?:cpp_pybinding|triton)\(", code))
    externs = len(re.findall(r"\bextern_kernels\.\w+\(", code))
    externs += len(re.findall(r"\btorch\.ops\.aten\.\w+\.\w+\(", code))
    return InductorCounts(kernels, externs, metrics.generated_kernel_count, seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", default=",".join(sorted(ALL_MODELS)))
    parser.add_argument("--no-inductor", action="store_true")
    args = parser.parse_args()
    header = (
        f"{'model':20} {'loop nodes':>10} {'kiln kernels':>12} {'externs':>7} "
        f"{'inductor kernels':>16} {'externs':>7} {'loop nests':>10}  "
        f"{'peak as written':>15} {'with frees':>10} {'after reuse':>11} {'allocs':>8}  "
        f"{'kiln s':>6} {'ind. s':>6}"
    )
    print(header)
    print("-" * len(header))
    for name in args.models.split(","):
        model, inputs = ALL_MODELS[name]()
        capture = capture_make_fx(model, *inputs)
        kiln = kiln_counts(capture)
        ind = None if args.no_inductor else inductor_counts(capture_make_fx(model, *inputs))
        mark = "" if kiln.correct else "  (WRONG RESULT)"
        print(
            f"{name:20} {kiln.loop_nodes:>10} {kiln.kernels:>12} {kiln.externs:>7} "
            f"{ind.kernels if ind else '-':>16} {ind.externs if ind else '-':>7} "
            f"{ind.loop_nests if ind else '-':>10}  {kiln.peak_written:>13} B "
            f"{kiln.peak_frees:>8} B {kiln.peak_after:>9} B "
            f"{f'{kiln.allocations_written}->{kiln.allocations_after}':>8}  {kiln.seconds:>6.2f} "
            f"{ind.seconds if ind else float('nan'):>6.1f}{mark}"
        )


if __name__ == "__main__":
    main()
