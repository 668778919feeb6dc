"""The garbage collector during a compile (issue 19, ``kiln/gc_pause.py``): the heap that
predates the compile is frozen and full collections held back while kiln works, and the
collector's state is given back exactly afterwards, also when the compile fails."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
import torch

import kiln
import kiln.compiler
from kiln.gc_pause import frozen_heap


@pytest.fixture(autouse=True)
def _collector_state() -> Iterator[None]:
    """Each test starts from, and leaves, the collector as the suite runs it."""
    threshold = gc.get_threshold()
    assert gc.get_freeze_count() == 0
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)
    gc.enable()


def _state() -> tuple[bool, int, tuple[int, ...]]:
    return gc.isenabled(), gc.get_freeze_count(), gc.get_threshold()


def test_frozen_inside_and_restored_after() -> None:
    before = _state()
    with frozen_heap():
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold()[:2] == before[2][:2]  # young collections as usual
        assert gc.get_threshold()[2] > before[2][2]
        garbage: list[object] = []
        garbage.append(garbage)  # a cycle made inside is still collectable
        del garbage
        assert gc.collect() >= 1
    assert _state() == before


def test_restored_when_the_block_raises() -> None:
    before = _state()
    with pytest.raises(RuntimeError, match="boom"), frozen_heap():
        raise RuntimeError("boom")
    assert _state() == before


def test_nested_blocks_unfreeze_once_at_the_outermost() -> None:
    before = _state()
    with frozen_heap():
        frozen = gc.get_freeze_count()
        # An inner unfreeze would leave 0; frozen objects that die meanwhile (another
        # thread's, a finalizer's) leave the count too (2 of 1.47 million once), so it is
        # not compared exactly.
        with frozen_heap():
            assert gc.get_freeze_count() > frozen // 2
        assert gc.get_freeze_count() > frozen // 2  # the inner exit left it frozen
    assert _state() == before


def test_leaves_a_disabled_or_already_frozen_collector_alone() -> None:
    gc.disable()
    unfrozen = gc.get_freeze_count()  # not 0 after another test of the worker froze
    with frozen_heap():
        assert gc.get_freeze_count() == unfrozen
        assert not gc.isenabled()
    assert not gc.isenabled()
    gc.enable()
    gc.freeze()  # the application's own freeze (a pre-fork server): not ours to undo
    frozen = gc.get_freeze_count()
    threshold = gc.get_threshold()
    with frozen_heap():
        assert gc.get_threshold() == threshold
    # An unfreeze would leave 0; frozen objects that die meanwhile (another thread's, a
    # finalizer's) leave the count too, so it is not compared exactly.
    assert gc.get_freeze_count() > frozen // 2


def test_compile_graph_runs_its_passes_frozen(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []
    run_pipeline = kiln.compiler._run_pipeline  # pyright: ignore[reportPrivateUsage]

    def spy(*args: object, **kwargs: object) -> None:
        seen.append(gc.get_freeze_count())
        run_pipeline(*args, **kwargs)  # pyright: ignore[reportArgumentType]

    monkeypatch.setattr(kiln.compiler, "_run_pipeline", spy)
    before = _state()
    x = torch.randn(4, 8)
    torch.testing.assert_close(kiln.compile(torch.tanh, verbose=False)(x), torch.tanh(x))
    assert seen
    assert seen[0] > 0
    assert _state() == before


def test_aot_autograd_traces_frozen_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """The backend freezes before AOTAutograd traces (its metadata pass and graph
    capture build as much as kiln's compile; session 12), and gives it back after."""
    import torch._functorch.aot_autograd as aot_autograd

    seen: list[int] = []
    create_aot_state = aot_autograd.create_aot_state

    def spy(*args: object, **kwargs: object) -> object:
        seen.append(gc.get_freeze_count())
        return create_aot_state(*args, **kwargs)  # pyright: ignore[reportArgumentType]

    monkeypatch.setattr(aot_autograd, "create_aot_state", spy)
    before = _state()
    x = torch.randn(4, 8)
    torch.testing.assert_close(kiln.compile(torch.sin, verbose=False)(x), torch.sin(x))
    assert seen
    assert seen[0] > 0
    assert _state() == before


def test_compile_graph_restores_the_collector_when_it_fails() -> None:
    before = _state()
    fn = kiln.compile(lambda x: x + 2, pipeline="decompose,no-such-pass", verbose=False)
    with pytest.raises(Exception, match="bad pipeline"):
        fn(torch.randn(4))
    assert _state() == before
