"""``cumsum`` along a short static dim lowered to a masked ``loop.reduction`` sum (no ATen
call): values and dtypes equal eager's for floats, half types, ints and bool (summed as
int64), along any dim, with NaN and inf in the row; long or symbolic dims stay ATen's."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from lower_aten_checks import capture_and_lower, check, loop_ops
from xdsl.dialects.builtin import ModuleOp

from kiln.dialects.loop import ExternOp, ReductionOp
from kiln.passes.aten_to_loop.reductions import SHORT_SCAN


def _reductions(module: ModuleOp) -> list[ReductionOp]:
    return [op for op in loop_ops(module) if isinstance(op, ReductionOp)]


def _floats(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape).to(dtype)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_float_rows_along_every_dim(dim: int) -> None:
    module = check(lambda x: torch.cumsum(x, dim) * 2, _floats(3, 5, 7))
    assert not [op for op in loop_ops(module) if isinstance(op, ExternOp)]
    (op,) = _reductions(module)
    assert op.kind.data.value == "sum"


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.randint(-50, 50, (4, 33)),
        lambda: torch.randint(-50, 50, (4, 33), dtype=torch.int32),
        lambda: torch.randn(4, 33) > 0,
    ],
    ids=["int64", "int32", "bool"],
)
def test_integers_and_bool_sum_exactly_as_int64(make: Callable[[], torch.Tensor]) -> None:
    x = make()
    got = check(lambda t: torch.cumsum(t, 1), x)
    assert not [op for op in loop_ops(got) if isinstance(op, ExternOp)]
    assert torch.cumsum(x, 1).dtype == torch.int64


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_types_accumulate_in_float(dtype: torch.dtype) -> None:
    # 100 terms of ~1: a half-precision running sum would lose the low bits ATen keeps.
    x = (torch.rand(2, 100) + 0.5).to(dtype)
    check(lambda t: torch.cumsum(t, 1), x)


def test_dtype_argument() -> None:
    x = torch.randint(-9, 9, (3, 6))
    check(lambda t: torch.cumsum(t, 1, dtype=torch.float32), x)


def test_nan_and_inf_only_reach_later_elements() -> None:
    x = _floats(2, 8)
    x[0, 3] = float("nan")
    x[1, 5] = float("inf")
    check(lambda t: torch.cumsum(t, 1), x)


def test_position_ids_of_packed_sequences() -> None:
    """transformers' ``find_packed_sequence_indices``: where positions restart."""

    def packed(position_ids: torch.Tensor) -> torch.Tensor:
        first = position_ids[:, :1] - 1
        diff = torch.diff(position_ids, prepend=first, dim=-1)
        return (diff != 1).cumsum(-1)

    positions = torch.cat([torch.arange(12), torch.arange(9), torch.arange(11)]).unsqueeze(0)
    check(packed, positions)


def test_long_or_symbolic_dims_stay_aten() -> None:
    _, _, stats = capture_and_lower(lambda x: torch.cumsum(x, 1), _floats(2, SHORT_SCAN + 1))
    assert stats.extern == {"aten::cumsum.default": 1}
    _, _, stats = capture_and_lower(lambda x: torch.cumsum(x, 1), _floats(3, 9), dynamic=True)
    assert stats.extern == {"aten::cumsum.default": 1}


@pytest.mark.parametrize("executor", ["cpp", "triton"])
def test_end_to_end_fused_with_its_neighbours(executor: str) -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x.relu(), 1).sin() + 1

    x = _floats(4, 24)
    torch._dynamo.reset()  # pyright: ignore[reportPrivateImportUsage]
    compiled = torch.compile(
        fn, backend="kiln", options={"executor": executor, "graph_cache": False, "verbose": False}
    )
    torch.testing.assert_close(compiled(x), fn(x))
