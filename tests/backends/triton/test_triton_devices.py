"""Devices: graphs made on CUDA run on CUDA, CPU scalars mix into CUDA graphs.

On the CPU (Triton's interpreter) the executor choice and the wrapper's device handling
are checked on graphs traced with fake CUDA tensors. With ``KILN_TRITON_DEVICE=cuda``
the GPU tests compile through ``torch.compile(backend="kiln")`` and compare every
output's device, dtype and values with eager::

    KILN_TRITON_DEVICE=cuda python -m pytest tests/backends/triton/test_triton_devices.py -q
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
import torch.utils._pytree as pytree
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx
from torch.signal import windows as signal_windows
from triton_checks import DEVICE

import kiln
from kiln.backends.triton.runtime import as_buffer
from kiln.compiler import CompileError, CompileOptions, compile_graph
from kiln.devices import graph_devices
from kiln.executors import check_triton_devices

ON_GPU = DEVICE.type == "cuda"
gpu_only = pytest.mark.skipif(not ON_GPU, reason="needs KILN_TRITON_DEVICE=cuda and a GPU")


def factories(device: str) -> tuple[torch.Tensor, ...]:
    return (
        torch.ones(3, device=torch.device(device)) * 2.0,
        torch.zeros(2, 3, device=torch.device(device)) + 1.0,
        torch.full((4,), 1.5, device=torch.device(device)),
        torch.arange(5, device=torch.device(device)) * 3,
        torch.linspace(-1.0, 1.0, 7, device=torch.device(device)),
        torch.logspace(0.0, 2.0, 5, device=torch.device(device)),
        torch.scalar_tensor(2.5, device=torch.device(device)) + 1.0,
    )


def windows(device: str) -> tuple[torch.Tensor, ...]:
    w = signal_windows
    return (
        w.hann(8, device=torch.device(device)),
        w.hamming(8, device=torch.device(device)),
        w.gaussian(8, std=2.0, device=torch.device(device)),
        w.cosine(8, device=torch.device(device)),
        w.exponential(8, device=torch.device(device)),
    )


# -- on the CPU: graphs traced with fake CUDA tensors, kernels in the interpreter ------------


def test_factory_graph_traced_on_cuda_runs_on_triton() -> None:
    with FakeTensorMode():
        gm = make_fx(lambda: factories("cuda"))()
    assert any(d.type == "cuda" for d in graph_devices(gm))
    compiled = compile_graph(gm, [], CompileOptions(verbose=False))
    assert compiled.stats.executor == "triton"  # C++ before: the graph has no input
    got = pytree.tree_leaves(compiled())
    for actual, expected in zip(got, factories("cpu"), strict=True):
        assert actual.device.type == DEVICE.type  # cuda on a GPU: the graph is a CUDA one
        torch.testing.assert_close(actual.cpu(), expected)


def test_wrapper_moves_arguments_to_the_program_device() -> None:
    x = torch.randn(())
    moved = as_buffer(x, torch.device("meta"))
    assert moved.device.type == "meta"
    assert as_buffer(x, torch.device("cpu")) is x


def test_cpu_scalar_input_of_a_cuda_graph_is_no_compile_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A 0-d CPU tensor with CUDA tensors is legal in eager; the wrapper moves it.
    with FakeTensorMode():
        gm = make_fx(lambda x, s: x * s)(torch.empty(3, device="cuda"), torch.empty(()))
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    check_triton_devices("g", [torch.randn(3), torch.randn(())], graph_devices(gm))
    cpu = make_fx(lambda x: x * 2.0)(torch.randn(3))
    with pytest.raises(CompileError, match="input 0 is on cpu"):
        check_triton_devices("g", [torch.randn(3)], graph_devices(cpu))


def test_extern_scalar_read_by_a_kernel_is_moved_to_the_device() -> None:
    from triton_checks import capture, compile_capture

    compiled = compile_capture(
        capture(lambda x, y: torch.linalg.det(x) * y, torch.randn(3, 3), torch.randn(4))
    )
    source = compiled.program.source
    import re

    # the extern's 0-d result goes to the program's device before the kernel reads it
    assert re.search(r"\n\s+(\w+) = on_device\(\1, device\)", source.split("# kernel.extern")[1])
    torch.testing.assert_close(compiled.run()[0].cpu(), compiled.expected[0])


def test_argument_only_externs_read_stays_on_its_device() -> None:
    # A CPU 0-d tensor that only an ATen call reads (attention's philox seed in a CUDA
    # backward) was moved to the GPU on every call: a blocking host-to-device copy.
    import re

    from triton_checks import capture, compile_capture

    compiled = compile_capture(
        capture(lambda x, y: torch.linalg.det(x) * y, torch.randn(3, 3), torch.randn(4))
    )
    source = compiled.program.source
    only_extern = re.findall(r"\n\s+(\w+) = as_buffer\(\1\)\n", source)
    to_device = re.findall(r"\n\s+(\w+) = as_buffer\(\1, device\)\n", source)
    assert len(only_extern) == 1, source
    assert len(to_device) == 1, source
    torch.testing.assert_close(compiled.run()[0].cpu(), compiled.expected[0])


def test_extern_tensor_read_by_a_kernel_is_moved_to_the_device() -> None:
    # ``x[torch.tensor([0, 2])]``: the lifted index constant is made on the CPU; on the
    # H200 the kernel that gathers with it failed ("cannot be accessed from Triton").
    import re

    from triton_checks import capture, compile_capture

    compiled = compile_capture(capture(lambda x: x[torch.tensor([0, 2])] * 2.0, torch.randn(4, 5)))
    externs = compiled.program.source.split("# kernel.extern")[1:]
    assert externs
    assert any(re.search(r"\n\s+(\w+) = on_device\(\1, device\)", e) for e in externs)
    torch.testing.assert_close(compiled.run()[0].cpu(), compiled.expected[0])


# -- on the GPU --------------------------------------------------------------------------------


def _assert_like_eager(
    fn: Callable[..., Any], *args: Any, atol: float = 1e-5, rtol: float = 1e-5
) -> None:
    torch._dynamo.reset()  # pyright: ignore[reportPrivateImportUsage]
    expected = pytree.tree_leaves(fn(*args))
    actual = pytree.tree_leaves(kiln.compile(fn, verbose=False)(*args))
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected, strict=True):
        if not isinstance(e, torch.Tensor):
            assert a == e
            continue
        assert isinstance(a, torch.Tensor)
        assert a.device == e.device, (a.device, e.device)
        assert a.dtype == e.dtype
        torch.testing.assert_close(a, e, atol=atol, rtol=rtol)


@gpu_only
def test_gpu_factory_only_graphs_return_cuda_tensors() -> None:
    _assert_like_eager(lambda: factories("cuda"))
    _assert_like_eager(lambda: windows("cuda"))


@gpu_only
def test_gpu_graph_that_moves_a_cpu_input_to_cuda() -> None:
    _assert_like_eager(lambda x: (x.to("cuda") * 2.0).sin(), torch.randn(8))


@gpu_only
def test_gpu_cpu_tensor_made_in_a_cuda_graph_stays_on_the_cpu() -> None:
    _assert_like_eager(lambda x: (x * 2.0, torch.ones(2) + 1.0), torch.randn(3, device="cuda"))


@gpu_only
def test_gpu_cpu_scalar_tensor_mixed_into_a_cuda_graph() -> None:
    x = torch.randn(4, 5, device="cuda")
    target = torch.randint(0, 2, (4, 5), device="cuda").float() * 2 - 1
    _assert_like_eager(lambda x, s: x * s + 1.0, x, torch.tensor(3.0))
    _assert_like_eager(lambda x, t: F.hinge_embedding_loss(x, t, margin=0.5), x, target)
    _assert_like_eager(lambda x, t: F.hinge_embedding_loss(x, t, reduction="none"), x, target)


@gpu_only
def test_gpu_batch_norm_with_update_and_var_mean_outputs_stay_on_cuda() -> None:
    x = torch.randn(4, 3, 5, 5, device="cuda")
    w, b = torch.randn(3, device="cuda"), torch.randn(3, device="cuda")

    def bn(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> Any:
        rm, rv = torch.zeros(3, device=x.device), torch.ones(3, device=x.device)
        out = torch.ops.aten._batch_norm_with_update(x, w, b, rm, rv, 0.1, 1e-5)
        return (*out[:3], rm, rv)

    _assert_like_eager(bn, x, w, b, atol=1e-4, rtol=1e-4)

    def reserve(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        rm, rv = torch.zeros(3, device=x.device), torch.ones(3, device=x.device)
        return torch.ops.aten._batch_norm_with_update(x, w, b, rm, rv, 0.1, 1e-5)[3]

    torch._dynamo.reset()  # pyright: ignore[reportPrivateImportUsage]
    got = kiln.compile(reserve, verbose=False)(x, w, b)  # cuDNN's workspace: no values to compare
    expected = reserve(x, w, b)
    assert (got.device, got.dtype) == (expected.device, expected.dtype)
    xb = torch.randn(6, 7, device="cuda", dtype=torch.bfloat16)
    _assert_like_eager(lambda x: torch.var_mean(x, dim=1), xb, atol=5e-2, rtol=5e-2)
    _assert_like_eager(lambda x: torch.var_mean(x, dim=0, correction=0), xb, atol=5e-2, rtol=5e-2)
