"""The dashboard's rows and results files: what one measurement is, how results files
merge, and the run's provenance (commit, machine, versions)."""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch


@dataclass
class Row:
    model: str
    source: str
    family: str
    size: str
    mode: str
    dtype: str
    backend: str
    device: str
    status: str = "pass"
    """pass, fail (with ``reason``)."""
    reason: str | None = None
    ms: float | None = None
    eager_paired_ms: float | None = None
    """Eager's ms timed in bursts alternating with this backend's (``paired_ms``): the
    baseline of this row's speedup and of the kiln/Inductor ratio."""
    interleaved_ms: float | None = None
    """``--interleave``: ms per call timed in the same rounds as the task's other backends
    (``interleaved_ms``); None: not measured."""
    opt_ms: float | None = None
    """train, eager row: one AdamW step (eager, foreach)."""
    cold_compile_s: float | None = None
    warm_compile_s: float | None = None
    peak_mb: float | None = None
    launches: float | None = None
    """Kernel launches per step (see benchmarks/dashboard.py's docstring for how, per device)."""
    kernel_ms: float | None = None
    """CUDA: summed device time of the kernels of one step (torch.profiler)."""
    graphs: int | None = None
    externs: int | None = None
    """kiln: ATen fallback calls per step."""
    err_eager: float | None = None
    err_fp64: float | None = None
    eager_err_fp64: float | None = None
    perturbed_err_fp64: float | None = None
    """The worst float64 error of eager's perturbed runs (one rounding) on that tensor."""
    notes: str | None = None
    """Measurements that failed on a passing row (memory, profiler, optimizer)."""
    dynamic: bool = False
    """Compiled with ``torch.compile(dynamic=True)`` (``--dynamic``)."""
    recompiles: int | None = None
    """``--dynamic``: recompilations counted by the recompile hook (None: not measured)."""
    jobs: int = 1
    """Worker processes that ran at once (``--jobs``). Timed measurements never overlap
    (one lock), but above 1 the compile times were measured beside other workers' compiles
    (see benchmarks/dashboard.py's docstring)."""
    lock_wait_s: float | None = None
    """``--jobs``: seconds this row waited for the timing lock (how busy the lock was)."""
    top_kernels: list[tuple[str, float, float]] | None = None
    """CUDA: the step's costliest kernels as ``(name, us per step, launches per step)``,
    most time first (``dashboard_measure.TOP_KERNELS`` of them): what the row's
    ``kernel_ms`` is made of, so that a row that moved between two runs shows which
    kernels moved."""

    def key(self) -> tuple[Any, ...]:
        return row_key(self.__dict__)


def row_key(row: dict[str, Any]) -> tuple[Any, ...]:
    base = (row["model"], row["size"], row["mode"], row["dtype"], row["backend"])
    # Static rows keep their old key, so that results files of earlier runs still merge.
    return (*base, "dynamic") if row.get("dynamic") else base


def failed_rows(
    spec: Any, size: str, mode: str, dtype: str, backends: Sequence[str], device: str, reason: str
) -> list[Row]:
    """One failure row per backend (a model that did not build, an eager reference that
    failed, a worker process that died)."""
    return [
        Row(spec.name, spec.source, spec.family, size, mode, dtype, b, device, "fail", reason)
        for b in backends
    ]


def finite(row: dict[str, Any]) -> dict[str, Any]:
    # JSON has no infinity: an infinite error (NaN output, shape mismatch) is stored as null.
    return {
        k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in row.items()
    }


def load_results(paths: Sequence[Path]) -> dict[str, Any]:
    """Merge results files: runs concatenated; rows and scaling points, later files win."""
    merged: dict[str, Any] = {"runs": [], "rows": [], "scaling": []}
    rows: dict[tuple[Any, ...], dict[str, Any]] = {}
    scaling: dict[tuple[Any, ...], dict[str, Any]] = {}
    for path in paths:
        data = json.loads(path.read_text())
        merged["runs"] += data.get("runs", [])
        for row in data.get("rows", []):
            rows[row_key(row)] = row
        for point in data.get("scaling", []):
            scaling[(point["backend"], point["layers"])] = point
    merged["rows"] = list(rows.values())
    merged["scaling"] = sorted(scaling.values(), key=lambda p: (p["backend"], p["layers"]))
    return merged


def save_results(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    tmp.replace(path)


def machine(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name()
    name = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    return f"{name}, {torch.get_num_threads()} threads{transparent_huge_pages()}"


def transparent_huge_pages() -> str:
    """``, THP <mode>`` (the kernel's transparent huge page mode, and torch's own madvise
    when ``THP_MEM_ALLOC_ENABLE=1``), or nothing where unknown: it moved large CPU rows by
    a third on session 25's VM, so rows of machines in different modes do not compare."""
    with contextlib.suppress(OSError):
        text = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
        mode = text[text.index("[") + 1 : text.index("]")] if "[" in text else text.strip()
        torch_madvise = os.environ.get("THP_MEM_ALLOC_ENABLE") == "1"
        return f", THP {mode}" + (" (torch madvises)" if torch_madvise else "")
    return ""


def commit() -> str:
    if os.environ.get("KILN_COMMIT"):
        return os.environ["KILN_COMMIT"]
    root = Path(__file__).resolve().parent.parent

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()

    try:
        head = git("rev-parse", "--short", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
        return head + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown (set KILN_COMMIT)"


def versions() -> dict[str, str]:
    from importlib.metadata import version

    out = {"python": platform.python_version(), "torch": torch.__version__}
    for name in ("torchvision", "timm", "transformers", "triton", "xdsl"):
        with contextlib.suppress(Exception):
            out[name] = version(name)
    return out
