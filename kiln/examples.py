"""Small real models used by the README's main job, ``kiln-import`` examples and benchmarks.

Weights are random but deterministic: each model draws them from its own seeded
generator, so two instances are identical and the global RNG is left alone.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


def _reinit(module: nn.Module, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in module.named_parameters():
            if name.endswith("bias"):
                param.copy_(torch.randn(param.shape, generator=gen) * 0.02)
            elif param.dim() == 1:
                param.copy_(1.0 + 0.1 * torch.randn(param.shape, generator=gen))
            else:
                fan_in = param.shape[-1]
                param.copy_(torch.randn(param.shape, generator=gen) / math.sqrt(fan_in))


class CausalSelfAttention(nn.Module):
    def __init__(self, dim: int = 64, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=-1)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(c // self.heads))
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        scores = scores.masked_fill(~mask, float("-inf"))
        y = F.softmax(scores, dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(b, t, c))


class GPTBlock(nn.Module):
    """A GPT-2 style transformer block: pre-LN attention and GELU MLP with residuals."""

    def __init__(self, dim: int = 64, heads: int = 4, seed: int = 0) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = CausalSelfAttention(dim, heads)
        self.ln2 = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, 4 * dim)
        self.out = nn.Linear(4 * dim, dim)
        _reinit(self, seed)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class MLP(nn.Module):
    def __init__(self, dim: int = 64, hidden: int = 256, seed: int = 0) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)
        _reinit(self, seed)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.relu(self.fc1(x)))


def gpt_block() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """The README's default example: a GPT block on a (2, 16, 64) activation."""
    gen = torch.Generator().manual_seed(1)
    return GPTBlock().eval(), (torch.randn(2, 16, 64, generator=gen),)
