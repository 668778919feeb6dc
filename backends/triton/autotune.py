"""Autotuning: benchmark a kernel's candidate configs on its first call, keep the fastest.

``tile`` proposes configs (``configs`` on each ``kernel.kernel``, carried to the
``triton.kernel``); with ``autotune=True`` the runtime hands each runner an
:class:`Autotuner`. On the kernel's first launch it times every candidate on the real
arguments (``triton.testing.do_bench`` on a GPU; one timed run each under the
interpreter), prints progress on stderr, and stores the winner in the per-user cache
keyed by the kernel's source, the argument signature, the device and Triton's version,
so later processes skip the search. Benchmark launches write to copies of the output
buffers (and of every buffer when an output aliases an input), so the real arguments
are untouched until the real launch.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, cast

from kiln.backends.cache import content_hash, load_json, store_json

if TYPE_CHECKING:
    from kiln.backends.triton.launch import KernelRunner


def _describe(config: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in config.items())


def _signature(args: Sequence[Any]) -> str:
    parts: list[str] = []
    for a in args:
        if hasattr(a, "data_ptr"):
            parts.append(f"{a.dtype}:{tuple(a.shape)}:{int(a.data_ptr() % 16 == 0)}")
        else:
            parts.append(repr(a))
    return ";".join(parts)


@dataclass
class Autotuner:
    """Chooses configs by measurement (see the module docstring)."""

    cache_dir: Path | None
    sources: dict[str, str]
    """Kernel name -> its source (part of the cache key)."""
    device: str
    interpret: bool
    progress: IO[str] | None = field(default_factory=lambda: sys.stderr)
    results: dict[str, dict[str, int]] = field(default_factory=dict[str, dict[str, int]])
    """Kernel name -> the winner (for reports and tests)."""
    timings: dict[str, list[tuple[dict[str, int], float]]] = field(
        default_factory=dict[str, list[tuple[dict[str, int], float]]]
    )

    def _path(self, runner: KernelRunner, args: Sequence[Any]) -> Path | None:
        if self.cache_dir is None:
            return None
        import triton

        key = content_hash(
            self.sources.get(runner.spec.name, runner.spec.name),
            _signature(args),
            self.device,
            triton.__version__,
            repr(runner.spec.configs),
        )
        return self.cache_dir / "autotune" / key[:2] / f"{key}.json"

    def _cached(self, runner: KernelRunner, path: Path | None) -> dict[str, int] | None:
        if path is None:
            return None
        value = load_json(path)
        if isinstance(value, dict) and value in [dict(c) for c in runner.spec.configs]:
            return {str(k): int(v) for k, v in value.items()}  # pyright: ignore[reportUnknownArgumentType, reportUnknownVariableType]
        return None

    def tune(self, runner: KernelRunner, stream: int, args: Sequence[Any]) -> dict[str, int]:
        configs = [dict(c) for c in runner.spec.configs]
        name = runner.spec.name
        if len(configs) == 1:
            return configs[0]
        path = self._path(runner, args)
        if (cached := self._cached(runner, path)) is not None:
            self._say(f"kiln autotune {name}: cached {_describe(cached)}")
            self.results[name] = cached
            return cached
        bench_args = _benchmark_copies(args, runner.spec.n_pointers, runner.spec.n_inputs)
        timings: list[tuple[dict[str, int], float]] = []
        self._say(f"kiln autotune {name}: {len(configs)} configs")
        for k, config in enumerate(configs, 1):
            try:
                launch = runner.launch_with(config, stream, bench_args)
                seconds = self._time(launch)
            except Exception as e:  # a config that does not compile (out of resources) loses
                self._say(
                    f"  [{k}/{len(configs)}] {_describe(config)}: failed ({type(e).__name__})"
                )
                continue
            timings.append((config, seconds))
            self._say(f"  [{k}/{len(configs)}] {_describe(config)}: {seconds * 1e6:.1f} us")
        if not timings:
            return configs[0]
        best = min(timings, key=lambda t: t[1])[0]
        self._say(f"  -> {_describe(best)}")
        self.results[name] = best
        self.timings[name] = timings
        if path is not None:
            store_json(path, best)
        return best

    def _time(self, launch: Callable[[], None]) -> float:
        if self.interpret:
            launch()  # first run: warm
            start = time.perf_counter()
            launch()
            return time.perf_counter() - start
        from triton.testing import do_bench

        return cast(float, do_bench(launch, warmup=5, rep=25)) * 1e-3

    def _say(self, line: str) -> None:
        if self.progress is not None:
            print(line, file=self.progress, flush=True)


def _benchmark_copies(args: Sequence[Any], n_pointers: int, n_inputs: int) -> list[Any]:
    """The arguments with outputs (or, when an output aliases an input, all buffers) copied."""
    pointers = list(args[:n_pointers])
    inputs, outputs = pointers[:n_inputs], pointers[n_inputs:]
    input_ptrs = {t.untyped_storage().data_ptr() for t in inputs}
    aliased = any(t.untyped_storage().data_ptr() in input_ptrs for t in outputs)
    copied = [t.clone() if aliased or k >= n_inputs else t for k, t in enumerate(pointers)]
    return [*copied, *args[n_pointers:]]


__all__ = ["Autotuner"]
