"""Suite-wide set-up."""

from __future__ import annotations

import importlib.metadata

import pytest


def pytest_configure(config: pytest.Config) -> None:
    """``backend="kiln"`` also where kiln runs from a checkout on ``PYTHONPATH`` without
    being installed (the GPU machine): its entry point is then missing."""
    del config
    installed = any(
        ep.name == "kiln" for ep in importlib.metadata.entry_points(group="torch_dynamo_backends")
    )
    if installed:
        return
    from torch._dynamo.backends.registry import register_backend

    from kiln.frontends.dynamo import kiln_backend

    register_backend(kiln_backend, name="kiln")
