"""Compile one ATen FX graph: import, run the pass pipeline, build an executable.

This is what ``torch.compile(..., backend="kiln")`` runs for every graph AOTAutograd
hands it (see :mod:`kiln.frontends.dynamo`), and what :func:`kiln.compile` wraps.

Options (``options={...}`` in ``torch.compile``, keyword arguments of ``kiln.compile``):

===================  ==========================================================================
``pipeline``         pass pipeline, ``kiln-opt -p`` syntax (default: :data:`DEFAULT_PIPELINE`);
                     ``output-layout`` is added before ``lower-aten`` when missing (outputs
                     alias and stride as eager's whatever the passes)
``plugins``          plugin modules or ``.py`` files to load (each defines ``register(registry)``)
``executor``         ``auto`` (Triton when any tensor of the graph is on CUDA: inputs, factory
                     results, outputs; C++ otherwise; when built, see :mod:`kiln.devices`),
                     ``cpp``, ``triton``, or ``interpret`` (kiln's reference interpreters:
                     slow, for debugging)
``autotune``         benchmark candidate kernel configs on first call (Triton)
``cuda_graphs``      replay launches through CUDA graphs (Triton): ``"auto"`` (default: for
                     calls whose arguments are all CUDA tensors; outputs a caller still
                     holds are never overwritten, see :mod:`kiln.backends.triton.cudagraphs`),
                     ``True`` (also calls with Python numbers: a graph per value) or ``False``
``debug_dir``        write, per graph, the FX graph, the IR after every pass, the generated
                     code and the fusion report (also ``KILN_DEBUG=dir``)
``partitioner``      training under ``torch.compile``: how AOTAutograd splits the joint graph,
                     ``min-cut`` (default, as Inductor: cheap forward ops are recomputed in
                     the backward instead of saved, views of parameters are never saved) or
                     ``default`` (AOTAutograd's default: save every forward value the
                     backward reads)
``verbose``          print a one-line summary per graph (default on)
``graph_cache``      reuse a graph compiled before, by this or an earlier process, from the
                     on-disk graph cache (default on; also off with ``KILN_GRAPH_CACHE=0``;
                     see :mod:`kiln.graph_cache`)
``prepack_weights``  CPU inference graphs (AOTAutograd's inference graphs: grad mode off, or
                     no input requiring grad) run their convolutions (except 1x1) on
                     oneDNN-prepacked weights, cached per call site and repacked when the
                     weight tensor, its version counter or its data pointer changes (default
                     on; pass ``prepack-weights``); on the GPU, channels-last convolutions
                     (inference and training, forward and backward) read a cached
                     channels-last copy of the weight, one per weight, kept the same way
                     (a backward reads its forward's copy). An update that bypasses the version
                     counter (``w.data.mul_(2)``) is not seen: turn this off then
===================  ==========================================================================
"""

from __future__ import annotations

import itertools
import os
import sys
import time
import warnings
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

import torch
from xdsl.dialects.builtin import ModuleOp, StringAttr, UnitAttr
from xdsl.passes import ModulePass, PassPipeline
from xdsl.utils.exceptions import ArgSpecParseError

from kiln import graph_cache
from kiln.devices import choose_executor, device_fixer, gpu_device, graph_devices
from kiln.gc_pause import frozen_heap
from kiln.registry import Registry, default_registry, normalize_pipeline

DEFAULT_PIPELINE = "decompose,canonicalize,cse,dce,output-layout,unfuse-addmm,unfuse-conv-bias,patch-conv-to-mm,pad-mm,prepack-weights,channels-last,conv1x1-to-mm,lower-aten,fuse,tile,reorder-collectives,buffer-reuse,dedup-kernels"

Executor = Literal["auto", "cpp", "triton", "interpret"]


class CompileError(RuntimeError):
    """A graph could not be compiled (the message names the graph and the step)."""


@dataclass(frozen=True)
class CompileOptions:
    pipeline: str = DEFAULT_PIPELINE
    plugins: tuple[str, ...] = ()
    executor: Executor = "auto"
    autotune: bool = False
    cuda_graphs: bool | Literal["auto"] = "auto"
    partitioner: str = "min-cut"
    debug_dir: str | None = None
    verbose: bool = True
    graph_cache: bool = True
    prepack_weights: bool = True

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any] | None) -> CompileOptions:
        options = dict(options or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise CompileError(f"unknown kiln option(s) {unknown}; known: {sorted(known)}")
        if "plugins" in options and isinstance(options["plugins"], str):
            options["plugins"] = (options["plugins"],)
        if "plugins" in options:
            options["plugins"] = tuple(options["plugins"])
        if options.get("debug_dir") is None and os.environ.get("KILN_DEBUG"):
            options["debug_dir"] = os.environ["KILN_DEBUG"]
        if isinstance(options.get("debug_dir"), os.PathLike):
            options["debug_dir"] = os.fspath(options["debug_dir"])
        for name, value in options.items():
            _check_option(name, value)
        return cls(**options)


_OPTION_TYPES: dict[str, tuple[type, ...]] = {
    "pipeline": (str,),
    "executor": (str,),
    "autotune": (bool,),
    "cuda_graphs": (bool, str),
    "partitioner": (str,),
    "debug_dir": (str, type(None)),
    "verbose": (bool,),
    "graph_cache": (bool,),
    "prepack_weights": (bool,),
}
_EXECUTORS = ("auto", "cpp", "triton", "interpret")
PARTITIONERS = ("min-cut", "default")


def _check_option(name: str, value: Any) -> None:
    """Reject a mistyped option when it is given, not at the first call."""
    if name == "plugins":
        if not all(isinstance(p, str) for p in value):
            raise CompileError(f"kiln option plugins={value!r}: expected module names or paths")
        return
    expected = _OPTION_TYPES[name]
    if not isinstance(value, expected):
        names = " or ".join("None" if t is type(None) else t.__name__ for t in expected)
        raise CompileError(f"kiln option {name}={value!r}: expected {names}")
    if name == "executor" and value not in _EXECUTORS:
        raise CompileError(f"kiln option executor={value!r}: expected one of {list(_EXECUTORS)}")
    if name == "cuda_graphs" and isinstance(value, str) and value != "auto":
        raise CompileError(f"kiln option cuda_graphs={value!r}: expected True, False or 'auto'")
    if name == "partitioner" and value not in PARTITIONERS:
        raise CompileError(
            f"kiln option partitioner={value!r}: expected one of {list(PARTITIONERS)}"
        )


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


@dataclass
class CompiledGraph:
    """A compiled graph: call it with the graph's inputs (a flat list of tensors/ints)."""

    run: Callable[[Sequence[Any]], Sequence[Any]]
    stats: GraphStats
    _module: ModuleOp | Callable[[], ModuleOp]
    """The module, or (a graph from the graph cache) how to make it: the pipeline runs
    again on first access only."""

    @property
    def module(self) -> ModuleOp:
        """The graph's IR after the pipeline (what the backend built)."""
        if not isinstance(self._module, ModuleOp):
            self._module = self._module()
        return self._module

    output_strides: list[tuple[int, ...] | None] | None = None
    """The strides of each output as the program returns them (None: not a tensor), when
    the compile was asked for them (``free_layout_outputs``)."""

    def __call__(self, *args: Any) -> Any:
        return self.run(args)


_LAST_STATS: list[GraphStats] = []
_HISTORY: list[GraphStats] = []
_GRAPH_IDS = itertools.count()


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


def _registry(options: CompileOptions) -> Registry:
    registry = default_registry()
    if options.plugins:
        from kiln.plugins import load_plugin

        for plugin in options.plugins:
            load_plugin(registry, plugin)
    return registry


def _debug_dir(root: str | None, name: str) -> Path | None:
    """The graph's debug directory; None, with a warning, when it cannot be created (a
    debug dump is never worth failing the compile for)."""
    if not root:
        return None
    path = Path(root) / name
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".kiln-write-check"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        warnings.warn(
            f"kiln: cannot write the debug directory {path} ({e.strerror or e}); "
            "compiling without debug output",
            RuntimeWarning,
            stacklevel=3,
        )
        return None
    return path


def _dump(debug: Path | None, name: str, text: str) -> None:
    if debug is not None:
        try:
            (debug / name).write_text(text)
        except OSError as e:
            warnings.warn(f"kiln: cannot write {debug / name}: {e}", RuntimeWarning, stacklevel=2)


def profiling_passes() -> bool:
    """``KILN_PROFILE_PASSES`` set (not ``0``): print :meth:`GraphStats.profile` per graph."""
    return os.environ.get("KILN_PROFILE_PASSES", "0") not in ("", "0")


@frozen_heap()  # full collections skip the heap that predates the compile (~40 % of its CPU)
def compile_graph(
    gm: torch.fx.GraphModule,
    example_inputs: Sequence[Any],
    options: CompileOptions,
    name: str | None = None,
    aot_seconds: float | None = None,
    inference: bool = False,
    free_layout_outputs: Sequence[int] = (),
    guarded: bool = False,
) -> CompiledGraph:
    """Compile one ATen-level GraphModule (FakeTensor metadata in ``node.meta['val']``).
    ``aot_seconds``: the time AOTAutograd took to hand over this graph (for the profile).
    ``inference``: an inference graph (AOTAutograd's ``inference_compiler``), whose
    weights ``prepack-weights`` may keep prepacked (with the ``prepack_weights`` option).
    ``free_layout_outputs``: indices of outputs whose strides are the compiler's to choose
    (a training forward's saved activations); the result's ``output_strides`` then says
    the strides every output is returned with. ``guarded``: the caller guards the
    metadata of parameters and static inputs (Dynamo does), so a CUDA-graph replay checks
    them by address only (:attr:`~kiln.backends.triton.cudagraphs.CudaGraphRunner.guarded`)."""
    start = time.perf_counter()
    name = name or f"graph_{next(_GRAPH_IDS)}"
    stats = GraphStats(name=name)
    if aot_seconds is not None:
        stats.stage_seconds["aot"] = aot_seconds
    stats.fx_nodes = sum(1 for n in gm.graph.nodes if n.op == "call_function")
    debug = _debug_dir(options.debug_dir, name)
    if debug is not None:  # printing the graph costs 0.3 s at 48 GPT-2 layers: only when asked
        _dump(debug, "fx_graph.py", gm.print_readable(print_output=False))
    devices = graph_devices(gm, example_inputs)
    program_device = gpu_device(devices)
    # The module attribute that lets prepack-weights mark convolutions: inference graphs
    # everywhere; training graphs on the GPU (channels-last weight copies).
    # (Named, not imported: a graph-cache hit imports no dialect.)
    prepack: Literal["inference", "training"] | None = None
    if options.prepack_weights and (inference or program_device is not None):
        prepack = "inference" if inference else "training"

    # The graph cache first, keyed on the FX graph itself: a hit loads no IR module and
    # imports nothing (kiln.fx_key). A graph it cannot describe (dynamic shapes, ...) is
    # keyed on its imported IR below, as before.
    cache_key: str | None = None
    cached = graph_cache.enabled(options) and (
        choose_executor(options.executor, devices, _available_executors()) == "cpp"
    )
    described = False
    if cached:
        from kiln.fx_key import describe_graph

        key_start = time.perf_counter()
        description = describe_graph(gm)
        described = description is not None
        if description is not None:
            context = (
                f"device {program_device}",
                f"inference prepack {prepack == 'inference'}",
                f"free layout {list(free_layout_outputs)}",
            )
            cache_key = graph_cache.graph_key(description, options, "cpp", context)
        stats.stage_seconds["graph-key"] = time.perf_counter() - key_start
        if cache_key is not None:
            hit = _from_graph_cache(
                cache_key, gm, options, stats, start, program_device, prepack, free_layout_outputs
            )
            if hit is not None:
                return hit

    setup_start = time.perf_counter()
    from kiln.dialects.aten.fx import import_graph, lifted_constants  # the first graph: imports
    from kiln.dialects.aten.fx.importer import lifted_targets

    setup = time.perf_counter() - setup_start
    import_start = time.perf_counter()
    module = import_graph(gm)
    # Traced constants kiln does not embed are arguments after the placeholders.
    constants = lifted_constants(module, gm)
    lifted = lifted_targets(module)
    stats.stage_seconds["import"] = time.perf_counter() - import_start
    if debug is not None:  # printing a module costs as much as a pass: only when asked
        _dump(debug, "00_aten.mlir", str(module))
    stats.pass_ops["import"] = _count_ops(module)
    _mark(module, program_device, prepack, free_layout_outputs)

    if cached and not described:
        key_start = time.perf_counter()
        cache_key = graph_cache.graph_key(str(module), options, "cpp")
        stats.stage_seconds["graph-key"] += time.perf_counter() - key_start
        if cache_key is not None:
            stats.stage_seconds["setup"] = setup  # a miss's pipeline setup adds to it
            hit = _from_graph_cache(
                cache_key, gm, options, stats, start, program_device, prepack, free_layout_outputs
            )
            if hit is not None:
                return hit

    setup_start = time.perf_counter()
    _run_pipeline(module, options, stats, debug, name, setup, setup_start)

    # Read after the pipeline: a pass may change how outputs are rebuilt (output-layout).
    output_structure = next(
        (op.attributes["kiln.outputs"] for op in module.ops if "kiln.outputs" in op.attributes),
        None,
    )
    executor = choose_executor(options.executor, devices, _available_executors())
    if executor == "triton":
        _check_triton_devices(name, example_inputs, devices)
    build_start = time.perf_counter()
    run, stats.executor, program = _build(
        executor, module, options, debug, gpu_device(devices), stats.stage_seconds, guarded
    )
    if stats.executor not in ("cpp", "triton"):
        stats.stage_seconds["build"] = time.perf_counter() - build_start
    stats.kernels = sum(1 for op in module.ops if op.name == "kernel.kernel")
    stats.launches = sum(1 for op in module.walk() if op.name == "kernel.launch")
    stats.externs = extern_overloads(module)
    # The C++ wrapper's oneDNN-packed ops (not the Triton wrapper's channels-last copies).
    stats.prepacked = prepacked_ops(module) if stats.executor == "cpp" else 0
    structure = None if output_structure is None else str(output_structure.data)  # pyright: ignore
    strides = returned_strides(module, structure) if free_layout_outputs else None
    if cache_key is not None and program is not None:
        _store(cache_key, program, structure, stats, lifted, strides)
    _record(stats, start, options)
    fix = device_fixer(gm, gpu_device(devices)) if stats.executor == "triton" else None
    compiled = _finish(run, stats, module, structure, constants, fix)
    compiled.output_strides = strides
    return compiled


def _mark(
    module: ModuleOp,
    program_device: torch.device | None,
    prepack: Literal["inference", "training"] | None,
    free_layout_outputs: Sequence[int] = (),
) -> None:
    """What the driver adds to an imported module before the pipeline (and to the graph
    cache's key with it)."""
    from xdsl.dialects.func import FuncOp

    from kiln.dialects.aten.function_attrs import (
        DEVICE_ATTR,
        FREE_LAYOUT_OUTPUTS_ATTR,
        free_layout_attr,
    )

    if free_layout_outputs:
        for func in module.ops:
            if isinstance(func, FuncOp):
                func.attributes[FREE_LAYOUT_OUTPUTS_ATTR] = free_layout_attr(free_layout_outputs)

    if program_device is not None:
        # Passes that make tensors (decompositions) make them where the program runs.
        module.attributes[DEVICE_ATTR] = StringAttr(str(program_device))
    if prepack is not None:
        from kiln.dialects.aten.prepack import INFERENCE_ATTR, TRAINING_ATTR

        module.attributes[INFERENCE_ATTR if prepack == "inference" else TRAINING_ATTR] = UnitAttr()


def _from_graph_cache(
    key: str,
    gm: torch.fx.GraphModule,
    options: CompileOptions,
    stats: GraphStats,
    start: float,
    program_device: torch.device | None,
    prepack: Literal["inference", "training"] | None,
    free_layout_outputs: Sequence[int] = (),
) -> CompiledGraph | None:
    """The compiled graph from the graph cache entry ``key``, or None on a miss. A hit
    imports no IR module: the entry names the traced constants to pass (``lifted``) and
    the output structure; the module is rebuilt only when asked for."""
    lookup_start = time.perf_counter()
    found = graph_cache.load(key, stats.stage_seconds)
    if found is None:
        stats.stage_seconds["graph-cache"] = time.perf_counter() - lookup_start
        return None
    entry, run = found
    stats.graph_cache = "hit"
    stats.executor = "cpp"
    stats.kernels, stats.launches = entry.kernels, entry.launches
    stats.externs = Counter(entry.externs)
    from kiln.fx_key import fetch_constants

    constants = fetch_constants(gm, entry.lifted)
    name = stats.name

    def rebuild() -> ModuleOp:
        # Only when asked for: the same import and pipeline as a cold compile.
        from kiln.dialects.aten.fx import import_graph

        again = import_graph(gm)
        _mark(again, program_device, prepack, free_layout_outputs)
        _run_pipeline(again, options, GraphStats(name=name), None, name)
        return again

    _record(stats, start, options)
    compiled = _finish(run, stats, rebuild, entry.output_structure, constants, None)
    compiled.output_strides = entry.output_strides
    return compiled


def _with_output_layout(pipeline: PassPipeline) -> PassPipeline:
    """``pipeline``, with ``output-layout`` before its first ``lower-aten`` (or last) when
    it has none: outputs that alias each other or carry eager's strides are part of what
    a compiled graph must return, whatever passes a user picks (without it,
    ``options={"pipeline": "decompose,lower-aten,fuse"}`` returned ``y, y.view(-1)`` as
    two copies). ``kiln-opt`` runs exactly the passes given."""
    from kiln.passes.output_layout import OutputLayoutPass

    passes = list(pipeline.passes)
    if any(p.name == OutputLayoutPass.name for p in passes):
        return pipeline
    at = next((k for k, p in enumerate(passes) if p.name == "lower-aten"), len(passes))
    passes.insert(at, OutputLayoutPass())
    return PassPipeline(tuple(passes), pipeline.callback)


def _run_pipeline(
    module: ModuleOp,
    options: CompileOptions,
    stats: GraphStats,
    debug: Path | None,
    name: str,
    setup: float = 0.0,
    setup_start: float | None = None,
) -> None:
    """Run the options' pipeline on ``module`` in place, timing each pass into ``stats``."""
    from kiln.passes.aten_to_loop.stamp import stamped_notes
    from kiln.passes.scheduling.stamp import STAMPED_FUSE_ATTR

    setup_start = time.perf_counter() if setup_start is None else setup_start
    registry = _registry(options)
    ctx = registry.make_context()
    counter = itertools.count(1)
    last = [time.perf_counter()]

    def after_each(prev: ModulePass | None, mod: ModuleOp, _next: ModulePass | None) -> None:
        now = time.perf_counter()
        if prev is not None:
            stats.pass_seconds[prev.name] = stats.pass_seconds.get(prev.name, 0.0) + now - last[0]
            stats.pass_ops[prev.name] = _count_ops(mod)
            if prev.name == "lower-aten":
                stats.stamped = stamped_notes(mod)
            elif prev.name == "fuse":
                stats.stamped_fuse = stamped_notes(mod, STAMPED_FUSE_ATTR)
            if debug is not None:
                _dump(debug, f"{next(counter):02d}_{prev.name}.mlir", str(mod))
        last[0] = now

    try:
        pipeline = PassPipeline.parse_spec(
            registry.passes, normalize_pipeline(options.pipeline), after_each
        )
    except (Exception, ArgSpecParseError) as e:  # xDSL's spec errors are BaseExceptions
        raise CompileError(f"{name}: bad pipeline {options.pipeline!r}: {e}") from e
    pipeline = _with_output_layout(pipeline)
    stats.stage_seconds["setup"] = setup + time.perf_counter() - setup_start
    last[0] = passes_start = time.perf_counter()
    pipeline.apply(ctx, module)
    stats.stage_seconds["passes"] = time.perf_counter() - passes_start


def _store(
    key: str,
    program: Any,
    output_structure: str | None,
    stats: GraphStats,
    lifted: Sequence[str],
    output_strides: list[tuple[int, ...] | None] | None,
) -> None:
    """Save a C++ program in the graph cache (``stats.graph_cache`` says what happened)."""
    from kiln.backends.cpp.saved import NotSaveable

    store_start = time.perf_counter()
    try:
        saved = program.saved()
    except NotSaveable as e:
        stats.graph_cache = f"not stored: {e}"
    else:
        entry = graph_cache.GraphEntry(
            saved,
            output_structure,
            stats.kernels,
            stats.launches,
            dict(stats.externs),
            tuple(lifted),
            output_strides,
        )
        stored = graph_cache.store(key, entry)
        stats.graph_cache = "stored" if stored is not None else "not stored: cache not writable"
    stats.stage_seconds["graph-cache"] = (
        stats.stage_seconds.get("graph-cache", 0.0) + time.perf_counter() - store_start
    )


def _record(stats: GraphStats, start: float, options: CompileOptions) -> None:
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


def _finish(
    run: Runner,
    stats: GraphStats,
    module: ModuleOp | Callable[[], ModuleOp],
    output_structure: str | None,
    constants: list[torch.Tensor],
    fix: Callable[[Any], Any] | None,
) -> CompiledGraph:
    """The compiled graph: lifted constants appended, outputs rebuilt as the graph
    returns them, moved where eager made them (``fix``)."""
    if constants:
        run = _with_constants(run, constants)
    if output_structure is None and fix is None:
        return CompiledGraph(lambda args: run(_owned(args)), stats, module)
    from kiln.output_structure import structure_builder  # imports no IR (graph cache hits)

    build = structure_builder(output_structure) if output_structure is not None else tuple
    if fix is None:

        def call(args: Sequence[Any]) -> Any:
            return build(run(_owned(args)))

    else:

        def call(args: Sequence[Any]) -> Any:
            # A CUDA program allocates on the GPU; eager made these outputs on the CPU.
            return fix(build(run(_owned(args))))

    return CompiledGraph(call, stats, module)


def returned_strides(
    module: ModuleOp, structure: str | None
) -> list[tuple[int, ...] | None] | None:
    """The strides of each output of the compiled ``module`` (its function's results,
    contiguous buffers, seen through ``structure``: permutes, aliases), None per output
    that is not a tensor; None when a result's shape is symbolic."""
    from xdsl.dialects.builtin import MemRefType, TensorType

    from kiln.output_structure import structure_builder

    function = next((op for op in module.ops if "kiln.outputs" in op.attributes), None)
    function_type = getattr(function, "function_type", None)
    if function_type is None:
        return None
    values: list[Any] = []
    for ty in function_type.outputs.data:
        if isinstance(ty, MemRefType | TensorType):
            shape = [int(d) for d in ty.get_shape()]  # pyright: ignore[reportUnknownArgumentType, reportUnknownMemberType, reportUnknownVariableType]
            if any(d < 0 for d in shape):
                return None
            values.append(torch.empty(shape, device="meta"))
        else:
            values.append(None)
    outputs = structure_builder(structure)(values) if structure is not None else tuple(values)
    return [tuple(out.stride()) if isinstance(out, torch.Tensor) else None for out in outputs]


def _with_constants(run: Runner, constants: list[torch.Tensor]) -> Runner:
    def run_with_constants(args: list[Any]) -> Sequence[Any]:
        args.extend(constants)
        return run(args)

    return run_with_constants


def _owned(args: Sequence[Any]) -> list[Any]:
    """A list the runner may empty: a list is handed over as it is (AOTAutograd's boxed
    convention, so arguments can be freed at their last use), anything else copied."""
    return args if type(args) is list else list(args)


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


def _check_triton_devices(name: str, inputs: Sequence[Any], devices: set[torch.device]) -> None:
    """Real Triton kernels read GPU memory only; say so at compile time, not at a launch.
    A CPU input of a CUDA graph (a 0-d tensor, CPU indices) is moved by the wrapper."""
    from kiln.backends.triton.runtime import interpreting

    if interpreting() or gpu_device(devices) is not None:
        return
    for k, t in enumerate(inputs):
        if isinstance(t, torch.Tensor) and not t.is_cuda:
            raise CompileError(
                f"{name}: executor 'triton' needs GPU tensors, but input {k} is on {t.device}"
                " (set TRITON_INTERPRET=1 to run the kernels in Triton's interpreter on the CPU)"
            )


def _available_executors() -> set[str]:
    import importlib.util

    found = {"interpret"}
    for executor, module in (
        ("cpp", "kiln.backends.cpp.wrapper"),
        ("triton", "kiln.backends.triton.runtime"),
    ):
        try:
            if importlib.util.find_spec(module) is not None:
                found.add(executor)
        except ModuleNotFoundError:
            pass
    return found


def _count_ops(module: ModuleOp) -> int:
    return sum(1 for _ in module.walk()) - 1


Runner = Callable[[list[Any]], Sequence[Any]]


def _build(
    executor: str,
    module: ModuleOp,
    options: CompileOptions,
    debug: Path | None,
    device: torch.device | None = None,
    stages: dict[str, float] | None = None,
    guarded: bool = False,
) -> tuple[Runner, str, Any]:
    """The runner for ``module``, and the executor that actually runs it. The driver
    lowers to the backend's level (:mod:`kiln.targets`); backends run no passes.
    ``stages`` receives the build's time by stage (:attr:`GraphStats.stage_seconds`).
    The third value is the backend's program object for the C++ executor (the graph
    cache saves it), else None."""
    stages = stages if stages is not None else {}
    if executor == "interpret":
        return _interpreter(module), "interpret", None
    if executor == "cpp":
        if not any(op.name == "kernel.program" for op in module.ops):
            if options.executor == "auto":
                return _interpreter(module), "interpret", None  # the pipeline stopped before fuse
            raise CompileError(
                "executor 'cpp' runs kernel-level IR: the pipeline must include fuse"
            )
        from kiln.backends.cpp.compiler import CompilerNotFound
        from kiln.targets import build_cpp_program

        try:
            program = build_cpp_program(module)
        except CompilerNotFound as e:
            if options.executor != "auto":
                raise CompileError(str(e)) from e
            print(f"kiln: {e}; running the reference interpreter instead", file=sys.stderr)
            return _interpreter(module), "interpret", None
        stages.update(program.stage_seconds)
        _dump(debug, "kernels.cpp", program.cpp_source)
        _dump(debug, "wrapper.py", program.python_source)
        return program.run, "cpp", program
    if executor == "triton":
        from kiln.backends.triton.runtime import TritonOptions
        from kiln.targets import build_triton_program

        if not any(op.name == "kernel.program" for op in module.ops):
            if options.executor == "auto":
                return _interpreter(module), "interpret", None  # the pipeline stopped before fuse
            raise CompileError(
                "executor 'triton' runs kernel-level IR: the pipeline must include fuse"
            )
        from kiln.backends.triton.runtime import interpreting

        triton_options = TritonOptions(
            autotune=options.autotune,
            cuda_graphs=options.cuda_graphs,
            device=None if interpreting() or device is None else str(device),
            guarded=guarded,
        )
        # Lowered in place: the compiled graph's module shows the Triton kernels.
        triton_start = time.perf_counter()
        triton_program = build_triton_program(module, options=triton_options)
        stages["lower-to-triton+build"] = time.perf_counter() - triton_start
        _dump(debug, "triton_module.py", triton_program.source)
        return triton_program.boxed_call, "triton", None
    raise CompileError(f"executor {executor!r} is not available in this build")


def _interpreter(module: ModuleOp) -> Callable[[list[Any]], Sequence[Any]]:
    """Run at the deepest level the pipeline reached, with kiln's reference interpreters,
    after the size checks the wrappers make (sizes traced as one symbol equal)."""
    run = _interpreter_at_level(module)
    check = _entry_size_checker(module)
    if check is None:
        return run

    def checked(args: list[Any]) -> Sequence[Any]:
        check(args)
        return run(args)

    return checked


def _interpreter_at_level(module: ModuleOp) -> Callable[[list[Any]], Sequence[Any]]:
    names = {op.name.split(".")[0] for op in module.walk()}
    if "kernel" in names:
        from kiln.dialects.kernel.interpreter import run_program

        return lambda args: run_program(module, args)[0]
    if "loop" in names:
        from kiln.dialects.loop.interpreter import run_function as run_loop

        return lambda args: run_loop(module, args)
    from kiln.dialects.aten.interpreter import run_function

    return lambda args: run_function(module, args)


def _entry_size_checker(module: ModuleOp) -> Callable[[Sequence[Any]], None] | None:
    """The size checks of ``@forward`` (a ``kernel.program`` or ``func.func``)."""
    from xdsl.dialects.func import FuncOp

    from kiln.backends.host.size_checks import size_checker
    from kiln.dialects.kernel.program_ops import ProgramOp

    for op in module.ops:
        if isinstance(op, ProgramOp | FuncOp) and op.sym_name.data == "forward":
            if not op.body.blocks:
                return None
            return size_checker(op.body.block.args, op.arg_attrs)
    return None
