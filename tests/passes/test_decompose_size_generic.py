"""``decompose``'s size-generic traces (``kiln.passes.decompose_parts.size_generic``): one
trace per size pattern gives each use the body its own trace would have, and a body that
reads a size is traced per use as before."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from xdsl.parser import Parser

from kiln.dialects.aten import AtenOp
from kiln.dialects.aten.interpreter import run_function
from kiln.passes import decompose
from kiln.passes.decompose import DecomposePass
from kiln.passes.decompose_parts import size_generic
from kiln.registry import make_context
from tests.passes.pass_checks import printed

_BN = (
    "%0, %1, %2 = aten._native_batch_norm_legit_no_training.default(%x, %m, %v, weight = %w, "
    "bias = %b, momentum = 0.1, eps = 1.0e-05) : (T, C, C, C, C) -> (T, tensor<0xf32>, "
    "tensor<0xf32>)"
)

CASES = {
    # name: (body with T for the activation type and C for the per-channel one, operand names)
    "hardswish": ("%0 = aten.hardswish.default(%x) : (T) -> T", "x"),
    "hardsigmoid": ('%0 = aten.generic "aten::hardsigmoid.default"(%x) : (T) -> T', "x"),
    "silu": ("%0 = aten.silu.default(%x) : (T) -> T", "x"),
    "hardswish_backward": ("%0 = aten.hardswish_backward.default(%x, %y) : (T, T) -> T", "xy"),
    "_native_batch_norm_legit_no_training": (_BN, "xmvwb"),
}

SHAPES = {
    "static": ("tensor<2x16x5x7xf32>", "tensor<16xf32>"),
    "other channels": ("tensor<2x96x5x5xf32>", "tensor<96xf32>"),
    "symbolic": ("tensor<?x24x?x?xf32>", "tensor<24xf32>"),
}

_SYMBOLS = ' {kiln.size_symbols = ["s0", "", "s1", "s2"]}'
"""What the tracer says of a symbolic activation (two of them have the same sizes)."""


def _module(case: str, shape: str) -> Any:
    body, names = CASES[case]
    t, c = SHAPES[shape]
    types = {"x": t, "y": t, "w": c, "b": c, "m": c, "v": c}
    symbols = _SYMBOLS if "?" in t else ""
    args = ", ".join(f"%{n}: {types[n]}{symbols if n in 'xy' else ''}" for n in names)
    text = f"""
    func.func @f({args}) -> {t} {{
      {body.replace("T", t).replace("C", c)}
      func.return %0 : {t}
    }}
    """
    return Parser(make_context(), text).parse_module()


def _decomposed(case: str, shape: str, generic: bool, monkeypatch: pytest.MonkeyPatch) -> str:
    with monkeypatch.context() as patch:
        patch.setattr(decompose, "_TRACE_CACHE", OrderedDict())
        if not generic:
            patch.setattr(size_generic, "applies", lambda op: False)
        module = _module(case, shape)
        DecomposePass().apply(make_context(), module)
        module.verify()
        return printed(module)


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_size_generic_body_is_the_op_own_trace(
    case: str, shape: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The body given this use's sizes prints exactly as the op's own trace (static or
    symbolic: then ``make_fx``'s symbolic trace)."""
    own = _decomposed(case, shape, False, monkeypatch)
    assert f"{case}.default" not in own  # decomposed
    assert _decomposed(case, shape, True, monkeypatch) == own


def test_one_trace_per_size_pattern(traced: list[str]) -> None:
    """Batch norm and hardswish at three channel counts, static and symbolic batch: one
    trace of each (MobileNet-v3 traced them 27 times, 1.3 s of a dynamic compile)."""
    lines, args, results = [], [], []
    for k, (n, c) in enumerate([("2", 8), ("2", 16), ("?", 8), ("?", 32)]):
        t, ct = f"tensor<{n}x{c}x5x5xf32>", f"tensor<{c}xf32>"
        args += [f"%x{k}: {t}", f"%w{k}: {ct}", f"%m{k}: {ct}", f"%v{k}: {ct}"]
        lines.append(
            f"%n{k}, %s{k}, %r{k} = aten._native_batch_norm_legit_no_training.default(%x{k}, "
            f"%m{k}, %v{k}, weight = %w{k}, bias = %w{k}, momentum = 0.1, eps = 1.0e-05) : "
            f"({t}, {ct}, {ct}, {ct}, {ct}) -> ({t}, tensor<0xf32>, tensor<0xf32>)"
        )
        lines.append(f"%h{k} = aten.hardswish.default(%n{k}) : ({t}) -> {t}")
        results.append((f"%h{k}", t))
    text = f"""
    func.func @f({", ".join(args)}) -> ({", ".join(t for _, t in results)}) {{
      {chr(10).join(lines)}
      func.return {", ".join(r for r, _ in results)} : {", ".join(t for _, t in results)}
    }}
    """
    module = Parser(make_context(), text).parse_module()
    DecomposePass().apply(make_context(), module)
    module.verify()
    assert sorted(traced) == [
        "aten::_native_batch_norm_legit_no_training.default",
        "aten::hardswish.default",
    ]
    names = {op.overload_name for op in module.walk() if isinstance(op, AtenOp)}
    assert not any("batch_norm" in n or "hardswish" in n for n in names), names
    inputs: list[torch.Tensor] = []
    expected: list[torch.Tensor] = []
    for batch, c in [(2, 8), (2, 16), (3, 8), (5, 32)]:
        x, w = torch.randn(batch, c, 5, 5), torch.randn(c)
        m, v = torch.randn(c), torch.rand(c) + 0.5
        inputs += [x, w, m, v]
        expected.append(F.hardswish(F.batch_norm(x, m, v, w, w, eps=1e-5)))
    for got, want in zip(run_function(module, inputs, "f"), expected, strict=True):
        torch.testing.assert_close(got, want)


def test_a_body_that_reads_a_size_is_traced_per_use(traced: list[str]) -> None:
    """A decomposition that bakes a size into its body (a view through ``x.shape``) is
    not size-generic: each use gets its own trace, and the numbers are eager's."""
    aten = torch.ops.aten

    def flattened(x: torch.Tensor) -> torch.Tensor:
        return (x.reshape(-1).sigmoid() * x.reshape(-1)).reshape(x.shape)

    @dataclass(frozen=True)
    class FlatSilu(DecomposePass):
        name = "flat-silu"

        def decompositions(self) -> dict[Any, Any]:
            return {aten.silu.default: flattened}

    text = """
    func.func @f(%x: tensor<4x6xf32>, %y: tensor<3x10xf32>) -> (tensor<4x6xf32>, tensor<3x10xf32>) {
      %0 = aten.silu.default(%x) : (tensor<4x6xf32>) -> tensor<4x6xf32>
      %1 = aten.silu.default(%y) : (tensor<3x10xf32>) -> tensor<3x10xf32>
      func.return %0, %1 : tensor<4x6xf32>, tensor<3x10xf32>
    }
    """
    module = Parser(make_context(), text).parse_module()
    FlatSilu().apply(make_context(), module)
    module.verify()
    # One size-generic trace (rejected: its views hold the traced sizes), then one per use.
    assert traced == ["aten::silu.default"] * 3
    assert "aten::silu.default" not in {
        op.overload_name for op in module.walk() if isinstance(op, AtenOp)
    }
    x, y = torch.randn(4, 6), torch.randn(3, 10)
    for got, want in zip(run_function(module, [x, y], "f"), (F.silu(x), F.silu(y)), strict=True):
        torch.testing.assert_close(got, want)
