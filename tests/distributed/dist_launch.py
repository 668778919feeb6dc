"""Start N gloo ranks of ``dist_worker.py`` as separate processes, as ``torchrun`` would, and
collect what each reports; a hang or crash fails instead of blocking the test run.

Each rank is a fresh ``python tests/distributed/dist_worker.py`` process (spawned, not
forked: torch's and gloo's threads do not survive a fork) with ``RANK``/``WORLD_SIZE``
and a file rendezvous, one intra-op thread (the ranks share the machine's cores) and the
checkout first on ``PYTHONPATH``. Each writes its results as JSON; the launcher waits
for all of them up to ``timeout`` seconds, then kills the survivors.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("dist_worker.py")


class RanksFailed(AssertionError):
    """A rank crashed, or the ranks did not finish in time (the message has their logs)."""


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "<no log>"


def run_ranks(
    world_size: int, scenarios: list[str], workdir: Path, timeout: float = 600.0
) -> list[dict[str, Any]]:
    """Run ``scenarios`` on ``world_size`` ranks; each rank's results, by rank."""
    workdir = workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [str(ROOT), env.get("PYTHONPATH", "")] if p)
    env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    env["OMP_NUM_THREADS"] = "1"
    env["WORLD_SIZE"] = str(world_size)
    store = workdir / "rendezvous"
    store.unlink(missing_ok=True)
    procs: list[tuple[subprocess.Popen[bytes], Path]] = []
    for rank in range(world_size):
        log = workdir / f"rank{rank}.log"
        rank_env = {**env, "RANK": str(rank), "LOCAL_RANK": str(rank)}
        command = [
            sys.executable,
            str(WORKER),
            "--init",
            f"file://{store}",
            "--out",
            str(workdir / f"rank{rank}.json"),
            "--scenarios",
            ",".join(scenarios),
        ]
        with log.open("wb") as out:
            procs.append(
                (
                    subprocess.Popen(
                        command, env=rank_env, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT
                    ),
                    log,
                )
            )
    deadline = time.monotonic() + timeout
    try:
        while any(p.poll() is None for p, _ in procs):
            if time.monotonic() > deadline:
                raise RanksFailed(
                    f"{world_size} ranks did not finish in {timeout:.0f} s (a hang?)\n"
                    + "\n".join(
                        f"--- rank {r} ---\n{_tail(log)}" for r, (_, log) in enumerate(procs)
                    )
                )
            if any(p.poll() not in (None, 0) for p, _ in procs):
                time.sleep(1.0)  # let the others print why they stopped too
                break
            time.sleep(0.1)
    finally:
        for p, _ in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    failed = [(r, p.returncode, log) for r, (p, log) in enumerate(procs) if p.returncode != 0]
    if failed:
        raise RanksFailed(
            "\n".join(
                f"--- rank {r} exited with {code} ---\n{_tail(log)}" for r, code, log in failed
            )
        )
    return [json.loads((workdir / f"rank{r}.json").read_text()) for r in range(world_size)]


__all__ = ["RanksFailed", "run_ranks"]
