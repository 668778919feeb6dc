"""A zoo of small real models, shared by the tests of every pipeline level.

Each factory returns ``(module, example_inputs)`` with tiny shapes, random weights and
random inputs (never zeros or ones: BatchNorm and LayerNorm affine parameters and
running statistics are randomized too). Factories seed their own forked RNG, so they
are deterministic and leave the caller's RNG state alone.

```python
from models import ALL_MODELS
module, inputs = ALL_MODELS["gpt_block"]()
expected = module(*inputs)
```
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import nn

Inputs = tuple[torch.Tensor, ...]
ModelCase = tuple[nn.Module, Inputs]
ModelFactory = Callable[[], ModelCase]


@contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Deterministic randomness inside, the caller's RNG state untouched outside."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def _randomize_affine(norm: nn.Module) -> None:
    """Replace the ones/zeros default affine parameters of a norm layer by random ones."""
    with torch.no_grad():
        weight = getattr(norm, "weight", None)
        bias = getattr(norm, "bias", None)
        if isinstance(weight, torch.Tensor):
            weight.copy_(torch.rand_like(weight) + 0.5)
        if isinstance(bias, torch.Tensor):
            bias.copy_(torch.randn_like(bias) * 0.5)


def randomize_batch_norms(model: nn.Module) -> None:
    """Random affine parameters and running statistics for every BatchNorm2d (eval-mode
    batch norm is then no identity), from the global RNG."""
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.BatchNorm2d):
                module.weight.uniform_(0.5, 1.5)
                module.bias.uniform_(-0.5, 0.5)
                module.running_mean.uniform_(-0.5, 0.5)  # pyright: ignore[reportOptionalMemberAccess]
                module.running_var.uniform_(0.5, 1.5)  # pyright: ignore[reportOptionalMemberAccess]


# --- MLP ---------------------------------------------------------------------------------


class MLP(nn.Module):
    def __init__(self, dims: tuple[int, ...] = (16, 32, 24, 8)) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in itertools.pairwise(dims))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i + 1 < len(self.layers):
                x = F.relu(x) if i % 2 == 0 else F.tanh(x)
        return x


def mlp() -> ModelCase:
    with seeded(1):
        return MLP(), (torch.randn(4, 16),)


# --- Conv + BatchNorm + ReLU + MaxPool ------------------------------------------------------


class ConvBnReLU(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, kernel_size=3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(F.relu(self.bn(self.conv(x))))


def conv_bn_relu(train: bool = False) -> ModelCase:
    """Eval mode uses (random) running statistics; train mode normalizes with batch
    statistics and updates the running statistics in place."""
    with seeded(2):
        model = ConvBnReLU()
        _randomize_affine(model.bn)
        running_mean, running_var = model.bn.running_mean, model.bn.running_var
        assert running_mean is not None
        assert running_var is not None
        with torch.no_grad():
            running_mean.copy_(torch.randn(8) * 0.3)
            running_var.copy_(torch.rand(8) + 0.5)
        model.train(train)
        return model, (torch.randn(2, 3, 8, 8),)


def conv_bn_relu_eval() -> ModelCase:
    return conv_bn_relu(train=False)


def conv_bn_relu_train() -> ModelCase:
    return conv_bn_relu(train=True)


# --- attention -------------------------------------------------------------------------------


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention (nanoGPT style).

    ``use_sdpa=False`` writes it out: scaled scores, ``masked_fill`` with a causal mask
    sliced from a buffer, softmax, weighted sum. ``use_sdpa=True`` calls
    ``F.scaled_dot_product_attention(is_causal=True)``.
    """

    mask: torch.Tensor

    def __init__(self, dim: int = 16, heads: int = 2, max_len: int = 8, use_sdpa: bool = False):
        super().__init__()
        self.heads = heads
        self.use_sdpa = use_sdpa
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        mask = torch.tril(torch.ones(max_len, max_len, dtype=torch.bool))
        self.register_buffer("mask", mask.view(1, 1, max_len, max_len), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, dim = x.shape
        q, k, v = self.qkv(x).split(dim, dim=2)
        head_dim = dim // self.heads
        q = q.view(batch, length, self.heads, head_dim).transpose(1, 2)
        k = k.view(batch, length, self.heads, head_dim).transpose(1, 2)
        v = v.view(batch, length, self.heads, head_dim).transpose(1, 2)
        if self.use_sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(head_dim))
            causal = self.mask[:, :, :length, :length]
            scores = scores.masked_fill(~causal, float("-inf"))
            y = F.softmax(scores, dim=-1) @ v
        y = y.transpose(1, 2).contiguous().view(batch, length, dim)
        return self.proj(y)


def attention(use_sdpa: bool = False) -> ModelCase:
    with seeded(3):
        return CausalSelfAttention(use_sdpa=use_sdpa), (torch.randn(2, 5, 16),)


def attention_sdpa() -> ModelCase:
    return attention(use_sdpa=True)


# --- LayerNorm ---------------------------------------------------------------------------------


class LayerNormModel(nn.Module):
    def __init__(self, dim: int = 16) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


def layer_norm() -> ModelCase:
    with seeded(4):
        model = LayerNormModel()
        _randomize_affine(model.norm)
        return model, (torch.randn(2, 5, 16) * 2 + 0.5,)


# --- GPT block ---------------------------------------------------------------------------------


class GPTBlock(nn.Module):
    """Pre-norm transformer block: x + attn(ln(x)), then + mlp(ln(.)) with GELU."""

    def __init__(self, dim: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = CausalSelfAttention(dim, heads)
        self.ln2 = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, 4 * dim)
        self.out = nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


def gpt_block() -> ModelCase:
    with seeded(5):
        model = GPTBlock()
        _randomize_affine(model.ln1)
        _randomize_affine(model.ln2)
        return model, (torch.randn(2, 5, 16),)


# --- embedding and indexing -----------------------------------------------------------------


class EmbeddingIndexing(nn.Module):
    """nn.Embedding, then advanced indexing (index.Tensor), gather and index_select."""

    def __init__(self, vocab: int = 20, dim: int = 8) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)

    def forward(
        self, ids: torch.Tensor, positions: torch.Tensor, gather_index: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        emb = self.embed(ids)  # (B, T, D)
        picked = emb[:, positions] * 2.0  # index.Tensor with a leading None
        gathered = torch.gather(emb, 2, gather_index)
        selected = torch.index_select(emb, 1, positions).sum(-1)
        return picked, gathered, selected


def embedding_indexing() -> ModelCase:
    with seeded(6):
        model = EmbeddingIndexing()
        ids = torch.randint(0, 20, (2, 5))
        positions = torch.randint(0, 5, (3,))
        gather_index = torch.randint(0, 8, (2, 5, 3))
        return model, (ids, positions, gather_index)


# --- LLaMA-style: RMSNorm, rotary embedding, SiLU-gated MLP -----------------------------------


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.rand(dim) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class LlamaBlock(nn.Module):
    inv_freq: torch.Tensor

    def __init__(self, dim: int = 16, heads: int = 2, hidden: int = 24) -> None:
        super().__init__()
        self.heads = heads
        head_dim = dim // heads
        self.attn_norm = RMSNorm(dim)
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, dim, bias=False)
        self.wv = nn.Linear(dim, dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)
        self.mlp_norm = RMSNorm(dim)
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.up = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)
        inv_freq = 1.0 / (10000.0 ** (torch.arange(0, head_dim, 2).float() / head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def _rotary(self, length: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        positions = torch.arange(length, device=device, dtype=torch.float32)
        freqs = torch.outer(positions, self.inv_freq)
        angles = torch.cat((freqs, freqs), dim=-1)
        return angles.cos(), angles.sin()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, dim = x.shape
        head_dim = dim // self.heads
        h = self.attn_norm(x)

        def heads(t: torch.Tensor) -> torch.Tensor:
            return t.view(batch, length, self.heads, head_dim).transpose(1, 2)

        q, k, v = heads(self.wq(h)), heads(self.wk(h)), heads(self.wv(h))
        cos, sin = self._rotary(length, x.device)
        q = q * cos + _rotate_half(q) * sin
        k = k * cos + _rotate_half(k) * sin
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.wo(attn.transpose(1, 2).reshape(batch, length, dim))
        h = self.mlp_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


def rmsnorm_rotary() -> ModelCase:
    with seeded(7):
        return LlamaBlock(), (torch.randn(2, 6, 16),)


# --- losses ----------------------------------------------------------------------------------


class Losses(nn.Module):
    """A linear head and three losses on it: cross entropy, NLL (sum) and MSE."""

    def __init__(self, features: int = 8, classes: int = 5) -> None:
        super().__init__()
        self.head = nn.Linear(features, classes)

    def forward(
        self, x: torch.Tensor, target: torch.Tensor, regression_target: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        logits = self.head(x)
        cross_entropy = F.cross_entropy(logits, target)
        nll = F.nll_loss(F.log_softmax(logits, dim=-1), target, reduction="sum")
        mse = F.mse_loss(logits, regression_target)
        return cross_entropy, nll, mse


def losses() -> ModelCase:
    with seeded(8):
        model = Losses()
        x = torch.randn(6, 8)
        target = torch.randint(0, 5, (6,))
        regression_target = torch.randn(6, 5)
        return model, (x, target, regression_target)


ALL_MODELS: dict[str, ModelFactory] = {
    "mlp": mlp,
    "conv_bn_relu_eval": conv_bn_relu_eval,
    "conv_bn_relu_train": conv_bn_relu_train,
    "attention": attention,
    "attention_sdpa": attention_sdpa,
    "layer_norm": layer_norm,
    "gpt_block": gpt_block,
    "embedding_indexing": embedding_indexing,
    "rmsnorm_rotary": rmsnorm_rotary,
    "losses": losses,
}
"""Every model by name; parametrize tests over it."""
