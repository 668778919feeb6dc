"""Import helpers for the model zoo: offline, and torchvision beside a CPU-only torch.

Everything here runs offline: ``HF_HUB_OFFLINE`` / ``TRANSFORMERS_OFFLINE`` are set before
transformers is imported, models are built from configs with random weights.

PyPI's torchvision wheel for torch 2.13 ships a CUDA build of its C extension (``_C.so``),
which fails to load beside the CPU torch wheel; torchvision then fails at import with
"operator torchvision::nms does not exist", because ``torchvision._meta_registrations``
registers fake kernels for ops the missing extension would have defined. The model
definitions (``torchvision.models``) do not need the extension (only detection ops like
``nms`` and ``roi_align`` do), so when ``_C`` cannot load we stub that one module out
before importing torchvision. timm imports torchvision, so it needs the same, and so does transformers. Where
torchvision's extension loads (the GPU machine: torch 2.11 + torchvision 0.26), nothing
is patched.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import types
from types import ModuleType

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

_PATCHED: list[bool] = []


def _extension_loads() -> bool:
    """Whether torchvision's C extension loads in this process (without importing
    torchvision itself, whose ``__init__`` is what fails)."""
    spec = importlib.util.find_spec("torchvision")
    if spec is None or not spec.submodule_search_locations:
        return False
    import glob

    import torch

    for folder in spec.submodule_search_locations:
        for path in glob.glob(os.path.join(folder, "_C*.so")):
            try:
                torch.ops.load_library(path)
                return True
            except (OSError, RuntimeError):
                return False
    return False


def import_torchvision() -> ModuleType:
    """``import torchvision``, stubbing its meta registrations when its C extension
    cannot load (see the module docstring)."""
    if "torchvision" not in sys.modules and not _extension_loads():
        sys.modules["torchvision._meta_registrations"] = types.ModuleType(
            "torchvision._meta_registrations"
        )
        _PATCHED.append(True)
    import torchvision

    return torchvision


def torchvision_patched() -> bool:
    """Whether :func:`import_torchvision` had to stub the meta registrations."""
    return bool(_PATCHED)


def import_timm() -> ModuleType:
    import_torchvision()
    import timm

    return timm


def import_transformers() -> ModuleType:
    # transformers imports torchvision when it is installed (image processors).
    if importlib.util.find_spec("torchvision") is not None:
        import_torchvision()
    import transformers

    transformers.logging.set_verbosity_error()
    return transformers
