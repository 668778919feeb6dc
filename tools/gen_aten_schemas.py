"""Regenerate ``dialects/aten/schemas.py`` from the installed torch.

The generated set is every overload tagged ``torch.Tag.core`` plus every overload that
appears when common models (MLP, attention, layer/RMS norm, conv nets, embeddings,
losses) are captured by AOTAutograd, forward and backward, raw and after PyTorch's
core-ATen and Inductor decomposition tables.

    python -m kiln.tools.gen_aten_schemas            # rewrite the file
    python -m kiln.tools.gen_aten_schemas --check    # exit 1 if it is stale
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from kiln.dialects.aten.schema import parse_schema

KEPT_TAGS = ("core", "pointwise", "nondeterministic_seeded", "view_copy")

# Always representable and needed by the importer even when no model shows them.
EXTRA_OVERLOADS = (
    "sym_size.int",
    "sym_numel.default",
    "sym_stride.int",
    "sym_storage_offset.default",
    "_local_scalar_dense.default",
    "scalar_tensor.default",
    "lift_fresh_copy.default",
    "empty_strided.default",
    "full_like.default",
    "zeros_like.default",
    "ones_like.default",
    "rand_like.default",
    "randn_like.default",
    "linear.default",
    "matmul.default",
    "softmax.int",
    "log_softmax.int",
    "layer_norm.default",
    "group_norm.default",
    "batch_norm.default",
    "dropout.default",
    "gelu.default",
    "silu.default",
    "scaled_dot_product_attention.default",
    "cross_entropy_loss.default",
    "nll_loss.default",
    "mse_loss.default",
    "binary_cross_entropy_with_logits.default",
    "embedding.default",
    "flatten.using_ints",
    "reshape.default",
    "contiguous.default",
    "t.default",
    "transpose.int",
    "unflatten.int",
    "chunk.default",
    "split.Tensor",
    "stack.default",
    "index_select.default",
    "masked_fill.Scalar",
    "masked_fill.Tensor",
    "rsub.Scalar",
    "rsub.Tensor",
    "baddbmm.default",
    "einsum.default",
    "cumsum.default",
    "argmax.default",
    "argmin.default",
    "all.default",
    "all.dim",
    "any.dim",
    "std.correction",
    "var.correction",
    "var_mean.correction",
    "mean.default",
    "mean.dim",
    "sum.default",
    "tanh.default",
    "addcmul.default",
    "lerp.Scalar",
    "square.default",
    "type_as.default",
    "to.dtype",
    "alias.default",
)


class _Capture:
    def __init__(self) -> None:
        self.overloads: set[torch._ops.OpOverload] = set()  # pyright: ignore[reportPrivateUsage]

    def compiler(self, gm: torch.fx.GraphModule, _inputs: Any) -> Callable[..., Any]:
        for node in gm.graph.nodes:
            if node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload):  # pyright: ignore[reportPrivateUsage]
                self.overloads.add(node.target)
        return gm


def _models() -> Iterable[tuple[nn.Module, tuple[torch.Tensor, ...]]]:
    class Attention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.qkv = nn.Linear(16, 48)
            self.proj = nn.Linear(16, 16)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b, t, c = x.shape
            q, k, v = self.qkv(x).split(16, dim=-1)
            q = q.view(b, t, 2, 8).transpose(1, 2)
            k = k.view(b, t, 2, 8).transpose(1, 2)
            v = v.view(b, t, 2, 8).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (8**-0.5)
            mask = torch.tril(torch.ones(t, t, dtype=torch.bool))
            att = att.masked_fill(~mask, float("-inf")).softmax(-1)
            y = (att @ v).transpose(1, 2).reshape(b, t, c)
            y2 = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.proj(y) + y2.transpose(1, 2).reshape(b, t, c)

    class RMSNorm(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.ones(16))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.w

    mlp = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Dropout(0.1), nn.Linear(32, 16), nn.SiLU())
    conv = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 8, 3, stride=2),
        nn.GroupNorm(2, 8),
        nn.Hardswish(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(8, 4),
    )

    class EmbedLosses(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(32, 16)

        def forward(self, idx: torch.Tensor, target: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
            e = self.emb(idx) + x
            logits = e @ self.emb.weight.t()
            ce = F.cross_entropy(logits.flatten(0, 1), target.flatten(), label_smoothing=0.1)
            mse = F.mse_loss(e, x)
            bce = F.binary_cross_entropy_with_logits(e, torch.sigmoid(x))
            l1 = F.smooth_l1_loss(e, x)
            g = torch.gather(logits, -1, target.unsqueeze(-1)).sum()
            sel = e[:, idx[0] % 4].sum() + e[torch.arange(2), 1].sum()
            nll = F.nll_loss(F.log_softmax(logits.flatten(0, 1), -1), target.flatten())
            return ce + mse + bce + l1 + g + sel + nll + torch.cat([e, x], -1).std()

    ln = nn.LayerNorm(16)
    x16 = torch.randn(2, 4, 16, requires_grad=True)
    yield mlp, (x16,)
    yield Attention(), (x16,)
    yield RMSNorm(), (x16,)
    yield ln, (x16,)
    yield conv, (torch.randn(2, 3, 16, 16, requires_grad=True),)
    yield EmbedLosses(), (torch.randint(0, 32, (2, 4)), torch.randint(0, 32, (2, 4)), x16)


def _captured_overloads() -> set[Any]:
    from torch._decomp import core_aten_decompositions
    from torch._functorch.aot_autograd import aot_module

    tables: list[dict[Any, Any] | None] = [None, core_aten_decompositions()]
    try:
        import torch._inductor.lowering  # noqa: F401  (its decompositions consult it)
        from torch._inductor.decomposition import select_decomp_table

        tables.append(select_decomp_table())
    except ImportError:
        pass
    seen: set[Any] = set()
    for model, inputs in _models():
        for table in tables:
            cap = _Capture()
            kwargs: dict[str, Any] = {"fw_compiler": cap.compiler, "bw_compiler": cap.compiler}
            if table is not None:
                kwargs["decompositions"] = table
            compiled = aot_module(model, **kwargs)
            out = compiled(*inputs)
            out.sum().backward()
            seen |= cap.overloads
    return seen


def collect() -> list[tuple[str, tuple[str, ...]]]:
    overloads: dict[str, Any] = {}
    for name in dir(torch.ops.aten):
        try:
            packet = getattr(torch.ops.aten, name)
            names = packet.overloads()
        except (AttributeError, RuntimeError):
            continue
        for ov in names:
            op = getattr(packet, ov)
            if torch.Tag.core in op.tags:
                overloads[str(op._schema)] = op
    for qual in EXTRA_OVERLOADS:
        name, _, ov = qual.partition(".")
        op = getattr(getattr(torch.ops.aten, name), ov)
        overloads[str(op._schema)] = op
    for op in _captured_overloads():
        if op.namespace == "aten":
            overloads[str(op._schema)] = op
    entries: list[tuple[str, tuple[str, ...]]] = []
    for text, op in overloads.items():
        schema = parse_schema(text)
        if not schema.supported or schema.is_mutable or schema.name == "generic":
            continue
        tags = tuple(t for t in KEPT_TAGS if getattr(torch.Tag, t) in op.tags)
        entries.append((text, tags))
    entries.sort()
    return entries


HEADER = '''"""ATen schemas kiln generates ops for. GENERATED by ``python -m kiln.tools.gen_aten_schemas``.

torch {version}: {count} overloads ({core} tagged core). Do not edit by hand; add
overloads to ``EXTRA_OVERLOADS`` in the generator instead.
"""

SCHEMAS: tuple[tuple[str, tuple[str, ...]], ...] = (
'''


def render(entries: list[tuple[str, tuple[str, ...]]]) -> str:
    core = sum(1 for _, tags in entries if "core" in tags)
    lines = [HEADER.format(version=torch.__version__.split("+")[0], count=len(entries), core=core)]
    for text, tags in entries:
        lines.append(f"    ({text!r}, {tags!r}),\n")
    lines.append(")\n")
    return "".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="fail if the file is stale")
    args = parser.parse_args(argv)
    target = Path(__file__).resolve().parent.parent / "dialects" / "aten" / "schemas.py"
    text = render(collect())
    if args.check:
        if target.read_text() != text:
            print(
                f"{target} is stale; rerun python -m kiln.tools.gen_aten_schemas", file=sys.stderr
            )
            return 1
        return 0
    target.write_text(text)
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
