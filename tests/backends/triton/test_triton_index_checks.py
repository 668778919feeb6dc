"""Indirect indices outside their dimension fail the launch (``tl.device_assert``), as
eager raises and Inductor asserts, instead of reading another row or arbitrary memory."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from triton_checks import DEVICE, Compiled, check


def _gather(x: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
    return torch.gather(x, 1, i) * 2


def _embedding(w: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
    return F.embedding(i, w) + 1


def _cross_entropy(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(x, t)


def _run_and_wait(compiled: Compiled, args: list[object]) -> None:
    compiled.run(args)
    if DEVICE.type == "cuda":  # a device-side assert surfaces at the next sync
        torch.cuda.synchronize()


CASES = [
    (_gather, torch.randn(4, 6), torch.tensor([[0], [5], [1], [2]]), [[0], [6], [1], [2]]),
    (_gather, torch.randn(4, 6), torch.tensor([[0], [5], [1], [2]]), [[0], [-1], [1], [2]]),
    (_embedding, torch.randn(10, 8), torch.tensor([1, 9, 0]), [1, 10, 0]),
    (_cross_entropy, torch.randn(4, 5), torch.tensor([1, 4, 3, 0]), [1, 5, 4, 0]),
    (_cross_entropy, torch.randn(4, 5), torch.tensor([1, 4, 3, 0]), [1, -1, 4, 0]),
]


IDS = ["gather-6", "gather-neg", "embedding-10", "cross_entropy-5", "cross_entropy-neg"]


@pytest.fixture(scope="module")
def child_results() -> list[subprocess.CompletedProcess[str]]:
    """On a GPU, each case in its own child process, all at once: a device-side assert
    poisons the process's CUDA context (every later test would fail), and one child at a
    time costs a cold start each."""
    if DEVICE.type != "cuda":
        return []
    here = Path(__file__).parent
    children = []
    for k in range(len(CASES)):
        script = (
            f"import sys; sys.path[:0] = [{str(here)!r}, {str(here.parents[1])!r}]\n"
            "import torch, test_triton_index_checks as t\n"
            f"fn, x, good, bad = t.CASES[{k}]\n"
            "compiled = t.check(fn, x, good)\n"
            "assert 'tl.device_assert(' in compiled.program.source\n"
            "args = list(compiled.args); args[1] = torch.tensor(bad, device=t.DEVICE)\n"
            "t._run_and_wait(compiled, args)\n"
        )
        children.append(
            subprocess.Popen(
                [sys.executable, "-c", script],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    results = []
    for child in children:
        out, err = child.communicate(timeout=300)
        results.append(subprocess.CompletedProcess(child.args, child.returncode, out, err))
    return results


@pytest.mark.parametrize("k", range(len(CASES)), ids=IDS)
def test_out_of_range_index_fails_the_launch(
    k: int, child_results: list[subprocess.CompletedProcess[str]]
) -> None:
    if DEVICE.type == "cuda":
        result = child_results[k]
        assert result.returncode != 0, result.stdout
        assert "device-side assert" in result.stderr or "Assertion" in result.stderr, result.stderr[
            -2000:
        ]
        return
    fn, x, good, bad = CASES[k]
    compiled = check(fn, x, good)  # pyright: ignore[reportArgumentType]
    assert "tl.device_assert(" in compiled.program.source
    args = list(compiled.args)
    args[1] = torch.tensor(bad, device=DEVICE)
    # IndexOutOfBounds in the interpreter; a device-side assert (RuntimeError) on a GPU.
    with pytest.raises(RuntimeError):
        _run_and_wait(compiled, args)


# Outputs that alias each other share storage through the Triton executor too (the
# structure that rebuilds them is the same for every executor; issue 20 item 3).


def test_aliasing_outputs_share_storage_with_triton() -> None:
    sys.path.insert(0, str(Path(__file__).parents[2]))
    from test_output_aliasing import CASES, check_aliasing_like_eager

    for fn in CASES:
        torch._dynamo.reset()
        check_aliasing_like_eager(fn, "triton", DEVICE.type)
