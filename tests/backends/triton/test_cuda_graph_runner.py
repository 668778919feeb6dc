"""The CUDA-graph runner's bookkeeping, on the CPU: a stand-in recorder whose "graph"
writes every replay into the same output tensors, as a CUDA graph does. Checks that a
replay never overwrites outputs the caller still holds (tensors, views, ``.grad``), that
idle instances are replayed, and which calls run without a graph."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch
from cuda_graph_standin import fixed_memory_recorder
from recorded_ops import RecordedOps

from kiln.backends.host.input_writes import InputWrites
from kiln.backends.triton.cudagraphs import (
    MAX_RECORDINGS,
    MAX_SITES,
    MOVES_BEFORE_COPY,
    SETTLED_CALLS,
    STALE_CALLS,
    CudaGraphRunner,
    _at_addresses,  # pyright: ignore[reportPrivateUsage]
)
from kiln.backends.triton.graph_recording import Epilogue, Recorder
from kiln.dialects.aten.arg_layout import in_layout
from kiln.output_structure import structure_builder


class FakeProgram:
    source = ""
    weight_sites: Sequence[Any] = ()

    def __init__(self, fn: Callable[..., tuple[Any, ...]]) -> None:
        self.fn = fn
        self.calls = 0

    def __call__(self, args: Sequence[Any]) -> tuple[Any, ...]:
        self.calls += 1
        # As a compiled program runs under AOTAutograd: without grad (a kept output read
        # by a program that records autograd history would stay held by that history).
        with torch.no_grad():
            return self.fn(*args)

    def boxed_call(self, args: list[Any]) -> tuple[Any, ...]:
        self.boxed = len(args)
        values = list(args)
        args.clear()
        return self(values)


_guarded = False
"""Whether the runners made here trust the caller's guards (set per test by ``modes``)."""


@pytest.fixture(autouse=True, params=[False, True], ids=["signature", "guarded"])
def modes(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test runs twice: with the full signature of every call, and trusting the
    caller's guards (Dynamo's: borrowed arguments are checked by address only)."""
    monkeypatch.setattr(sys.modules[__name__], "_guarded", request.param)


def make(program: FakeProgram, **kw: Any) -> CudaGraphRunner:
    kw.setdefault("record", fixed_memory_recorder)
    return CudaGraphRunner(
        program, device_type="cpu", replay_reads_inputs=True, guarded=_guarded, **kw
    )


def runner(fn: Callable[..., tuple[Any, ...]], **kw: Any) -> CudaGraphRunner:
    return make(FakeProgram(fn), **kw)


def affine(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return (x * w + 1,)


def test_held_outputs_are_never_overwritten() -> None:
    f = runner(affine, auto=True)
    w = torch.randn(8)
    xs = [torch.randn(8) for _ in range(5)]
    kept = [f([x, w])[0] for x in xs]  # the caller keeps every result
    for x, y in zip(xs, kept, strict=True):
        torch.testing.assert_close(y, x * w + 1)
    (instances,) = f.graphs.values()
    assert len(instances) == 2  # then every instance is held: calls run without a graph
    assert f.plain_calls == 1 + 2


def test_a_loop_that_drops_results_replays_two_instances() -> None:
    f = runner(affine, auto=True)
    w = torch.randn(8)
    y = None
    for _ in range(6):
        x = torch.randn(8)
        y = f([x, w])[0]  # the previous y is alive during the call
        torch.testing.assert_close(y, x * w + 1)
    (instances,) = f.graphs.values()
    assert len(instances) == 2
    assert f.plain_calls == 1  # only the first call ran without a graph
    del y


def test_outputs_viewing_a_parameter_do_not_keep_an_instance_busy() -> None:
    """A training forward returns views of its weights for the backward. Counted as the
    instance's outputs, every other view of the weight (the second instance's, an eager
    layer's) kept the first instance busy for good: hf_bart's layers ran without graphs
    for steps. The replays do not write the parameter's memory: only what they write
    counts."""
    w = torch.nn.Parameter(torch.randn(8, 8))
    f = runner(lambda x, weight: (x @ weight.detach(), weight.detach().t()), auto=True)
    y = None
    with torch.no_grad():
        for _ in range(8):
            x = torch.randn(8)
            y = f([x, w])  # the previous outputs are alive during the call
            torch.testing.assert_close(y[0], x @ w)
            assert y[1].data_ptr() == w.data_ptr()
    (instances,) = f.graphs.values()
    assert len(instances) == 2
    assert f.plain_calls == 1  # only the first call ran without a graph
    del y


@torch.no_grad()  # as AOTAutograd runs compiled graphs: no autograd history
def test_an_output_in_another_graphs_memory_does_not_keep_that_graph_busy() -> None:
    """A graph that returns a view of a borrowed input (a training forward saving its
    input reshaped for the backward) kept that view in its instance, raising the use
    count of the upstream graph's memory for good: the upstream instance was never idle
    again, recorded more instances and then ran without a graph (hf_opt's and hf_bart's
    layers, for steps). The view is rebuilt from the input at each replay instead."""
    upstream = runner(lambda x: (x.relu(),), auto=True)
    w = torch.nn.Parameter(torch.randn(4, 4))
    f = runner(lambda h, weight: (h @ weight.detach(), h.view(2, 8)), auto=True)
    for _ in range(8):
        x = torch.randn(4, 4)
        (h,) = upstream([x])
        y, saved = f([h, w])
        torch.testing.assert_close(y, x.relu() @ w)
        torch.testing.assert_close(saved, x.relu().view(2, 8))
        assert saved.data_ptr() == h.data_ptr()
        del h, y, saved
    assert upstream.plain_calls == 1
    assert sum(upstream.recordings.values()) == 1
    assert f.plain_calls == 1


@torch.no_grad()
def test_cloned_outputs_include_those_lying_in_borrowed_inputs() -> None:
    w = torch.nn.Parameter(torch.randn(4, 4))
    f = runner(lambda x, weight: (x @ weight.detach(), weight.detach().t()), clone_outputs=True)
    for step in range(3):  # plain, recorded, replayed
        x = torch.randn(4)
        y, wt = f([x, w])
        torch.testing.assert_close(y, x @ w)
        torch.testing.assert_close(wt, w.t())
        assert step == 0 or wt.data_ptr() != w.data_ptr()  # a replay's outputs are copies


def test_views_and_grad_fields_keep_outputs_alive() -> None:
    f = runner(affine, auto=True)
    w = torch.randn(8)
    f([torch.randn(8), w])  # the first call runs without a graph and records one
    x1 = torch.randn(8)
    view = f([x1, w])[0][2:5]  # only a view of the replayed result survives
    p = torch.nn.Parameter(torch.randn(8))
    p.grad = f([torch.randn(8), w])[0]
    x2 = p.grad.clone()
    for _ in range(3):
        f([torch.randn(8), w])
    torch.testing.assert_close(view, (x1 * w + 1)[2:5])
    torch.testing.assert_close(p.grad, x2)


def test_unchanged_inputs_are_not_copied_again_and_changed_ones_are() -> None:
    f = runner(affine, auto=True)
    w = torch.randn(8)
    x = torch.randn(8)
    for _ in range(3):
        torch.testing.assert_close(f([x, w])[0], x * w + 1)
    w.mul_(2)  # in place: the version counter moves
    torch.testing.assert_close(f([x, w])[0], x * w + 1)


def test_auto_mode_leaves_out_numbers_and_other_devices() -> None:
    def scale(x: torch.Tensor, n: int) -> tuple[torch.Tensor, ...]:
        return (x * n,)

    f = runner(scale, auto=True)
    for n in (2, 3, 2):
        x = torch.randn(4)
        torch.testing.assert_close(f([x, n])[0], x * n)
    assert not f.graphs
    assert f.plain_calls == 3
    g = runner(scale)  # cuda_graphs=True: a graph per number
    for n in (2, 3, 2, 3):
        x = torch.randn(4)
        torch.testing.assert_close(g([x, n])[0], x * n)
    assert len(g.graphs) == 2


def test_auto_mode_falls_back_when_recording_fails() -> None:
    def failing(
        run: Callable[[], tuple[Any, ...]],
        epilogue: Callable[[tuple[Any, ...]], None] | None = None,
    ) -> tuple[Callable[[], None], tuple[Any, ...]]:
        raise RuntimeError("operation not permitted when stream is capturing")

    f = make(FakeProgram(affine), record=failing, auto=True)
    w = torch.randn(8)
    for _ in range(3):
        x = torch.randn(8)
        torch.testing.assert_close(f([x, w])[0], x * w + 1)
    assert f.plain_calls == 3
    assert not f.graphs
    g = make(FakeProgram(affine), record=failing)
    with pytest.raises(RuntimeError, match="capturing"):
        g([torch.randn(8), w])


def test_outputs_that_alias_each_other_stay_aliased() -> None:
    def two_views(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        y = x + 1
        return y, y.view(2, 4)

    f = runner(two_views, auto=True)
    for _ in range(4):
        x = torch.randn(8)
        a, b = f([x])
        a.add_(10)
        torch.testing.assert_close(b.reshape(-1), x + 11)


def test_boxed_calls_without_graphs_hand_the_argument_list_over() -> None:
    # A backward that runs without graphs frees each saved activation after its last use:
    # the program gets the caller's list itself, not a copy.
    def scale(x: torch.Tensor, n: int) -> tuple[torch.Tensor, ...]:
        return (x * n,)

    program = FakeProgram(scale)
    f = make(program, auto=True)
    f([torch.randn(4), 2])  # the first call finds the signature excluded (a number)
    x = torch.randn(4)
    args: list[Any] = [x, 2]
    (y,) = f.boxed_call(args)
    assert args == []
    assert program.boxed == 2
    torch.testing.assert_close(y, x * 2)


def capturing_recorder(flag: list[bool]) -> Recorder:
    """``fixed_memory_recorder`` with ``flag[0]`` set while the "graph" runs, as
    ``torch.cuda.is_current_stream_capturing()`` is during a capture."""

    def record(
        run: Callable[[], tuple[Any, ...]], epilogue: Epilogue | None = None
    ) -> tuple[Callable[[], None], tuple[Any, ...]]:
        def captured() -> tuple[Any, ...]:
            flag[0] = True
            try:
                return run()
            finally:
                flag[0] = False

        return fixed_memory_recorder(captured, epilogue)

    return record


def test_outputs_on_the_host_only_outside_a_recording_are_replayed() -> None:
    # SDPA's dropout seed and offset: host tensors outside a capture, device tensors in
    # one. Here the "device" is the CPU and the "host" is the meta device.
    capturing = [False]

    def attention_like(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        seed = torch.zeros((), dtype=torch.int64, device="cpu" if capturing[0] else "meta")
        return x * 2, seed

    program = FakeProgram(attention_like)
    f = make(program, record=capturing_recorder(capturing), auto=True)
    first = f([torch.randn(4)])
    assert first[1].device.type == "meta"  # the plain first call
    for _ in range(3):
        x = torch.randn(4)
        y, seed = f([x])
        torch.testing.assert_close(y, x * 2)
        assert seed.device.type == "cpu"  # from the graph
    assert len(f.graphs) == 1
    assert f.plain_calls == 1


def test_outputs_on_the_host_in_the_recording_run_without_a_graph() -> None:
    def to_host(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return x * 2, torch.zeros((), device="meta")

    for auto in (True, False):  # cuda_graphs=True too: host outputs are no error
        f = runner(to_host, auto=auto)
        for _ in range(3):
            x = torch.randn(4)
            torch.testing.assert_close(f([x])[0], x * 2)
        assert not f.graphs
        assert f.plain_calls == 3

    def failing(
        run: Callable[[], tuple[Any, ...]],
        epilogue: Callable[[tuple[Any, ...]], None] | None = None,
    ) -> tuple[Callable[[], None], tuple[Any, ...]]:
        raise RuntimeError("operation not permitted when stream is capturing")

    g = make(FakeProgram(to_host), record=failing)
    x = torch.randn(4)
    torch.testing.assert_close(g([x])[0], x * 2)  # a failed recording: plain, no error
    assert not g.graphs


def test_a_failed_input_copy_names_the_argument() -> None:
    f = runner(affine)
    w = torch.randn(8)
    f([torch.randn(8), w])  # records
    (instances,) = f.graphs.values()
    # A static input that cannot be written (stride 0): the error says which argument.
    instances[0].inputs[0] = torch.randn(1).expand(8)
    with pytest.raises(RuntimeError, match=r"cannot copy argument 0 .*strides \(0,\)"):
        f([torch.randn(8), w])


def test_an_expanded_argument_keeps_its_strides_in_the_graph() -> None:
    """A program compiled for an expanded argument's strides (stride 0) got a contiguous
    clone of it, copied that back into the stride-0 layout and failed ("more than one
    element of the written-to tensor refers to a single memory location": BART's
    backward, whose tangent is an expanded sum gradient)."""

    def scaled(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (in_layout(x, (0, 1)) * 2,)

    f = runner(scaled)
    for _ in range(3):  # records, then replays with new values copied in
        row = torch.randn(5)
        (y,) = f([row.expand(4, 5)])
        torch.testing.assert_close(y, row.expand(4, 5) * 2)
    (instances,) = f.graphs.values()
    assert instances[0].inputs[0].stride() == (0, 1)


def test_parameters_and_graph_outputs_are_borrowed_not_copied() -> None:
    """A training step's shape: the forward reads a parameter and returns a saved
    activation that the backward reads. Neither is copied into a static input (the
    backward copied every saved activation at every step); the parameter's in-place
    updates (an optimizer step) are read where it lies."""
    forward = runner(lambda x, w: (x * w, (x * w).sin()), auto=True)
    backward = runner(lambda saved, g: (saved.cos() * g,), auto=True)
    w = torch.nn.Parameter(torch.randn(8))
    for _ in range(5):
        x, g = torch.randn(8), torch.randn(8)
        out, saved = forward([x, w])
        (grad,) = backward([saved, g])
        torch.testing.assert_close(out, x * w)
        torch.testing.assert_close(grad, (x * w).sin().cos() * g)
        del out, saved, grad
        with torch.no_grad():
            w.mul_(0.5)  # the optimizer's step, in place
    ((fwd,),) = forward.graphs.values()
    ((bwd,),) = backward.graphs.values()
    assert fwd.borrowed == {1: w.data_ptr()}
    assert fwd.inputs[1] is None
    assert list(bwd.borrowed) == [0]
    assert bwd.inputs[0] is None
    assert forward.plain_calls == backward.plain_calls == 1  # every later call replayed


def test_a_borrowed_input_at_another_address_is_not_read_from_the_old_one() -> None:
    """A replay reads a borrowed input where it was recorded: a call whose tensor lies
    elsewhere (a replaced parameter, a forward replayed into its other instance) gets a
    graph of its own, or runs without one, never the old address's data."""
    f = runner(affine, auto=True, max_instances=1)
    w1 = torch.nn.Parameter(torch.randn(8))
    x = torch.randn(8)
    for _ in range(2):
        torch.testing.assert_close(f([x, w1])[0], x * w1 + 1)
    w2 = torch.nn.Parameter(torch.randn(8))  # the same signature, another address
    for _ in range(2 * STALE_CALLS):
        torch.testing.assert_close(f([x, w2])[0], x * w2 + 1)
    ((instance,),) = f.graphs.values()
    # w2 is a new call site: recorded when it recurs (its first call ran without a
    # graph, as did w1's); w1's instance gave way after STALE_CALLS misses per site.
    assert instance.borrowed == {1: w2.data_ptr()}
    assert f.plain_calls == 2


def test_parameters_met_once_run_without_recording_a_graph_each() -> None:
    """A call with fresh parameters every time (a model built anew per call) is a new
    call site at every call: it runs without a graph rather than recording one per
    call (each in its own memory pool)."""
    f = runner(affine, auto=True)
    x = torch.randn(8)
    calls = 3 * MAX_SITES
    weights = [torch.nn.Parameter(torch.randn(8)) for _ in range(calls)]  # no reused address
    for w in weights:
        torch.testing.assert_close(f([x, w])[0], x * w + 1)
    assert sum(f.recordings.values()) == 1  # the first site's
    assert f.plain_calls == calls


def test_a_borrowed_input_that_keeps_moving_is_copied() -> None:
    """A graph's output at a new address at every call (an upstream graph that keeps
    re-recording: hf_opt's training on the H200 recorded two runners MAX_RECORDINGS
    times and then ran every call without a graph): after MOVES_BEFORE_COPY moves the
    input is copied like any other and the signature replays from then on."""
    upstream = runner(lambda x: (x + 1,), auto=True, max_instances=MAX_RECORDINGS)
    f = runner(affine, auto=True)
    w = torch.nn.Parameter(torch.randn(8))
    held = []  # every upstream output kept: each of its calls records a new instance
    for _ in range(MAX_RECORDINGS + 4):
        x = torch.randn(8)
        (h,) = upstream([x])
        held.append(h)
        torch.testing.assert_close(f([h, w])[0], (x + 1) * w + 1)
    assert sum(f.recordings.values()) <= 2 + MOVES_BEFORE_COPY
    copying = [i for i in next(iter(f.graphs.values())) if i.copied]
    assert [i.copied for i in copying] == [{0}]
    plain = f.plain_calls
    for _ in range(5):
        x = torch.randn(8)
        (h,) = upstream([x])
        held.append(h)
        torch.testing.assert_close(f([h, w])[0], (x + 1) * w + 1)
    assert f.plain_calls == plain  # a moving input no longer makes calls plain


def test_a_copied_graph_output_is_copied_at_every_replay() -> None:
    """An input copied for having moved is another graph's output: once that graph
    settles, its replays hand over the same tensor (a kept output) with new values and
    an unmoved version counter, so "the very tensor seen last time, unmodified" is no
    reason to skip its copy (the downstream graph read the first replay's values)."""
    upstream = runner(lambda x: (x + 1,), auto=True, max_instances=MAX_RECORDINGS)
    f = runner(affine, auto=True)
    w = torch.nn.Parameter(torch.randn(8))
    held = []
    for _ in range(MAX_RECORDINGS + 4):  # moves until f copies the input
        x = torch.randn(8)
        (h,) = upstream([x])
        held.append(h)
        f([h, w])
    assert any(i.copied == {0} for i in next(iter(f.graphs.values())))
    del held, h
    seen: set[int] = set()
    for _ in range(6):
        x = torch.randn(8)
        (h,) = upstream([x])  # the same kept tensor at every replay
        seen.add(id(h))
        torch.testing.assert_close(f([h, w])[0], (x + 1) * w + 1)
        del h
    assert len(seen) < 6


def test_each_output_held_alone_keeps_its_instance_busy() -> None:
    """Outputs alone in their storage are handed over as themselves at every replay
    (no ``detach`` per output, as Inductor's CUDA-graph trees keep them), the others as
    fresh aliases; holding any one of them, alone, keeps the instance from replaying
    over it (its reference counts are compared with the runner's own)."""

    def program(x: torch.Tensor, w: torch.Tensor) -> tuple[Any, ...]:
        base = x * w
        twice = x - w  # a result also saved: one tensor at two positions
        return x + w, base, base[2:6], x.sum(), None, twice, twice

    f = runner(program, auto=True)
    w = torch.nn.Parameter(torch.randn(8))
    f([torch.randn(8), w])  # records
    # Each result dropped at once: one instance replays, handing over the same tensor.
    assert len({id(f([torch.randn(8), w])[0]) for _ in range(4)}) == 1
    first = f([torch.randn(8), w])
    assert f([torch.randn(8), w])[0] is not first[0]  # held: the second instance
    del first
    (instances,) = f.graphs.values()
    for instance in instances:
        assert instance.fresh == (1, 2)  # the view and its base: fresh aliases
        handed = instance.handed_over([torch.randn(8), w])
        assert handed[5] is handed[6]  # one tensor, kept, at both positions
        del handed
    for position in (0, 1, 2, 3, 5, 6):
        x = torch.randn(8)
        held = f([x, w])[position]
        expected = program(x, w)[position]
        for _ in range(3):
            f([torch.randn(8), w])
        torch.testing.assert_close(held, expected, msg=f"output {position}")
        del held


def test_a_hook_on_a_kept_output_does_not_outlive_the_step() -> None:
    f = runner(affine, auto=True)
    w = torch.nn.Parameter(torch.randn(8))
    f([torch.randn(8), w])
    y = f([torch.randn(8), w])[0]
    y.requires_grad_()
    y.register_hook(lambda g: g * 2)
    del y
    y = f([torch.randn(8), w])[0]
    assert y._backward_hooks is None  # pyright: ignore[reportPrivateUsage]


@torch.no_grad()  # as AOTAutograd runs compiled graphs: no autograd history
def test_a_moved_input_that_settles_is_borrowed_again() -> None:
    """Moves happen while upstream graphs record: a training step's first calls. On the
    H100, hf_opt's and hf_bart's backwards counted their saved activations as moving in
    the first four steps and then copied 18 and 45 of them at every step for good,
    though the forwards had settled. Once a copied input has been borrowable at one
    address for SETTLED_CALLS replays, the next call records an instance that borrows
    it, and the copying one is dropped."""
    upstream = runner(lambda x: (x + 1,), auto=True, max_instances=MAX_RECORDINGS)
    f = runner(affine, auto=True)
    w = torch.nn.Parameter(torch.randn(8))
    x = torch.randn(8)
    held = []  # warm-up: every upstream output kept, each call records a new instance
    for _ in range(3 + MOVES_BEFORE_COPY):
        (h,) = upstream([x])
        held.append(h)
        torch.testing.assert_close(f([h, w])[0], (x + 1) * w + 1)
    assert any(i.copied == {0} for i in next(iter(f.graphs.values())))
    held.clear()  # settled: the upstream replays one instance, at one address
    h_at = None
    for _ in range(SETTLED_CALLS + 4):
        x = torch.randn(8)
        (h,) = upstream([x])
        torch.testing.assert_close(f([h, w])[0], (x + 1) * w + 1)
        h_at = h.data_ptr()
        del h
    (instances,) = f.graphs.values()
    assert all(not i.copied for i in instances)  # the copying instance is gone
    assert h_at in {i.borrowed.get(0) for i in instances}
    plain, recorded = f.plain_calls, sum(f.recordings.values())
    for _ in range(5):
        x = torch.randn(8)
        (h,) = upstream([x])
        torch.testing.assert_close(f([h, w])[0], (x + 1) * w + 1)
        del h
    assert (f.plain_calls, sum(f.recordings.values())) == (plain, recorded)


def test_borrowed_addresses_are_read_by_position() -> None:
    # Torch's C++ check (CUDA builds) and the Python fallback: ptrs[k] for args[k].
    p, q = torch.randn(3), torch.randn(3)
    args: list[Any] = [torch.randn(2), 3, p]
    ptrs: list[int | None] = [None, None, p.data_ptr()]
    assert _at_addresses(args, ptrs, [2])
    assert not _at_addresses([args[0], 3, q], ptrs, [2])


def test_a_guarded_call_with_new_unborrowed_metadata_records_its_own_graph() -> None:
    f = runner(affine, auto=True)
    w = torch.nn.Parameter(torch.randn(8))
    for x in [torch.randn(8), torch.randn(8), torch.randn(2, 8), torch.randn(2, 8)]:
        torch.testing.assert_close(f([x, w])[0], x * w + 1)
    assert len(f.graphs) == 2
    assert f.plain_calls == 2  # each signature's first call


def test_a_parameter_returned_by_a_replay_is_the_parameter_itself() -> None:
    """A training forward returns its weights for the backward. A replay returned a
    detached alias of each, a new tensor at every step, and the backward received no
    parameters: its channels-last weight copies, kept per parameter, missed (a weight
    copied twice a step instead of once)."""
    w = torch.nn.Parameter(torch.randn(8))
    f = runner(lambda x, weight: (x * weight.detach(), weight), auto=True)
    with torch.no_grad():
        for step in range(4):  # plain, recorded, replayed twice
            x = torch.randn(8)
            y, weight = f([x, w])
            torch.testing.assert_close(y, x * w)
            assert weight is w, step
    assert f.plain_calls == 1


def test_a_block_called_by_every_layer_replays_without_copying_weights() -> None:
    """A graph break inside a transformer layer: Dynamo compiles the layer's forward once
    and every layer calls it with its own weights, and so with its backward. The moves
    counted per signature took the layers' weights for one moving input: hf_opt's
    training copied every weight and saved activation at every step (95 copies a step;
    a third of its kernel time on the H100). Counted per call site (the weights a call
    reads), three layers replay graphs that borrow their weights and each other's
    outputs; only the step's fresh input and output gradient are copied."""
    forward = runner(lambda h, w: ((h * w).tanh(), h * w), auto=True)
    backward = runner(lambda z, w, g: (g * (1 - z.tanh() ** 2) * w,), auto=True)
    weights = [torch.nn.Parameter(torch.randn(8)) for _ in range(3)]

    def step() -> None:
        x, g0 = torch.randn(8), torch.randn(8)
        h, saved = x, []
        for w in weights:
            h, z = forward([h, w])
            saved.append(z)
        g = g0
        for w, z in zip(reversed(weights), reversed(saved), strict=True):
            (g,) = backward([z, w, g])
        expected_h, expected_zs = x, []
        for w in weights:
            expected_zs.append(expected_h * w)
            expected_h = expected_zs[-1].tanh()
        expected_g = g0
        for w, z in zip(reversed(weights), reversed(expected_zs), strict=True):
            expected_g = expected_g * (1 - z.tanh() ** 2) * w
        torch.testing.assert_close(h, expected_h)
        torch.testing.assert_close(g, expected_g)

    with torch.no_grad():  # as AOTAutograd runs compiled graphs: no autograd history
        for _ in range(6):
            step()
        plain = forward.plain_calls, backward.plain_calls
        recorded = sum(forward.recordings.values()), sum(backward.recordings.values())
        for _ in range(4):
            step()
    assert (forward.plain_calls, backward.plain_calls) == plain  # every call replays
    assert (sum(forward.recordings.values()), sum(backward.recordings.values())) == recorded
    for f in (forward, backward):
        (instances,) = f.graphs.values()
        assert all(not i.copied for i in instances)  # no input taken for a moving one
    # Each layer's instance borrows its weight; only layer 1 copies its input (x).
    used = [i for i in forward.graphs[next(iter(forward.graphs))] if 1 in i.borrowed]
    assert {i.borrowed[1] for i in used} == {w.data_ptr() for w in weights}


def test_a_graph_runner_over_built_outputs_replays_views_without_view_ops() -> None:
    """A Triton program builds a flat structure itself (``TritonOptions.output_structure``),
    so that its CUDA graph records the views: a replay hands a saved view over with no
    view op (ViT-tiny's training forward: 84 views, ~4 us each as ``as_strided``)."""
    # A training forward's saved query: view -> split -> view -> permute of a projection.
    build = structure_builder(
        "(alias('aten::permute.default', alias('aten::view.default', "
        "alias('aten::split_with_sizes.default', alias('aten::view.default', 0, "
        "\"{'size': [1, 4, 12]}\"), \"{'split_sizes': [4, 4, 4], 'dim': 2}\", 1), "
        "\"{'size': [1, 4, 2, 2]}\"), \"{'dims': [0, 2, 1, 3]}\"), 0)"
    )

    class Program(FakeProgram):
        def __init__(self) -> None:
            super().__init__(lambda x: build([x * 2]))

    f = make(Program(), auto=True)  # pyright: ignore[reportArgumentType]
    for _ in range(2):
        f([torch.randn(4, 12)])
    x = torch.randn(4, 12)
    view, value = f([x])
    (instances,) = f.graphs.values()
    with RecordedOps() as recorded:
        instances[0].handed_over([x])
    # Both lie in one storage: fresh aliases, with no view op (the stand-in's replay
    # reruns the program, so only the handing over is counted).
    assert recorded.ops == ["aten.detach.default"] * 2, recorded.ops
    expected = value.view(1, 4, 12).split([4, 4, 4], 2)[1].view(1, 4, 2, 2).permute(0, 2, 1, 3)
    assert view.stride() == expected.stride()
    assert view.storage_offset() == expected.storage_offset()
    assert view.untyped_storage().data_ptr() == value.untyped_storage().data_ptr()
    torch.testing.assert_close(value, x * 2)
    torch.testing.assert_close(view, expected)


def _decayed(x: torch.Tensor, stat: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # The output reads the statistic; the trailing value is its update (written into it).
    return x * 2 + stat, stat * 0.5 + x.mean()


@pytest.mark.parametrize("borrowed", [True, False], ids=["buffer", "plain-input"])
def test_trailing_values_are_written_into_inputs_once_per_call(borrowed: bool) -> None:
    """A buffer (it stays put) is written inside the "graph" at each replay; another input
    after it. Either way once per call, never at the recording itself (a second write
    of a running statistic would double its update)."""
    stat = torch.randn(8)
    if borrowed:
        stat = torch.nn.Parameter(stat, requires_grad=False)
    f = make(FakeProgram(_decayed), auto=True, writes=InputWrites((1,)))
    want = stat.detach().clone()
    for call in range(5):
        x = torch.randn(8)
        version = stat._version
        (y,) = f([x, stat])
        torch.testing.assert_close(y, x * 2 + want, msg=f"call {call}")
        want = want * 0.5 + x.mean()
        torch.testing.assert_close(stat.detach(), want, msg=f"call {call}")
        assert stat._version > version  # written in place, as eager would
    (instances,) = f.graphs.values()
    assert len(instances) == 2  # ``y`` holds the last call's output: two alternate
    assert f.plain_calls == 1
    for instance in instances:
        assert instance.graph_writes == ([1] if borrowed else [])
        assert instance.host_writes == ([] if borrowed else [(0, 1)])
        assert len(instance.outputs) == 1  # the value is never handed over


def test_trailing_values_are_written_by_calls_without_a_graph() -> None:
    # A number among the arguments: auto mode runs the program plainly, and still writes.
    def scaled(x: torch.Tensor, stat: torch.Tensor, n: int) -> tuple[torch.Tensor, ...]:
        return x * n, stat + n

    stat = torch.nn.Parameter(torch.zeros(4), requires_grad=False)
    f = make(FakeProgram(scaled), auto=True, writes=InputWrites((1,)))
    for n in (1, 2, 3):
        x = torch.randn(4)
        outputs = f([x, stat, n]) if n < 3 else f.boxed_call([x, stat, n])
        assert len(outputs) == 1
        torch.testing.assert_close(outputs[0], x * n)
    torch.testing.assert_close(stat.detach(), torch.full((4,), 6.0))
    assert not f.graphs


@torch.no_grad()
def test_a_dropped_runner_is_freed_without_the_cycle_collector() -> None:
    """Each instance's recorded ``run`` held the runner, which holds its instances: a
    dropped runner (and its graphs' memory) lived until the cycle collector ran, with
    its outputs' addresses still registered as graph outputs, so a later runner took a
    tensor at a reused address for one (flaky plain-call counts in this file)."""
    import gc
    import weakref

    f = runner(affine, auto=True)
    w = torch.randn(8)
    for _ in range(3):  # plain, recorded, replayed
        f([torch.randn(8), w])
    (instances,) = f.graphs.values()
    refs = [weakref.ref(f), *(weakref.ref(i) for i in instances)]
    enabled = gc.isenabled()
    gc.disable()
    try:
        del f, instances
        assert all(r() is None for r in refs)
    finally:
        if enabled:
            gc.enable()
