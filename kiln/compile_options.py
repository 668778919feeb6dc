"""kiln's compile options: what ``torch.compile(..., backend="kiln", options={...})`` and
:func:`kiln.compile` accept, checked when given (:class:`CompileOptions`).

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

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Literal

DEFAULT_PIPELINE = "decompose,canonicalize,cse,dce,output-layout,scale-after-bmm,unfuse-addmm,unfuse-conv-bias,patch-conv-to-mm,merge-products,pad-mm,prepack-weights,channels-last,conv1x1-to-mm,conv-epilogue,dot-kernels,lower-aten,fuse,tile,reorder-collectives,buffer-reuse,dedup-kernels"

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
            check_option(name, value)
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
EXECUTORS = ("auto", "cpp", "triton", "interpret")
PARTITIONERS = ("min-cut", "default")


def check_option(name: str, value: Any) -> None:
    """Reject a mistyped option when it is given, not at the first call."""
    if name == "plugins":
        if not all(isinstance(p, str) for p in value):
            raise CompileError(f"kiln option plugins={value!r}: expected module names or paths")
        return
    expected = _OPTION_TYPES[name]
    if not isinstance(value, expected):
        names = " or ".join("None" if t is type(None) else t.__name__ for t in expected)
        raise CompileError(f"kiln option {name}={value!r}: expected {names}")
    if name == "executor" and value not in EXECUTORS:
        raise CompileError(f"kiln option executor={value!r}: expected one of {list(EXECUTORS)}")
    if name == "cuda_graphs" and isinstance(value, str) and value != "auto":
        raise CompileError(f"kiln option cuda_graphs={value!r}: expected True, False or 'auto'")
    if name == "partitioner" and value not in PARTITIONERS:
        raise CompileError(
            f"kiln option partitioner={value!r}: expected one of {list(PARTITIONERS)}"
        )


__all__ = [
    "DEFAULT_PIPELINE",
    "EXECUTORS",
    "PARTITIONERS",
    "CompileError",
    "CompileOptions",
    "Executor",
    "check_option",
]
