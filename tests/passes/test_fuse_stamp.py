"""Stamping repeated layers in ``fuse`` (issue 19): the output of the full schedule.

A stack of GPT blocks is lowered, then scheduled with and without stamping: every
kernel and the program (printed with locations, the FX names the backends print as
provenance) must be the same but for the ``kiln.stamped_fuse`` note, and the program
must compute what the loop function does. Every check that guards stamping falls back
to the full schedule, which gives the same output.
"""

from __future__ import annotations

import io
import re
from functools import cache
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.testing import assert_close
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp
from xdsl.printer import Printer

from kiln.compiler import DEFAULT_PIPELINE, CompileOptions, compile_graph
from kiln.dialects.kernel import ProgramOp
from kiln.examples import GPTBlock
from kiln.frontends.capture import capture_make_fx
from kiln.frontends.fx import import_graph
from kiln.passes.scheduling import stamp
from kiln.passes.scheduling.stamp import STAMPED_FUSE_ATTR
from tests.passes.fuse_checks import assert_schedule_preserves, schedule

NOTE = r',? ?kiln\.stamped_fuse = "[^"]*",? ?'
"""The stamping note in printed IR (an attribute of the program)."""
LAYERS = 8


def _blocks(layers: int) -> nn.Module:
    return nn.Sequential(*[GPTBlock(dim=16, heads=2, seed=k) for k in range(layers)]).eval()


@cache
def _loop(layers: int) -> ModuleOp:
    """The blocks' loop IR (shared: the tests schedule clones)."""
    gen = torch.Generator().manual_seed(3)
    capture = capture_make_fx(_blocks(layers), torch.randn(1, 4, 16, generator=gen))
    return schedule(import_graph(capture.gm), "decompose,canonicalize,cse,dce,lower-aten")


def _fused(stamped: bool, layers: int = LAYERS) -> ModuleOp:
    return schedule(_loop(layers).clone(), f"fuse{{stamp={str(stamped).lower()}}}")


def _text(module: ModuleOp) -> str:
    """The IR with locations, without the stamping note."""
    out = io.StringIO()
    Printer(stream=out, print_debuginfo=True).print_op(module)
    return re.sub(NOTE, "", out.getvalue())


def _note(module: ModuleOp) -> str | None:
    program = next(op for op in module.ops if isinstance(op, ProgramOp))
    return getattr(program.attributes.get(STAMPED_FUSE_ATTR), "data", None)


def test_stamped_schedule_is_the_full_schedule() -> None:
    stamped, real = _fused(True), _fused(False)
    note = _note(stamped)
    assert note is not None
    assert re.fullmatch(r"[1-9]\d* of \d+ periods of \d+ loop ops", note), note
    assert _note(real) is None
    assert _text(stamped) == _text(real)
    assert "loc(" in _text(stamped)


def test_stamped_program_computes_the_loop_function() -> None:
    """The interpreters: the loop function before, the stamped program after."""
    scheduled, _ = assert_schedule_preserves(_loop(LAYERS).clone(), "fuse")
    assert _note(scheduled) is not None


def test_too_few_periods_are_scheduled_for_real() -> None:
    """Five periods or fewer fill the window: nothing to stamp, the full schedule."""
    stamped = _fused(True, layers=4)
    assert _note(stamped) is None
    assert _text(stamped) == _text(_fused(False, layers=4))


def test_a_failed_check_schedules_the_whole_function(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stamp, "_same_ops", lambda *_: False)
    stamped = _fused(True)
    assert _note(stamped) is None
    assert _text(stamped) == _text(_fused(False))


def test_a_failure_while_cloning_leaves_the_function_untouched(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The check passes, a later period fails half-way through its clones: the clones
    made so far are dropped (no uses left behind) and the full schedule runs."""
    calls = [0]
    clone_period = stamp._clone_period  # pyright: ignore[reportPrivateUsage]

    def fail_third(*args: object, **kwargs: object) -> object:
        calls[0] += 1
        if calls[0] == 3:
            stamp._discard(clone_period(*args, **kwargs))  # pyright: ignore[reportPrivateUsage, reportArgumentType]
            raise stamp.StampFailed("test")
        return clone_period(*args, **kwargs)  # pyright: ignore[reportArgumentType]

    monkeypatch.setattr(stamp, "_clone_period", fail_third)
    stamped = _fused(True)
    assert calls[0] == 3
    assert _note(stamped) is None
    assert _text(stamped) == _text(_fused(False))


def test_groups_that_differ_between_periods_are_not_stamped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The template's groups must be the previous period's, one period on."""
    run = stamp.Scheduler.run

    def split_one(self: stamp.Scheduler, max_rounds: int = 16) -> stamp.FusionResult:
        result = run(self, max_rounds)
        # The window's middle node lies in its middle period, the template.
        middle = len(self.graph.nodes) // 2
        group = next(g for g in result.groups if middle in g.nodes)
        group.numel = group.numel + 1
        return result

    monkeypatch.setattr(stamp.Scheduler, "run", split_one)
    func = next(op for op in _loop(LAYERS).clone().ops if isinstance(op, FuncOp))
    assert stamp.stamp_fuse(func, 64, inline=True) is None


def test_compiled_code_is_the_same_with_and_without_stamping(tmp_path: Path) -> None:
    """Through the compiler: every IR dump (but for the note), the C++ (with the
    provenance comments that name FX nodes) and the wrapper are the same, the outputs
    equal eager, and the compile statistics say what was stamped."""
    model = _blocks(LAYERS)
    x = torch.randn(1, 4, 16, generator=torch.Generator().manual_seed(5))
    capture = capture_make_fx(model, x)
    want = model(x)
    notes: list[list[str]] = []
    for stamped in ("true", "false"):
        options = CompileOptions(
            pipeline=",".join(
                f"fuse{{stamp={stamped}}}" if name == "fuse" else name
                for name in DEFAULT_PIPELINE.split(",")
            ),
            debug_dir=str(tmp_path / stamped),
            verbose=False,
        )
        compiled = compile_graph(capture.gm, capture.example_inputs, options, name="blocks")
        assert_close(compiled(*capture.example_inputs), want, rtol=1e-5, atol=1e-5)
        notes.append(compiled.stats.stamped_fuse)
    assert len(notes[0]) == 1
    assert notes[0][0].endswith("loop ops")
    assert notes[1] == []
    dumps = sorted(p.relative_to(tmp_path / "true") for p in (tmp_path / "true").rglob("*.*"))
    assert any(p.name == "kernels.cpp" for p in dumps)
    assert any(p.name == "wrapper.py" for p in dumps)
    for path in dumps:
        text = (tmp_path / "true" / path).read_text()
        assert re.sub(NOTE, "", text) == (tmp_path / "false" / path).read_text(), path
