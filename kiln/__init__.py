"""kiln: an MLIR-style PyTorch compiler on xDSL.

``torch.compile(model, backend="kiln")`` works without importing kiln (entry point
``torch_dynamo_backends``); :func:`compile` is the same with keyword options.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from collections.abc import Callable


def compile(model: Callable[..., Any], *, dynamic: bool | None = None, **options: Any) -> Callable[..., Any]:
    """``torch.compile(model, backend="kiln", options=options, dynamic=dynamic)``."""
    import torch

    from kiln.frontends.dynamo import kiln_backend

    return torch.compile(model, backend=kiln_backend, dynamic=dynamic, options=options or None)
