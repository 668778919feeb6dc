"""What passes ask an aten op (``kiln.dialects.aten.traits``): derived from torch's tags
and schemas, the same for generated ops and for ``aten.generic`` ones."""

from __future__ import annotations

import pytest
import torch
from xdsl.dialects.builtin import TensorType, f32
from xdsl.ir import Block
from xdsl.traits import OpTrait

from kiln.dialects.aten import GenericOp, op_class, op_classes
from kiln.dialects.aten.traits import (
    AliasingView,
    FollowsChannelsLast,
    NondeterministicSeeded,
    Pointwise,
    ViewLike,
    has_aten_trait,
    overload_traits,
)

SEMANTIC = (Pointwise, NondeterministicSeeded, AliasingView, ViewLike, FollowsChannelsLast)


def _semantic(traits: object) -> set[str]:
    return {type(t).__name__ for t in traits if isinstance(t, SEMANTIC)}  # pyright: ignore


def test_generated_ops_carry_the_traits_torch_implies() -> None:
    """Each generated class has the traits derived from the installed torch's own tags and
    schema for its overload; ``AliasingView`` is exactly torch's ``is_view``."""
    for qualified, cls in op_classes().items():
        name, _, overload = qualified.partition(".")
        torch_op = getattr(getattr(torch.ops.aten, name), overload)
        assert _semantic(cls.traits) == _semantic(overload_traits(f"aten::{qualified}")), qualified
        assert cls.has_trait(AliasingView) == torch_op.is_view, qualified
        assert cls.has_trait(Pointwise) == (torch.Tag.pointwise in torch_op.tags), qualified


@pytest.mark.parametrize(
    ("overload", "expected"),
    [
        ("aten::permute.default", {AliasingView, ViewLike}),
        ("aten::permute_copy.default", {ViewLike}),  # a functional view (view_copy tag)
        ("aten::_unsafe_view.default", {ViewLike}),
        # torch tags the inverse of a view view_copy too; it writes src into self: no view.
        ("aten::slice_scatter.default", set()),
        ("aten::mul.Tensor", {Pointwise}),
        ("aten::bernoulli.p", {NondeterministicSeeded}),
        ("aten::convolution.default", {FollowsChannelsLast}),
        ("aten::native_batch_norm.default", {FollowsChannelsLast}),
        ("aten::mm.default", set()),
        ("aten::no_such_op.default", set()),
    ],
)
def test_traits_of_an_overload(overload: str, expected: set[type[OpTrait]]) -> None:
    assert {type(t) for t in overload_traits(overload) if isinstance(t, SEMANTIC)} == expected


def test_generic_ops_answer_like_generated_ones() -> None:
    block = Block(arg_types=[TensorType(f32, [4, 8])])
    generic = GenericOp.build_generic(
        "aten::permute_copy.default",
        {"self": block.args[0], "dims": [1, 0]},
        [TensorType(f32, [8, 4])],
    )
    assert has_aten_trait(generic, ViewLike)
    assert not has_aten_trait(generic, AliasingView)
    relu = op_class("relu.default")
    assert relu is not None
    op = relu.from_args({"self": block.args[0]}, [TensorType(f32, [4, 8])])
    assert has_aten_trait(op, Pointwise)
    assert op.has_trait(Pointwise)
    assert not has_aten_trait(op, ViewLike)
