"""compile_graph prints IR only when a debug directory asks for it.

Printing a module after every pass cost as much as the passes themselves (7.5 s of 43 s
compiling an OpInfo batch of 81 kernels), for text that was then thrown away.
"""

from __future__ import annotations

import pytest
import torch
from xdsl.printer import Printer

from kiln.compiler import CompileOptions, compile_graph
from kiln.frontends.capture import capture_make_fx


def test_no_ir_is_printed_without_debug_dir(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    x = torch.randn(4, 8)
    capture = capture_make_fx(lambda t: (t.relu() + 1).sum(dim=1), x)
    printed: list[str] = []
    original = Printer.print_op

    def counting(self: Printer, op: object) -> None:
        printed.append(type(op).__name__)
        original(self, op)  # pyright: ignore[reportArgumentType]

    monkeypatch.setattr(Printer, "print_op", counting)
    compiled = compile_graph(
        capture.gm, capture.example_inputs, CompileOptions(executor="interpret", verbose=False)
    )
    assert printed == []
    torch.testing.assert_close(compiled(x), (x.relu() + 1).sum(dim=1))

    debug = tmp_path_factory.mktemp("kiln-debug")
    compile_graph(
        capture.gm,
        capture.example_inputs,
        CompileOptions(executor="interpret", verbose=False, debug_dir=str(debug)),
    )
    assert printed  # the debug directory still gets every pass's IR
    assert any(p.name.endswith("_lower-aten.mlir") for p in debug.rglob("*.mlir"))
