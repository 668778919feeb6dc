"""``max_pool2d_with_indices`` lowered to pointwise kernels (no ATen call): values and
indices equal eager's, with padding, dilation, ceil_mode, channels-last inputs, NaN and
-inf in the window (ATen keeps the first maximum, any NaN, and the last NaN's index)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F
from lower_aten_checks import check, loop_ops, pointwise_ops

from kiln.dialects.loop import ExternOp

CASES: list[dict[str, Any]] = [
    {"kernel_size": 3, "stride": 2, "padding": 1},
    {"kernel_size": 2},
    {"kernel_size": 3, "stride": 1, "padding": 1, "dilation": 2},
    {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True},
    {"kernel_size": (2, 3), "stride": (1, 2), "padding": (1, 0)},
]


def _image(channels_last: bool, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    x = torch.randn(2, 3, 9, 11)
    x[0, 0, 0, :3] = float("nan")
    x[1, 1, 2:4, 2:4] = float("-inf")
    x[1, 2] = float("-inf")  # windows of -inf only: the index of the first valid one
    x[0, 1, 0, 0:4] = 5.0  # ties: the first maximum's index
    x = x.to(dtype)
    return x.to(memory_format=torch.channels_last) if channels_last else x


@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "nhwc"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_values_and_indices_match_eager(case: int, channels_last: bool) -> None:
    kwargs = CASES[case]

    def pool(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return F.max_pool2d(x, return_indices=True, **kwargs)

    module = check(pool, _image(channels_last))
    assert not [op for op in loop_ops(module) if isinstance(op, ExternOp)]
    assert len(pointwise_ops(module)) == 2


def test_end_to_end_with_kiln_and_half_precision() -> None:
    def net(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        values, indices = F.max_pool2d(torch.relu(x), 3, 2, 1, return_indices=True)
        return values * 2, indices

    for dtype in (torch.float32, torch.bfloat16):
        x = _image(True, dtype)
        torch._dynamo.reset()  # pyright: ignore[reportPrivateImportUsage]
        got = torch.compile(net, backend="kiln", options={"graph_cache": False})(x)
        want = net(x)
        torch.testing.assert_close(got[0], want[0], equal_nan=True)
        torch.testing.assert_close(got[1], want[1])
        assert got[0].stride() == want[0].stride()


def test_large_windows_and_integers_stay_aten() -> None:
    module = check(lambda x: F.max_pool2d(x, 8), torch.randn(1, 2, 16, 16))
    assert [op for op in loop_ops(module) if isinstance(op, ExternOp)]
    ints = torch.randint(-5, 5, (1, 2, 6, 6))
    module = check(lambda x: F.max_pool2d(x, 2), ints)
    assert [op for op in loop_ops(module) if isinstance(op, ExternOp)]


def test_on_a_gpu_only_unused_indices_are_lowered() -> None:
    # ATen's CUDA NHWC kernel starts from index 0 (its NCHW and CPU kernels from the
    # first valid position): a window of -inf only gets index 0 there, and whether eager
    # runs it depends on its input's layout. On the H200 the first-valid rule disagreed
    # with eager for a channels-last input; a GPU graph reading the indices keeps ATen.
    from lower_aten_checks import interpret, lower_module
    from xdsl.dialects.builtin import StringAttr

    from kiln.frontends.capture import capture_make_fx
    from kiln.frontends.fx import import_graph

    x = torch.randn(1, 2, 5, 5)
    x[0, 1] = float("-inf")

    def with_indices(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return F.max_pool2d(x, 3, 2, 1, return_indices=True)

    def values_only(x: torch.Tensor) -> torch.Tensor:
        return F.max_pool2d(x, 3, 2, 1) * 2

    for fn, lowered in ((with_indices, False), (values_only, True)):
        capture = capture_make_fx(fn, x)
        module = import_graph(capture.gm)
        module.attributes["kiln.device"] = StringAttr("cuda:0")
        got = interpret(lower_module(module), capture.example_inputs)
        externs = [op for op in loop_ops(module) if isinstance(op, ExternOp)]
        assert bool(externs) != lowered
        torch.testing.assert_close(got, fn(x))


@pytest.mark.parametrize("case", [0, 2, 4])
def test_symbolic_sizes_are_lowered(case: int) -> None:
    """Under ``dynamic=True`` the output sizes follow ATen's formula over the symbolic
    input sizes (it was an ATen call: ShuffleNet-v2 and ResNet's stem pooling under
    ``dynamic=True``); checked against eager at the traced size and at another."""
    kwargs = CASES[case]

    def pool(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return F.max_pool2d(x, return_indices=True, **kwargs)

    module = check(pool, _image(False), dynamic=True)
    assert not [op for op in loop_ops(module) if isinstance(op, ExternOp)]
    for shape in ((2, 3, 9, 11), (3, 3, 14, 7)):
        x = torch.randn(shape)
        torch._dynamo.reset()  # pyright: ignore[reportPrivateImportUsage]
        compiled = torch.compile(pool, backend="kiln", dynamic=True, options={"graph_cache": False})
        got, want = compiled(x), pool(x)
        torch.testing.assert_close(got[0], want[0])
        torch.testing.assert_close(got[1], want[1])


def test_symbolic_sizes_under_ceil_mode_stay_aten() -> None:
    def pool(x: torch.Tensor) -> torch.Tensor:
        return F.max_pool2d(x, 3, 2, 1, ceil_mode=True)

    module = check(pool, torch.randn(2, 3, 9, 11), dynamic=True)
    assert [op for op in loop_ops(module) if isinstance(op, ExternOp)]
