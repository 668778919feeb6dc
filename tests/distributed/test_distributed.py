"""kiln under torch.distributed, gloo on CPU, 2 and 4 ranks: results equal eager's.
``KILN_DIST_BACKEND=nccl KILN_DIST_WORLDS=N`` runs the same scenarios with NCCL, one GPU
per rank (N = 1 on a one-GPU machine: the NCCL code paths, no communication between GPUs).

Each world size starts its ranks once for the module (dist_launch.py, a hard timeout so a
hang fails) and runs its scenarios of dist_worker.py in one process group; the tests below
check each scenario's report. Losses are compared step by step over several SGD steps;
kiln's float32 kernels sum in other orders than ATen's, hence the small tolerances.

The smallest world runs every scenario; larger ones (four ranks in CI) only those whose
compiled graphs depend on the world size (the functional collectives' shapes, the
tensor-parallel shards). DDP and FSDP2 run on the smallest world only: the graphs kiln compiles for them are the same for any world size (DDP's
gradient all-reduces and FSDP2's all-gathers and reduce-scatters run in eager hooks
outside the graphs, and FSDP2's compiled layers see unsharded parameters), so four ranks
would compile the same graphs again, on a CI machine with two cores.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from dist_launch import run_ranks

WORLDS = [int(n) for n in os.environ.get("KILN_DIST_WORLDS", "2,4").split(",")]
"""Rank counts; with ``KILN_DIST_BACKEND=nccl`` one GPU per rank (``KILN_DIST_WORLDS=1``
on a one-GPU machine)."""
SCENARIOS = ["functional", "ddp", "fsdp", "tp"]
WORLD_DEPENDENT = ["functional", "tp"]
"""The scenarios whose compiled graphs change with the world size."""


def scenarios(world: int) -> list[str]:
    """The scenarios ``world`` ranks run (see the module docstring)."""
    return SCENARIOS if world == min(WORLDS) else WORLD_DEPENDENT


RTOL = 1e-4
ATOL = 1e-5

Reports = Callable[[int], list[dict[str, Any]]]


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> Reports:
    """Each rank's report for a world size (its ranks run once, on first use)."""
    runs: dict[int, list[dict[str, Any]]] = {}

    def run(world: int) -> list[dict[str, Any]]:
        if world not in runs:
            workdir: Path = tmp_path_factory.mktemp(f"dist{world}")
            runs[world] = run_ranks(world, scenarios(world), workdir)
        return runs[world]

    return run


def _close(got: list[float], want: list[float]) -> bool:
    return len(got) == len(want) and all(
        math.isclose(a, b, rel_tol=RTOL, abs_tol=ATOL) for a, b in zip(got, want, strict=True)
    )


@pytest.mark.parametrize("world", WORLDS, ids=lambda n: f"{n}ranks")
def test_functional_collectives_fullgraph(reports: Reports, world: int) -> None:
    for rank, report in enumerate(reports(world)):
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


@pytest.mark.parametrize(
    ("world", "scenario"),
    [(w, s) for w in WORLDS for s in scenarios(w) if s != "functional"],
    ids=lambda v: f"{v}ranks" if isinstance(v, int) else str(v),
)
def test_training_matches_eager(reports: Reports, world: int, scenario: str) -> None:
    for rank, report in enumerate(reports(world)):
        result = report[scenario]
        assert _close(result["losses"], result["expected"]), (rank, result)
        assert result["weights"] <= 1e-4, (rank, result["weights"])
        assert result["graphs"], "kiln compiled nothing"


def test_ddp_graph_is_split_at_buckets(reports: Reports) -> None:
    graphs = reports(min(WORLDS))[0]["ddp"]["graphs"]
    assert len([g for g in graphs if g.startswith("forward")]) > 1, graphs


@pytest.mark.parametrize("world", WORLDS, ids=lambda n: f"{n}ranks")
def test_tensor_parallel_collectives_are_compiled(reports: Reports, world: int) -> None:
    if world == 1:
        pytest.skip("one rank (NCCL on a one-GPU machine): DTensor needs no all-reduce")
    assert "_c10d_functional::all_reduce.default" in reports(world)[0]["tp"]["collectives"]
    assert "_c10d_functional::wait_tensor.default" in reports(world)[0]["tp"]["collectives"]
