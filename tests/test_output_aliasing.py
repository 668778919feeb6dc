"""Outputs that alias each other share storage, as in eager (issue 20 item 3).

``y = x + 1; return y, y.view(-1)``: writing ``y`` in place after the call must change
the view too; kiln used to return the view as a separate copy.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import kiln


def _view_of_output(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    y = x + 1
    return y, y.view(-1)


def _views_of_intermediate(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    y = x + 1
    return y.t(), y.view(-1)


def _chain_and_select(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    y = x.t() * 2  # eager strides: transposed
    return y, y[1:], y.transpose(0, 1)[0]


def _pieces_of_a_split(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # GPT-2's attention: q, k, v are pieces of one split, each viewed again. The chain
    # must say which piece (the H200 dashboard's hf_gpt2 training step crashed on it).
    a, b, c = (x + 1).split([1, 2, 1], dim=1)
    return a.t(), b.t(), c.view(-1)


def _equal_outputs_of_two_nodes(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # cse merges the two sums; eager returns two tensors (found by program-batch).
    return x.sum(0, keepdim=True), x.sum(0, keepdim=True)


def _one_node_returned_twice(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    y = x + 1
    return y, y


def _channels_last_of_a_channels_last_view(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # (3, 1, 1, 4) with strides (4, 4, 4, 1) is channels-last contiguous already: eager's
    # contiguous returns it (found by program-batch: kiln returned a copy).
    y = (x * 2).unsqueeze(1).unsqueeze(1)
    return y.contiguous(memory_format=torch.channels_last), y


def _two_equal_views_and_their_base(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # cse makes the two views one value returned twice.
    b = x * 2
    return b.unsqueeze(1), b.unsqueeze(1), b


def _a_flip_and_its_contiguous(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # The flip is one value returned twice (``contiguous`` of a contiguous tensor is the
    # tensor); lowered as an index remap of ``x``, it was materialized once per position,
    # into two buffers (found by program-batch).
    y = x.flip(1)
    return y, y.contiguous()


CASES = [
    _view_of_output,
    _views_of_intermediate,
    _chain_and_select,
    _pieces_of_a_split,
    _equal_outputs_of_two_nodes,
    _one_node_returned_twice,
    _channels_last_of_a_channels_last_view,
    _two_equal_views_and_their_base,
    _a_flip_and_its_contiguous,
]


def storage_groups(outputs: tuple[torch.Tensor, ...]) -> list[int]:
    """For each output, the index of the first output sharing its storage."""
    ptrs = [o.untyped_storage().data_ptr() for o in outputs]
    return [ptrs.index(p) for p in ptrs]


def check_aliasing_like_eager(
    fn: Callable[[torch.Tensor], tuple[torch.Tensor, ...]], executor: str, device: str = "cpu"
) -> None:
    x = torch.randn(3, 4, device=device)
    expected = fn(x)
    actual = kiln.compile(fn, verbose=False, executor=executor)(x)
    assert storage_groups(actual) == storage_groups(expected)
    for a, e in zip(actual, expected, strict=True):
        torch.testing.assert_close(a, e)
        assert (a.stride(), a.storage_offset()) == (e.stride(), e.storage_offset())
    # A write through the first output shows through every output that aliases it.
    actual[0].add_(10)
    expected[0].add_(10)
    for a, e in zip(actual, expected, strict=True):
        torch.testing.assert_close(a, e)


@pytest.mark.parametrize("executor", ["cpp", "interpret"])
@pytest.mark.parametrize("fn", CASES, ids=[f.__name__.strip("_") for f in CASES])
def test_aliasing_outputs_share_storage(
    fn: Callable[[torch.Tensor], tuple[torch.Tensor, ...]], executor: str
) -> None:
    check_aliasing_like_eager(fn, executor)


def test_single_view_output_is_computed_as_before() -> None:
    from kiln.compiler import last_compile_stats

    def fn(x: torch.Tensor) -> torch.Tensor:
        return (x * 2).view(-1)

    x = torch.randn(3, 4)
    torch.testing.assert_close(kiln.compile(fn, verbose=False)(x), fn(x))
    assert last_compile_stats().kernels == 1
    assert not last_compile_stats().externs


@pytest.mark.parametrize("pipeline", ["decompose, lower-aten, fuse", "decompose"])
def test_a_user_pipeline_without_output_layout_still_returns_aliases(pipeline: str) -> None:
    """Issue 20's own example pipeline lacks ``output-layout``: the view came back as a
    copy, so ``y.add_(10)`` left it unchanged. The driver now adds the pass."""
    x = torch.randn(2, 3)
    y, v = kiln.compile(
        _view_of_output,
        pipeline=pipeline,
        executor="cpp" if "fuse" in pipeline else "interpret",
        verbose=False,
    )(x)
    torch.testing.assert_close(y, x + 1)
    y.add_(10)
    torch.testing.assert_close(v, y.view(-1))
