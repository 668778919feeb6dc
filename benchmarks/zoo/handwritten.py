"""The models this project wrote itself (benchmarks/suite_models.py), as zoo rows: the blocks
``benchmarks/suite.py`` has measured since the start, kept for continuity."""

from __future__ import annotations

import torch
from suite_models import SUITE, Factory

from zoo import Built, ModelSpec

_FAMILIES = {
    "mlp": "mlp",
    "resnet": "cnn",
    "vit": "vit",
    "gpt2": "decoder-lm",
    "llama_block": "decoder-lm-rope",
    "bert": "encoder-lm",
    "layer_norm": "op",
    "softmax": "op",
    "cross_entropy": "op",
}


def _spec(name: str, factory: Factory) -> ModelSpec:
    def build(size: str) -> Built:
        model, inputs = factory(torch.device("cpu"), torch.float32, size)
        return model, inputs

    return ModelSpec(name, "kiln", _FAMILIES.get(name, "other"), build)


SPECS: list[ModelSpec] = [_spec(name, factory) for name, factory in SUITE.items()]
