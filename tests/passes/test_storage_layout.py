"""Storage-dependent ops see eager's storage layout, not kiln's (kiln.storage).

``as_strided`` & co. index a tensor's storage: after a copy that changes the layout
(``contiguous`` of a transpose, ``to(memory_format=channels_last)``, a pointwise op of a
transposed input) eager's storage order differs from the buffer kiln holds the elements
in, and the op must follow eager's.
"""

from __future__ import annotations

import pytest
import torch
from lower_aten_checks import capture_and_lower, check

from kiln.passes.lower_aten import LowerAtenError


def test_as_strided_after_contiguous_of_a_transpose() -> None:
    # The reproducer: kiln read x's storage, [[0, 1], [3, 4]].
    check(
        lambda x: torch.as_strided(x.transpose(0, 1).contiguous(), (2, 2), (3, 1)),
        torch.randn(2, 3),
    )


def test_as_strided_after_channels_last_copy() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        y = x.to(memory_format=torch.channels_last)
        return torch.as_strided(y, (2, 3, 2), (1, 2, 12), 1) * 2.0

    check(fn, torch.randn(2, 3, 2, 4))


def test_as_strided_of_a_slice_of_a_fresh_tensor() -> None:
    # The storage is the clone's: the slice's offset counts, the slice's view does not.
    def fn(x: torch.Tensor) -> torch.Tensor:
        z = x.t().contiguous()[1:]
        return torch.as_strided(z, (2, 2), (2, 1)) + torch.as_strided(z, (3,), (1,), 0)[:2]

    check(fn, torch.randn(3, 4))


def test_as_strided_of_a_pointwise_result_of_a_transposed_input() -> None:
    # Eager's mul keeps the transposed strides of its input; kiln's buffer is contiguous.
    check(lambda x: torch.as_strided(x.t() * 2.0, (4, 2), (1, 4)), torch.randn(2, 4))


def test_as_strided_of_a_transposed_graph_input() -> None:
    x = torch.randn(4, 3).t()  # strides (1, 3): kiln's wrapper copies it contiguous
    check(lambda x: torch.as_strided(x, (6,), (2,)), x)


def test_as_strided_copy_and_reshape_alias_with_strides_of_their_own() -> None:
    aten = torch.ops.aten

    def fn(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = x.t().contiguous()
        return aten.as_strided_copy(y, (3, 2), (1, 3)), aten._reshape_alias(y, (2, 3), (1, 2))

    check(fn, torch.randn(2, 3))


def test_as_strided_scatter_after_a_layout_changing_copy() -> None:
    def fn(x: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
        return torch.as_strided_scatter(x.t().contiguous(), src, (2, 2), (3, 1)) * 1.0

    check(fn, torch.randn(2, 3), torch.randn(2, 2))


def test_importer_records_the_base_and_its_layout() -> None:
    from kiln.frontends.capture import capture_make_fx
    from kiln.frontends.fx import import_graph

    gm = capture_make_fx(
        lambda x: torch.as_strided(x.t().contiguous()[1:], (2,), (2,)), torch.randn(2, 3)
    ).gm
    text = str(import_graph(gm))
    # the view (slice) is looked through to the clone that owns the storage
    assert "as_strided.default(%clone, size = [2], stride = [2], storage_offset = 2)" in text
    assert "kiln.storage = [0 : i64, 2 : i64, 1 : i64]" in text


def test_reading_storage_kiln_does_not_hold_is_an_error() -> None:
    # The input is the first row of a larger tensor: eager reads the second row too,
    # which the compiled graph never receives.
    base = torch.randn(2, 3)
    with pytest.raises(LowerAtenError, match="outside the 3 elements"):
        capture_and_lower(lambda x: torch.as_strided(x, (6,), (1,)), base[0])
