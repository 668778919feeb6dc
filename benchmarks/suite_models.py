"""The benchmark suite's models: built in torch with random weights, no downloads.

Each entry is a factory ``(device, dtype, size) -> (module, inputs)``; ``size`` is
``"small"`` (CPU, this 2-core VM) or ``"large"`` (the H200).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

Factory = Callable[[torch.device, torch.dtype, str], tuple[nn.Module, tuple[torch.Tensor, ...]]]


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _randn(*shape: int, device: torch.device, dtype: torch.dtype, seed: int = 1) -> torch.Tensor:
    return torch.randn(*shape, generator=_gen(seed)).to(device=device, dtype=dtype)


class MLP(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.fc1, self.fc2, self.fc3 = (
            nn.Linear(dim, hidden),
            nn.Linear(hidden, hidden),
            nn.Linear(hidden, dim),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc3(F.gelu(self.fc2(F.relu(self.fc1(x)))))


class ResBlock(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(x + self.bn2(self.conv2(y)))


class ResNet(nn.Module):
    def __init__(self, channels: int, blocks: int, classes: int = 100) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, channels, 3, padding=1, bias=False), nn.BatchNorm2d(channels), nn.ReLU()
        )
        self.blocks = nn.Sequential(*[ResBlock(channels) for _ in range(blocks)])
        self.head = nn.Linear(channels, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.blocks(self.stem(x))
        return self.head(y.mean(dim=(2, 3)))


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int, causal: bool) -> None:
        super().__init__()
        self.heads, self.causal = heads, causal
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.heads)
        if self.causal:
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
            scores = scores.masked_fill(~mask, float("-inf"))
        y = scores.softmax(-1) @ v
        return self.proj(y.transpose(1, 2).reshape(b, t, c))


class TransformerLayer(nn.Module):
    """Pre-LN (GPT-2 / ViT) or post-LN (BERT) transformer layer with a GELU MLP."""

    def __init__(self, dim: int, heads: int, causal: bool, pre_ln: bool) -> None:
        super().__init__()
        self.pre_ln = pre_ln
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = Attention(dim, heads, causal)
        self.fc, self.out = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def mlp(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(F.gelu(self.fc(x), approximate="tanh" if self.pre_ln else "none"))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.pre_ln:
            x = x + self.attn(self.ln1(x))
            return x + self.mlp(self.ln2(x))
        x = self.ln1(x + self.attn(x))
        return self.ln2(x + self.mlp(x))


class GPT2(nn.Module):
    def __init__(self, vocab: int, dim: int, heads: int, layers: int, ctx: int) -> None:
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, dim), nn.Embedding(ctx, dim)
        self.layers = nn.ModuleList(TransformerLayer(dim, heads, True, True) for _ in range(layers))
        self.ln = nn.LayerNorm(dim)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for layer in self.layers:
            x = layer(x)
        return self.ln(x) @ self.tok.weight.t()


class BERTEncoder(nn.Module):
    def __init__(self, dim: int, heads: int, layers: int) -> None:
        super().__init__()
        self.layers = nn.Sequential(
            *[TransformerLayer(dim, heads, False, False) for _ in range(layers)]
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


class ViT(nn.Module):
    def __init__(self, dim: int, heads: int, layers: int, patch: int, classes: int = 100) -> None:
        super().__init__()
        self.embed = nn.Conv2d(3, dim, patch, stride=patch)
        self.layers = nn.Sequential(
            *[TransformerLayer(dim, heads, False, True) for _ in range(layers)]
        )
        self.ln, self.head = nn.LayerNorm(dim), nn.Linear(dim, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.embed(x).flatten(2).transpose(1, 2)
        return self.head(self.ln(self.layers(y)).mean(1))


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps, self.weight = eps, nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin


class LlamaBlock(nn.Module):
    """RMSNorm, rotary attention, SiLU-gated MLP."""

    def __init__(self, dim: int, heads: int, hidden: int, ctx: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = RMSNorm(dim), RMSNorm(dim)
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(dim, dim, bias=False) for _ in range(4))
        self.w1, self.w3 = nn.Linear(dim, hidden, bias=False), nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        head_dim = dim // heads
        freqs = 1.0 / (10000 ** (torch.arange(0, head_dim, 2).float() / head_dim))
        angles = torch.outer(torch.arange(ctx).float(), freqs)
        self.register_buffer("cos", torch.cat([angles.cos()] * 2, -1), persistent=False)
        self.register_buffer("sin", torch.cat([angles.sin()] * 2, -1), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        h = self.norm1(x)
        q, k, v = (
            w(h).view(b, t, self.heads, -1).transpose(1, 2) for w in (self.wq, self.wk, self.wv)
        )
        cos, sin = self.cos[:t].to(x.dtype), self.sin[:t].to(x.dtype)
        q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.heads)
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        y = scores.masked_fill(~mask, float("-inf")).softmax(-1) @ v
        x = x + self.wo(y.transpose(1, 2).reshape(b, t, c))
        h = self.norm2(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class LayerNormOnly(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(x)


class Softmax(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.softmax(-1)


class CrossEntropy(nn.Module):
    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, target)


def _sizes(size: str, small: tuple[int, ...], large: tuple[int, ...]) -> tuple[int, ...]:
    return small if size == "small" else large


def _prepare(
    build: Callable[[], nn.Module], device: torch.device, dtype: torch.dtype, seed: int = 0
) -> nn.Module:
    # Seeded before construction: module init draws from the global RNG.
    torch.manual_seed(seed)
    return build().to(device=device, dtype=dtype).eval()


def mlp(
    device: torch.device, dtype: torch.dtype, size: str
) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    batch, dim, hidden = _sizes(size, (64, 256, 1024), (4096, 1024, 4096))
    return _prepare(lambda: MLP(dim, hidden), device, dtype), (
        _randn(batch, dim, device=device, dtype=dtype),
    )


def resnet(
    device: torch.device, dtype: torch.dtype, size: str
) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    batch, channels, blocks, res = _sizes(size, (4, 32, 2, 32), (64, 128, 4, 56))
    model = _prepare(lambda: ResNet(channels, blocks), device, dtype)
    return model, (_randn(batch, 3, res, res, device=device, dtype=dtype),)


def vit(
    device: torch.device, dtype: torch.dtype, size: str
) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    batch, dim, heads, layers = _sizes(size, (4, 128, 4, 2), (64, 768, 12, 4))
    model = _prepare(lambda: ViT(dim, heads, layers, patch=16), device, dtype)
    return model, (
        _randn(
            batch,
            3,
            64 if size == "small" else 224,
            64 if size == "small" else 224,
            device=device,
            dtype=dtype,
        ),
    )


def gpt2(
    device: torch.device, dtype: torch.dtype, size: str
) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    batch, ctx, dim, heads, layers, vocab = _sizes(
        size, (2, 64, 128, 4, 2, 1024), (16, 512, 768, 12, 4, 32768)
    )
    model = _prepare(lambda: GPT2(vocab, dim, heads, layers, ctx), device, dtype)
    idx = torch.randint(0, vocab, (batch, ctx), generator=_gen(2)).to(device)
    return model, (idx,)


def llama_block(
    device: torch.device, dtype: torch.dtype, size: str
) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    batch, ctx, dim, heads, hidden = _sizes(size, (2, 64, 128, 4, 352), (8, 1024, 2048, 16, 5632))
    model = _prepare(lambda: LlamaBlock(dim, heads, hidden, ctx), device, dtype)
    return model, (_randn(batch, ctx, dim, device=device, dtype=dtype),)


def bert(
    device: torch.device, dtype: torch.dtype, size: str
) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    batch, seq, dim, heads, layers = _sizes(size, (2, 64, 128, 4, 2), (16, 512, 768, 12, 4))
    model = _prepare(lambda: BERTEncoder(dim, heads, layers), device, dtype)
    return model, (_randn(batch, seq, dim, device=device, dtype=dtype),)


def layer_norm(
    device: torch.device, dtype: torch.dtype, size: str
) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    rows, dim = _sizes(size, (2048, 1024), (32768, 4096))
    return _prepare(lambda: LayerNormOnly(dim), device, dtype), (
        _randn(rows, dim, device=device, dtype=dtype),
    )


def softmax(
    device: torch.device, dtype: torch.dtype, size: str
) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    rows, dim = _sizes(size, (2048, 1024), (32768, 4096))
    return _prepare(lambda: Softmax(), device, dtype), (
        _randn(rows, dim, device=device, dtype=dtype),
    )


def cross_entropy(
    device: torch.device, dtype: torch.dtype, size: str
) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    rows, classes = _sizes(size, (1024, 1000), (16384, 32768))
    target = torch.randint(0, classes, (rows,), generator=_gen(3)).to(device)
    return _prepare(lambda: CrossEntropy(), device, dtype), (
        _randn(rows, classes, device=device, dtype=dtype),
        target,
    )


SUITE: dict[str, Factory] = {
    "mlp": mlp,
    "resnet": resnet,
    "vit": vit,
    "gpt2": gpt2,
    "llama_block": llama_block,
    "bert": bert,
    "layer_norm": layer_norm,
    "softmax": softmax,
    "cross_entropy": cross_entropy,
}
