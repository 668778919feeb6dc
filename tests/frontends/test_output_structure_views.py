"""Views a compiled graph returns (``alias(...)`` in ``kiln.outputs``): replayed through
their view ops once per layout of the value they view, then as one ``as_strided`` of it,
the same view of the same memory."""

from __future__ import annotations

import torch
from recorded_ops import RecordedOps

from kiln.output_structure import is_flat, structure_builder

# A training forward's saved query: view -> split -> view -> permute of a projection.
QUERY = (
    "(alias('aten::permute.default', alias('aten::view.default', "
    "alias('aten::split_with_sizes.default', alias('aten::view.default', 0, "
    "\"{'size': [1, 4, 12]}\"), \"{'split_sizes': [4, 4, 4], 'dim': 2}\", 1), "
    "\"{'size': [1, 4, 2, 2]}\"), \"{'dims': [0, 2, 1, 3]}\"), 0)"
)


def _eager(x: torch.Tensor) -> torch.Tensor:
    return x.view(1, 4, 12).split([4, 4, 4], 2)[1].view(1, 4, 2, 2).permute(0, 2, 1, 3)


def _same_view(got: torch.Tensor, want: torch.Tensor) -> None:
    assert got.shape == want.shape
    assert got.stride() == want.stride()
    assert got.storage_offset() == want.storage_offset()
    assert got.untyped_storage().data_ptr() == want.untyped_storage().data_ptr()
    torch.testing.assert_close(got, want)


def test_a_view_chain_is_one_as_strided_after_the_first_call() -> None:
    build = structure_builder(QUERY)
    first = torch.randn(4, 12)
    view, value = build([first])
    assert value is first
    _same_view(view, _eager(first))
    second = torch.randn(4, 12)  # a new result of the same layout
    with RecordedOps() as recorded:
        view, _ = build([second])
    assert recorded.ops == ["aten.as_strided.default"], recorded.ops  # was four view ops
    _same_view(view, _eager(second))
    view.mul_(0)  # writes through to the viewed memory, as the view ops' result would
    assert (second.view(1, 4, 12)[:, :, 4:8] == 0).all()


def test_another_layout_of_the_viewed_value_replays_the_ops() -> None:
    build = structure_builder(QUERY)
    build([torch.randn(4, 12)])
    # Same sizes, another layout and offset: the ops again (view of a transposed
    # buffer would fail; this one is a contiguous slice at an offset).
    storage = torch.randn(100)
    shifted = storage[7:55].view(4, 12)
    view, _ = build([shifted])
    _same_view(view, _eager(shifted))
    view, _ = build([shifted])
    _same_view(view, _eager(shifted))


def test_flat_structures_are_those_a_graph_runner_can_record() -> None:
    assert is_flat(QUERY)
    assert is_flat("(0, None, alias('aten::t.default', 1, '{}'), permute(2, (1, 0)))")
    assert is_flat("()")
    assert not is_flat("((0, 1), 2)")  # a container inside
    assert not is_flat("[0, 1]")
    assert not is_flat("{'a': 0}")
    assert not is_flat("0")
    assert not is_flat("(0,")  # malformed: not flat (the builder reports it)
