"""Accumulating scatters in the Triton backend: ``tl.atomic_add`` after a zero-fill
kernel, many duplicate indices, against eager on fresh inputs (interpreter on CPU;
``KILN_TRITON_DEVICE=cuda`` on a GPU)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch
from triton_checks import DEVICE, assert_close, check, runs_bfloat16_constants


def _index_put(x: torch.Tensor, i: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return torch.index_put(x, (i,), v * 2, accumulate=True)


def _embedding_backward(g: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
    return torch.ops.aten.embedding_dense_backward(g, i, 20, 3, False)


CASES: dict[str, tuple[Callable[..., Any], Callable[[], Sequence[torch.Tensor]]]] = {
    "index_put_f32_negative": (
        _index_put,
        lambda: (torch.randn(7, 5), torch.randint(-7, 7, (40,)), torch.randn(40, 5)),
    ),
    "index_put_i32_broadcast": (
        lambda x, i, v: torch.index_put(x, (i,), v, accumulate=True),
        lambda: (
            torch.randint(-50, 50, (6, 3), dtype=torch.int32),
            torch.randint(0, 6, (4, 5)),
            torch.randint(-50, 50, (3,), dtype=torch.int32),
        ),
    ),
    "scatter_add": (
        lambda x, i, s: x.scatter_add(1, i, s),
        lambda: (torch.randn(3, 6), torch.randint(0, 6, (3, 10)), torch.randn(3, 10)),
    ),
    "embedding_backward": (
        _embedding_backward,
        lambda: (torch.randn(2, 16, 8), torch.randint(0, 20, (2, 16))),
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_scatter(name: str) -> None:
    fn, make = CASES[name]
    compiled = check(fn, *make())
    assert "tl.atomic_add(" in compiled.program.source
    fresh = [t.to(DEVICE) for t in make()]
    (out,) = compiled.run(fresh)
    assert_close(out, fn(*[t.clone() for t in fresh]).cpu())


STORES: dict[str, tuple[Callable[..., Any], Callable[[], Sequence[torch.Tensor]]]] = {
    "scatter_value_one_per_row": (
        lambda g, t: torch.zeros(8, 12, device=t.device).scatter(1, t, -1.0) * g,
        lambda: (torch.randn(8, 1), torch.randint(0, 12, (8, 1))),
    ),
    "scatter_value_duplicates_bf16": (
        lambda x, i: x.scatter(1, i, 2.5),
        lambda: (torch.randn(3, 10).to(torch.bfloat16), torch.randint(0, 10, (3, 25))),
    ),
    "index_put_one_value_negative": (
        lambda x, i, v: torch.index_put(x, (i,), v),
        lambda: (torch.randn(7, 5), torch.randint(-7, 7, (40,)), torch.randn(())),
    ),
    "index_put_bool_mask": (
        lambda x, m, v: torch.index_put(x, (m,), v),
        lambda: (torch.randn(7, 5), torch.rand(7, 5) > 0.5, torch.randn(())),
    ),
}
"""Non-accumulating scatters kiln lowers (exact whatever the duplicates): a select, or an
i32 hit count (``tl.atomic_add`` of ints) then ``where``."""


@pytest.mark.parametrize("name", sorted(STORES))
def test_exact_store_scatter(name: str) -> None:
    fn, make = STORES[name]
    if name.endswith("_bf16") and not runs_bfloat16_constants():
        pytest.skip("this Triton's interpreter builds no bfloat16 constants (get_bf16)")
    from kiln.dialects.kernel import ExternOp

    compiled = check(fn, *make())
    assert not any(isinstance(op, ExternOp) for op in compiled.module.walk())
    fresh = [t.to(DEVICE) for t in make()]
    (out,) = compiled.run(fresh)
    assert_close(out, fn(*[t.clone() for t in fresh]).cpu())


def _sm90() -> bool:
    return (
        DEVICE.type == "cuda"
        and torch.cuda.is_available()
        and torch.cuda.get_device_capability() >= (9, 0)
    )


@pytest.mark.skipif(not _sm90(), reason="bf16 tl.atomic_add needs a GPU of sm90 or later")
def test_bf16_atomic_adds_on_sm90() -> None:
    """bf16 scatters compiled for a Hopper GPU (``kiln.device``) are atomic adds, not ATen:
    ``index_put(accumulate=True)``, ``scatter_add`` and ``index_add`` against eager at
    bf16 tolerance (few duplicates: each bf16 add rounds)."""
    import torch.utils._pytree as pytree
    from triton_checks import Compiled, capture, program_arguments, run_pipeline
    from xdsl.dialects.builtin import StringAttr

    from kiln.dialects.aten.fx import import_graph
    from kiln.dialects.kernel import ExternOp
    from kiln.targets import build_triton_program

    def fn(x: torch.Tensor, i: torch.Tensor, v: torch.Tensor) -> Any:
        rows = i.remainder(x.shape[0])
        return (
            torch.index_put(x, (i,), v, accumulate=True),
            x.scatter_add(0, rows[:, None].expand(-1, x.shape[1]), v),
            x.index_add(0, rows, v),
        )

    def make() -> list[torch.Tensor]:
        return [
            torch.randn(64, 16).to(torch.bfloat16),
            torch.randint(-64, 64, (96,)),
            torch.randn(96, 16).to(torch.bfloat16),
        ]

    captured = capture(fn, *make())
    module = import_graph(captured.gm)
    module.attributes["kiln.device"] = StringAttr(str(torch.device("cuda", 0)))
    run_pipeline(module)
    assert not any(isinstance(op, ExternOp) for op in module.walk())
    args = program_arguments(module, captured)
    expected = tuple(pytree.tree_leaves(captured.gm(*[a.clone() for a in args])))
    compiled = Compiled(build_triton_program(module), module, args, expected)
    assert "tl.atomic_add(" in compiled.program.source
    fresh = [t.to(DEVICE) for t in make()]
    outs = compiled.run(fresh)
    for out, want in zip(outs, fn(*[t.clone() for t in fresh]), strict=True):
        assert_close(out, want.cpu())


def _tied_embedding_grad(
    ids: torch.Tensor, g: torch.Tensor, a: torch.Tensor, b: torch.Tensor
) -> torch.Tensor:
    """A tied embedding's weight gradient: the LM head's product plus the scatter of the
    token gradients."""
    rows = torch.zeros(100, 16, device=g.device).index_put((ids,), g, accumulate=True)
    return a.t() @ b + rows


def test_scatter_accumulates_onto_the_product_it_is_added_to() -> None:
    from kiln.dialects.kernel.kernel_ops import KernelOp

    # 64 ids over 100 rows: repeated rows get several atomic adds onto the product.
    ids = torch.randint(0, 100, (64,))
    compiled = check(
        _tied_embedding_grad, ids, torch.randn(64, 16), torch.randn(32, 100), torch.randn(32, 16)
    )
    kernels = [op.sym_name.data for op in compiled.module.ops if isinstance(op, KernelOp)]
    assert len(kernels) == 1, kernels  # the scatter; no zero fill, no add
