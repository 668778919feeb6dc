"""The Triton wrapper checks the size equalities of shared size symbols (issue 21; the
case is in ``tests/test_size_checks.py``)."""

from __future__ import annotations

from test_size_checks import check_sizes_traced_as_one_symbol
from triton_checks import DEVICE


def test_sizes_traced_as_one_symbol_are_checked_triton() -> None:
    check_sizes_traced_as_one_symbol("triton", DEVICE)
