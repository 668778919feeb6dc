"""Suite-wide set-up."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    """``backend="kiln"`` also where kiln runs from a checkout on ``PYTHONPATH`` without
    being installed (the GPU machine): its entry point is then missing."""
    del config
    from torch._dynamo.backends.registry import list_backends, register_backend

    if "kiln" in list_backends(exclude_tags=()):
        return
    from kiln.frontends.dynamo import kiln_backend

    register_backend(kiln_backend, name="kiln")
