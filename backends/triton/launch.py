"""Launching one Triton kernel with little Python in the way.

A :class:`KernelRunner` is what the generated wrapper calls for a ``kernel.launch``:
``run_kiln_poi_fused_add_0(stream, in0, out0, ks0)``. It computes the grid from the
kernel's ``numel`` and its config (once, for static shapes), and launches the compiled
kernel through Triton's launcher directly (``CompiledKernel.run``), skipping
``JITFunction.run``'s argument binding and cache-key computation on every call, as
Inductor's launchers do. Compiled variants are keyed by what Triton specializes on:
each pointer's 16-byte alignment and each integer's being 1 or a multiple of 16; a new
key compiles (``JITFunction.warmup``) and is remembered. Under ``TRITON_INTERPRET=1`` the
runner calls the interpreted kernel (``kernel[grid](...)``) instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import sympy

from kiln.dialects.loop.body_ops import IndexOutOfBounds
from kiln.dialects.loop.index_eval import compile_expr
from kiln.dialects.triton.block_ops import INDEX_ASSERT

MAX_GRID_Y = 65535


class LaunchError(RuntimeError):
    """A kernel that cannot be launched with these arguments."""


@dataclass(frozen=True)
class KernelSpec:
    """What the runtime needs to know about a ``triton.kernel`` to launch it."""

    name: str
    kind: str
    n_inputs: int
    """Pointers to buffers the kernel reads (``in_ptr<k>``); the rest are outputs."""
    n_pointers: int
    n_sizes: int
    constexprs: tuple[str, ...]
    numel: sympy.Expr
    rnumel: sympy.Expr
    ynumel: sympy.Expr | None
    configs: tuple[dict[str, int], ...]
    """Candidate configs, the chosen one first."""
    implements: str
    asserts: bool = False
    """Whether the kernel holds ``tl.device_assert`` (index checks): Triton compiles
    those only with ``debug=True``."""


def enable_interpreter_asserts() -> None:
    """Make ``tl.device_assert`` raise under ``TRITON_INTERPRET=1``.

    Triton's interpreter has no per-kernel ``debug`` option: its builder's options start
    with ``debug=False``, which turns every ``device_assert`` into a no-op. Turn it on
    (once, for the process), with overflow sanitizing off as in compiled kernels.
    """
    from dataclasses import replace

    from triton.runtime import interpreter

    builder = interpreter.interpreter_builder
    if not builder.options.debug:
        builder.options = replace(builder.options, debug=True, sanitize_overflow=False)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass
class Compiled:
    run: Callable[..., Any]
    function: Any
    metadata: Any
    kernel: Any = None
    """Triton's ``CompiledKernel`` (its source's signature explains a failed launch)."""


@dataclass
class KernelRunner:
    """Launches one kernel (see the module docstring)."""

    spec: KernelSpec
    fn: Any
    """The ``@triton.jit`` function (a ``JITFunction``, or an interpreted one)."""
    interpret: bool
    config: dict[str, int] = field(default_factory=dict[str, int])
    tuner: Any = None
    """An :class:`~kiln.backends.triton.autotune.Autotuner` when autotuning is on."""
    compiled: dict[tuple[int, ...], Compiled] = field(
        default_factory=dict[tuple[int, ...], Compiled]
    )
    launches: int = 0

    def __post_init__(self) -> None:
        if self.interpret and self.spec.asserts:
            enable_interpreter_asserts()
        self.config = dict(self.config or self.spec.configs[0])
        self._numel = compile_expr(self.spec.numel)
        self._ynumel = compile_expr(self.spec.ynumel) if self.spec.ynumel is not None else None
        self._static = not self.spec.numel.free_symbols and not (
            self.spec.ynumel is not None and self.spec.ynumel.free_symbols
        )
        self._set_config(self.config)

    def _set_config(self, config: dict[str, int]) -> None:
        self.config = dict(config)
        self.constexpr_values = tuple(config[c] for c in self.spec.constexprs)
        self.constexpr_kwargs = {c: config[c] for c in self.spec.constexprs}
        self.options: dict[str, Any] = {
            k: config[k] for k in ("num_warps", "num_stages") if k in config
        }
        if self.spec.asserts:
            # What Inductor compiles with: device asserts on, overflow sanitizing off.
            self.options.update(debug=True, sanitize_overflow=False)
        self.compiled.clear()
        self._static_grid = self._grid(()) if self._static else None

    # -- grid ------------------------------------------------------------------------------

    def _grid(self, sizes: Sequence[int]) -> tuple[int, int, int]:
        env = {f"s{k}": int(v) for k, v in enumerate(sizes)}
        numel = int(self._numel(env))
        config = self.config
        if self._ynumel is not None:
            ynumel = int(self._ynumel(env))
            xnumel = numel // ynumel if ynumel else 0
            grid_y = _cdiv(ynumel, config["YBLOCK"])
            if grid_y > MAX_GRID_Y:
                raise LaunchError(f"{self.spec.name}: {grid_y} row blocks exceed the grid limit")
            return (_cdiv(xnumel, config["XBLOCK"]), grid_y, 1)
        return (_cdiv(numel, config["XBLOCK"]), 1, 1)

    def grid(self, args: Sequence[Any]) -> tuple[int, int, int]:
        if self._static_grid is not None:
            return self._static_grid
        return self._grid(args[self.spec.n_pointers :])

    # -- launching ---------------------------------------------------------------------------

    def __call__(self, stream: int, *args: Any) -> None:
        grid = self._static_grid or self.grid(args)
        if grid[0] == 0 or grid[1] == 0:
            return  # an empty tensor: nothing to compute
        if self.tuner is not None and self.launches == 0:
            self._set_config(self.tuner.tune(self, stream, args))
            grid = self.grid(args)
        self.launches += 1
        if self.interpret:
            try:
                self.fn[grid](*args, **self.constexpr_kwargs)
            except Exception as e:
                if self.spec.asserts and INDEX_ASSERT in str(e):
                    # The interpreter's failed device_assert: raise what the C++ backend
                    # and kiln's interpreters raise (on a GPU, a device-side assert).
                    raise IndexOutOfBounds(f"kiln: {self.spec.name}: {e}") from e
                raise
            return
        key = self.key(args)
        compiled = self.compiled.get(key)
        if compiled is None:
            compiled = self.compile(args, grid)
            self.compiled[key] = compiled
        try:
            compiled.run(
                grid[0],
                grid[1],
                grid[2],
                stream,
                compiled.function,
                compiled.metadata,
                None,
                None,
                None,
                *args,
                *self.constexpr_values,
            )
        except TypeError as e:
            # Triton's launcher parses a fixed argument list: a mismatch means this variant
            # was compiled for another signature. Say which kernel, variant and arguments.
            raise LaunchError(self.describe_mismatch(key, compiled, args, e)) from e

    def key(self, args: Sequence[Any]) -> tuple[int, ...]:
        """What Triton specializes on: pointer alignment, integers equal to 1 or to 0 mod 16."""
        n = self.spec.n_pointers
        key = [int(a.data_ptr() % 16 == 0) for a in args[:n]]
        for v in args[n:]:
            key.append(2 if v == 1 else int(v % 16 == 0))
        return tuple(key)

    def compile(self, args: Sequence[Any], grid: tuple[int, int, int] = (1, 1, 1)) -> Compiled:
        """Compile (or load from Triton's cache) the variant for these arguments."""
        kernel = self.fn.warmup(*args, grid=grid, **self.constexpr_kwargs, **self.options)
        return Compiled(kernel.run, kernel.function, kernel.packed_metadata, kernel)

    def describe_mismatch(
        self, key: tuple[int, ...], compiled: Compiled, args: Sequence[Any], error: Exception
    ) -> str:
        """Why a launch's arguments do not fit the compiled variant, for the error."""
        source = getattr(compiled.kernel, "src", None)
        signature = getattr(source, "signature", None)
        constants = getattr(source, "constants", None)
        shown = [
            f"ptr({a.dtype}, align16={a.data_ptr() % 16 == 0})"
            if hasattr(a, "data_ptr")
            else repr(a)
            for a in args
        ]
        return (
            f"kiln: cannot launch Triton kernel {self.spec.name}: {error}; kiln passed "
            f"{len(args)} arguments ({self.spec.n_pointers} pointers, {self.spec.n_sizes} sizes: "
            f"{', '.join(shown)}) and constexprs {self.constexpr_kwargs}; variant key {key}, "
            f"{len(self.compiled)} variants compiled; the variant's signature: {signature}, "
            f"constants: {constants}"
        )

    def launch_with(
        self, config: dict[str, int], stream: int, args: Sequence[Any]
    ) -> Callable[[], None]:
        """A function launching the kernel with ``config`` (for benchmarking)."""
        saved = self.config
        self._set_config(config)
        try:
            grid = self.grid(args)
            if self.interpret:
                fn, kwargs = self.fn, dict(self.constexpr_kwargs)
                return lambda: fn[grid](*args, **kwargs)
            compiled = self.compile(args, grid)
            values = self.constexpr_values
            return lambda: compiled.run(
                grid[0],
                grid[1],
                grid[2],
                stream,
                compiled.function,
                compiled.metadata,
                None,
                None,
                None,
                *args,
                *values,
            )
        finally:
            self._set_config(saved)


__all__ = ["MAX_GRID_Y", "Compiled", "KernelRunner", "KernelSpec", "LaunchError"]
