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
    and fusion decisions (see :mod:`kiln.explain`)."""
    from kiln.explain import explain as _explain

    return _explain(model, *inputs, **options)


def compile(
    model: Callable[..., Any], *, dynamic: bool | None = None, **options: Any
) -> Callable[..., Any]:
    """``torch.compile(model, backend="kiln", options=options, dynamic=dynamic)``."""
    import torch

    from kiln.frontends.dynamo import kiln_backend

    return torch.compile(model, backend=kiln_backend, dynamic=dynamic, options=options or None)
