"""The benchmark dashboard's model zoo: real architectures plus the hand-written models.

Every entry is a :class:`ModelSpec` whose ``build(size)`` returns ``(module, inputs)`` in
float32 on the CPU, seeded, with random weights and no downloads (configs are built in code);
the dashboard moves them to the device and dtype. Sizes: ``small`` (batch 1, short
sequences, small images: latency-bound, cheap enough for a CPU run of the whole zoo) and
``large`` (bigger batches and widths: throughput-bound).

Sources: ``torchvision``, ``timm``, ``transformers`` (the ``bench`` extra) and ``kiln``
(benchmarks/suite_models.py). Dropout is disabled everywhere so that training steps compare
exactly with eager; so is stochastic depth (:data:`RANDOM_DEPTH`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

Built = tuple[nn.Module, tuple[torch.Tensor, ...]]

SIZES = ("small", "large")


@dataclass(frozen=True)
class ModelSpec:
    name: str
    source: str
    """torchvision, timm, transformers or kiln (the hand-written models)."""
    family: str
    """What kind of architecture: cnn, depthwise-cnn, vit, mixer, encoder-lm, ..."""
    build: Callable[[str], Built]


RANDOM_DEPTH = {"StochasticDepth": "p", "DropPath": "drop_prob"}
"""Modules that drop whole residual branches at random in train mode, by class name
(torchvision's and timm's) and the attribute holding their probability: EfficientNet and
Swin have them on by default, so that every training step (eager's, the backend's, the
float64 reference's) drew different branches and their comparison was meaningless."""


def seeded(build: Callable[[], nn.Module], seed: int = 0) -> nn.Module:
    """``build()`` under a fixed seed (module init draws from the global RNG), dropout and
    stochastic depth off."""
    torch.manual_seed(seed)
    model = build()
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.p = 0.0
        probability = RANDOM_DEPTH.get(type(module).__name__)
        if probability is not None:
            setattr(module, probability, 0.0)
    return model.eval()


def randn(*shape: int, seed: int = 1) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def randint(high: int, *shape: int, seed: int = 2) -> torch.Tensor:
    return torch.randint(0, high, shape, generator=torch.Generator().manual_seed(seed))


def registry() -> dict[str, ModelSpec]:
    """Every model, by name (building none of them; imports happen in ``build``)."""
    from zoo import handwritten, language, vision

    specs = [*vision.SPECS, *language.SPECS, *handwritten.SPECS]
    return {spec.name: spec for spec in specs}


__all__ = ["SIZES", "Built", "ModelSpec", "randint", "randn", "registry", "seeded"]
