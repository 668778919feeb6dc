"""Small models for the FX importer tests (``MODEL_CASES``; conftest.py makes them the
parametrised ``model_case`` fixture). A module of its own, not conftest.py, so that tests
import it by a name no other test directory uses."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

EMBED = 16
HEADS = 2
SEQ = 6


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(12, 24)
        self.fc2 = nn.Linear(24, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


class ConvBNReLU(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn(self.conv(x)))


class CausalSelfAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(EMBED, 3 * EMBED)
        self.proj = nn.Linear(EMBED, EMBED)
        self.register_buffer("mask", torch.tril(torch.ones(SEQ, SEQ, dtype=torch.bool)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, embed = x.shape
        q, k, v = self.qkv(x).split(embed, dim=2)
        head = embed // HEADS
        q = q.view(batch, seq, HEADS, head).transpose(1, 2)
        k = k.view(batch, seq, HEADS, head).transpose(1, 2)
        v = v.view(batch, seq, HEADS, head).transpose(1, 2)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(head)
        scores = scores.masked_fill(~self.mask[:seq, :seq], float("-inf"))
        out = torch.softmax(scores, dim=-1) @ v
        return self.proj(out.transpose(1, 2).reshape(batch, seq, embed))


class LayerNorm(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(EMBED)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


class GPTBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(EMBED)
        self.attn = CausalSelfAttention()
        self.ln2 = nn.LayerNorm(EMBED)
        self.fc = nn.Linear(EMBED, 4 * EMBED)
        self.out = nn.Linear(4 * EMBED, EMBED)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class EmbeddingIndexing(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(10, EMBED)

    def forward(self, tokens: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        h = self.embed(tokens)  # [B, S, E]
        picked = h[:, rows]  # aten.index.Tensor
        order = torch.argsort(picked, dim=-1)
        return torch.gather(picked, -1, order) * 2.0


@dataclass(frozen=True)
class ModelCase:
    name: str
    make: Callable[[], nn.Module]
    inputs: Callable[[], tuple[Any, ...]]


def _float(*shape: int) -> Callable[[], tuple[Any, ...]]:
    return lambda: (torch.randn(*shape),)


MODEL_CASES = [
    ModelCase("mlp", MLP, _float(3, 12)),
    ModelCase("conv_bn_relu", ConvBNReLU, _float(2, 3, 5, 5)),
    ModelCase("causal_attention", CausalSelfAttention, _float(2, SEQ, EMBED)),
    ModelCase("layer_norm", LayerNorm, _float(2, SEQ, EMBED)),
    ModelCase("gpt_block", GPTBlock, _float(2, SEQ, EMBED)),
    ModelCase(
        "embedding_indexing",
        EmbeddingIndexing,
        lambda: (torch.randint(0, 10, (2, 5)), torch.tensor([4, 0, 2])),
    ),
]
