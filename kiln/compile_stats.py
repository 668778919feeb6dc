"""What a compilation did (:class:`GraphStats`), the process's history of them, and the
counts taken from a compiled module (ATen fallbacks, prepacked ops, ops)."""

from __future__ import annotations

import itertools
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass, field

from xdsl.dialects.builtin import ModuleOp

from kiln.compile_options import CompileOptions


@dataclass
class GraphStats:
    """What one compilation did; :func:`last_compile_stats` returns the latest."""

    name: str
    fx_nodes: int = 0
    kernels: int = 0
    launches: int = 0
    """``kernel.launch`` ops: kernel launches per call."""
    externs: Counter[str] = field(default_factory=Counter[str])
    prepacked: int = 0
    """Convolutions and linear layers marked ``kiln.prepack`` (run on cached prepacked
    weights by the C++ wrapper)."""
    executor: str = ""
    seconds: float = 0.0
    pass_seconds: dict[str, float] = field(default_factory=dict[str, float])
    pass_ops: dict[str, int] = field(default_factory=dict[str, int])
    """Ops in the module after each pass (and after ``import``)."""
    stage_seconds: dict[str, float] = field(default_factory=dict[str, float])
    """Where :attr:`seconds` went, by stage: ``aot`` (AOTAutograd's tracing before kiln
    got the graph, under ``torch.compile``; not part of :attr:`seconds`), ``import``,
    ``setup`` (loading kiln's modules and the passes: mostly the first graph of a process),
    ``passes`` (:attr:`pass_seconds` summed), then the backend's: ``lower-to-cpp``,
    ``emit``, ``build`` (compiler or cache, loading), ``wrapper`` (C++), or
    ``lower-to-triton+build`` (Triton); ``graph-key`` (the graph cache's key: describing
    the FX graph, or printing the imported IR), ``graph-cache`` (reading the entry, or
    storing it after a miss), ``load`` (a hit: loading its kernels' libraries and
    wrapper); ``other`` is the rest (executor choice, statistics)."""
    graph_cache: str = ""
    """``hit``, ``stored``, ``not stored: <why>``, or empty when the graph cache was not
    used (:mod:`kiln.graph_cache`)."""
    stamped: list[str] = field(default_factory=list[str])
    """What ``lower-aten`` stamped instead of lowering (repeated layers: ``"45 of 48
    periods of 81 aten ops"``), one note per function (:mod:`kiln.passes.aten_to_loop.stamp`)."""
    stamped_fuse: list[str] = field(default_factory=list[str])
    """What ``fuse`` stamped instead of scheduling (``"41 of 46 periods of 54 loop ops"``),
    one note per program (:mod:`kiln.passes.scheduling.stamp`)."""

    def profile(self) -> str:
        """The per-stage and per-pass times as a table (``KILN_PROFILE_PASSES=1`` prints it
        after every graph)."""
        rows = [
            f"kiln profile: {self.name}: {self.seconds:.3f} s in kiln, {self.fx_nodes} FX nodes"
        ]
        for stage, seconds in self.stage_seconds.items():
            rows.append(f"  {stage:<24} {seconds:8.3f} s")
            if stage == "passes":
                for name, pass_s in self.pass_seconds.items():
                    ops = self.pass_ops.get(name)
                    rows.append(
                        f"    {name:<22} {pass_s:8.3f} s  {ops if ops is not None else '':>7} ops"
                    )
        return "\n".join(rows)

    def summary(self) -> str:
        extern = ", ".join(f"{name} x{n}" for name, n in self.externs.most_common())
        how = "from the graph cache in" if self.graph_cache == "hit" else "compiled in"
        return (
            f"kiln: {self.name}: {self.fx_nodes} FX nodes -> {self.kernels} kernels"
            f"{', ATen fallback: ' + extern if extern else ', no ATen fallback'}"
            f" [{self.executor}, {how} {self.seconds:.2f} s]"
        )


_LAST_STATS: list[GraphStats] = []
_HISTORY: list[GraphStats] = []
GRAPH_IDS = itertools.count()
"""Numbers for graphs compiled without a name (``graph_<n>``)."""


def last_compile_stats() -> GraphStats:
    """Statistics of the most recent graph compiled in this process."""
    if not _LAST_STATS:
        raise LookupError("kiln has not compiled a graph in this process")
    return _LAST_STATS[-1]


def compile_history() -> list[GraphStats]:
    """Statistics of every graph compiled since :func:`reset_compile_history`."""
    return list(_HISTORY)


def reset_compile_history() -> None:
    _HISTORY.clear()


def profiling_passes() -> bool:
    """``KILN_PROFILE_PASSES`` set (not ``0``): print :meth:`GraphStats.profile` per graph."""
    return os.environ.get("KILN_PROFILE_PASSES", "0") not in ("", "0")


def record(stats: GraphStats, start: float, options: CompileOptions) -> None:
    """Finish ``stats`` (total and ``other`` seconds), keep it, print what is asked."""
    stats.seconds = time.perf_counter() - start
    inside = sum(v for k, v in stats.stage_seconds.items() if k != "aot")
    stats.stage_seconds["other"] = max(stats.seconds - inside, 0.0)
    _LAST_STATS.append(stats)
    del _LAST_STATS[:-1]
    _HISTORY.append(stats)
    if options.verbose:
        print(stats.summary(), file=sys.stderr)
    if profiling_passes():
        print(stats.profile(), file=sys.stderr)


_VIEW_OPS = frozenset(
    {
        "aten::as_strided.default",
        "aten::view.default",
        "aten::alias.default",
        "aten::permute.default",  # the NHWC view a channels-last extern yields
        "aten::reshape.default",  # an extern result retyped for its consumer (copy elision)
    }
)


def extern_overloads(module: ModuleOp) -> Counter[str]:
    """ATen overloads that run as fallbacks (extern bodies), views excluded."""
    from kiln.dialects.aten import AtenOp

    counts: Counter[str] = Counter()
    for op in module.walk():
        if op.name not in ("kernel.extern", "loop.extern"):
            continue
        for inner in op.walk():
            if isinstance(inner, AtenOp) and inner.overload_name not in _VIEW_OPS:
                counts[inner.overload_name] += 1
    return counts


def prepacked_ops(module: ModuleOp) -> int:
    """Convolutions and linear layers the C++ wrapper runs on prepacked weights
    (``kiln.prepack``)."""
    from kiln.dialects.aten.prepack import PREPACK_ATTR

    return sum(
        1
        for op in module.walk()
        if op.name in ("kernel.extern", "loop.extern")
        for inner in op.walk()
        if PREPACK_ATTR in inner.attributes
    )


def count_ops(module: ModuleOp) -> int:
    return sum(1 for _ in module.walk()) - 1


__all__ = [
    "GRAPH_IDS",
    "GraphStats",
    "compile_history",
    "count_ops",
    "extern_overloads",
    "last_compile_stats",
    "prepacked_ops",
    "profiling_passes",
    "record",
    "reset_compile_history",
]
