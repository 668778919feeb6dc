"""kiln's C++ kernels in ``torch.profiler``: while it records, each launch is a
``kiln::<kernel> (<fx nodes>)`` range beside the ATen ops, from a fresh compile and from
the graph cache alike; without the profiler the wrapper makes the bare calls."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch
from torch.profiler import ProfilerActivity, profile
from xdsl.dialects.builtin import ArrayAttr, StringAttr

import kiln
from kiln.backends.cpp.wrapper import PROFILER_LABEL_NODES, profiler_label
from kiln.compiler import compile_history, reset_compile_history
from kiln.dialects.cpp.func_ops import FuncOp


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("KILN_GRAPH_CACHE", "1")
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def block(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """A matmul (an ATen call), then a layer norm and pointwise ops (kiln's kernels)."""
    h = torch.nn.functional.layer_norm(x @ w, (w.shape[1],))
    return torch.relu(h).exp() + h.sum(-1, keepdim=True)


def _kernel_ranges(fn: Callable[..., object], *inputs: torch.Tensor, calls: int) -> Counter[str]:
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(calls):
            fn(*inputs)
    events = prof.events() or []
    return Counter(e.name for e in events if e.name.startswith("kiln::"))


@pytest.mark.parametrize("cache", ["fresh compile", "graph cache hit"])
def test_launches_are_named_ranges_under_the_profiler(cache: str) -> None:
    x, w = torch.randn(6, 16), torch.randn(16, 32)
    if cache == "graph cache hit":
        kiln.compile(block, verbose=False)(x, w)  # stores the graph
        torch._dynamo.reset()
    reset_compile_history()
    compiled = kiln.compile(block, verbose=False)
    torch.testing.assert_close(compiled(x, w), block(x, w))
    (stats,) = compile_history()
    assert stats.graph_cache == ("hit" if cache == "graph cache hit" else "stored")
    ranges = _kernel_ranges(compiled, x, w, calls=3)
    assert sum(ranges.values()) == 3 * stats.launches
    assert stats.launches > 0
    for name, count in ranges.items():
        assert count % 3 == 0
        assert " (" in name, name  # the FX nodes it computes
    assert any("native_layer_norm" in name for name in ranges), ranges
    # Outside the profiler: the same numbers, no ranges left behind.
    x2 = torch.randn(6, 16)
    torch.testing.assert_close(compiled(x2, w), block(x2, w))


def _func(name: str, provenance: list[str] | None) -> FuncOp:
    func = FuncOp(name, [], [])
    if provenance is not None:
        func.provenance = ArrayAttr([StringAttr(line) for line in provenance])
    return func


def test_profiler_label_names_the_fx_nodes_in_order_once_each() -> None:
    lines = [
        "%a: pointwise [4] <- fx node 'mul'",
        "%b: sum [4] reduce [8] <- fx node 'sum_1'",
        "%c: pointwise [4] <- fx node 'mul'",
    ]
    assert profiler_label(_func("kernel2", lines)) == "kernel2 (mul, sum_1)"
    many = [f"%v{k}: pointwise [4] <- fx node 'op{k}'" for k in range(PROFILER_LABEL_NODES + 2)]
    label = profiler_label(_func("kernel0", many))
    assert label.endswith(", ...)")
    assert label.count("op") == PROFILER_LABEL_NODES
    assert profiler_label(_func("kernel5", None)) == "kernel5"
