"""One gloo rank of the distributed tests (started by dist_launch.py, like ``torchrun`` would).

Each scenario runs the same program eagerly and compiled by kiln on identical inputs and
parameters, and reports what the test compares: outputs, losses per optimizer step, and
the collectives kiln compiled. Scenarios:

``functional``  functional collectives (all_reduce, all_gather_into_tensor,
                reduce_scatter_tensor, all_to_all_single, broadcast, the in-place
                ``dist.all_reduce``) compiled ``fullgraph=True``
``ddp``         ``torch.compile`` over a DDP module with two buckets (Dynamo's DDPOptimizer
                splits the graph at bucket boundaries), SGD steps
``fsdp``        FSDP2 (``fully_shard`` per layer and the root), the module compiled, SGD steps
``tp``          a tensor-parallel MLP (ColwiseParallel, RowwiseParallel DTensors), compiled,
                SGD steps
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

STEPS = 3
BACKEND = os.environ.get("KILN_DIST_BACKEND", "gloo")
"""``gloo`` (CPU tensors) or ``nccl`` (each rank on GPU ``LOCAL_RANK``)."""
DEVICE = torch.device("cpu")
"""Where each rank's tensors live; set in :func:`main`."""


def kiln_backend() -> Callable[..., Any]:
    from kiln.frontends.dynamo import kiln_backend as backend

    return backend


def compiled(fn: Any, **kwargs: Any) -> Any:
    torch._dynamo.reset()  # pyright: ignore[reportPrivateImportUsage]
    return torch.compile(fn, backend=kiln_backend(), options={"verbose": False}, **kwargs)


def kiln_collectives() -> list[str]:
    """The collectives (and waits) in the graphs kiln compiled since the last reset."""
    from kiln.compiler import compile_history

    return sorted({name for stats in compile_history() for name in stats.externs if "c10d" in name})


def graphs_compiled() -> list[str]:
    from kiln.compiler import compile_history

    return [stats.name for stats in compile_history()]


def reset_history() -> None:
    from kiln.compiler import reset_compile_history

    reset_compile_history()


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.detach(), b.detach()
    if a.shape != b.shape or a.dtype != b.dtype:
        return float("inf")
    return float((a.double() - b.double()).abs().max()) if a.numel() else 0.0


# -- functional collectives -------------------------------------------------------------


def functional(rank: int, world: int) -> dict[str, Any]:
    import torch.distributed._functional_collectives as funcol

    group = dist.group.WORLD
    assert group is not None

    def program(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
        h = x @ w
        reduced = funcol.all_reduce(h, "sum", group)
        independent = torch.tanh(x).sum(0)  # overlaps the all-reduce once reordered
        gathered = funcol.all_gather_tensor(x, 0, group)
        scattered = funcol.reduce_scatter_tensor(h, "sum", 0, group)
        exchanged = funcol.all_to_all_single(x * 2, None, None, group)
        broadcast = funcol.broadcast(x + 1, 0, group)
        return (
            reduced * 2 + 1,
            independent,
            gathered.sum(0),
            scattered,
            exchanged + 1,
            broadcast,
        )

    def in_place(x: torch.Tensor) -> torch.Tensor:
        y = x * 3
        dist.all_reduce(y)  # Dynamo traces it as a functional all_reduce and a copy back
        return y + 1

    generator = torch.Generator().manual_seed(100 + rank)
    x = torch.randn(2 * world, 8, generator=generator).to(DEVICE)
    w = torch.randn(8, 8, generator=generator).to(DEVICE)
    reset_history()
    eager = [t.wait() if hasattr(t, "wait") else t for t in program(x, w)]
    got = compiled(program, fullgraph=True)(x, w)
    diffs = [max_diff(a, b) for a, b in zip(got, eager, strict=True)]
    eager_in_place = in_place(x)
    got_in_place = compiled(in_place, fullgraph=True)(x)
    diffs.append(max_diff(got_in_place, eager_in_place))
    return {"diffs": diffs, "collectives": kiln_collectives(), "graphs": graphs_compiled()}


# -- training ----------------------------------------------------------------------------


class MLP(nn.Module):
    def __init__(self, width: int = 16, hidden: int = 32, out: int = 4) -> None:
        super().__init__()
        self.fc1 = nn.Linear(width, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


class TwoLayers(nn.Module):
    """The tensor-parallel MLP: fc1 split by columns, fc2 by rows (one all-reduce)."""

    def __init__(self, width: int, hidden: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(width, hidden)
        self.fc2 = nn.Linear(hidden, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


def batches(seed: int, width: int = 16, out: int = 4) -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(seed)
    return [
        (
            torch.randn(8, width, generator=generator).to(DEVICE),
            torch.randn(8, out, generator=generator).to(DEVICE),
        )
        for _ in range(STEPS)
    ]


def train(model: nn.Module, run: Any, data: list[tuple[torch.Tensor, torch.Tensor]]) -> list[float]:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    losses: list[float] = []
    for x, y in data:
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(run(x), y)
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    return losses


def ddp(rank: int, world: int) -> dict[str, Any]:
    from torch.nn.parallel import DistributedDataParallel

    torch.manual_seed(0)
    # 1.1 MB of parameters in 1 MB buckets (the least DDPOptimizer allows: its first
    # bucket is 1 MB): two buckets, so Dynamo splits the graph in two.
    model = MLP(16, 512, 4).to(DEVICE)
    reference = copy.deepcopy(model)
    data = batches(200 + rank)  # data parallel: each rank its own batch
    eager = DistributedDataParallel(reference, bucket_cap_mb=1)
    expected = train(reference, eager, data)
    module = DistributedDataParallel(model, bucket_cap_mb=1)
    reset_history()
    losses = train(model, compiled(module), data)
    weights = max(
        max_diff(a, b) for a, b in zip(model.parameters(), reference.parameters(), strict=True)
    )
    return {"losses": losses, "expected": expected, "weights": weights, "graphs": graphs_compiled()}


def fsdp(rank: int, world: int) -> dict[str, Any]:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh(DEVICE.type, (world,))
    torch.manual_seed(0)
    model = MLP().to(DEVICE)
    reference = copy.deepcopy(model)
    data = batches(300 + rank)
    for m in (model, reference):
        for layer in (m.fc1, m.fc2, m.fc3):
            fully_shard(layer, mesh=mesh)
        fully_shard(m, mesh=mesh)
    expected = train(reference, reference, data)
    reset_history()
    losses = train(model, compiled(model), data)
    weights = max(
        max_diff(a.full_tensor(), b.full_tensor())  # pyright: ignore[reportAttributeAccessIssue]
        for a, b in zip(model.parameters(), reference.parameters(), strict=True)
    )
    return {"losses": losses, "expected": expected, "weights": weights, "graphs": graphs_compiled()}


def tp(rank: int, world: int) -> dict[str, Any]:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    mesh = init_device_mesh(DEVICE.type, (world,))
    torch.manual_seed(0)
    model = TwoLayers(16, 8 * world).to(DEVICE)
    reference = copy.deepcopy(model)
    plan = {"fc1": ColwiseParallel(), "fc2": RowwiseParallel()}
    for m in (model, reference):
        parallelize_module(m, mesh, plan)
    data = batches(400, 16, 16)  # the same batch on every rank
    expected = train(reference, reference, data)
    reset_history()
    losses = train(model, compiled(model), data)
    weights = max(
        max_diff(a.full_tensor(), b.full_tensor())  # pyright: ignore[reportAttributeAccessIssue]
        for a, b in zip(model.parameters(), reference.parameters(), strict=True)
    )
    return {
        "losses": losses,
        "expected": expected,
        "weights": weights,
        "collectives": kiln_collectives(),
        "graphs": graphs_compiled(),
    }


SCENARIOS: dict[str, Callable[[int, int], dict[str, Any]]] = {
    "functional": functional,
    "ddp": ddp,
    "fsdp": fsdp,
    "tp": tp,
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--init", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--scenarios", required=True)
    args = parser.parse_args()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.set_num_threads(1)
    global DEVICE
    if BACKEND == "nccl":
        DEVICE = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)))
        torch.cuda.set_device(DEVICE)
    dist.init_process_group(
        BACKEND, init_method=args.init, rank=rank, world_size=world, timeout=timedelta(seconds=300)
    )
    results: dict[str, Any] = {}
    try:
        for name in args.scenarios.split(","):
            start = time.perf_counter()
            results[name] = SCENARIOS[name](rank, world)
            results[name]["seconds"] = time.perf_counter() - start  # where CI time goes
            dist.barrier()
    except Exception:
        # The other ranks may now wait in a collective forever: report and stop, the
        # launcher kills them.
        traceback.print_exc()
        sys.stdout.flush()
        os._exit(1)
    with open(args.out, "w") as out:
        json.dump(results, out)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
