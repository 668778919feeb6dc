"""kiln under torch.distributed, gloo on CPU, 2 and 4 ranks: results equal eager's.
``KILN_DIST_BACKEND=nccl KILN_DIST_WORLDS=N`` runs the same scenarios with NCCL, one GPU
per rank (N = 1 on a one-GPU machine: the NCCL code paths, no communication between GPUs).

Each world size starts its ranks once for the module (dist_launch.py, a hard timeout so a
hang fails) and runs every scenario of dist_worker.py in one process group; the tests below
check each scenario's report. Losses are compared step by step over several SGD steps;
kiln's float32 kernels sum in other orders than ATen's, hence the small tolerances.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import pytest
from dist_launch import run_ranks

SCENARIOS = ["functional", "ddp", "fsdp", "tp"]
RTOL = 1e-4
ATOL = 1e-5


WORLDS = [int(n) for n in os.environ.get("KILN_DIST_WORLDS", "2,4").split(",")]
"""Rank counts; with ``KILN_DIST_BACKEND=nccl`` one GPU per rank (``KILN_DIST_WORLDS=1``
on a one-GPU machine)."""


@pytest.fixture(scope="module", params=WORLDS, ids=lambda n: f"{n}ranks")
def reports(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> list[dict[str, Any]]:
    world = int(request.param)
    workdir: Path = tmp_path_factory.mktemp(f"dist{world}")
    return run_ranks(world, SCENARIOS, workdir)


def _close(got: list[float], want: list[float]) -> bool:
    return len(got) == len(want) and all(
        math.isclose(a, b, rel_tol=RTOL, abs_tol=ATOL) for a, b in zip(got, want, strict=True)
    )


def test_functional_collectives_fullgraph(reports: list[dict[str, Any]]) -> None:
    for rank, report in enumerate(reports):
        result = report["functional"]
        assert all(d <= 1e-4 for d in result["diffs"]), (rank, result["diffs"])
        assert {
            "_c10d_functional::all_reduce.default",
            "_c10d_functional::all_gather_into_tensor.default",
            "_c10d_functional::reduce_scatter_tensor.default",
            "_c10d_functional::all_to_all_single.default",
            "_c10d_functional::broadcast.default",
            "_c10d_functional::wait_tensor.default",
        } <= set(result["collectives"]), result["collectives"]


@pytest.mark.parametrize("scenario", ["ddp", "fsdp", "tp"])
def test_training_matches_eager(reports: list[dict[str, Any]], scenario: str) -> None:
    for rank, report in enumerate(reports):
        result = report[scenario]
        assert _close(result["losses"], result["expected"]), (rank, result)
        assert result["weights"] <= 1e-4, (rank, result["weights"])
        assert result["graphs"], "kiln compiled nothing"


def test_ddp_graph_is_split_at_buckets(reports: list[dict[str, Any]]) -> None:
    forward = [g for g in reports[0]["ddp"]["graphs"] if g.startswith("forward")]
    assert len(forward) > 1, reports[0]["ddp"]["graphs"]


def test_tensor_parallel_collectives_are_compiled(reports: list[dict[str, Any]]) -> None:
    assert "_c10d_functional::all_reduce.default" in reports[0]["tp"]["collectives"]
    assert "_c10d_functional::wait_tensor.default" in reports[0]["tp"]["collectives"]
