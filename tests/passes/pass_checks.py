"""Shared checks for pass tests: IR in/IR out, and the same numbers before and after.

``assert_pass_output`` runs a pass on parsed IR and compares the printed result.
``assert_same_semantics`` runs every function of the module before and after a pass
through the aten interpreter (``kiln.dialects.aten.interpreter.run_function``) on the
same random inputs and RNG seed, and checks that outputs agree in value, shape,
strides (of dims larger than 1) and in which inputs they alias.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from io import StringIO

import torch
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr, TensorType
from xdsl.dialects.func import FuncOp
from xdsl.parser import Parser
from xdsl.passes import ModulePass
from xdsl.printer import Printer

from kiln.dialects.aten.dtypes import type_to_dtype
from kiln.dialects.aten.interpreter import run_function
from kiln.output_structure import rebuild_structure
from kiln.registry import make_context

ArgsFactory = Callable[[], Sequence[object]]


def parse(text: str, ctx: Context | None = None) -> ModuleOp:
    return Parser(ctx or make_context(), text).parse_module()


def printed(module: ModuleOp) -> str:
    out = StringIO()
    Printer(stream=out).print_op(module)
    return out.getvalue()


def run_pass(pass_: ModulePass, text: str) -> tuple[ModuleOp, ModuleOp]:
    """The module parsed from ``text``, and a copy after ``pass_`` (verified)."""
    ctx = make_context()
    before = parse(text, ctx)
    after = before.clone()
    pass_.apply(ctx, after)
    after.verify()
    return before, after


def assert_pass_output(pass_: ModulePass, text: str, expected: str) -> None:
    """``pass_`` turns ``text`` into ``expected`` (both compared as printed IR)."""
    _, after = run_pass(pass_, text)
    assert printed(after).strip() == printed(parse(expected)).strip()


def structured_outputs(
    module: ModuleOp, inputs: list[object], name: str = "f"
) -> tuple[object, ...]:
    """What ``@name`` returns as the caller sees it: its returned values rebuilt through
    its ``kiln.outputs`` structure (a returned root seen through ``alias`` views)."""
    (func,) = [op for op in module.ops if isinstance(op, FuncOp) and op.sym_name.data == name]
    structure = func.attributes["kiln.outputs"]
    assert isinstance(structure, StringAttr)
    return rebuild_structure(structure.data, run_function(module, inputs, name))


def random_args(func: FuncOp, generator: torch.Generator) -> list[object]:
    """Random non-zero tensors for a function whose arguments all have static shapes."""
    args: list[object] = []
    for ty in func.function_type.inputs.data:
        assert isinstance(ty, TensorType), f"give explicit arguments for {ty}"
        dtype = type_to_dtype(ty.element_type)
        shape = ty.get_shape()
        if dtype.is_floating_point:
            value = torch.randn(shape, generator=generator).to(dtype)
        else:
            value = torch.randint(1, 10, shape, generator=generator).to(dtype)
        args.append(value)
    return args


def _aliased_inputs(output: torch.Tensor, args: Sequence[object]) -> list[int]:
    storage = output.untyped_storage().data_ptr()
    return [
        i
        for i, arg in enumerate(args)
        if isinstance(arg, torch.Tensor) and arg.untyped_storage().data_ptr() == storage
    ]


def _strides(t: torch.Tensor) -> list[int]:
    return [s for s, n in zip(t.stride(), t.shape, strict=True) if n > 1]


def assert_same_semantics(
    before: ModuleOp,
    after: ModuleOp,
    args: dict[str, ArgsFactory] | None = None,
    seed: int = 0,
) -> None:
    """Every function computes the same outputs before and after (see the module doc)."""
    args = args or {}
    generator = torch.Generator().manual_seed(seed)
    for func in before.ops:
        if not isinstance(func, FuncOp):
            continue
        name = func.sym_name.data
        inputs = args[name]() if name in args else random_args(func, generator)
        torch.manual_seed(seed)
        expected = run_function(before, inputs, name)
        torch.manual_seed(seed)
        actual = run_function(after, inputs, name)
        assert len(actual) == len(expected), name
        for position, (want, got) in enumerate(zip(expected, actual, strict=True)):
            where = f"@{name} result {position}"
            if not isinstance(want, torch.Tensor):
                assert got == want, where
                continue
            assert isinstance(got, torch.Tensor), where
            torch.testing.assert_close(got, want, msg=where)
            assert _strides(got) == _strides(want), f"{where}: strides"
            assert _aliased_inputs(got, inputs) == _aliased_inputs(want, inputs), (
                f"{where}: aliasing"
            )
