"""Compile-time scaling: cold compile time of GPT-2 (width 128) at 1, 4, 16, 48 layers for
kiln and Inductor, each point in a fresh process (``dashboard.py --scaling``); for kiln,
also the warm recompile: a second fresh process on the cold one's caches (the graph
cache, ``kiln.graph_cache``), as ``warm_compile_s`` / ``warm_cpu_s`` / ``warm_kiln_s`` and
where its kiln seconds went (``warm_stages``: ``graph-key``, ``graph-cache``, ``load``,
... as :attr:`kiln.compiler.GraphStats.stage_seconds`)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from dashboard_measure import compile_with, describe, fresh_caches, sync

DASHBOARD = Path(__file__).resolve().parent / "dashboard.py"


def scaling_child(backend: str, layers: int, device_name: str, warm: bool = False) -> None:
    """In a fresh process: cold compile time of GPT-2 (width 128) with ``layers`` layers
    (``warm``: on the caches the environment names, which a cold child filled)."""
    from zoo.language import gpt2_layers

    device = torch.device(device_name)
    if not warm:
        fresh_caches(f"scaling-{backend}-{layers}")
    model, (ids,) = gpt2_layers(layers)
    model, ids = model.to(device), ids.to(device)
    result: dict[str, Any] = {"backend": backend, "layers": layers}
    try:
        with torch.no_grad():
            model(ids)
            sync(device)
            start = time.perf_counter()
            model(ids)
            sync(device)
            eager_s = time.perf_counter() - start
            fn = compile_with(backend, model)
            cpu = _cpu_seconds()
            start = time.perf_counter()
            fn(ids)
            sync(device)
            result["compile_s"] = max(time.perf_counter() - start - eager_s, 0.0)
            # CPU time of this process and its compiler children: steadier than wall time
            # on a shared machine (parallel builds make it exceed the wall time).
            result["cpu_s"] = _cpu_seconds() - cpu
        if backend.startswith("kiln"):
            result.update(kiln_stages())
            result["cache_dir"] = os.environ["KILN_CACHE_DIR"]
    except Exception as e:
        result["error"] = describe(e)
    print("SCALING " + json.dumps(result), flush=True)


def _cpu_seconds() -> float:
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def kiln_stages() -> dict[str, Any]:
    """kiln's own time over the graphs it compiled (``kiln_s``), by stage (``stages``: see
    :attr:`kiln.compiler.GraphStats.stage_seconds`, ``aot`` being AOTAutograd's), and the
    kernels it built against the launches they serve."""
    from kiln.compiler import compile_history

    history = compile_history()
    stages: dict[str, float] = {}
    for stats in history:
        for stage, seconds in getattr(stats, "stage_seconds", {}).items():
            stages[stage] = stages.get(stage, 0.0) + seconds
        for name, seconds in stats.pass_seconds.items():
            stages["pass:" + name] = stages.get("pass:" + name, 0.0) + seconds
    return {
        "graph_cache_hits": sum(getattr(s, "graph_cache", "") == "hit" for s in history),
        "kiln_s": sum(s.seconds for s in history),
        "stages": {k: round(v, 3) for k, v in stages.items()},
        "kernels": sum(s.kernels for s in history),
        "launches": sum(s.launches for s in history),
    }


def run_scaling(
    backends: Sequence[str], layers: Sequence[int], device: str, timeout: int
) -> list[dict[str, Any]]:
    results = []
    for n in layers:
        for backend in backends:
            print(f"compile-time scaling: {backend}, {n} layers ...", file=sys.stderr, flush=True)
            result = _child(backend, n, device, timeout)
            cache_dir = result.pop("cache_dir", None)
            if cache_dir is not None:
                print(f"  warm recompile: {backend}, {n} layers ...", file=sys.stderr, flush=True)
                warm = _child(backend, n, device, timeout, cache_dir)
                for key in ("compile_s", "cpu_s", "kiln_s", "graph_cache_hits", "stages", "error"):
                    if key in warm:
                        result[f"warm_{key}"] = warm[key]
            result["device"] = device
            print(f"  -> {result}", file=sys.stderr, flush=True)
            results.append(result)
    return results


def _child(
    backend: str, n: int, device: str, timeout: int, warm_cache: str | None = None
) -> dict[str, Any]:
    """One scaling point in a fresh process (``warm_cache``: on that kiln cache)."""
    command = [
        sys.executable,
        str(DASHBOARD),
        "--scaling-child",
        f"{backend}:{n}",
        "--device",
        device,
    ]
    env = None
    if warm_cache is not None:
        command[3] += ":warm"
        env = {**os.environ, "KILN_CACHE_DIR": warm_cache}
    # Its own session: on a timeout, its compile workers are killed with it.
    proc = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env=env,
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout or None)
        line = next((x for x in stdout.splitlines() if x.startswith("SCALING ")), None)
        if line is None:
            tail = (stderr.strip().splitlines() or ["no output"])[-1]
            return {
                "backend": backend,
                "layers": n,
                "error": f"exit {proc.returncode}: {tail[:300]}",
            }
        return json.loads(line.removeprefix("SCALING "))
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return {"backend": backend, "layers": n, "error": f"timed out after {timeout} s"}
