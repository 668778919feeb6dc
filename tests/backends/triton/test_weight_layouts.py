"""Convolutions on a cached channels-last weight (the Triton wrapper's ``kiln.prepack``
site), on the CPU: the numbers are ``torch.convolution``'s, the copy is made once and
refreshed after an in-place update, a replaced weight is copied anew, and a CUDA-graph
instance (a stand-in that reads the pinned copy, as a graph reads its address) replays
only while its copy is current."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch
from triton_checks import DEVICE

from kiln.backends.triton.cudagraphs import CudaGraphRunner
from kiln.backends.triton.graph_recording import Epilogue, Recorder
from kiln.backends.triton.weight_layouts import (
    ChannelsLastConvolution,
    ChannelsLastConvolutionBackward,
    WeightCopies,
)

CL = torch.channels_last


def _site() -> ChannelsLastConvolution:
    return ChannelsLastConvolution(stride=[1, 1], padding=[1, 1], dilation=[1, 1], groups=1)


def _conv(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.conv2d(x, w, padding=1)


def _nhwc(*shape: int) -> torch.Tensor:
    return torch.randn(*shape).to(memory_format=CL)


def test_channels_last_input_reads_a_cached_copy() -> None:
    site = _site()
    x, w = _nhwc(2, 8, 6, 6), torch.nn.Parameter(torch.randn(4, 8, 3, 3))
    with torch.no_grad():
        torch.testing.assert_close(site(x, w, None), _conv(x, w))
        copy = site.copy
        assert copy is not None
        assert copy.is_contiguous(memory_format=CL)
        torch.testing.assert_close(site(_nhwc(2, 8, 6, 6), w, None).shape, (2, 4, 6, 6))
        assert site.copy is copy  # made once


def test_in_place_update_refreshes_the_copy_in_place() -> None:
    site = _site()
    x, w = _nhwc(2, 8, 6, 6), torch.nn.Parameter(torch.randn(4, 8, 3, 3))
    with torch.no_grad():
        site(x, w, None)
        copy = site.copy
        w.mul_(-2)  # bumps w._version
        torch.testing.assert_close(site(x, w, None), _conv(x, w))
        assert site.copy is copy  # same memory: a graph reading it stays valid


def test_a_replaced_weight_is_copied_anew() -> None:
    site = _site()
    x = _nhwc(2, 8, 6, 6)
    with torch.no_grad():
        site(x, torch.nn.Parameter(torch.randn(4, 8, 3, 3)), None)
        w2 = torch.nn.Parameter(torch.randn(4, 8, 3, 3))
        torch.testing.assert_close(site(x, w2, None), _conv(x, w2))


def test_no_copy_where_aten_would_make_none() -> None:
    site = _site()
    w = torch.nn.Parameter(torch.randn(4, 8, 3, 3))
    x = torch.randn(2, 8, 6, 6)  # NCHW input: ATen runs NCHW, no weight copy
    with torch.no_grad():
        torch.testing.assert_close(site(x, w, None), _conv(x, w))
    assert site.copy is None
    # Grad mode on a weight that requires grad: the copy would cut the autograd graph.
    y = site(_nhwc(2, 8, 6, 6), w, None)
    assert y.requires_grad
    assert site.copy is None


def _backward_site(copies: WeightCopies) -> ChannelsLastConvolutionBackward:
    return ChannelsLastConvolutionBackward(
        bias_sizes=[0],
        stride=[1, 1],
        padding=[1, 1],
        dilation=[1, 1],
        groups=1,
        output_mask=[True, True, False],
        copies=copies,
    )


def _conv_backward(g: torch.Tensor, x: torch.Tensor, w: torch.Tensor) -> Any:
    return torch.ops.aten.convolution_backward.default(
        g, x, w, [0], [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [True, True, False]
    )


def test_backward_reads_the_copy_its_forward_made() -> None:
    """ATen copied each weight to channels-last twice a training step on the GPU, for
    the forward's convolution and again for the backward's ``convolution_backward``;
    the copies are kept per weight, so the backward site reads the forward's."""
    copies = WeightCopies()
    forward = ChannelsLastConvolution([1, 1], [1, 1], [1, 1], 1, copies)
    backward = _backward_site(copies)
    w = torch.nn.Parameter(torch.randn(4, 8, 3, 3))
    for step in range(2):
        x, g = _nhwc(2, 8, 6, 6), _nhwc(2, 4, 6, 6)
        with torch.no_grad():
            torch.testing.assert_close(forward(x, w, None), _conv(x, w))
            made = forward.copy
            got, want = backward(g, x, w), _conv_backward(g, x, w)
        assert backward.copy is made
        assert got[2] is None
        assert want[2] is None
        torch.testing.assert_close(got[0], want[0])
        torch.testing.assert_close(got[1], want[1])
        if step == 0:
            with torch.no_grad():
                w.sub_(0.1 * got[1])  # an optimizer step: refreshed in place, once
    assert forward.copy is backward.copy
    assert forward.copy is not None
    torch.testing.assert_close(forward.copy, w.detach())


class _CountingCopies(WeightCopies):
    """Counts the copies refreshed from the host (a launch each on the GPU)."""

    def __init__(self) -> None:
        super().__init__()
        self.refreshes = 0

    def entry(self, weight: torch.Tensor) -> Any:
        current = self._copies.get(weight)  # pyright: ignore[reportPrivateUsage]
        stale = current is not None and current.version != weight._version
        self.refreshes += stale
        return super().entry(weight)


class _Program:
    """``conv(x, w)`` through a site; remembers the arguments of its last run."""

    source = ""

    def __init__(self, copies: WeightCopies | None = None) -> None:
        self.site = (
            _site()
            if copies is None
            else ChannelsLastConvolution([1, 1], [1, 1], [1, 1], 1, copies)
        )
        self.weight_sites = [self.site]
        self.last: list[Any] = []

    def __call__(self, args: Sequence[Any]) -> tuple[Any, ...]:
        self.last = list(args)
        x, w = args
        return (self.site(x, w, None),)

    def boxed_call(self, args: list[Any]) -> tuple[Any, ...]:
        values = list(args)
        args.clear()
        return self(values)


def _address_reading_recorder(program: _Program) -> Recorder:
    """A stand-in graph that reads what a CUDA graph would: the static input and the
    weight copy the recording used, by reference (their addresses)."""

    def record(
        run: Callable[[], tuple[Any, ...]], epilogue: Epilogue | None = None
    ) -> tuple[Callable[[], None], tuple[Any, ...]]:
        assert epilogue is None  # the program writes no input
        outputs = run()
        # The copy the site read, else the weight itself (the static input or the
        # caller's tensor: the recording's argument list holds it during a replay).
        x, copy, static = program.last[0], program.site.pin(), program.last

        def replay() -> None:
            outputs[0].copy_(_conv(x, copy if copy is not None else static[1]))

        return replay, outputs

    return record


def test_graph_replays_see_in_place_weight_updates_and_replacements() -> None:
    program = _Program()
    f = CudaGraphRunner(
        program, record=_address_reading_recorder(program), device_type="cpu", guarded=True
    )
    w = torch.nn.Parameter(torch.randn(4, 8, 3, 3))
    with torch.no_grad():
        for _ in range(3):  # plain, recorded, replayed
            x = _nhwc(2, 8, 6, 6)
            torch.testing.assert_close(f([x, w])[0], _conv(x, w))
        assert f.plain_calls == 1
        (instance,) = next(iter(f.graphs.values()))
        assert instance.pins
        assert instance.pins[0][1] is program.site.copy
        for _ in range(2):  # an optimizer's step before each replay
            w.mul_(-2)
            x = _nhwc(2, 8, 6, 6)
            torch.testing.assert_close(f([x, w])[0], _conv(x, w))  # a replay, refreshed
        assert f.plain_calls == 1
        w2 = torch.nn.Parameter(torch.randn(4, 8, 3, 3))
        for _ in range(3):
            x = _nhwc(2, 8, 6, 6)
            torch.testing.assert_close(f([x, w2])[0], _conv(x, w2))


def _refreshing_recorder(program: _Program) -> Recorder:
    """:func:`_address_reading_recorder` for a training graph: what the capture recorded
    (the site's copy refreshed from the weight's address, then the convolution on the
    copy) at every replay, and nothing else (no host-side refresh)."""

    def record(
        run: Callable[[], tuple[Any, ...]], epilogue: Epilogue | None = None
    ) -> tuple[Callable[[], None], tuple[Any, ...]]:
        assert epilogue is None
        outputs = run()
        x, copy = program.last[0], program.site.pin()
        assert copy is not None

        def replay() -> None:
            program.site.refresh()
            outputs[0].copy_(_conv(x, copy))

        return replay, outputs

    return record


def test_a_training_graph_refreshes_its_weight_copies_itself() -> None:
    """The optimizer changes every weight between two training steps: a training
    graph refreshes its copies inside the graph (as Inductor converts weights in its
    graphs), where the host launched a copy per weight before each replay (0.4 ms of
    ResNet-18's step on an H100), and marks them current for the backward's sites."""
    copies = _CountingCopies()
    program = _Program(copies)
    backward = _backward_site(copies)
    f = CudaGraphRunner(
        program,
        record=_refreshing_recorder(program),
        device_type="cpu",
        guarded=True,
        refresh_weights=True,
    )
    w = torch.nn.Parameter(torch.randn(4, 8, 3, 3))
    with torch.no_grad():
        for _ in range(3):  # plain, recorded, replayed
            x = _nhwc(2, 8, 6, 6)
            torch.testing.assert_close(f([x, w])[0], _conv(x, w))
        (instance,) = next(iter(f.graphs.values()))
        assert not instance.pins
        assert [site for site, _ in instance.refreshed] == [program.site]
        backward(_nhwc(2, 4, 6, 6), x, w)
        made = copies.refreshes
        for _ in range(3):  # an optimizer's step before each replay
            w.mul_(-2)
            x = _nhwc(2, 8, 6, 6)
            torch.testing.assert_close(f([x, w])[0], _conv(x, w))
            assert backward.ready(program.site.copy)  # pyright: ignore[reportArgumentType]
        assert copies.refreshes == made  # none from the host
        assert f.plain_calls == 1
        w2 = torch.nn.Parameter(torch.randn(4, 8, 3, 3))  # replaced: no longer current
        for _ in range(3):
            x = _nhwc(2, 8, 6, 6)
            torch.testing.assert_close(f([x, w2])[0], _conv(x, w2))


def test_graph_replays_read_each_call_s_plain_tensor_weight() -> None:
    """A weight passed as a plain tensor (not a parameter) is copied into the graph's
    static input at each replay, after the pins are checked: the site's copy of that
    static input was one call behind, and kiln-cg read the previous call's weight,
    silently. Such a weight is not cached (ATen's copy is part of the graph)."""
    program = _Program()
    f = CudaGraphRunner(
        program, record=_address_reading_recorder(program), device_type="cpu", guarded=True
    )
    with torch.no_grad():
        for _ in range(4):  # plain, recorded, replayed twice
            x, w = _nhwc(2, 8, 6, 6), torch.randn(4, 8, 3, 3)
            torch.testing.assert_close(f([x, w])[0], _conv(x, w))
    assert f.plain_calls == 1
    assert program.site.copy is None


@pytest.mark.skipif(DEVICE.type != "cuda", reason="cuDNN convolutions need a GPU")
@pytest.mark.parametrize("cuda_graphs", [False, True])
def test_gpu_cnn_runs_no_weight_copies_and_sees_updates(cuda_graphs: bool) -> None:
    from torch.profiler import ProfilerActivity, profile

    import kiln

    torch.manual_seed(0)
    model = (
        torch.nn.Sequential(
            torch.nn.Conv2d(8, 16, 3, padding=1),
            torch.nn.BatchNorm2d(16),
            torch.nn.ReLU(),
            torch.nn.Conv2d(16, 16, 3, padding=1),
            torch.nn.ReLU(),
            torch.nn.Conv2d(16, 8, 3, stride=2),
        )
        .to(DEVICE, torch.bfloat16)
        .eval()
    )
    compiled = kiln.compile(model, cuda_graphs=cuda_graphs, verbose=False)
    conv: Any = model[3]
    x = torch.randn(2, 8, 12, 12, device=DEVICE, dtype=torch.bfloat16)
    with torch.no_grad():
        for _ in range(3):
            x = torch.randn(2, 8, 12, 12, device=DEVICE, dtype=torch.bfloat16)
            torch.testing.assert_close(compiled(x), model(x), rtol=2e-2, atol=2e-2)
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            compiled(x)
            torch.cuda.synchronize()
        copies = [e.name for e in prof.events() or () if "direct_copy" in e.name]
        if not cuda_graphs:  # a replay's kernels need not show by name
            assert not copies, copies
        conv.weight.mul_(-0.5)  # in place: the cached copy is refreshed
        x = torch.randn(2, 8, 12, 12, device=DEVICE, dtype=torch.bfloat16)
        torch.testing.assert_close(compiled(x), model(x), rtol=2e-2, atol=2e-2)


@pytest.mark.skipif(DEVICE.type != "cuda", reason="cuDNN convolutions need a GPU")
@pytest.mark.parametrize("cuda_graphs", ["auto", False])
def test_gpu_training_step_copies_each_weight_once(cuda_graphs: str | bool) -> None:
    """A training step (forward, backward, optimizer step) copied each 3x3 weight to
    channels-last twice (ATen, in the forward's and the backward's convolution); now
    once, in the forward after the optimizer's update (inside the forward's CUDA graph,
    with graphs), and the backward reads that copy.
    Outputs, gradients, weights and batch-norm statistics stay eager's at every step: a
    copy one update behind would show (lr * grad, percents). TF32 is off so that float32
    tolerances hold over several steps; reduction order alone moved one weight gradient
    element by 4e-4 at the fifth step on an H200."""
    from torch.profiler import ProfilerActivity, profile

    from kiln.frontends.dynamo import kiln_backend

    torch.manual_seed(0)

    def net() -> torch.nn.Module:
        return torch.nn.Sequential(
            torch.nn.Conv2d(8, 16, 3, padding=1),
            torch.nn.BatchNorm2d(16),
            torch.nn.ReLU(),
            torch.nn.Conv2d(16, 16, 3, padding=1),
            torch.nn.BatchNorm2d(16),
            torch.nn.ReLU(),
            torch.nn.Conv2d(16, 8, 3, stride=2),
        ).to(DEVICE)

    model = net()
    eager = net()
    eager.load_state_dict(model.state_dict())
    options = {"verbose": False, "cuda_graphs": cuda_graphs}
    # Static explicitly: after another test of the process compiled a Sequential, dynamo
    # would compile this one dynamic (automatic dynamic), whose convolutions read the
    # NCHW input as it is and copy no weight at all.
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=kiln_backend, options=options, dynamic=False)
    optimizers = [torch.optim.SGD(m.parameters(), lr=0.05) for m in (model, eager)]

    def forward_backward(fn: Callable[..., Any], opt: torch.optim.Optimizer) -> torch.Tensor:
        opt.zero_grad(set_to_none=True)
        y = fn(x)
        y.backward(dy)
        return y.detach()

    def step(fn: Callable[..., Any], m: torch.nn.Module, opt: torch.optim.Optimizer) -> Any:
        y = forward_backward(fn, opt)
        grads = [p.grad.clone() for p in m.parameters() if p.grad is not None]
        opt.step()
        return y, grads

    tf32 = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    try:
        for k in range(5):
            x = torch.randn(4, 8, 12, 12, device=DEVICE)
            dy = torch.randn(4, 8, 5, 5, device=DEVICE)
            if k == 4:
                with profile(
                    activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True
                ) as prof:
                    # Forward and backward only: the optimizer's update shows as the
                    # next forward's refresh of the copies, and the test's own clones
                    # of the gradients are weight-shaped copies too.
                    y = forward_backward(compiled, optimizers[0])
                    torch.cuda.synchronize()
                # Weight copies only: under CUDA graphs the step's input and output gradient
                # are copied into the graphs' static inputs too.
                # A copy inside a graph replay launches a kernel without an aten::copy_.
                events = prof.events() or []
                weights = {tuple(p.shape) for p in model.parameters() if p.dim() == 4}
                copies = [tuple(e.input_shapes[0]) for e in events if e.name == "aten::copy_"]
                kernels = [e.name for e in events if "direct_copy" in e.name]
                # Without graphs, each weight once from the host (was twice); a training
                # graph's replay refreshes the copies itself, inside the graph.
                expected = 3 if cuda_graphs is False else 0
                assert len([c for c in copies if c in weights]) == expected, copies
                # Each host copy launches one kernel; a replay launches the graph's own
                # (its weight refreshes, one per weight) without an aten::copy_.
                refreshes = len(weights) if cuda_graphs is not False else 0
                assert len(kernels) <= len(copies) + refreshes, (kernels, copies)
                grads = [p.grad.clone() for p in model.parameters() if p.grad is not None]
                optimizers[0].step()
                got = (y, grads)
            else:
                got = step(compiled, model, optimizers[0])
            want = step(eager, eager, optimizers[1])
            torch.testing.assert_close(
                got, want, rtol=1e-3, atol=1e-3, msg=lambda m, k=k: f"step {k}: {m}"
            )
    finally:
        torch.backends.cudnn.allow_tf32 = tf32
    for (name, a), (_, b) in zip(
        model.state_dict().items(), eager.state_dict().items(), strict=True
    ):
        torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-3, msg=name)
