"""The CUDA-graph runner around the programs of a real training step, on the CPU: kiln
compiles a model whose layers Dynamo breaks in two (one block compiled once, called by
every layer with its own weights, as in hf_opt and hf_bart on the GPU), and every
compiled program is wrapped in a runner with the CPU stand-in recorder. After a short
warm-up, steps must replay graphs only: no recording, no call without a graph, no input
copied for having moved, and the gradients of eager PyTorch.

Before session 36's runner fixes this settled into no steady state: instances kept by
views of their outputs held in other instances were never idle again, so the layers
recorded, ran without graphs and copied saved activations at every step."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch
from cuda_graph_standin import fixed_memory_recorder

import kiln.frontends.dynamo as dynamo_frontend
from kiln.backends.triton.cudagraphs import CudaGraphRunner


class _Program:
    source = ""
    weight_sites: Sequence[Any] = ()

    def __init__(self, run: Callable[[list[Any]], Sequence[Any]]) -> None:
        self.run = run

    def __call__(self, args: Sequence[Any]) -> tuple[Any, ...]:
        return tuple(self.run(list(args)))

    def boxed_call(self, args: list[Any]) -> tuple[Any, ...]:
        return tuple(self.run(args))


class Layer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(32)
        self.up = torch.nn.Linear(32, 64)
        self.down = torch.nn.Linear(64, 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.up(self.norm(x)).relu()
        torch._dynamo.graph_break()  # pyright: ignore[reportPrivateImportUsage]
        return x + self.down(h)


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(50, 32)
        self.layers = torch.nn.ModuleList(Layer() for _ in range(3))
        self.head = torch.nn.Linear(32, 50)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


def test_a_training_step_settles_into_replays(monkeypatch: pytest.MonkeyPatch) -> None:
    runners: list[CudaGraphRunner] = []
    compile_graph = dynamo_frontend.compile_graph

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        compiled = compile_graph(*args, **kwargs)
        runner = CudaGraphRunner(
            _Program(compiled.run),
            auto=True,
            guarded=True,
            record=fixed_memory_recorder,
            device_type="cpu",
            replay_reads_inputs=True,
        )
        runners.append(runner)
        compiled.run = runner.boxed_call
        return compiled

    monkeypatch.setattr(dynamo_frontend, "compile_graph", wrapped)
    torch._dynamo.reset()  # pyright: ignore[reportPrivateImportUsage]
    torch.manual_seed(0)
    model = Net()
    ids = torch.randint(0, 50, (2, 8))
    compiled = torch.compile(model, backend=dynamo_frontend.kiln_backend)
    grad = torch.randn(2, 8, 50)

    def step(fn: Callable[[torch.Tensor], torch.Tensor]) -> dict[str, torch.Tensor]:
        model.zero_grad(set_to_none=True)
        fn(ids).backward(grad)
        return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

    for _ in range(4):
        step(compiled)
    assert len(runners) == 4  # a forward and a backward per half-layer block
    counts = [(r.plain_calls, sum(r.recordings.values())) for r in runners]
    for _ in range(3):
        got = step(compiled)
        expected = step(model)
        assert got.keys() == expected.keys()
        for name in expected:
            torch.testing.assert_close(got[name], expected[name], msg=name)
    assert [(r.plain_calls, sum(r.recordings.values())) for r in runners] == counts
    for r in runners:
        for instances in r.graphs.values():
            assert all(not i.copied for i in instances)
    torch._dynamo.reset()  # pyright: ignore[reportPrivateImportUsage]
