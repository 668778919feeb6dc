"""``decompose``'s lifted-size traces (``size_generic.lift_sizes``): CPU attention at
symbolic sizes is traced on fake tensors at primes, the sizes its views read lifted into
symbolic arguments, instead of ``make_fx``'s symbolic trace; a body that reads a size any
other way (the scale of a symbolic head dim) is refused and traced symbolically."""

from __future__ import annotations

import operator
from collections import OrderedDict
from typing import Any, cast

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

_FLASH = "aten::_scaled_dot_product_flash_attention_for_cpu.default"


@pytest.fixture
def traces(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """How ``decompose`` traces from here on: ``symbolic`` or ``fake`` per ``make_fx``."""
    calls: list[str] = []
    real = decompose._trace_graph

    def counting(op: AtenOp, *args: Any) -> Any:
        dims = args[4]
        calls.append("symbolic" if dims is not None else "fake")
        return real(op, *args)

    monkeypatch.setattr(decompose, "_trace_graph", counting)
    monkeypatch.setattr(decompose, "_TRACE_CACHE", OrderedDict())
    return calls


def _attention(
    shape: str, symbols: str, arguments: str = "is_causal = true", length: int = 7
) -> Any:
    """Flash attention over one ``shape`` for query, key and value, traced at batch 2,
    sequence ``length`` and head dim 16."""
    lse = shape.rsplit("x", 2)[0] + "xf32>"
    hints = f"kiln.size_hints = {{s0 = 2 : i64, s1 = {length} : i64, s2 = 16 : i64}}"
    text = f"""
    func.func @f(%q: {shape}{symbols}, %k: {shape}{symbols}, %v: {shape}{symbols}) -> {shape} attributes {{{hints}}} {{
      %0, %1 = aten._scaled_dot_product_flash_attention_for_cpu.default(%q, %k, %v, {arguments}) : ({shape}, {shape}, {shape}) -> ({shape}, {lse})
      func.return %0 : {shape}
    }}
    """
    return Parser(make_context(), text).parse_module()


def _overloads(module: Any) -> set[str]:
    return {op.overload_name for op in module.walk() if isinstance(op, AtenOp)}


_BATCH_AND_LENGTH = ' {kiln.size_symbols = ["s0", "", "s1", ""]}'


@pytest.mark.parametrize("arguments", ["is_causal = true", "is_causal = false, scale = 0.3"])
def test_attention_at_symbolic_sizes_is_two_fake_traces(traces: list[str], arguments: str) -> None:
    """Symbolic batch and sequence length, static heads and head dim (what dynamo makes of
    a transformer): two fake traces, no symbolic one, and the body computes eager's
    attention at every size."""
    module = _attention("tensor<?x4x?x16xf32>", _BATCH_AND_LENGTH, arguments)
    DecomposePass().apply(make_context(), module)
    module.verify()
    assert traces == ["fake", "fake"]
    assert _FLASH not in _overloads(module)
    assert "aten::sym_size.int" in _overloads(module)  # the views read the sizes
    scale = 0.3 if "scale" in arguments else None
    for batch, length in [(2, 7), (3, 5), (1, 11)]:
        q, k, v = (torch.randn(batch, 4, length, 16) for _ in range(3))
        (got,) = run_function(module, [q, k, v], "f")
        want = F.scaled_dot_product_attention(
            q, k, v, is_causal="is_causal = true" in arguments, scale=scale
        )
        torch.testing.assert_close(got, want)


def test_a_size_read_into_a_float_is_refused(traces: list[str]) -> None:
    """With a symbolic head dim, the default scale ``1 / sqrt(E)`` is a float of the traced
    size: the two fake traces differ, so the body is not lifted (it would be silently
    wrong at every other head dim) and the symbolic trace decides as before."""
    symbols = ' {kiln.size_symbols = ["s0", "", "s1", "s2"]}'
    module = _attention("tensor<?x4x?x?xf32>", symbols)
    DecomposePass().apply(make_context(), module)
    module.verify()
    assert traces == ["fake", "fake", "symbolic"]
    for batch, length, dim in [(2, 7, 16), (3, 5, 8)]:
        q, k, v = (torch.randn(batch, 4, length, dim) for _ in range(3))
        (got,) = run_function(module, [q, k, v], "f")
        torch.testing.assert_close(got, F.scaled_dot_product_attention(q, k, v, is_causal=True))


def test_the_scale_of_a_lifted_trace_would_be_wrong_unchecked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the second trace guards against: lifted without it, the symbolic head dim's
    scale is the first trace's ``1 / sqrt(1021)`` at every head dim."""
    monkeypatch.setattr(decompose, "_TRACE_CACHE", OrderedDict())
    monkeypatch.setattr(size_generic, "same_graph", lambda a, b: True)
    symbols = ' {kiln.size_symbols = ["s0", "", "s1", "s2"]}'
    module = _attention("tensor<?x4x?x?xf32>", symbols)
    DecomposePass().apply(make_context(), module)
    assert _FLASH not in _overloads(module)
    q, k, v = (torch.randn(2, 4, 7, 16) for _ in range(3))
    (got,) = run_function(module, [q, k, v], "f")
    want = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert not torch.allclose(cast(torch.Tensor, got), want)


def test_long_sequences_stay_flash_attention(traces: list[str]) -> None:
    """Judged by the graph's traced sizes (64 x 64 scores from on), not the primes."""
    module = _attention("tensor<?x4x?x16xf32>", _BATCH_AND_LENGTH, length=128)
    DecomposePass().apply(make_context(), module)
    assert _FLASH in _overloads(module)
    assert "fake" not in traces


def test_lift_sizes_reads_products_of_sizes_from_the_inputs() -> None:
    """``view(x, [1009 * 4, 1013])`` becomes ``view(x, [sym_size(x, 0) * 4, sym_size(x,
    2)])``; other integers stay."""
    pattern = ((-1, 4, -2),)
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    x.meta["val"] = torch.empty(1009, 4, 1013)
    view = graph.call_function(torch.ops.aten.view.default, (x, [1009 * 4, 1013]))
    graph.output(view)
    gm = torch.fx.GraphModule(torch.nn.Module(), graph)
    assert size_generic.lift_sizes(gm, pattern, size_generic.PRIMES)
    view = next(n for n in gm.graph.nodes if n.target is torch.ops.aten.view.default)
    product, length = view.args[1]
    assert product.target is operator.mul
    assert product.args[1] == 4
    assert product.args[0].target is torch.ops.aten.sym_size.int
    assert product.args[0].args[1] == 0
    assert length.args[1] == 2
    assert view.args[0] is x


def test_a_static_size_a_prime_divides_is_not_lifted() -> None:
    assert size_generic.lifted_pattern([(-1, 4, -2, 16)]) is not None
    assert size_generic.lifted_pattern([(-1, 2 * 1009, -2)]) is None
