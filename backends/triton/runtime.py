"""Compile a scheduled module into a callable that runs it with Triton.

:func:`compile_program` takes a module at the Triton level (the driver ran
``lower-to-triton`` after ``fuse``/``tile``/``buffer-reuse``, see :mod:`kiln.targets`),
prints one Python module (the kernels, the reduction
helpers they use, and the wrapper ``call``), stores it in the per-user cache by content
hash (:mod:`~kiln.backends.cache`), imports it, and gives every kernel a
:class:`~kiln.backends.triton.launch.KernelRunner`. On a GPU, kernels whose shapes are
static are compiled in parallel right away (a thread pool: Triton's compile steps and
``ptxas`` run outside the interpreter lock in part, and its own disk cache makes a
second compile of the same kernel a load); the others compile on first launch.

```python
program = compile_program(module)                  # after lower-to-triton; TRITON_INTERPRET=1 on the CPU
(out,) = program([x, w])                           # the graph's calling convention
print(program.source)                              # what runs
```

Options: ``autotune`` (benchmark each kernel's candidate configs on its first call,
see :mod:`~kiln.backends.triton.autotune`), ``cuda_graphs`` (replay the whole launch
sequence as one CUDA graph, see :mod:`~kiln.backends.triton.cudagraphs`).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

import sympy
import torch
from xdsl.dialects.builtin import ArrayAttr, ModuleOp, SymbolRefAttr

from kiln.backends.cache import cache_root, content_hash, private_dir, store_source, usable_dir
from kiln.backends.host.input_writes import InputWrites
from kiln.backends.triton import interpreter_fixes
from kiln.backends.triton.autotune import Autotuner
from kiln.backends.triton.cudagraphs import CudaGraphRunner
from kiln.backends.triton.emit import HELPERS, MODULE_HEADER, emit_kernel
from kiln.backends.triton.launch import KernelRunner, KernelSpec
from kiln.backends.triton.weight_layouts import ChannelsLastConvolution, weight_sites
from kiln.backends.triton.wrapper import WRAPPER_HEADER, print_wrapper
from kiln.cores import usable_cores
from kiln.dialects.aten.arg_layout import in_layout
from kiln.dialects.aten.prepack import TRAINING_ATTR
from kiln.dialects.kernel.attributes import ConfigAttr
from kiln.dialects.kernel.contract_attrs import IMPLEMENTS
from kiln.dialects.kernel.program_ops import ProgramNotFound, ProgramOp, find_program
from kiln.dialects.loop.body_eval import torch_dtype
from kiln.dialects.triton import DeviceAssertOp, KernelOp, PointerType
from kiln.output_structure import structure_builder


class TritonRuntimeError(RuntimeError):
    """The module cannot be built into a Triton program."""


@dataclass(frozen=True)
class TritonOptions:
    autotune: bool = False
    cuda_graphs: bool | Literal["auto"] = False
    """Replay through CUDA graphs (:mod:`~kiln.backends.triton.cudagraphs`); ``"auto"``:
    where they are safe and useful (all-CUDA tensor arguments)."""
    cache_dir: str | None = None
    """Default: ``$KILN_CACHE_DIR``, ``$XDG_CACHE_HOME/kiln`` or ``~/.cache/kiln``."""
    compile_threads: int = 0
    """Parallel compile workers (0: one per CPU, at most 16)."""
    progress: bool = True
    """Print autotuning progress on stderr."""
    device: str | None = None
    """The device the program allocates on and moves its arguments to (the graph's, see
    :mod:`kiln.devices`); default: the current CUDA device, or the CPU when interpreting."""
    guarded: bool = False
    """The caller guards the metadata of parameters and static inputs (see
    :attr:`~kiln.backends.triton.cudagraphs.CudaGraphRunner.guarded`)."""
    output_structure: str | None = None
    """A flat ``kiln.outputs`` structure (:func:`kiln.output_structure.is_flat`) the
    program builds its results into, views included, so that a CUDA graph records the
    views too: a replay then hands each over as it hands over any output, where building
    them after the runner replayed every view op (or its ``as_strided``) at every call,
    ~4 us each (ViT-tiny's training forward returns 84 views as saved activations)."""
    input_writes: tuple[int, ...] = ()
    """The inputs the program's last ``len(input_writes)`` outputs are written into after
    each run (:mod:`kiln.backends.host.input_writes`); it returns the outputs before them.
    A CUDA graph writes the inputs that stay put (buffers) inside the graph."""


def default_cache_dir() -> Path:
    """The cache root (generated modules go to ``triton/``, autotuning results to
    ``autotune/`` under it), private, or a private temp directory (kiln.backends.cache)."""
    return usable_dir(cache_root(), "triton")


def interpreting() -> bool:
    """Whether Triton runs kernels in its interpreter (``TRITON_INTERPRET=1``)."""
    return os.environ.get("TRITON_INTERPRET") == "1"


# -- source -------------------------------------------------------------------------------


@dataclass
class GeneratedSource:
    text: str
    kernels: list[KernelOp]
    runners: dict[str, str]
    """``triton.kernel`` name -> its runner's name in the module."""
    kernel_sources: dict[str, str]
    namespace: dict[str, Any] = field(default_factory=dict[str, Any])
    """Module-level objects the wrapper's inlined externs use (``_c0``, ...)."""


def implementations(module: ModuleOp) -> dict[str, KernelOp]:
    """``kernel.kernel`` name -> the ``triton.kernel`` implementing it (``implements``)."""
    return {
        name: op
        for name, op in IMPLEMENTS.implementations(module).items()
        if isinstance(op, KernelOp)
    }


def generate_source(module: ModuleOp, name: str = "forward") -> GeneratedSource:
    """The Python module that runs ``kernel.program @name`` (the module must be at the
    Triton level: every launched ``kernel.kernel`` has a ``triton.kernel``)."""
    impls = implementations(module)
    try:
        program = find_program(module, name)
    except ProgramNotFound as e:
        raise TritonRuntimeError(str(e)) from None
    used = [k.string_value() for k in _launched(program)]
    kernels: list[KernelOp] = []
    for kernel_name in used:
        if kernel_name not in impls:
            raise TritonRuntimeError(
                f"no triton.kernel implements @{kernel_name}: run lower-to-triton first "
                "(kiln.targets.build_triton_program does)"
            )
        if impls[kernel_name] not in kernels:
            kernels.append(impls[kernel_name])
    emitted = [emit_kernel(k) for k in kernels]
    helpers: list[str] = []
    for e in emitted:
        helpers += [h for h in e.helpers if h not in helpers]
    runners = {k.sym_name.data: f"run_{k.sym_name.data}" for k in kernels}
    by_loop_kernel = {name: runners[impls[name].sym_name.data] for name in used}
    wrapper, namespace = print_wrapper(program, by_loop_kernel)
    parts = [
        MODULE_HEADER + "\n\n" + WRAPPER_HEADER,
        *(HELPERS[h] for h in helpers),
        *(e.source for e in emitted),
        wrapper,
    ]
    return GeneratedSource(
        "\n\n\n".join(parts) + "\n",
        kernels,
        runners,
        {e.name: e.source for e in emitted},
        namespace,
    )


def _launched(program: ProgramOp) -> list[SymbolRefAttr]:
    from kiln.dialects.kernel.program_ops import LaunchOp

    return [op.kernel for op in program.body.block.ops if isinstance(op, LaunchOp)]


def kernel_spec(kernel: KernelOp) -> KernelSpec:
    args = list(kernel.body.block.args)
    pointers = [a for a in args if isinstance(a.type, PointerType)]
    n_inputs = sum(1 for p in kernel.param_names if p.startswith("in_ptr"))
    chosen = kernel.attributes.get("config")
    candidates = kernel.attributes.get("configs")
    configs: list[dict[str, int]] = []
    for attr in ([chosen] if chosen is not None else []) + (
        list(candidates.data) if isinstance(candidates, ArrayAttr) else []
    ):
        if isinstance(attr, ConfigAttr) and attr.as_dict() not in configs:
            configs.append(attr.as_dict())
    missing = [c for c in kernel.constexpr_names if not configs or c not in configs[0]]
    if missing:
        raise TritonRuntimeError(
            f"triton.kernel @{kernel.sym_name.data} has no config for {missing}"
        )
    configs = [c for c in configs if all(k in c for k in kernel.constexpr_names)]
    implements = kernel.attributes.get("implements")
    return KernelSpec(
        name=kernel.sym_name.data,
        kind=kernel.kind.data,
        n_inputs=n_inputs,
        n_pointers=len(pointers),
        n_sizes=len(args) - len(pointers),
        constexprs=tuple(kernel.constexpr_names),
        numel=kernel.numel.data,
        rnumel=kernel.rnumel.data,
        ynumel=kernel.ynumel.data if kernel.ynumel is not None else None,
        configs=tuple(configs),
        implements=implements.string_value() if isinstance(implements, SymbolRefAttr) else "",
        asserts=any(isinstance(op, DeviceAssertOp) for op in kernel.walk()),
    )


def pointer_dtypes(kernel: KernelOp) -> list[torch.dtype]:
    return [
        torch_dtype(a.type.pointee)
        for a in kernel.body.block.args
        if isinstance(a.type, PointerType)
    ]


# -- run-time support the wrapper calls ---------------------------------------------------------


def as_buffer(value: Any, device: torch.device | None = None) -> Any:
    """A program argument as a contiguous buffer on ``device`` (copied only when it is
    not: a CPU 0-d tensor of a CUDA graph, legal in eager, would fault in a kernel)."""
    if not isinstance(value, torch.Tensor):
        return value
    if device is not None and value.device != device:
        value = value.to(device)
    if not value.is_contiguous():
        return value.contiguous()
    return value


def as_layout(value: Any, device: torch.device | None, strides: tuple[int, ...]) -> Any:
    """A program argument that the kernels read through ``strides`` (recorded at
    import, :mod:`kiln.dialects.aten.arg_layout`): itself, on ``device``, when laid out
    so; otherwise a copy with those strides."""
    if device is not None and value.device != device:
        value = value.to(device)
    return in_layout(value, strides)


def on_device(value: Any, device: torch.device) -> Any:
    """``value`` on ``device``, strides kept (a no-op, but for the check, when it is)."""
    if isinstance(value, torch.Tensor) and value.device != device:
        return value.to(device)
    return value


def program_device(option: str | None, interpret: bool) -> torch.device:
    """The device a program runs on (see :attr:`TritonOptions.device`), with an index,
    so that comparing it with a tensor's device is exact."""
    if interpret:
        return torch.device("cpu")
    device = torch.device(option or "cuda")
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    return device


def reinterpret(buffer: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """A reused buffer seen with another shape (same element count, contiguous)."""
    return buffer if tuple(buffer.shape) == tuple(shape) else buffer.view(shape)


def _stream_getter(interpret: bool) -> Callable[[torch.device], int]:
    if interpret:
        return lambda device: 0
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # pyright: ignore[reportPrivateUsage]
    if raw is not None:
        return lambda device: raw(
            device.index if device.index is not None else torch.cuda.current_device()
        )
    return lambda device: torch.cuda.current_stream(device).cuda_stream


# -- the program ---------------------------------------------------------------------------------


@dataclass
class TritonProgram:
    """A compiled ``kernel.program``: call it with the program's arguments."""

    source: str
    path: Path
    module: ModuleType
    runners: dict[str, KernelRunner]
    interpret: bool
    tuner: Autotuner | None = None
    weight_sites: list[ChannelsLastConvolution] = field(
        default_factory=list[ChannelsLastConvolution]
    )
    """The program's convolutions on cached channels-last weights (a CUDA graph pins
    the copies it reads)."""
    build: Callable[[Sequence[Any]], Any] | None = None
    """Builds the results into the graph's outputs (``TritonOptions.output_structure``)."""
    writes: InputWrites | None = None
    """Writes the trailing outputs into inputs (``TritonOptions.input_writes``)."""
    call: Callable[[list[Any]], tuple[Any, ...]] = field(init=False)

    def __post_init__(self) -> None:
        call = self.module.call
        build = self.build
        if build is not None:
            call = lambda args, run=call: build(run(args))  # noqa: E731
        self.call = call if self.writes is None else self.writes.wrap(call)

    def __call__(self, args: Sequence[Any]) -> tuple[Any, ...]:
        return self.call(list(args))

    def boxed_call(self, args: list[Any]) -> tuple[Any, ...]:
        """Run taking ownership of ``args``: the list is emptied, and each argument
        tensor is released after its last use (AOTAutograd's boxed convention)."""
        return self.call(args)


def _load(path: Path, key: str) -> ModuleType:
    name = f"kiln_triton_{key[:24]}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise TritonRuntimeError(f"cannot import generated module {path}")
    module = importlib.util.module_from_spec(spec)
    # triton.jit reads the kernels' source through the module's file (inspect).
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        del sys.modules[name]
        raise TritonRuntimeError(f"generated module {path} failed to load: {e}") from e
    return module


def compile_program(
    module: ModuleOp, name: str = "forward", options: TritonOptions | None = None
) -> TritonProgram | CudaGraphRunner:
    """Build the callable for ``kernel.program @name`` (see the module docstring)."""
    options = options or TritonOptions()
    interpret = interpreting()
    if interpret:
        interpreter_fixes.apply()  # bfloat16 dots and casts as on a GPU
    generated = generate_source(module, name)
    cache = private_dir(Path(options.cache_dir) if options.cache_dir else default_cache_dir())
    path = store_source(cache, "triton", generated.text)
    key = content_hash("triton", generated.text)
    loaded = _load(path, key)
    device = "cpu" if interpret else torch.cuda.get_device_name()
    tuner = (
        Autotuner(
            cache,
            generated.kernel_sources,
            device,
            interpret,
            progress=sys.stderr if options.progress else None,
        )
        if options.autotune
        else None
    )
    runners: dict[str, KernelRunner] = {}
    for kernel in generated.kernels:
        spec = kernel_spec(kernel)
        fn = getattr(loaded, spec.name)
        runner = KernelRunner(spec, fn, interpret, tuner=tuner)
        runners[spec.name] = runner
        setattr(loaded, generated.runners[spec.name], runner)
    for name, value in generated.namespace.items():
        setattr(loaded, name, value)
    loaded.as_buffer = as_buffer  # pyright: ignore[reportAttributeAccessIssue]
    loaded.as_layout = as_layout  # pyright: ignore[reportAttributeAccessIssue]
    loaded.on_device = on_device  # pyright: ignore[reportAttributeAccessIssue]
    loaded.reinterpret = reinterpret  # pyright: ignore[reportAttributeAccessIssue]
    loaded.get_stream = _stream_getter(interpret)  # pyright: ignore[reportAttributeAccessIssue]
    loaded.default_device = program_device(options.device, interpret)  # pyright: ignore[reportAttributeAccessIssue]
    if not interpret and not options.autotune:
        precompile(generated.kernels, runners, options.compile_threads)
    writes = InputWrites(options.input_writes) if options.input_writes else None
    graphed = bool(options.cuda_graphs) and not interpret  # the runner writes, in its graphs
    program = TritonProgram(
        generated.text,
        path,
        loaded,
        runners,
        interpret,
        tuner,
        weight_sites=weight_sites(generated.namespace),
        build=None
        if options.output_structure is None
        else structure_builder(options.output_structure),
        writes=None if graphed else writes,
    )
    if graphed:
        return CudaGraphRunner(
            program,
            auto=options.cuda_graphs == "auto",
            guarded=options.guarded,
            writes=writes,
            # The optimizer updates a training graph's weights between two steps.
            refresh_weights=TRAINING_ATTR in module.attributes,
        )
    return program


def precompile(
    kernels: Sequence[KernelOp], runners: dict[str, KernelRunner], threads: int = 0
) -> None:
    """Compile every static-shape kernel for aligned arguments, in parallel."""
    jobs: list[tuple[KernelRunner, list[torch.dtype]]] = []
    for kernel in kernels:
        runner = runners[kernel.sym_name.data]
        if runner.spec.n_sizes == 0 and not isinstance(runner.spec.numel, sympy.Symbol):
            jobs.append((runner, pointer_dtypes(kernel)))
    if not jobs:
        return
    workers = threads or min(16, usable_cores())

    def build(job: tuple[KernelRunner, list[torch.dtype]]) -> None:
        runner, dtypes = job
        key = (1,) * runner.spec.n_pointers
        runner.compiled[key] = runner.compile(dtypes, runner.grid(()))

    if workers == 1 or len(jobs) == 1:
        for job in jobs:
            build(job)
        return
    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(build, jobs))


__all__ = [
    "GeneratedSource",
    "TritonOptions",
    "TritonProgram",
    "TritonRuntimeError",
    "as_buffer",
    "as_layout",
    "compile_program",
    "generate_source",
    "implementations",
    "interpreting",
    "kernel_spec",
    "on_device",
    "precompile",
    "program_device",
    "reinterpret",
]
