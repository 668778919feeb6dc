"""kiln.gc_tuning: the collector's threshold is raised while compiling and restored after."""

from __future__ import annotations

import gc

import torch

import kiln
from kiln.gc_tuning import YOUNG_THRESHOLD, fewer_collections


def test_threshold_raised_then_restored() -> None:
    before = gc.get_threshold()
    with fewer_collections():
        assert gc.get_threshold() == (max(before[0], YOUNG_THRESHOLD), *before[1:])
    assert gc.get_threshold() == before


def test_a_users_higher_threshold_is_kept() -> None:
    before = gc.get_threshold()
    gc.set_threshold(10 * YOUNG_THRESHOLD, *before[1:])
    try:
        with fewer_collections():
            assert gc.get_threshold()[0] == 10 * YOUNG_THRESHOLD
    finally:
        gc.set_threshold(*before)


def test_compile_leaves_the_collector_as_it_was() -> None:
    before = gc.get_threshold()
    x = torch.randn(5, 3)
    torch.testing.assert_close(kiln.compile(torch.sigmoid, verbose=False)(x), torch.sigmoid(x))
    assert gc.get_threshold() == before
