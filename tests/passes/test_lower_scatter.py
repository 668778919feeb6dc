"""lower-aten of accumulating scatters: ``index_put(accumulate=True)``, ``scatter_add``,
``scatter_reduce(sum)`` and the embedding gradient become ``loop.scatter`` (plus ``self``
when it is not zeros); deterministic mode and dtypes without atomics stay ATen."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
import sympy
import torch
from lower_aten_checks import assert_same, function, interpret, lower_module
from xdsl.dialects.builtin import StringAttr

from kiln.dialects.loop import ExternOp, PointwiseOp, ScatterOp
from kiln.frontends.capture import capture_make_fx
from kiln.frontends.fx import import_graph
from kiln.registry import default_registry


def lowered(fn: Callable[..., Any], inputs: Sequence[Any], device: str | None = None) -> Any:
    module = import_graph(capture_make_fx(fn, *inputs).gm)
    if device is not None:
        module.attributes["kiln.device"] = StringAttr(device)
    registry = default_registry()
    ctx = registry.make_context()
    for name in ("decompose", "canonicalize", "cse", "dce"):
        registry.get_pass(name)().apply(ctx, module)
    return lower_module(module)


def ops(module: Any) -> list[str]:
    return [op.name for op in function(module).body.block.ops if op.name.startswith("loop.")]


def check(fn: Callable[..., Any], make: Callable[[], Sequence[Any]]) -> Any:
    """Lower ``fn`` and compare the loop interpreter with eager on fresh inputs."""
    module = lowered(fn, make())
    for _ in range(2):
        inputs = list(make())
        assert_same(interpret(module, inputs), fn(*inputs))
    return module


def _rows(n: int, size: int) -> torch.Tensor:
    """Indices with many duplicates and some negative ones (counted from the end)."""
    return torch.randint(-size, size, (n,))


def test_index_put_accumulate_is_one_scatter_plus_self() -> None:
    module = check(
        lambda x, i, v: torch.index_put(x, (i,), v, accumulate=True),
        lambda: (torch.randn(5, 3), _rows(12, 5), torch.randn(12, 3)),
    )
    assert ops(module) == ["loop.scatter", "loop.pointwise"]
    (scatter,) = [o for o in function(module).body.block.ops if isinstance(o, ScatterOp)]
    assert scatter.index.text == "d1 + 3*i0"
    assert [s.text for s in scatter.sizes.data] == ["12", "3"]
    assert [s.text for s in scatter.out_sizes.data] == ["5", "3"]


def test_index_put_two_index_tensors_broadcast_values() -> None:
    check(
        lambda x, i, j, v: torch.index_put(x, (i, j), v, accumulate=True),
        lambda: (
            torch.randn(4, 6, 3),
            torch.randint(-4, 4, (5, 1)),
            torch.randint(0, 6, (1, 7)),
            torch.randn(3),
        ),
    )


def test_index_put_non_adjacent_indices() -> None:
    check(
        lambda x, i, j, v: torch.ops.aten.index_put.default(x, [i, None, j], v, True),
        lambda: (torch.randn(4, 2, 6), _rows(9, 4), torch.randint(0, 6, (9,)), torch.randn(9, 2)),
    )


def test_integer_index_put() -> None:
    module = check(
        lambda x, i, v: torch.index_put(x, (i,), v, accumulate=True),
        lambda: (torch.randint(-9, 9, (6,)), _rows(20, 6), torch.randint(-9, 9, (20,))),
    )
    assert "loop.scatter" in ops(module)


def test_scatter_add_and_scatter_reduce_sum() -> None:
    def fn(x: torch.Tensor, i: torch.Tensor, s: torch.Tensor) -> Any:
        return x.scatter_add(1, i, s), x.scatter_reduce(0, i % 4, s, "sum")

    module = check(fn, lambda: (torch.randn(4, 6), torch.randint(0, 6, (3, 5)), torch.randn(3, 5)))
    assert ops(module).count("loop.scatter") == 2


def test_embedding_gradient_needs_no_add() -> None:
    """``embedding_dense_backward`` decomposes to an index_put into ``new_zeros``: the
    scatter's own zero buffer is the result."""

    def fn(g: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
        return torch.ops.aten.embedding_dense_backward(g, i, 10, 3, False)

    module = lowered(fn, (torch.randn(2, 7, 4), torch.randint(0, 10, (2, 7))))
    assert "loop.extern" not in ops(module)
    assert ops(module).count("loop.scatter") == 1
    for _ in range(2):
        g, i = torch.randn(2, 7, 4), torch.randint(0, 10, (2, 7))
        assert_same(interpret(module, [g, i]), fn(g, i))


def test_out_of_range_index_raises_like_eager() -> None:
    fn = lambda x, i, v: torch.index_put(x, (i,), v, accumulate=True)  # noqa: E731
    module = lowered(fn, (torch.randn(5, 3), _rows(4, 5), torch.randn(4, 3)))
    bad = torch.tensor([0, 5, 1, 2])
    with pytest.raises(IndexError):
        fn(torch.randn(5, 3), bad, torch.randn(4, 3))
    with pytest.raises(IndexError, match="out of bounds"):
        interpret(module, [torch.randn(5, 3), bad, torch.randn(4, 3)])


@pytest.mark.parametrize(
    ("dtype", "device"),
    [(torch.bool, None), (torch.bfloat16, None), (torch.float16, None), (torch.int64, "cuda:0")],
)
def test_dtypes_without_atomics_stay_aten(dtype: torch.dtype, device: str | None) -> None:
    fn = lambda x, i, v: torch.index_put(x, (i,), v, accumulate=True)  # noqa: E731
    x = torch.ones(5, 3).to(dtype)
    module = lowered(fn, (x, _rows(4, 5), x[:4]), device)
    assert "loop.scatter" not in ops(module)
    assert any(isinstance(o, ExternOp) for o in function(module).body.block.ops)


def test_deterministic_mode_stays_aten() -> None:
    fn = lambda x, i, v: torch.index_put(x, (i,), v, accumulate=True)  # noqa: E731
    inputs = (torch.randn(5, 3), _rows(4, 5), torch.randn(4, 3))
    torch.use_deterministic_algorithms(True)
    try:
        module = lowered(fn, inputs)
    finally:
        torch.use_deterministic_algorithms(False)
    assert ops(module) == ["loop.extern"]


def test_plain_index_put_is_not_a_scatter() -> None:
    fn = lambda x, i, v: torch.index_put(x, (i,), v)  # noqa: E731
    module = lowered(fn, (torch.randn(5, 3), torch.arange(4), torch.randn(4, 3)))
    assert "loop.scatter" not in ops(module)


@pytest.mark.parametrize(("make", "zeros"), [(torch.zeros, True), (torch.ones, False)])
def test_only_a_constant_zero_buffer_counts_as_zeros(make: Callable[..., Any], zeros: bool) -> None:
    from kiln.passes.aten_to_loop.scatter import is_zeros
    from kiln.passes.aten_to_loop.tensors import TensorRef

    module = lowered(lambda: make(3, 2), ())
    op = next(o for o in function(module).body.block.ops if isinstance(o, PointwiseOp))
    sizes = [sympy.Integer(3), sympy.Integer(2)]
    assert is_zeros(TensorRef.of_buffer(op.result, sizes)) is zeros


def test_fuse_keeps_readers_of_the_scattered_buffer_out(capsys: pytest.CaptureFixture[str]) -> None:
    """Producers of the values fuse into the scatter's kernel; a consumer of its buffer
    (here ``self + acc``, then relu) never does (a read-after-atomic hazard), and the
    program zero-fills the buffer with a launch of its own first."""
    from kiln.dialects.kernel.interpreter import run_program
    from kiln.dialects.kernel.kernel_ops import KernelOp
    from kiln.dialects.kernel.program_ops import LaunchOp
    from kiln.passes.fuse import FusePass

    def fn(x: torch.Tensor, i: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return torch.index_put(x, (i,), v * 3 - 1, accumulate=True).relu()

    make = lambda: (torch.randn(5, 3), _rows(12, 5), torch.randn(12, 3))  # noqa: E731
    module = lowered(fn, make())
    registry = default_registry()
    ctx = registry.make_context()
    FusePass(report=True).apply(ctx, module)
    for name in ("tile", "buffer-reuse"):
        registry.get_pass(name)().apply(ctx, module)
    module.verify()
    assert "which a scatter accumulates into (atomic adds)" in capsys.readouterr().err
    kernels = {k.sym_name.data: k for k in module.walk() if isinstance(k, KernelOp)}
    launched = [
        kernels[op.kernel.string_value()] for op in module.walk() if isinstance(op, LaunchOp)
    ]
    assert len(launched) == 3  # zero fill, scatter (with v * 3 - 1), self + acc and relu
    fill, scatter, epilogue = launched
    assert [n.name for n in fill.nodes()] == ["loop.pointwise"]
    assert any(isinstance(n, ScatterOp) for n in scatter.nodes())
    assert not any(isinstance(n, ScatterOp) for n in epilogue.nodes())
    for _ in range(2):
        inputs = list(make())
        (out,), _ = run_program(module, inputs)
        assert_same(out, fn(*inputs))
