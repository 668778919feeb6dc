"""kiln: an MLIR-style PyTorch compiler on xDSL.

``torch.compile(model, backend="kiln")`` works without importing kiln (entry point
``torch_dynamo_backends``); :func:`compile` is the same with keyword options.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from collections.abc import Callable


def explain(model: Callable[..., Any], *inputs: Any, **options: Any) -> str:
    """Print (and return) what kiln does with ``model``: graphs, kernels, ATen fallbacks
    and fusion decisions (see :mod:`kiln.explainer`)."""
    from kiln.explainer import explain as _explain

    return _explain(model, *inputs, **options)


def compile(
    model: Callable[..., Any],
    *,
    dynamic: bool | None = None,
    fullgraph: bool = False,
    mode: str | None = None,
    **options: Any,
) -> Callable[..., Any]:
    """``torch.compile(model, backend="kiln", options=options, dynamic=..., fullgraph=...)``.

    ``mode`` takes Inductor's names: ``"reduce-overhead"`` replays CUDA graphs,
    ``"max-autotune"`` also autotunes kernel configs, ``"max-autotune-no-cudagraphs"`` only
    autotunes. Options are checked here, not at the first call.
    """
    import torch

    from kiln.compiler import CompileError, CompileOptions
    from kiln.frontends.dynamo import kiln_backend

    if mode not in _MODES:
        raise CompileError(f"kiln.compile: unknown mode {mode!r}; known: {sorted(_MODES, key=str)}")
    options = {**_MODES[mode], **options}
    CompileOptions.from_mapping(options)
    return torch.compile(
        model, backend=kiln_backend, dynamic=dynamic, fullgraph=fullgraph, options=options or None
    )


_MODES: dict[str | None, dict[str, bool]] = {
    None: {},
    "default": {},
    "reduce-overhead": {"cuda_graphs": True},
    "max-autotune": {"cuda_graphs": True, "autotune": True},
    "max-autotune-no-cudagraphs": {"autotune": True},
}
