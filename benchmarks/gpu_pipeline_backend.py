"""A torch.compile backend for checking kiln's GPU pipeline on a machine without a GPU:
kiln with every decision a CUDA program gets (``kiln.compiler.gpu_device`` answers
``cuda:0``: merged and padded products, dot kernels, channels-last convolutions, the
GPU's fusion and tiling rules), the Triton executor, kernels in Triton's interpreter
(``TRITON_INTERPRET=1``, with :mod:`kiln.backends.triton.interpreter_fixes`), no CUDA
graphs. Compile failures and wrong answers of the GPU pipeline show here first (session
54's bfloat16 language-model crash did); speed does not mean anything here.

    TRITON_INTERPRET=1 python benchmarks/arch_sweep.py --dtype bfloat16 \\
        --backend benchmarks/gpu_pipeline_backend.py:kiln_as_on_a_gpu --models 'hf_*'

Importing this module points ``kiln.compiler.gpu_device`` at ``cuda:0`` for the whole
process (a training step's backward compiles at ``backward()``, outside any call of the
backend): use it in a process of its own, as ``arch_sweep.py`` runs each model.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

os.environ.setdefault("TRITON_INTERPRET", "1")

import torch

import kiln.compiler
from kiln.frontends.dynamo import kiln_backend

OPTIONS: dict[str, Any] = {
    "executor": "triton",
    "cuda_graphs": False,
    "graph_cache": False,
    "verbose": False,
}


def _cuda0(*args: Any, **kwargs: Any) -> torch.device:
    return torch.device("cuda", 0)


kiln.compiler.gpu_device = _cuda0  # pyright: ignore[reportAttributeAccessIssue]


def kiln_as_on_a_gpu(
    gm: torch.fx.GraphModule, example_inputs: Sequence[Any], **kwargs: Any
) -> Callable[..., Any]:
    """kiln's backend with :data:`OPTIONS` (and any options passed to it on top)."""
    options = {**OPTIONS, **kwargs.pop("options", {})}
    return kiln_backend(gm, example_inputs, options=options, **kwargs)
