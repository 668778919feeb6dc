"""The executor is chosen from the whole graph (kiln.devices), never from the inputs alone.

Graphs are traced with FakeTensors on CUDA, which FakeTensorMode fabricates without a GPU.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx
from torch.signal import windows

from kiln.devices import choose_executor, gpu_device, graph_devices

ALL = {"cpp", "triton", "interpret"}


def trace(fn: Callable[..., Any], *shapes: tuple[tuple[int, ...], str]) -> torch.fx.GraphModule:
    with FakeTensorMode():
        inputs = [torch.empty(shape, device=device) for shape, device in shapes]
        return make_fx(fn)(*inputs)


def executor(gm: torch.fx.GraphModule, inputs: list[Any] | None = None) -> str:
    return choose_executor("auto", graph_devices(gm, inputs or []), ALL)


def test_factory_only_graph_on_cuda_runs_on_triton() -> None:
    gm = trace(
        lambda: (
            torch.ones(3, device="cuda"),
            torch.zeros(2, 2, device="cuda"),
            torch.full((2,), 1.5, device="cuda"),
            torch.arange(4, device="cuda"),
            torch.linspace(0, 1, 5, device="cuda"),
            torch.logspace(0, 1, 5, device="cuda"),
            torch.scalar_tensor(2.0, device="cuda"),
            windows.hann(6, device=torch.device("cuda")),
        )
    )
    assert executor(gm) == "triton"
    assert gpu_device(graph_devices(gm)) is not None


def test_cpu_input_made_cuda_inside_the_graph_runs_on_triton() -> None:
    # x.to("cuda"): built by hand (a CPU-only torch cannot trace the copy itself).
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    copy = graph.call_function(
        torch.ops.aten._to_copy.default, (x,), {"device": torch.device("cuda")}
    )
    graph.output((copy,))
    with FakeTensorMode():
        x.meta["val"] = torch.empty(3)
        copy.meta["val"] = torch.empty(3, device="cuda")
    gm = torch.fx.GraphModule(torch.nn.Module(), graph)
    assert executor(gm, [torch.randn(3)]) == "triton"
    del copy.meta["val"]  # the device argument alone says it
    assert executor(gm, [torch.randn(3)]) == "triton"


def test_cpu_scalar_mixed_into_a_cuda_graph_runs_on_triton() -> None:
    gm = trace(lambda x, s: x * s, ((3,), "cuda"), ((), "cpu"))
    devices = graph_devices(gm)
    assert executor(gm) == "triton"
    assert gpu_device(devices) == torch.device("cuda", 0) or gpu_device(devices) == torch.device(
        "cuda"
    )


def test_cpu_graph_runs_on_cpp_and_explicit_choices_stand() -> None:
    gm = trace(lambda x: torch.ones(3) + x, ((3,), "cpu"))
    assert executor(gm, [torch.randn(3)]) == "cpp"
    devices = graph_devices(gm)
    assert choose_executor("interpret", devices, ALL) == "interpret"
    assert choose_executor("auto", devices, {"interpret"}) == "interpret"
    cuda = graph_devices(trace(lambda: torch.ones(2, device="cuda")))
    assert choose_executor("auto", cuda, {"cpp", "interpret"}) == "interpret"


def test_cpu_outputs_of_a_cuda_graph_are_moved_back() -> None:
    from kiln.devices import device_fixer, output_devices

    gm = trace(lambda x: (x * 2.0, torch.ones(2) + 1.0), ((3,), "cuda"))
    devices = output_devices(gm)
    assert [d.type if d is not None else None for d in devices] == ["cuda", "cpu"]
    fix = device_fixer(gm, torch.device("cuda", 0))
    assert fix is not None
    out = fix((torch.randn(3), torch.randn(2)))
    assert isinstance(out, tuple)
    assert out[1].device.type == "cpu"
    assert device_fixer(trace(lambda x: x * 2.0, ((3,), "cuda")), torch.device("cuda", 0)) is None
    assert device_fixer(gm, None) is None
