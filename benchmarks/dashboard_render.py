"""Render the dashboard's results (benchmarks/dashboard.py's JSON) as markdown and plots.

``render(data, path)`` writes ``path`` (markdown) and PNG plots in a folder named like it
(``dashboard-cpu.md`` -> ``dashboard-cpu/``): per (size, mode, dtype) the speedup of every
backend over eager per model; cold compile times, kiln against Inductor; peak-memory
compression, kiln against Inductor; compile time against depth (the scaling family).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from dashboard_backends import BACKENDS

Rows = list[dict[str, Any]]

PAIRS = (
    ("kiln", "inductor"),
    ("kiln-cg", "inductor-ro"),
    ("kiln-at", "inductor"),
    ("kiln-cublas", "inductor"),
)
"""(kiln backend, the Inductor backend it is compared with)."""


def geomean(xs: Iterable[float]) -> float | None:
    values = [x for x in xs if x and x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in values) / len(values)) if values else None


def fmt(value: float | None, spec: str = ".2f") -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return format(value, spec)


def _ms(row: dict[str, Any] | None) -> float | None:
    return row["ms"] if row and row["status"] == "pass" and row.get("ms") else None


def _ratio(num: float | None, den: float | None) -> float | None:
    return num / den if num and den else None


def _speedup(rs: dict[str, dict[str, Any]], backend: str) -> float | None:
    """Eager ms / ``backend`` ms, against the eager steps timed alternately with the
    backend's (``eager_paired_ms``) where the row has them, else the eager row's."""
    row = rs.get(backend)
    ms = _ms(row)
    paired = row.get("eager_paired_ms") if row and ms else None
    return _ratio(paired or _ms(rs.get("eager")), ms)


def _versus(rs: dict[str, dict[str, Any]], base: str, other: str) -> float | None:
    """How much faster ``other`` is than ``base`` (kiln/inductor: Inductor's time over
    kiln's), each measured against its own paired eager steps."""
    return _ratio(_speedup(rs, other), _speedup(rs, base))


def mode_of(row: dict[str, Any]) -> str:
    """The row's mode, ``dynamic`` added for ``--dynamic`` rows (a group of their own; their
    eager rows are the static ones)."""
    return row["mode"] + (" dynamic" if row.get("dynamic") else "")


def groups(rows: Rows) -> dict[tuple[str, str, str], dict[str, dict[str, dict[str, Any]]]]:
    """(size, mode, dtype) -> model -> backend -> row, in a stable order."""
    out: dict[tuple[str, str, str], dict[str, dict[str, dict[str, Any]]]] = defaultdict(dict)
    sizes, modes, dtypes = (
        ("small", "large"),
        ("infer", "train", "infer dynamic", "train dynamic"),
        ("float32", "bfloat16", "float16"),
    )
    for row in sorted(
        rows,
        key=lambda r: (
            sizes.index(r["size"]) if r["size"] in sizes else 9,
            modes.index(mode_of(r)) if mode_of(r) in modes else 9,
            dtypes.index(r["dtype"]) if r["dtype"] in dtypes else 9,
        ),
    ):
        out[(row["size"], mode_of(row), row["dtype"])].setdefault(row["model"], {})[
            row["backend"]
        ] = row
    for (size, mode, dtype), models in out.items():  # dynamic groups: eager is the baseline
        static = out.get((size, mode.removesuffix(" dynamic"), dtype), {})
        for model, rs in models.items():
            if mode.endswith(" dynamic") and "eager" not in rs and "eager" in static.get(model, {}):
                rs["eager"] = static[model]["eager"]
    # A ``--dynamic`` run's eager rows are static rows (eager compiles nothing): once its
    # dynamic groups have them, a static group of eager rows alone says nothing more.
    for size, mode, dtype in [k for k in out if not k[1].endswith(" dynamic")]:
        eager_only = all(set(rs) == {"eager"} for rs in out[(size, mode, dtype)].values())
        if eager_only and (size, f"{mode} dynamic", dtype) in out:
            del out[(size, mode, dtype)]
    return out


def backends_in(rows: Rows) -> list[str]:
    present = {r["backend"] for r in rows}
    return [b for b in BACKENDS if b in present]


def summary(rows: Rows) -> list[str]:
    backends = backends_in(rows)
    compiled = [b for b in backends if b != "eager"]
    pairs = [(k, i) for k, i in PAIRS if k in backends and i in backends]
    head = (
        ["size", "mode", "dtype", "models"]
        + [f"{b} pass" for b in backends]
        + [f"{b} speedup" for b in compiled]
        + [f"{k}/{i}" for k, i in pairs]
        + [f"compile {k}/{i}" for k, i in pairs[:1]]
        + [f"{b} compression" for b in compiled]
    )
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (size, mode, dtype), models in groups(rows).items():
        cells = [size, mode, dtype, str(len(models))]
        for b in backends:
            present = [m[b] for m in models.values() if b in m]
            cells.append(f"{sum(r['status'] == 'pass' for r in present)}/{len(present)}")
        for b in compiled:
            cells.append(fmt(geomean(_speedup(m, b) or 0 for m in models.values())))
        for k, i in pairs:
            cells.append(fmt(geomean(_versus(m, i, k) or 0 for m in models.values())))
        for k, i in pairs[:1]:
            cells.append(
                fmt(
                    geomean(
                        _ratio(_compile(m.get(k)), _compile(m.get(i))) or 0 for m in models.values()
                    )
                )
            )
        for b in compiled:
            cells.append(fmt(geomean(_compression(m, b) or 0 for m in models.values())))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _passed(row: dict[str, Any] | None, key: str) -> float | None:
    """``row[key]`` of a passing row (None otherwise)."""
    return row.get(key) if row and row["status"] == "pass" else None


def _compile(row: dict[str, Any] | None) -> float | None:
    return _passed(row, "cold_compile_s")


def _compression(models_row: dict[str, dict[str, Any]], backend: str) -> float | None:
    eager, other = models_row.get("eager"), models_row.get(backend)
    if not eager or not other or other["status"] != "pass":
        return None
    return _ratio(eager.get("peak_mb"), other.get("peak_mb"))


def worst(rows: Rows, n: int = 5) -> list[str]:
    """The n lowest kiln/Inductor ratios over all rows where both ran."""
    found = []
    for (size, mode, dtype), models in groups(rows).items():
        for model, rs in models.items():
            for k, i in PAIRS:
                ratio = _versus(rs, i, k)
                if ratio:
                    found.append((ratio, model, size, mode, dtype, k, i, rs))
    found.sort(key=lambda t: t[0])
    lines = [
        "| model | size | mode | dtype | pair | inductor ms | kiln ms | ratio |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for ratio, model, size, mode, dtype, k, i, rs in found[:n]:
        lines.append(
            f"| {model} | {size} | {mode} | {dtype} | {k} vs {i} | {fmt(_ms(rs.get(i)), '.3f')} | "
            f"{fmt(_ms(rs.get(k)), '.3f')} | {ratio:.2f} |"
        )
    return lines if found else ["(no row where both kiln and Inductor ran)"]


def _pair_lines(
    rows: Rows,
    metric: str,
    kiln_over_inductor: bool,
    headers: tuple[str, str, str],
    n: int,
) -> list[str]:
    """kiln against Inductor by one ``metric`` of both rows (``PAIRS``): the ratio is
    kiln's over Inductor's (``kiln_over_inductor``: higher is worse) or Inductor's over
    kiln's (lower is worse); per group its geomean and worst value, then the ``n`` worst
    rows. ``headers``: the ratio's column, the worst value's column, and the unit of the
    per-row figures. Empty where no pair has the metric."""
    ratio_header, worst_header, unit = headers
    per_group: dict[tuple[str, str, str, str], list[float]] = defaultdict(list)
    found: list[tuple[float, str, str, str, str, str, str, float, float]] = []
    for (size, mode, dtype), models in groups(rows).items():
        for model, rs in models.items():
            for k, i in PAIRS:
                kiln, inductor = _passed(rs.get(k), metric), _passed(rs.get(i), metric)
                if kiln and inductor:
                    ratio = kiln / inductor if kiln_over_inductor else inductor / kiln
                    per_group[(size, mode, dtype, f"{k}/{i}")].append(ratio)
                    found.append((ratio, model, size, mode, dtype, k, i, inductor, kiln))
    if not found:
        return []
    worst_of = max if kiln_over_inductor else min
    lines = [
        f"| size | mode | dtype | pair | models | {ratio_header} | {worst_header} |",
        "|---|---|---|---|---|---|---|",
    ]
    for (size, mode, dtype, pair), values in per_group.items():
        lines.append(
            f"| {size} | {mode} | {dtype} | {pair} | {len(values)} | {fmt(geomean(values))} | "
            f"{fmt(worst_of(values))} |"
        )
    found.sort(key=lambda t: -t[0] if kiln_over_inductor else t[0])
    lines += [
        "",
        f"| model | size | mode | dtype | pair | inductor {unit} | kiln {unit} | kiln/Inductor |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for ratio, model, size, mode, dtype, k, i, inductor, kiln in found[:n]:
        lines.append(
            f"| {model} | {size} | {mode} | {dtype} | {k} vs {i} | {inductor:.3f} | {kiln:.3f} | "
            f"{ratio:.2f} |"
        )
    return lines


def kernel_time_lines(rows: Rows, n: int = 5) -> list[str]:
    """On CUDA: the summed kernel time of a step, kiln's over Inductor's (below 1: kiln's
    kernels take less; issue 16's measure), geomean per group and the highest rows;
    empty where no row has a kernel time."""
    headers = ("kernel time kiln/Inductor (geomean)", "worst", "kernel ms")
    return _pair_lines(rows, "kernel_ms", True, headers, n)


def interleaved_lines(rows: Rows, n: int = 5) -> list[str]:
    """``--interleave``: kiln against Inductor timed in the same rounds (Inductor ms /
    kiln ms, above 1: kiln faster), geomean and lowest per group, then the lowest rows;
    empty where no row was timed so."""
    headers = ("kiln/Inductor, same rounds (geomean)", "lowest", "ms")
    return _pair_lines(rows, "interleaved_ms", False, headers, n)


def failures(rows: Rows) -> list[str]:
    failed = [r for r in rows if r["status"] != "pass"]
    if not failed:
        return ["None."]
    lines = ["| model | size | mode | dtype | backend | reason |", "|---|---|---|---|---|---|"]
    for r in sorted(
        failed, key=lambda r: (r["model"], r["size"], r["mode"], r["dtype"], r["backend"])
    ):
        reason = (r.get("reason") or "").replace("|", "\\|").replace("\n", " ")
        lines.append(
            f"| {r['model']} | {r['size']} | {r['mode']} | {r['dtype']} | {r['backend']} | {reason} |"
        )
    return lines


def table(
    models: dict[str, dict[str, dict[str, Any]]], backends: Sequence[str], cuda: bool
) -> list[str]:
    compiled = [b for b in backends if b != "eager"]
    pairs = [(k, i) for k, i in PAIRS if k in backends and i in backends]
    recompiles = any(r.get("recompiles") is not None for rs in models.values() for r in rs.values())
    head = (
        ["model", "source"]
        + [f"{b} ms" for b in backends]
        + [f"{k}/{i}" for k, i in pairs]
        + ["kiln speedup", "cold compile s (ind / kiln)", "warm compile s (ind / kiln)"]
        + ["peak MB (" + " / ".join(backends) + ")", "kiln compression"]
        + ["launches (" + " / ".join(compiled) + ")"]
        + (["kernel ms (" + " / ".join(backends) + ")"] if cuda else [])
        + (["recompiles (" + " / ".join(compiled) + ")"] if recompiles else [])
        + ["kiln err (eager / fp64 / eager's fp64 / perturbed eager's fp64)", "failures and notes"]
    )
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for model, rs in models.items():
        any_row = next(iter(rs.values()))
        kiln = rs.get("kiln")
        ind = rs.get("inductor")
        cells = [model, any_row["source"]]
        cells += [fmt(_ms(rs.get(b)), ".3f") for b in backends]
        cells += [fmt(_versus(rs, i, k)) for k, i in pairs]
        cells.append(fmt(_speedup(rs, "kiln") if kiln else None))
        for key in ("cold_compile_s", "warm_compile_s"):
            cells.append(
                f"{fmt(ind.get(key) if ind else None, '.1f')} / {fmt(kiln.get(key) if kiln else None, '.1f')}"
            )
        cells.append(
            " / ".join(fmt(rs[b].get("peak_mb") if b in rs else None, ".1f") for b in backends)
        )
        cells.append(fmt(_compression(rs, "kiln")))
        cells.append(
            " / ".join(fmt(rs[b].get("launches") if b in rs else None, ".0f") for b in compiled)
        )
        if cuda:
            cells.append(
                " / ".join(
                    fmt(rs[b].get("kernel_ms") if b in rs else None, ".3f") for b in backends
                )
            )
        if recompiles:
            cells.append(
                " / ".join(fmt(rs[b].get("recompiles") if b in rs else None, "d") for b in compiled)
            )
        cells.append(
            " / ".join(
                fmt(kiln.get(k) if kiln else None, ".1e")
                for k in ("err_eager", "err_fp64", "eager_err_fp64", "perturbed_err_fp64")
            )
        )
        notes = "; ".join(
            f"{b}: {r['reason'] if r['status'] != 'pass' else r['notes']}"
            for b, r in rs.items()
            if r["status"] != "pass" or r.get("notes")
        )
        cells.append(notes.replace("|", "\\|")[:400])
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def scaling_lines(points: Rows) -> list[str]:
    if not points:
        return ["Not run (`--scaling`)."]
    by_backend: dict[str, dict[int, dict[str, Any]]] = defaultdict(dict)
    for p in points:
        by_backend[p["backend"]][p["layers"]] = p
    layers = sorted({p["layers"] for p in points})
    lines = [
        "| backend | "
        + " | ".join(f"{n} layers" for n in layers)
        + " | s per added layer (first to last) |",
        "|---|" + "---|" * (len(layers) + 1),
    ]
    for backend, by_layers in sorted(by_backend.items()):
        cells = []
        for n in layers:
            p = by_layers.get(n)
            cells.append(
                "-" if p is None else fmt(p.get("compile_s"), ".1f") if "error" not in p else "fail"
            )
        ok = [
            (n, by_layers[n]["compile_s"])
            for n in layers
            if n in by_layers and "compile_s" in by_layers[n]
        ]
        slope = (ok[-1][1] - ok[0][1]) / (ok[-1][0] - ok[0][0]) if len(ok) >= 2 else None
        lines.append(f"| {backend} | " + " | ".join(cells) + f" | {fmt(slope)} |")
    errors = [
        f"- {p['backend']} at {p['layers']} layers: {p['error']}" for p in points if "error" in p
    ]
    return (
        lines
        + (["", *errors] if errors else [])
        + scaling_stage_lines(points)
        + warm_stage_lines(points)
    )


STAGES = ("aot", "setup", "import", "passes", "lower-to-cpp", "emit", "build", "wrapper")
"""kiln's stages in the scaling rows (kiln.compiler.GraphStats.stage_seconds); the warm
columns are a second fresh process on the cold one's caches (the graph cache)."""


def scaling_stage_lines(points: Rows) -> list[str]:
    """Where kiln's time goes at each depth: wall and CPU seconds of the compile, kiln's
    own seconds by stage, and kernels built against launches (repeated layers share
    kernels)."""
    staged = sorted((p for p in points if "stages" in p), key=lambda p: (p["backend"], p["layers"]))
    if not staged:
        return []
    lines = [
        "",
        "kiln by stage (seconds summed over the graphs; `aot` is AOTAutograd's tracing, "
        "outside kiln's own time; `cpu` counts the compiler processes too):",
        "",
        "| backend | layers | wall | cpu | kiln | "
        + " | ".join(STAGES)
        + " | kernels / launches | warm: wall / cpu / kiln |",
        "|---|---|" + "---|" * (len(STAGES) + 5),
    ]
    for p in staged:
        stages = p["stages"]
        cells = [fmt(stages.get(s), ".2f") for s in STAGES]
        lines.append(
            f"| {p['backend']} | {p['layers']} | {fmt(p.get('compile_s'), '.1f')} | "
            f"{fmt(p.get('cpu_s'), '.1f')} | {fmt(p.get('kiln_s'), '.1f')} | "
            + " | ".join(cells)
            + f" | {p.get('kernels', '-')} / {p.get('launches', '-')}"
            + f" | {fmt(p.get('warm_compile_s'), '.1f')} / {fmt(p.get('warm_cpu_s'), '.1f')}"
            + f" / {fmt(p.get('warm_kiln_s'), '.2f')} |"
        )
    return lines


WARM_STAGES = ("graph-key", "graph-cache", "load", "setup", "import", "other")
"""A warm recompile's stages: keying the FX graph (kiln.fx_key), reading the entry,
loading its program (libraries, wrapper); ``setup``/``import`` only where the graph was
keyed on its imported IR (dynamic shapes) or missed."""


def warm_stage_lines(points: Rows) -> list[str]:
    """Where a warm recompile's kiln seconds go (the second process, graph cache hits)."""
    warm = sorted(
        (p for p in points if "warm_stages" in p), key=lambda p: (p["backend"], p["layers"])
    )
    if not warm:
        return []
    lines = [
        "",
        "Warm recompile (a second fresh process on the cold one's caches) by stage, kiln's "
        "seconds summed over the graphs (`aot`: AOTAutograd's tracing, outside them):",
        "",
        "| backend | layers | wall | cpu | kiln | hits | aot | " + " | ".join(WARM_STAGES) + " |",
        "|---|---|" + "---|" * (len(WARM_STAGES) + 5),
    ]
    for p in warm:
        stages = p["warm_stages"]
        cells = [fmt(stages.get(s), ".2f") for s in ("aot", *WARM_STAGES)]
        lines.append(
            f"| {p['backend']} | {p['layers']} | {fmt(p.get('warm_compile_s'), '.1f')} | "
            f"{fmt(p.get('warm_cpu_s'), '.1f')} | {fmt(p.get('warm_kiln_s'), '.2f')} | "
            f"{p.get('warm_graph_cache_hits', '-')} | " + " | ".join(cells) + " |"
        )
    return lines


# -- plots ---------------------------------------------------------------------------------


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_speedup(
    models: dict[str, dict[str, dict[str, Any]]], backends: Sequence[str], title: str, path: Path
) -> None:
    plt = _pyplot()
    compiled = [b for b in backends if b != "eager"]
    names = list(models)
    fig, ax = plt.subplots(figsize=(8, 0.28 * len(names) * max(1, len(compiled) / 2) + 1.5))
    height = 0.8 / max(len(compiled), 1)
    for k, b in enumerate(compiled):
        values = [_speedup(models[m], b) or 0.0 for m in names]
        ax.barh([y + k * height for y in range(len(names))], values, height=height, label=b)
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_yticks(
        [y + height * (len(compiled) - 1) / 2 for y in range(len(names))], names, fontsize=7
    )
    ax.invert_yaxis()
    ax.set_xlabel("speedup over eager (higher is better; 0 = failed)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plot_pairs(rows: Rows, metric: str, label: str, path: Path, log: bool) -> bool:
    """kiln's value against Inductor's per (model, size, mode, dtype), one dot each."""
    plt = _pyplot()
    points: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for (size, mode, dtype), models in groups(rows).items():
        for rs in models.values():
            k, i = rs.get("kiln"), rs.get("inductor")
            if metric == "compression":
                kv, iv = _compression(rs, "kiln"), _compression(rs, "inductor")
            else:
                kv = k.get(metric) if k and k["status"] == "pass" else None
                iv = i.get(metric) if i and i["status"] == "pass" else None
            if kv and iv:
                points[f"{size} {mode} {dtype}"].append((iv, kv))
    if not points:
        return False
    fig, ax = plt.subplots(figsize=(6, 6))
    lo = min(min(x, y) for ps in points.values() for x, y in ps)
    hi = max(max(x, y) for ps in points.values() for x, y in ps)
    for name, ps in points.items():
        ax.scatter([p[0] for p in ps], [p[1] for p in ps], label=name, s=14)
    ax.plot([lo, hi], [lo, hi], color="black", linewidth=0.8)
    if log:
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_xlabel(f"Inductor {label}")
    ax.set_ylabel(f"kiln {label}")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


def plot_scaling(points: Rows, path: Path) -> bool:
    plt = _pyplot()
    by_backend: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for p in points:
        if "compile_s" in p:
            by_backend[p["backend"]].append((p["layers"], p["compile_s"]))
    if not by_backend:
        return False
    fig, ax = plt.subplots(figsize=(6, 4))
    for backend, ps in sorted(by_backend.items()):
        ps.sort()
        ax.plot([p[0] for p in ps], [p[1] for p in ps], marker="o", label=backend)
    ax.set_xlabel("GPT-2 layers (width 128)")
    ax.set_ylabel("cold compile s")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


# -- the page ------------------------------------------------------------------------------


def jobs_note(rows: Rows) -> list[str]:
    """What ``--jobs`` above 1 means for the rows it measured (none: nothing to say)."""
    jobs = sorted({int(r.get("jobs") or 1) for r in rows} - {1})
    if not jobs:
        return []
    n = sum(int(r.get("jobs") or 1) > 1 for r in rows)
    return [
        "",
        f"{n} of {len(rows)} rows were measured with {' or '.join(map(str, jobs))} workers at "
        "once (`--jobs`, the row's `jobs`): their timed runs, peak memory and kernel profiles "
        "ran under one exclusive lock (no two workers timed at once), but their compile times "
        "were measured while the other workers compiled, each worker on its own share of the "
        "cores (cores / jobs): read them against rows of the same `jobs`, not against serial "
        "ones.",
    ]


def dynamic_against_static(rows: Rows) -> list[str]:
    """Per model measured both ways: kiln's static speedup over its ``dynamic=True`` one
    (above 1: the dynamic compile runs slower; issue 21 asks for at most 1.1), from the
    static task's row (``--shapes static,dynamic``) or else the dynamic task's
    ``kiln-static`` row, each against its own paired eager steps; with ``kiln-static``
    and ``--interleave``, the same ratio timed in the same rounds (the reliable one on a
    VM whose speed swings) and the dynamic compile's cold compile time over the static
    one's (issue 21: at most 1.5); Inductor's static/dynamic, kiln against Inductor
    under ``dynamic=True`` and the recompiles. Empty without such pairs."""
    out: list[str] = []
    paired: list[float] = []
    same_rounds: list[float] = []
    compiles: list[float] = []
    all_groups = groups(rows)
    for (size, mode, dtype), models in all_groups.items():
        if not mode.endswith(" dynamic"):
            continue
        base = mode.removesuffix(" dynamic")
        static = all_groups.get((size, base, dtype), {})
        for model, rs in models.items():
            srs = static.get(model, {})
            kiln_static = srs.get("kiln") or rs.get("kiln-static")
            static_speedup = _speedup(srs, "kiln") if "kiln" in srs else _speedup(rs, "kiln-static")
            kiln = _ratio(static_speedup, _speedup(rs, "kiln"))
            inductor = _ratio(_speedup(srs, "inductor"), _speedup(rs, "inductor"))
            rounds = _ratio(
                _passed(rs.get("kiln"), "interleaved_ms"),
                _passed(rs.get("kiln-static"), "interleaved_ms"),
            )
            compile_ratio = _ratio(_compile(rs.get("kiln")), _compile(kiln_static))
            if kiln is None and inductor is None and rounds is None:
                continue
            for values, value in ((paired, kiln), (same_rounds, rounds), (compiles, compile_ratio)):
                if value is not None:
                    values.append(value)
            recompiles = [str(rs.get(b, {}).get("recompiles", "-")) for b in ("kiln", "inductor")]
            out.append(
                f"| {model} | {size} | {base} | {dtype} | "
                f"{fmt(_ms(kiln_static), '.3f')} | {fmt(_ms(rs.get('kiln')), '.3f')} | "
                f"{fmt(kiln)} | {fmt(rounds)} | {fmt(compile_ratio)} | {fmt(inductor)} | "
                f"{fmt(_versus(rs, 'inductor', 'kiln'))} | {' / '.join(recompiles)} |"
            )
    if not out:
        return []
    summary = (
        f"Geomean kiln static/dynamic (above 1: dynamic slower): paired speedups "
        f"{fmt(geomean(paired))}, within 1.1x on {sum(r <= 1.1 for r in paired)} of {len(paired)}"
    )
    if same_rounds:
        summary += (
            f"; same rounds {fmt(geomean(same_rounds))}, within 1.1x on "
            f"{sum(r <= 1.1 for r in same_rounds)} of {len(same_rounds)}"
        )
    if compiles:
        summary += (
            f". Cold compile dynamic/static {fmt(geomean(compiles))}, within 1.5x on "
            f"{sum(r <= 1.5 for r in compiles)} of {len(compiles)}"
        )
    return [
        summary + ".",
        "",
        "| model | size | mode | dtype | kiln static ms | kiln dynamic ms"
        " | kiln static/dynamic | same rounds | compile dynamic/static"
        " | inductor static/dynamic | kiln/inductor (dynamic) | recompiles kiln / inductor |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
        *out,
    ]


def render(data: dict[str, Any], path: Path, plots: bool = True) -> None:
    rows: Rows = data.get("rows", [])
    runs = data.get("runs", [])
    folder = path.with_suffix("")
    if plots:
        folder.mkdir(parents=True, exist_ok=True)
    rel = folder.name
    cuda = any(r.get("device", "").startswith("cuda") for r in rows) or any(
        run.get("device") == "cuda" for run in runs
    )
    machines = sorted({run.get("machine", "?") for run in runs})
    out = [
        f"# Benchmark dashboard: {'CUDA' if cuda else 'CPU'}, {', '.join(machines) or '?'}",
        "",
        "Generated by `benchmarks/dashboard.py` (definitions of every column in its docstring). "
        "Eager, TorchInductor and kiln side by side on the same inputs, on real architectures "
        "(torchvision, timm, transformers; random weights, built from configs) and the hand-written "
        "models of `benchmarks/suite_models.py`. Ratios: `kiln/inductor` = Inductor ms / kiln ms "
        "(above 1: kiln is faster); speedup = eager ms / backend ms, with eager timed in bursts "
        "alternating with the backend's (a drifting machine slows both alike); kiln/inductor is "
        "the ratio of those speedups; compression = eager peak / "
        "backend peak (memory one step allocates beyond what was live before it); compile times "
        "exclude one eager step.",
        "",
        "## Runs",
        "",
        "| commit | started | machine | versions | check only | iters | jobs | command |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        versions = ", ".join(f"{k} {v}" for k, v in run.get("versions", {}).items())
        out.append(
            f"| {run.get('commit', '?')} | {run.get('started', '?')} | {run.get('machine', '?')} | "
            f"{versions} | {run.get('check_only', False)} | {run.get('iters', '?')} | "
            f"{run.get('jobs', 1)} | `{run.get('command', '?')}` |"
        )
    out += jobs_note(rows)
    out += ["", "## Summary (geomeans over the models where both sides passed)", "", *summary(rows)]
    out += ["", "## Worst five (kiln/Inductor)", "", *worst(rows)]
    kernel_lines = kernel_time_lines(rows)
    if kernel_lines:
        out += [
            "",
            "## Summed kernel time of a step, kiln against Inductor (highest five below)",
            "",
            *kernel_lines,
        ]
    same_rounds = interleaved_lines(rows)
    if same_rounds:
        out += [
            "",
            "## kiln against Inductor timed in the same rounds (`--interleave`; lowest five below)",
            "",
            *same_rounds,
        ]
    both = dynamic_against_static(rows)
    if both:
        out += ["", "## dynamic=True against static", "", *both]
    n_failed = sum(r["status"] != "pass" for r in rows)
    out += ["", f"## Failures ({n_failed} of {len(rows)} rows)", "", *failures(rows)]
    out += ["", "## Compile-time scaling (GPT-2, width 128, cold, fresh process each)", ""]
    out += scaling_lines(data.get("scaling", []))
    if plots and plot_scaling(data.get("scaling", []), folder / "scaling.png"):
        out += ["", f"![compile time against depth]({rel}/scaling.png)"]
    if plots:
        if plot_pairs(rows, "cold_compile_s", "cold compile s", folder / "compile.png", log=True):
            out += [
                "",
                "## Compile time, kiln against Inductor",
                "",
                f"![compile time]({rel}/compile.png)",
            ]
        if plot_pairs(rows, "compression", "memory compression", folder / "memory.png", log=True):
            out += [
                "",
                "## Memory compression, kiln against Inductor",
                "",
                f"![memory]({rel}/memory.png)",
            ]
    for (size, mode, dtype), models in groups(rows).items():
        group_backends = backends_in([r for rs in models.values() for r in rs.values()])
        out += ["", f"## {size} / {mode} / {dtype}", ""]
        if plots and any(_ms(r) for rs in models.values() for r in rs.values()):
            name = f"speedup-{size}-{mode.replace(' ', '-')}-{dtype}.png"
            plot_speedup(models, group_backends, f"{size} {mode} {dtype}", folder / name)
            out += [f"![speedup {size} {mode} {dtype}]({rel}/{name})", ""]
        out += table(models, group_backends, cuda)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(out) + "\n")
