"""The own-level FileCheck inputs of each pass compute the same numbers after the pass.

Each ``tests/filecheck/<level>/<pass>.mlir`` test feeds a pass IR of its own level and
checks the IR it prints; this runs the same inputs (each ``// -----`` chunk) through the
reference interpreters before and after the pass, on fresh random inputs, wherever both
levels have one: aten (``run_function`` through torch), loop (``func.func`` on memrefs)
and kernel (``kernel.program``, with poisoned freed memory). ``output-layout`` changes the
calling convention (``kiln.outputs``) and is checked in test_output_layout.py;
``lower-to-cpp`` and ``lower-to-triton`` end where there is no IR interpreter (their
kernels are run against eager by tests/backends).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from xdsl.dialects.builtin import DYNAMIC_INDEX, MemRefType, ModuleOp, TensorType
from xdsl.dialects.func import FuncOp
from xdsl.ir import Attribute
from xdsl.parser import Parser

from kiln.dialects.aten.dtypes import type_to_dtype
from kiln.dialects.aten.interpreter import run_function as run_aten
from kiln.dialects.kernel import ProgramOp
from kiln.dialects.kernel.interpreter import run_program
from kiln.dialects.loop.interpreter import run_function as run_loop
from kiln.registry import default_registry, make_context

FILECHECK = Path(__file__).parent.parent / "filecheck"

CASES = [
    "aten/unfuse-addmm.mlir",
    "aten/channels-last.mlir",
    "aten/conv1x1-to-mm.mlir",
    "loop/lower-aten.mlir",
    "kernel/fuse.mlir",
    "kernel/tile.mlir",
    "kernel/buffer-reuse.mlir",
]
"""The FileCheck tests, ``<level>/<pass>.mlir``: each file's name is its pass's name."""


def chunks(path: Path) -> list[str]:
    """The ``--split-input-file`` chunks that hold IR."""
    parts = path.read_text().split("\n// -----\n")
    return [p for p in parts if any(line and not line.startswith("//") for line in p.split("\n"))]


def random_value(ty: Attribute, generator: torch.Generator, dynamic_size: int) -> torch.Tensor:
    """A random tensor of type ``ty``; its symbolic dims (``?``) are ``dynamic_size``."""
    assert isinstance(ty, TensorType | MemRefType), f"no random value for {ty}"
    dtype = type_to_dtype(ty.element_type)  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
    shape = [dynamic_size if d == DYNAMIC_INDEX else d for d in ty.get_shape()]  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    if dtype.is_floating_point:
        return torch.randn(shape, generator=generator).to(dtype)
    return torch.randint(1, 10, shape, generator=generator).to(dtype)


def entry_points(module: ModuleOp) -> dict[str, list[Attribute]]:
    """Each function or program of the module: its name and argument types."""
    return {
        op.sym_name.data: list(op.function_type.inputs.data)
        for op in module.ops
        if isinstance(op, FuncOp | ProgramOp)
    }


def run(module: ModuleOp, name: str, args: list[torch.Tensor]) -> tuple[object, ...]:
    """Run ``name`` through the interpreter of its level."""
    for op in module.ops:
        if isinstance(op, ProgramOp) and op.sym_name.data == name:
            return run_program(module, args, name)[0]
        if isinstance(op, FuncOp) and op.sym_name.data == name:
            if any(isinstance(t, MemRefType) for t in op.function_type.inputs.data):
                return run_loop(module, args, name)
            return run_aten(module, args, name)
    raise AssertionError(f"no @{name}")


@pytest.mark.parametrize("test", CASES)
def test_same_numbers_before_and_after(test: str) -> None:
    pass_ = default_registry().get_pass(Path(test).stem)()
    generator = torch.Generator().manual_seed(0)
    for text in chunks(FILECHECK / test):
        ctx = make_context()
        before = Parser(ctx, text).parse_module()
        after = before.clone()
        pass_.apply(ctx, after)
        after.verify()
        functions = entry_points(before)
        assert functions, f"{test}: a chunk without a function or program"
        for name, types in functions.items():
            # One size for every symbolic dim of a function: dims of one symbol agree.
            dynamic_size = int(torch.randint(2, 8, (), generator=generator))
            args = [random_value(ty, generator, dynamic_size) for ty in types]
            want = run(before, name, [a.clone() for a in args])
            got = run(after, name, [a.clone() for a in args])
            assert len(got) == len(want), name
            for position, (w, g) in enumerate(zip(want, got, strict=True)):
                assert isinstance(w, torch.Tensor)
                assert isinstance(g, torch.Tensor)
                torch.testing.assert_close(
                    g, w, rtol=1e-5, atol=1e-5, msg=f"{test} @{name} result {position}"
                )
