"""Writes to graph inputs (batch norm's running statistics, buffers updated in
``forward``) done by kiln after the program, grouped (:mod:`kiln.frontends.input_mutations`)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile

from kiln.backends.host.input_writes import InputWrites, write_back
from kiln.frontends.dynamo import kiln_backend
from kiln.frontends.input_mutations import InputMutations

_COPY = torch.ops.aten.copy_.default
_NOT_WRITES = frozenset({"aten::_foreach_copy_", "aten::_to_copy"})


def _bn_net() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 8, 3),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.Conv2d(8, 4, 3),
        nn.BatchNorm2d(4),
    )


def _steps(model: nn.Module, fn: nn.Module, images: list[torch.Tensor]) -> list[torch.Tensor]:
    got: list[torch.Tensor] = []
    for x in images:
        model.zero_grad(set_to_none=True)
        y = fn(x)
        y.backward(torch.randn(y.shape, generator=torch.Generator().manual_seed(1)))
        got += [y.detach(), *(p.grad for p in model.parameters() if p.grad is not None)]
    return got


def _reference_and_noise(
    model: nn.Module, images: list[torch.Tensor]
) -> tuple[list[torch.Tensor], list[float]]:
    """``_steps`` of ``model`` (float64), and per entry the float32 rounding noise of a
    gradient that is zero but for rounding, 0 for the others: a convolution's bias before
    batch norm (whose output does not move with a per-channel shift) gets the sum over
    N·H·W of an output gradient that sums to zero per channel, which float32 leaves at up
    to a few ulps of the sum of its magnitudes, an amount eager's own error does not
    bound (kiln sums in another order: 1.1e-5 where eager's noise was 2.4e-6)."""
    magnitudes: dict[nn.Module, float] = {}

    def record(module: nn.Module, grad_input: Any, grad_output: Any) -> None:
        del grad_input
        magnitudes[module] = float(grad_output[0].abs().sum((0, 2, 3)).max())

    convs = [m for m in model.modules() if isinstance(m, nn.Conv2d)]
    hooks = [conv.register_full_backward_hook(record) for conv in convs]
    got: list[torch.Tensor] = []
    noise: list[float] = []
    eps = torch.finfo(torch.float32).eps
    for x in images:
        got += _steps(model, model, [x])
        noise.append(0.0)  # the output
        for module in model.modules():
            for name, _ in module.named_parameters(recurse=False):
                zero = module in convs and name == "bias"
                noise.append(4 * eps * magnitudes[module] if zero else 0.0)
    for hook in hooks:
        hook.remove()
    assert len(noise) == len(got)
    return got, noise


def test_batch_norm_training_updates_running_statistics_as_eager() -> None:
    torch.manual_seed(0)
    eager = _bn_net()
    model = copy.deepcopy(eager)
    exact = copy.deepcopy(eager).double()
    compiled = torch.compile(model, backend=kiln_backend, options={"verbose": False})
    images = [torch.randn(2, 3, 10, 10) * (k + 1) + k for k in range(3)]
    got, want = _steps(model, compiled, images), _steps(eager, eager, images)
    reference, noise = _reference_and_noise(exact, [x.double() for x in images])
    # Against float64, with eager's own error as the noise floor, and the rounding noise
    # of the convolutions' bias gradients, exactly zero in float64 (1e-5 in float32,
    # varying with the summation order: eager's thread count, kiln's kernels).
    for g, w, r, floor in zip(got, want, reference, noise, strict=True):
        eager_error = (w.double() - r).abs().max().item()
        atol = max(1e-5, 4 * eager_error, floor)
        torch.testing.assert_close(g.double(), r, rtol=1e-4, atol=atol)
    for (name, buf), (_, ref) in zip(model.named_buffers(), eager.named_buffers(), strict=True):
        torch.testing.assert_close(buf, ref, rtol=1e-5, atol=1e-6, msg=name)
    assert int(model[1].num_batches_tracked) == 3  # pyright: ignore[reportArgumentType]


def test_buffer_writes_are_grouped_not_a_copy_per_buffer() -> None:
    """AOTAutograd wrote each updated buffer back with its own ``copy_`` after the
    compiled forward (6 for two batch norms: 60 launches a ResNet-18 step on the GPU).
    Now kiln writes them after its program: one ``_foreach_copy_`` per dtype (a single
    launch on CUDA; on the CPU it copies tensor by tensor inside)."""
    torch.manual_seed(0)
    model = _bn_net()
    compiled = torch.compile(model, backend=kiln_backend, options={"verbose": False})
    x = torch.randn(2, 3, 10, 10)
    compiled(x).sum().backward()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        compiled(x)
    events = prof.events()
    grouped = [e for e in events if e.name == "aten::_foreach_copy_"]
    alone = [
        e
        for e in events
        if e.name == "aten::copy_"
        # Inside a _foreach_copy_ (the CPU's per-tensor loop) or a dtype conversion
        # (``.to``) a copy is not a write-back.
        and (e.cpu_parent is None or e.cpu_parent.name not in _NOT_WRITES)
    ]
    assert len(grouped) == 2  # float32 statistics, int64 counters
    assert alone == [], [e.cpu_parent.name if e.cpu_parent else None for e in alone]


class _Counter(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("total", torch.zeros(3))
        self.register_buffer("calls", torch.zeros((), dtype=torch.int64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.total.add_(x.sum(0))  # a write nothing returns
        self.calls += 1  # a write whose result becomes the buffer again (returned)
        return x * 2


@pytest.mark.parametrize("dynamic", [False, True])
def test_inference_buffer_updates(dynamic: bool) -> None:
    torch.manual_seed(0)
    counter, eager = _Counter(), _Counter()
    compiled = torch.compile(
        counter, backend=kiln_backend, dynamic=dynamic, options={"verbose": False}
    )
    with torch.no_grad():
        for rows in (4, 5, 6):
            x = torch.randn(rows, 3)
            torch.testing.assert_close(compiled(x), eager(x))
    torch.testing.assert_close(counter.total, eager.total)
    assert int(counter.calls) == 3


def _graph(read_after: bool) -> torch.fx.GraphModule:
    graph = torch.fx.Graph()
    buf, x = graph.placeholder("buf"), graph.placeholder("x")
    new = graph.call_function(torch.ops.aten.add.Tensor, (buf, x))
    graph.call_function(_COPY, (buf, new))
    out = graph.call_function(torch.ops.aten.mul.Tensor, (buf if read_after else x, 2))
    graph.output((out,))
    return torch.fx.GraphModule(nn.Module(), graph)


def test_writes_become_trailing_outputs() -> None:
    gm = _graph(read_after=False)
    mutations = InputMutations(gm)
    assert mutations.targets == [0]
    written, count = mutations.written_back(gm)
    assert count == 1
    assert not any(n.target is _COPY for n in written.graph.nodes)
    assert mutations.positions == (0,)
    buf, x = torch.randn(3), torch.randn(3)
    args = [buf, x]
    writes = InputWrites(mutations.positions)
    targets = writes.capture(args)
    want_buf = buf + x
    outputs = written(*args)
    assert len(outputs) == 2
    result = writes.apply(outputs, targets)
    torch.testing.assert_close(result[0], x * 2)
    assert len(result) == 1
    torch.testing.assert_close(buf, want_buf)


def test_a_write_read_after_stays_in_the_graph() -> None:
    # Moving this write past the program would make ``mul`` read the old value.
    gm = _graph(read_after=True)
    mutations = InputMutations(gm)
    assert mutations.targets == []
    assert mutations.written_back(gm) == (gm, 1)


def test_write_back_of_casts_broadcasts_and_groups() -> None:
    torch.manual_seed(0)
    floats = [torch.zeros(4), torch.zeros(2, 3)]
    ints = torch.zeros(3, dtype=torch.int64)
    wide = torch.zeros(2, 3)
    strided = torch.zeros(3, 2).t()
    values = [torch.randn(4), torch.randn(2, 3), torch.tensor([1.9, -2.5, 3.0]), torch.randn(3)]
    strided_value = torch.randn(2, 3)
    write_back([*floats, ints, wide, strided], [*values, strided_value])
    torch.testing.assert_close(floats[0], values[0])
    torch.testing.assert_close(floats[1], values[1])
    torch.testing.assert_close(ints, values[2].to(torch.int64))  # cast as copy_ does
    torch.testing.assert_close(wide, values[3].expand(2, 3))  # broadcast as copy_ does
    torch.testing.assert_close(strided, strided_value)


def _add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    x.add_(y)
    return x * 2


def _slice_mul(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    x[1:3].mul_(y[:2])
    return x.sum()


def _copy_transposed(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    x.copy_(y.t())
    return x + 1


def _view_and_clamp(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    x.view(-1).add_(1)
    y.clamp_(min=0)
    return (x * y).sum(0)


def _read_between_writes(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    x.add_(1)
    z = x * y
    x.mul_(3)
    return z, x


def _index_put(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    idx = torch.tensor([0, 2, 2, 3])
    x.index_put_((idx,), y, accumulate=True)
    return x


_MUTATING = [_add, _slice_mul, _copy_transposed, _view_and_clamp, _read_between_writes, _index_put]


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("fn", _MUTATING, ids=[f.__name__.strip("_") for f in _MUTATING])
def test_functions_writing_their_inputs_match_eager(fn: Any, dynamic: bool) -> None:
    torch._dynamo.reset()
    torch.manual_seed(0)
    shapes = {
        _copy_transposed: ((3, 4), (4, 3)),
        _slice_mul: ((5, 3), (4, 3)),
        _index_put: ((5, 3), (4, 3)),
    }.get(fn, ((4, 3), (4, 3)))
    args = [torch.randn(s) for s in shapes]
    eager_args = [a.clone() for a in args]
    compiled = torch.compile(fn, backend=kiln_backend, dynamic=dynamic, options={"verbose": False})
    with torch.no_grad():
        want = fn(*eager_args)
        got = compiled(*args)
    torch.testing.assert_close(got, want)
    for a, b in zip(args, eager_args, strict=True):
        torch.testing.assert_close(a, b)  # the inputs written as eager writes them


def test_a_write_through_one_of_two_aliased_inputs() -> None:
    def fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a.add_(1)
        return b * 2

    torch._dynamo.reset()
    base = torch.randn(8)
    eager_base = base.clone()
    compiled = torch.compile(fn, backend=kiln_backend, options={"verbose": False})
    with torch.no_grad():
        want = fn(eager_base[:6], eager_base[2:])
        got = compiled(base[:6], base[2:])
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(base, eager_base)


def test_two_writes_to_one_input_leave_the_last() -> None:
    graph = torch.fx.Graph()
    buf, x = graph.placeholder("buf"), graph.placeholder("x")
    first = graph.call_function(torch.ops.aten.add.Tensor, (buf, x))
    graph.call_function(_COPY, (buf, first))
    second = graph.call_function(torch.ops.aten.mul.Tensor, (first, 2))
    graph.call_function(_COPY, (buf, second))
    graph.output((x,))
    gm = torch.fx.GraphModule(nn.Module(), graph)
    mutations = InputMutations(gm)
    assert mutations.targets == [0, 0]
    assert mutations.positions == (0,)
    written, count = mutations.written_back(gm)
    assert count == 1
    b, v = torch.randn(3), torch.randn(3)
    want = (b + v) * 2
    outputs = written(b, v)
    assert len(outputs) == 2  # one value per input written: the last
    writes = InputWrites(mutations.positions)
    writes.apply(outputs, writes.capture([b, v]))
    torch.testing.assert_close(b, want)
