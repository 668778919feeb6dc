"""``kiln.explain(model, *inputs)``: what kiln does with a model, without guessing.

Compiles the model with kiln (the fusion report switched on), runs it once, and returns
(and prints) a report per graph Dynamo captured: graph breaks, FX nodes, ops lowered to
kernels vs run through ATen, the kernels and the fusion decisions.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable
from typing import Any

import torch

from kiln.compiler import DEFAULT_PIPELINE, compile_history, reset_compile_history


def _with_fuse_report(pipeline: str) -> str:
    parts = [p.strip() for p in pipeline.split(",")]
    return ",".join("fuse{report=true}" if p == "fuse" else p for p in parts)


def explain(
    model: Callable[..., Any], *inputs: Any, print_report: bool = True, **options: Any
) -> str:
    """Compile ``model`` with kiln on ``inputs`` and describe each graph."""
    import kiln

    torch._dynamo.reset()
    breaks = torch._dynamo.explain(model)(*inputs)
    torch._dynamo.reset()
    reset_compile_history()
    pipeline = _with_fuse_report(options.pop("pipeline", DEFAULT_PIPELINE))
    # The report is the pipeline's own (pass times, fusion decisions): run it, not a
    # program from the graph cache.
    options.setdefault("graph_cache", False)
    fusion_log = io.StringIO()
    with contextlib.redirect_stderr(fusion_log), torch.no_grad():
        kiln.compile(model, pipeline=pipeline, verbose=False, **options)(*inputs)
    lines = [
        f"kiln.explain: {breaks.graph_count} graph(s), {breaks.graph_break_count} graph break(s)"
    ]
    for reason in breaks.break_reasons:
        lines.append(f"  break: {reason.reason}")
    for stats in compile_history():
        lines.append("")
        lines.append(stats.summary().removeprefix("kiln: "))
        lines.append(
            "  passes: "
            + ", ".join(
                f"{name} {stats.pass_seconds[name] * 1000:.0f} ms" for name in stats.pass_seconds
            )
        )
        if stats.stamped:
            lines.append(
                "  repeated layers lowered once (lower-aten): stamped " + "; ".join(stats.stamped)
            )
        if stats.stamped_fuse:
            lines.append(
                "  repeated layers scheduled once (fuse): stamped " + "; ".join(stats.stamped_fuse)
            )
        if stats.externs:
            lines.append("  run through ATen (no kiln lowering, or a library call such as mm):")
            lines.extend(f"    {name} x{count}" for name, count in stats.externs.most_common())
        if stats.prepacked:
            lines.append(
                f"  convolutions / linear layers on cached prepacked weights (prepack-weights): "
                f"{stats.prepacked}"
            )
    report = fusion_log.getvalue().strip()
    if report:
        lines += ["", "fusion decisions:", *("  " + line for line in report.splitlines())]
    text = "\n".join(lines)
    if print_report:
        print(text)
    return text
