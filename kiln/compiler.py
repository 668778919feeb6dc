"""Compile one ATen FX graph: import, run the pass pipeline, build an executable.

This is what ``torch.compile(..., backend="kiln")`` runs for every graph AOTAutograd
hands it (see :mod:`kiln.frontends.dynamo`), and what :func:`kiln.compile` wraps.

Options: :mod:`kiln.compile_options`. Statistics: :mod:`kiln.compile_stats`. Runners:
:mod:`kiln.executors`.
"""

from __future__ import annotations

import itertools
import time
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import torch
from xdsl.dialects.builtin import ModuleOp, StringAttr, UnitAttr
from xdsl.passes import ModulePass, PassPipeline
from xdsl.utils.exceptions import ArgSpecParseError

from kiln import graph_cache
from kiln.backends.host.input_writes import InputWrites
from kiln.compile_options import (
    DEFAULT_PIPELINE,
    PARTITIONERS,
    CompileError,
    CompileOptions,
    Executor,
)
from kiln.compile_stats import (
    GRAPH_IDS,
    GraphStats,
    compile_history,
    count_ops,
    extern_overloads,
    last_compile_stats,
    prepacked_ops,
    profiling_passes,
    record,
    reset_compile_history,
)
from kiln.debug_dump import debug_dir_for, dump
from kiln.devices import choose_executor, device_fixer, gpu_device, graph_devices
from kiln.executors import (
    Runner,
    available_executors,
    build_runner,
    check_triton_devices,
    owned,
    with_constants,
)
from kiln.frontends.eager_statistics import declare_eager_statistics
from kiln.gc_pause import frozen_heap
from kiln.output_structure import is_flat
from kiln.registry import Registry, default_registry, normalize_pipeline

if TYPE_CHECKING:
    from kiln.passes.pad_mm import PadMmPass


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


def _registry(options: CompileOptions) -> Registry:
    registry = default_registry()
    if options.plugins:
        from kiln.plugins import load_plugin

        for plugin in options.plugins:
            load_plugin(registry, plugin)
    return registry


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
    input_writes: Sequence[int] = (),
) -> CompiledGraph:
    """Compile one ATen-level GraphModule (FakeTensor metadata in ``node.meta['val']``).
    ``aot_seconds``: the time AOTAutograd took to hand over this graph (for the profile).
    ``inference``: an inference graph (AOTAutograd's ``inference_compiler``), whose
    weights ``prepack-weights`` may keep prepacked (with the ``prepack_weights`` option).
    ``free_layout_outputs``: indices of outputs whose strides are the compiler's to choose
    (a training forward's saved activations); the result's ``output_strides`` then says
    the strides every output is returned with. ``guarded``: the caller guards the
    metadata of every argument (Dynamo does), so a CUDA-graph replay checks parameters
    and static inputs by address only
    (:attr:`~kiln.backends.triton.cudagraphs.CudaGraphRunner.guarded`) and the C++
    wrapper checks no argument's type and shape (``kiln.guarded_arguments``).
    ``input_writes``: the inputs (by position) the graph's last ``len(input_writes)``
    outputs are written into after each run; the compiled graph returns the outputs
    before them (:mod:`kiln.backends.host.input_writes`)."""
    start = time.perf_counter()
    name = name or f"graph_{next(GRAPH_IDS)}"
    stats = GraphStats(name=name)
    if aot_seconds is not None:
        stats.stage_seconds["aot"] = aot_seconds
    stats.fx_nodes = sum(1 for n in gm.graph.nodes if n.op == "call_function")
    debug = debug_dir_for(options.debug_dir, name)
    if debug is not None:  # printing the graph costs 0.3 s at 48 GPT-2 layers: only when asked
        dump(debug, "fx_graph.py", gm.print_readable(print_output=False))
    devices = graph_devices(gm, example_inputs)
    program_device = gpu_device(devices)
    # The module attribute that lets prepack-weights mark convolutions: inference graphs
    # everywhere; training graphs on the GPU (channels-last weight copies).
    # (Named, not imported: a graph-cache hit imports no dialect.)
    prepack: Literal["inference", "training"] | None = None
    if options.prepack_weights and (inference or program_device is not None):
        prepack = "inference" if inference else "training"
    marks = _DriverMarks(
        program_device,
        prepack,
        tuple(free_layout_outputs),
        packed_linear=prepack == "inference" and program_device is None and _faster_packed_gemm(gm),
        guarded_arguments=guarded,
        tf32_matmul=runs_tf32_matmul(program_device),
    )

    # The graph cache first, keyed on the FX graph itself: a hit loads no IR module and
    # imports nothing (kiln.fx_key). A graph it cannot describe (dynamic shapes, ...) is
    # keyed on its imported IR below, as before.
    cache_key: str | None = None
    cached = graph_cache.enabled(options) and (
        choose_executor(options.executor, devices, available_executors()) == "cpp"
    )
    described = False
    if cached:
        from kiln.fx_key import describe_graph

        key_start = time.perf_counter()
        description = describe_graph(gm)
        described = description is not None
        if description is not None:
            cache_key = graph_cache.graph_key(description, options, "cpp", marks.key_context())
        stats.stage_seconds["graph-key"] = time.perf_counter() - key_start
        if cache_key is not None:
            hit = _from_graph_cache(cache_key, gm, options, stats, start, marks, input_writes)
            if hit is not None:
                return hit

    setup_start = time.perf_counter()
    from kiln.dialects.aten.fx import import_graph, lifted_constants  # the first graph: imports
    from kiln.dialects.aten.fx.importer import lifted_targets

    setup = time.perf_counter() - setup_start
    import_start = time.perf_counter()
    # After the graph-cache lookup (a hit imports none of kiln's IR): the correction is a
    # function of the graph the key is made of. A training step's graphs had it before
    # the partition (kiln.frontends.dynamo).
    declare_eager_statistics(gm.graph)
    module = import_graph(gm)
    # Traced constants kiln does not embed are arguments after the placeholders.
    constants = lifted_constants(module, gm)
    lifted = lifted_targets(module)
    stats.stage_seconds["import"] = time.perf_counter() - import_start
    if debug is not None:  # printing a module costs as much as a pass: only when asked
        dump(debug, "00_aten.mlir", str(module))
    stats.pass_ops["import"] = count_ops(module)
    marks.apply(module)

    if cached and not described:
        key_start = time.perf_counter()
        cache_key = graph_cache.graph_key(str(module), options, "cpp")
        stats.stage_seconds["graph-key"] += time.perf_counter() - key_start
        if cache_key is not None:
            stats.stage_seconds["setup"] = setup  # a miss's pipeline setup adds to it
            hit = _from_graph_cache(cache_key, gm, options, stats, start, marks, input_writes)
            if hit is not None:
                return hit

    setup_start = time.perf_counter()
    _run_pipeline(module, options, stats, debug, name, setup, setup_start)

    # Read after the pipeline: a pass may change how outputs are rebuilt (output-layout).
    output_structure = next(
        (op.attributes["kiln.outputs"] for op in module.ops if "kiln.outputs" in op.attributes),
        None,
    )
    executor = choose_executor(options.executor, devices, available_executors())
    if executor == "triton":
        check_triton_devices(name, example_inputs, devices)
    structure = None if output_structure is None else str(output_structure.data)  # pyright: ignore
    # A Triton program builds a flat structure itself, inside its CUDA graphs, and then
    # writes its inputs too (inside the graphs where it can).
    built = executor == "triton" and structure is not None and is_flat(structure)
    writes_in_program = executor == "triton" and (built or structure is None)
    build_start = time.perf_counter()
    run, stats.executor, program = build_runner(
        executor,
        module,
        options,
        debug,
        gpu_device(devices),
        stats.stage_seconds,
        guarded,
        output_structure=structure if built else None,
        input_writes=tuple(input_writes) if writes_in_program else (),
    )
    writes_in_program = writes_in_program and stats.executor == "triton"
    if stats.executor not in ("cpp", "triton"):
        stats.stage_seconds["build"] = time.perf_counter() - build_start
    stats.kernels = sum(1 for op in module.ops if op.name == "kernel.kernel")
    stats.launches = sum(1 for op in module.walk() if op.name == "kernel.launch")
    stats.externs = extern_overloads(module)
    # The C++ wrapper's oneDNN-packed ops (not the Triton wrapper's channels-last copies).
    stats.prepacked = prepacked_ops(module) if stats.executor == "cpp" else 0
    strides = returned_strides(module, structure) if free_layout_outputs else None
    if cache_key is not None and program is not None:
        _store(cache_key, program, structure, stats, lifted, strides)
    record(stats, start, options)
    returned = _returned_count(gm, input_writes)
    fix = device_fixer(gm, gpu_device(devices), returned) if stats.executor == "triton" else None
    writes = None if writes_in_program or not input_writes else InputWrites(tuple(input_writes))
    compiled = _finish(run, stats, module, None if built else structure, constants, fix, writes)
    compiled.output_strides = strides
    return compiled


_LINEAR_TARGETS = ("mm.default", "addmm.default", "convolution.default")
"""Ops that are or may become (``conv1x1-to-mm``) products of a weight."""


def _faster_packed_gemm(gm: torch.fx.GraphModule) -> bool:
    """Whether the CPU inference graph ``gm`` has a matrix product (or a convolution) and
    this machine runs oneDNN's packed GEMM faster than ATen's ``mm`` (measured once per
    machine and stored, only for a graph with a product to decide on)."""
    if not any(
        node.op == "call_function" and str(node.target).endswith(_LINEAR_TARGETS)
        for node in gm.graph.nodes
    ):
        return False
    from kiln.backends.cpp.gemm_calibration import packed_linear_faster

    return packed_linear_faster()


def runs_tf32_matmul(program_device: torch.device | None) -> bool:
    """Whether a program for ``program_device`` runs float32 matrix products in TF32:
    torch's setting when the graph is compiled, as Inductor's padding reads it."""
    return program_device is not None and torch.get_float32_matmul_precision() != "highest"


@dataclass(frozen=True)
class _DriverMarks:
    """What the driver adds to an imported module before the pipeline (and to the graph
    cache's key with it)."""

    program_device: torch.device | None
    prepack: Literal["inference", "training"] | None
    free_layout_outputs: tuple[int, ...] = ()
    packed_linear: bool = False
    guarded_arguments: bool = False
    """The caller guards the arguments (``compile_graph``'s ``guarded``): the C++
    wrapper writes no argument checks (``kiln.guarded_arguments``)."""
    tf32_matmul: bool = False
    """A GPU program compiled while torch runs float32 matrix products in TF32
    (``kiln.tf32_matmul``: ``pad-mm`` pads float32 products only then)."""

    def key_context(self) -> tuple[str, ...]:
        """The marks as the graph cache's key reads them (a key made from the FX graph
        sees no module)."""
        return (
            f"device {self.program_device}",
            f"inference prepack {self.prepack == 'inference'}",
            f"packed linear {self.packed_linear}",
            f"free layout {list(self.free_layout_outputs)}",
            f"guarded arguments {self.guarded_arguments}",
            f"tf32 matmul {self.tf32_matmul}",
        )

    def apply(self, module: ModuleOp) -> None:
        from xdsl.dialects.func import FuncOp

        from kiln.dialects.aten.function_attrs import (
            DEVICE_ATTR,
            FREE_LAYOUT_OUTPUTS_ATTR,
            GUARDED_ARGUMENTS_ATTR,
            TF32_MATMUL_ATTR,
            free_layout_attr,
        )

        for func in module.ops:
            if not isinstance(func, FuncOp):
                continue
            if self.free_layout_outputs:
                func.attributes[FREE_LAYOUT_OUTPUTS_ATTR] = free_layout_attr(
                    self.free_layout_outputs
                )
            if self.guarded_arguments:
                func.attributes[GUARDED_ARGUMENTS_ATTR] = UnitAttr()

        if self.program_device is not None:
            # Passes that make tensors (decompositions) make them where the program runs.
            module.attributes[DEVICE_ATTR] = StringAttr(str(self.program_device))
        if self.tf32_matmul:
            module.attributes[TF32_MATMUL_ATTR] = UnitAttr()
        if self.prepack is not None:
            from kiln.dialects.aten.prepack import INFERENCE_ATTR, TRAINING_ATTR

            attr = INFERENCE_ATTR if self.prepack == "inference" else TRAINING_ATTR
            module.attributes[attr] = UnitAttr()
        if self.packed_linear:
            from kiln.dialects.aten.prepack import PACKED_LINEAR_ATTR

            module.attributes[PACKED_LINEAR_ATTR] = UnitAttr()


def _returned_count(gm: torch.fx.GraphModule, input_writes: Sequence[int]) -> int | None:
    """How many of ``gm``'s outputs the compiled graph returns (None: all of them)."""
    if not input_writes:
        return None
    output = next(iter(gm.graph.find_nodes(op="output")))
    returned = output.args[0]
    total = len(returned) if isinstance(returned, tuple | list) else 1  # pyright: ignore[reportUnknownArgumentType]
    return total - len(input_writes)


def _from_graph_cache(
    key: str,
    gm: torch.fx.GraphModule,
    options: CompileOptions,
    stats: GraphStats,
    start: float,
    marks: _DriverMarks,
    input_writes: Sequence[int],
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

        declare_eager_statistics(gm.graph)
        again = import_graph(gm)
        marks.apply(again)
        _run_pipeline(again, options, GraphStats(name=name), None, name)
        return again

    record(stats, start, options)
    writes = InputWrites(tuple(input_writes)) if input_writes else None
    compiled = _finish(run, stats, rebuild, entry.output_structure, constants, None, writes)
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
    from kiln.passes.pad_mm import PadMmPass
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
            stats.pass_ops[prev.name] = count_ops(mod)
            if prev.name == "lower-aten":
                stats.stamped = stamped_notes(mod)
            elif prev.name == "fuse":
                stats.stamped_fuse = stamped_notes(mod, STAMPED_FUSE_ATTR)
            if debug is not None:
                dump(debug, f"{next(counter):02d}_{prev.name}.mlir", str(mod))
        last[0] = now
        if isinstance(_next, PadMmPass):
            _measure_padding(_next, mod)  # counted as the pass's time

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


def _measure_padding(pad_mm: PadMmPass, module: ModuleOp) -> None:
    """Time the products ``pad-mm`` leaves to measurement on the program's GPU and list
    those that pay padded on ``module`` (``kiln.padded_products``), when a GPU is here."""
    problems = pad_mm.to_measure(module)
    if not problems:
        return
    from kiln.backends.triton.matmul_padding import can_measure, padding_pays
    from kiln.dialects.aten.function_attrs import module_device
    from kiln.dialects.aten.padded_products import mark_padded_products

    if not can_measure():
        return
    device = module_device(module)
    try:
        paying = [p for p in problems if padding_pays(p, device)]
    except Exception as e:  # a measurement is an optimisation: the rules' program still runs
        warnings.warn(
            f"kiln: pad-mm could not time {len(problems)} matrix products on {device} "
            f"({type(e).__name__}: {e}); they stay unpadded",
            RuntimeWarning,
            stacklevel=2,
        )
        return
    mark_padded_products(module, paying)


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


def _finish(
    run: Runner,
    stats: GraphStats,
    module: ModuleOp | Callable[[], ModuleOp],
    output_structure: str | None,
    constants: list[torch.Tensor],
    fix: Callable[[Any], Any] | None,
    writes: InputWrites | None = None,
) -> CompiledGraph:
    """The compiled graph: lifted constants appended, outputs rebuilt as the graph
    returns them, the trailing ones written into inputs (``writes``), the others moved
    where eager made them (``fix``)."""
    if constants:
        run = with_constants(run, constants)
    if output_structure is not None:
        from kiln.output_structure import structure_builder  # imports no IR (graph cache hits)

        build = structure_builder(output_structure)
        built_run = run
        run = lambda args: build(built_run(args))  # noqa: E731
    if writes is not None:
        run = writes.wrap(run)
    if fix is not None:
        fixed_run = run
        # A CUDA program allocates on the GPU; eager made these outputs on the CPU.
        run = lambda args: fix(fixed_run(args))  # noqa: E731
    final = run
    return CompiledGraph(lambda args: final(owned(args)), stats, module)


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


__all__ = [
    "DEFAULT_PIPELINE",
    "PARTITIONERS",
    "CompileError",
    "CompileOptions",
    "CompiledGraph",
    "Executor",
    "GraphStats",
    "compile_graph",
    "compile_history",
    "extern_overloads",
    "last_compile_stats",
    "prepacked_ops",
    "profiling_passes",
    "reset_compile_history",
    "returned_strides",
]
