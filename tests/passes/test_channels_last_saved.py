"""``channels-last``'s rewrite of ``kiln.outputs`` for the results it returns NHWC."""

from __future__ import annotations

import ast

from kiln.passes.channels_last_parts.saved_nhwc import PermuteLeaves


def _wrapped(text: str, leaves: set[int]) -> str:
    tree = PermuteLeaves(leaves).visit(ast.parse(text, mode="eval"))
    return ast.unparse(ast.fix_missing_locations(tree))


def test_only_leaves_are_wrapped() -> None:
    """A returned value's index is wrapped wherever it is a leaf (inside a container, as
    a permute's or an alias's base), never the dims of a permute output-layout wrote nor
    an alias's arguments or result index."""
    text = "(0, permute(1, (1, 0)), alias('aten::split.Tensor', 2, \"{'split_size': 1}\", 1), torch.return_types.max(3, 0))"
    assert _wrapped(text, {1, 2, 3}) == (
        "(0, permute(permute(1, (0, 3, 1, 2)), (1, 0)), "
        "alias('aten::split.Tensor', permute(2, (0, 3, 1, 2)), \"{'split_size': 1}\", 1), "
        "torch.return_types.max(permute(3, (0, 3, 1, 2)), 0))"
    )
