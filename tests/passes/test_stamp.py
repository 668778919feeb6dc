"""Stamping repeated layers in ``lower-aten`` (issue 19): the IR a real lowering gives.

A stack of GPT blocks is lowered with and without stamping: the printed IR (locations,
the FX names the backends print as provenance, included) must be the same but for the
``kiln.stamped`` note, and the stamped IR must compute what the aten IR does. The check
that guards stamping (a clone against a real lowering) must fall back cleanly.
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
from xdsl.printer import Printer

from kiln.compiler import DEFAULT_PIPELINE, CompileOptions, compile_graph
from kiln.examples import GPTBlock
from kiln.frontends.capture import capture_make_fx
from kiln.frontends.fx import import_graph
from kiln.passes import lower_aten
from kiln.passes.aten_to_loop import lowering_table
from kiln.passes.aten_to_loop.stamp import STAMPED_ATTR, Stamper, StampFailed
from kiln.passes.lower_aten import LoweringStats, lower_function
from tests.passes.fuse_checks import schedule
from tests.passes.lower_aten_checks import assert_same, function, interpret

NOTE = r',? ?kiln\.stamped = "[^"]*",? ?'
"""The stamping note in printed IR (an attribute of the function, then the program)."""
ATEN_PASSES = "decompose,canonicalize,cse,dce,output-layout,unfuse-addmm"


def _blocks(layers: int) -> nn.Module:
    return nn.Sequential(*[GPTBlock(dim=16, heads=2, seed=k) for k in range(layers)]).eval()


@cache
def _aten(layers: int, dynamic: bool = False) -> tuple[ModuleOp, list[torch.Tensor]]:
    """The blocks' graph after the aten-level passes (shared: the tests lower clones);
    ``dynamic``: symbolic batch and sequence sizes."""
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(2 if dynamic else 1, 4, 16, generator=gen)
    capture = capture_make_fx(_blocks(layers), x, dynamic=dynamic)
    module = schedule(import_graph(capture.gm), ATEN_PASSES)
    return module, list(capture.example_inputs)


def _lowered(module: ModuleOp, stamp: bool) -> tuple[ModuleOp, LoweringStats]:
    lowered = module.clone()
    stats = LoweringStats({}, {})
    lower_function(function(lowered), lowering_table(), stats, stamp=stamp)
    lowered.verify()
    return lowered, stats


def _text(module: ModuleOp) -> str:
    """The IR with locations, without the stamping note."""
    out = io.StringIO()
    Printer(stream=out, print_debuginfo=True).print_op(module)
    return re.sub(NOTE, "", out.getvalue())


def _note(module: ModuleOp) -> str | None:
    attr = function(module).attributes.get(STAMPED_ATTR)
    return getattr(attr, "data", None)


def test_stamped_lowering_is_the_real_lowering() -> None:
    module, inputs = _aten(6)
    stamped, stamped_stats = _lowered(module, stamp=True)
    real, real_stats = _lowered(module, stamp=False)
    note = _note(stamped)
    assert note is not None
    assert re.fullmatch(r"[1-9]\d* of \d+ periods of \d+ aten ops", note)
    assert _note(real) is None
    assert _text(stamped) == _text(real)
    assert "loc(" in _text(stamped)
    assert stamped_stats == real_stats
    assert_same(interpret(stamped, inputs), interpret(module, inputs))


def test_stamped_lowering_of_symbolic_sizes_is_the_real_lowering() -> None:
    """Under symbolic sizes each layer computes its views' sizes (``arith.muli`` of the
    batch and sequence sizes), whose size expressions the lowering caches: the clone
    caches them too, so the check passes and the IR is the real lowering's (it refused
    every dynamic graph before)."""
    module, inputs = _aten(6, dynamic=True)
    assert "arith.muli" in _text(module)
    stamped, stamped_stats = _lowered(module, stamp=True)
    real, real_stats = _lowered(module, stamp=False)
    assert _note(stamped) is not None
    assert _text(stamped) == _text(real)
    assert stamped_stats == real_stats
    assert_same(interpret(stamped, inputs), interpret(module, inputs))


def test_a_graph_without_repetition_is_untouched() -> None:
    module, _ = _aten(1)
    stamped, _ = _lowered(module, stamp=True)
    real, _ = _lowered(module, stamp=False)
    assert _note(stamped) is None
    assert _text(stamped) == _text(real)


def test_a_failed_check_lowers_every_period(monkeypatch: pytest.MonkeyPatch) -> None:
    module, _ = _aten(6)
    monkeypatch.setattr(lower_aten, "same_lowering", lambda *_: False)
    stamped, _ = _lowered(module, stamp=True)
    assert _note(stamped) is None
    assert _text(stamped) == _text(_lowered(module, stamp=False)[0])


def test_a_period_that_cannot_be_stamped_is_lowered_for_real(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The check passes, the first stamped period is cloned, the next fails half-way
    (its clones are dropped, leaving no uses behind): the rest is lowered for real."""
    module, _ = _aten(7)
    calls = [0]
    stamp = Stamper.stamp

    def fail_third(self: Stamper, first: int) -> object:
        calls[0] += 1
        if calls[0] == 3:
            done = stamp(self, first)
            done.discard()
            raise StampFailed("test")
        return stamp(self, first)

    monkeypatch.setattr(Stamper, "stamp", fail_third)
    stamped, _ = _lowered(module, stamp=True)
    assert calls[0] == 3
    assert (_note(stamped) or "").startswith("1 of ")
    assert _text(stamped) == _text(_lowered(module, stamp=False)[0])


def test_compiled_code_is_the_same_with_and_without_stamping(tmp_path: Path) -> None:
    """Through the compiler: every IR dump (but for the note), the C++ (with the
    provenance comments that name FX nodes) and the wrapper are the same, the outputs
    equal eager, and the compile statistics say what was stamped."""
    model = _blocks(6)
    x = torch.randn(1, 4, 16, generator=torch.Generator().manual_seed(5))
    capture = capture_make_fx(model, x)
    want = model(x)
    stamped: list[list[str]] = []
    for stamp in ("true", "false"):
        options = CompileOptions(
            pipeline=DEFAULT_PIPELINE.replace("lower-aten", f"lower-aten{{stamp={stamp}}}"),
            debug_dir=str(tmp_path / stamp),
            verbose=False,
        )
        compiled = compile_graph(capture.gm, capture.example_inputs, options, name="blocks")
        assert_close(compiled(*capture.example_inputs), want, rtol=1e-5, atol=1e-5)
        stamped.append(compiled.stats.stamped)
    assert len(stamped[0]) == 1
    assert stamped[0][0].endswith("aten ops")
    assert stamped[1] == []
    dumps = sorted(p.relative_to(tmp_path / "true") for p in (tmp_path / "true").rglob("*.*"))
    assert any(p.name == "kernels.cpp" for p in dumps)
    for path in dumps:
        text = (tmp_path / "true" / path).read_text()
        assert re.sub(NOTE, "", text) == (tmp_path / "false" / path).read_text(), path
