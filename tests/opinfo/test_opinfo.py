"""PyTorch's OpInfo database (``op_db``) through kiln end to end, against eager.

Every OpInfo is compiled through kiln's real path (AOTAutograd's inference graph ->
:func:`kiln.compiler.compile_graph`, what ``torch.compile(backend="kiln")`` runs after
Dynamo) and executed by the C++ backend, or by the Triton backend (in Triton's
interpreter on the CPU, on the GPU with ``KILN_OPINFO_DEVICE=cuda``); see ``runner.py``
for how results are compared (values at the dtype's default tolerances, or as accurate as
eager against float64; dtype, shape, device, defined strides; metadata only for random
and ``empty``-like ops).

What runs (environment variables); results and counts are in ``docs/opinfo.md``:

* default (CI, the CPU), see ``CONFIGS``: the first sample of every op at float32 on the
  C++ backend (PyTorch's Inductor OpInfo test also runs only the first sample unless
  asked), every sample of every 32nd op, and the first sample of every 8th op (another
  offset each) at bfloat16 and float16 on the C++ backend and at float32 on the Triton
  interpreter, and the first sample of every 4th op with its gradients (``grad``: the
  sample's outputs and the gradients of its inputs that require grad, the backward
  traced into the same graph; about a minute on 2 cores). Deterministic: op_db order,
  ops supporting the dtype (forward and backward for ``grad``).
* ``KILN_OPINFO_SAMPLES=all`` (or a number): every sample (or the first N) of each op.
* ``KILN_OPINFO_FULL=1``: every op in every configuration, not the subsets.
* ``KILN_OPINFO_SHARD=i/n``: only ops ``k`` with ``k % n == i`` (0-based) in op_db order.
* ``KILN_OPINFO_DEVICE=cuda``: on the GPU: float32, bfloat16, float16 on the Triton
  backend, every op, and float32 with gradients. On the H200::

      for i in 0 1 2 3 4 5 6 7; do KILN_OPINFO_DEVICE=cuda KILN_OPINFO_SHARD=$i/8 \\
        python -m pytest tests/opinfo/test_opinfo.py -q -rxX > opinfo-$i.log 2>&1 & done; wait

  (8 processes for the machine's 16 cores; add ``KILN_OPINFO_SAMPLES=all`` for every
  sample, about 25 times the work.)

The tally per configuration (ops; samples passed, failed by category, skipped) is
printed at the end of the run.

Cost, measured on the 2-core dev machine while 4 other jobs shared it: the default
selection (929 op/dtype/backend cases, 1,383 samples) took 229 s of CPU (212 s user,
17 s sys; 19 min wall under a load of 8-10, so about 2-4 min on an idle 2-core CI).
One compiled graph per group of ``GROUP`` ops:
a group of 8 first samples costs about 1.5-3 s of CPU (AOTAutograd capture, the pass
pipeline, one g++ run) against about 1.5 s per op compiled alone. The cost of a group
grows faster than its size (57 first samples at float32 cost 20, 18.6, 24 and 33 s of CPU
in groups of 4, 8, 16 and 32 ops), hence groups of 8; every float32 sample
of every op (18,755) would cost about an hour, hence the subsets. A group that fails to
capture or compile is split per op, then per sample, to find the culprit, so ops
expected to fail are grouped apart.

Expected failures (``EXPECTED_FAILURES``) may only shrink: an entry whose op no longer
fails makes the test fail (remove the entry). Each reason says which category:
"issue 12 item N" (a kiln bug another change is fixing), "kiln: ..." (another kiln bug,
precisely), or "eager/OpInfo: ..." (not a kiln defect).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache

import pytest
import torch
from runner import TALLY, OpCase, Outcome, make_case, op_db, run_group

DEVICE = os.environ.get("KILN_OPINFO_DEVICE", "cpu")
_SAMPLES = os.environ.get("KILN_OPINFO_SAMPLES", "")
FULL = os.environ.get("KILN_OPINFO_FULL", "") not in ("", "0")
_SHARD = os.environ.get("KILN_OPINFO_SHARD", "0/1")
SHARD, SHARDS = (int(p) for p in _SHARD.split("/"))
GROUP = 8
"""Ops per compiled graph (the cheapest size measured, see the module docstring)."""
ALL = -1
"""``Config.samples``: every sample."""


@dataclass(frozen=True)
class Config:
    executor: str
    dtype: torch.dtype
    every: int = 1
    """Run every ``every``-th op (of those supporting the dtype), from ``offset``."""
    offset: int = 0
    samples: int = 1
    """The first ``samples`` samples of each op (``ALL``: every one)."""
    grad: bool = False
    """Outputs and input gradients, the backward traced into the same graph (ops whose
    OpInfo supports backward at the dtype; ``runner.make_case(grad=True)``)."""

    @property
    def name(self) -> str:
        dtype = str(self.dtype).removeprefix("torch.")
        subset = "" if self.every == 1 else f"-every{self.every}"
        count = "all" if self.samples == ALL else str(self.samples)
        return f"{self.executor}-{dtype}{'-grad' if self.grad else ''}{subset}-s{count}"

    def sample_limit(self) -> int | None:
        if _SAMPLES:
            return None if _SAMPLES == "all" else int(_SAMPLES)
        return None if self.samples == ALL else self.samples


if DEVICE == "cuda":
    CONFIGS = [
        Config("triton", torch.float32),
        Config("triton", torch.bfloat16),
        Config("triton", torch.float16),
        Config("triton", torch.float32, grad=True),
    ]
else:
    CONFIGS = [
        Config("cpp", torch.float32),
        Config("cpp", torch.float32, every=32, offset=7, samples=ALL),
        Config("cpp", torch.bfloat16, every=8, offset=1),
        Config("cpp", torch.float16, every=8, offset=3),
        Config("triton", torch.float32, every=8, offset=5),
        Config("cpp", torch.float32, every=4, offset=2, grad=True),
    ]
if FULL or _SAMPLES:  # the subsets' extra samples are then covered: one config per pair
    CONFIGS = list({(c.executor, c.dtype, c.grad): c for c in reversed(CONFIGS)}.values())[::-1]


@dataclass(frozen=True)
class XFail:
    reason: str
    samples: frozenset[int] | None = None
    """The failing sample indices (None: every sample that runs)."""


# op key, (op key, dtype name), (op key, executor) or (op key, executor, dtype name)
# -> why it fails. May only shrink.
EXPECTED_FAILURES: dict[str | tuple[str, ...], XFail] = {}


def expected_failure(key: str, config: Config) -> XFail | None:
    dtype = str(config.dtype).removeprefix("torch.")
    for k in ((key, config.executor, dtype), (key, dtype), (key, config.executor), key):
        if k in EXPECTED_FAILURES:
            return EXPECTED_FAILURES[k]
    return None


def _supported(key: str, config: Config) -> bool:
    info = op_db()[key]
    if config.grad:
        return config.dtype in info.supported_backward_dtypes(DEVICE)
    return config.dtype in info.supported_dtypes(DEVICE)


def selected(config: Config) -> list[str]:
    keys = [k for k in op_db() if _supported(k, config)]
    if not FULL:
        keys = [k for i, k in enumerate(keys) if i % config.every == config.offset]
    return [k for i, k in enumerate(keys) if i % SHARDS == SHARD]


def _groups(config: Config) -> dict[str, int]:
    """op key -> its group; ops expected to fail are grouped apart (a failing graph is
    split and recompiled per op, which would cost the passing ops their batching)."""
    keys = selected(config)
    passing = [k for k in keys if expected_failure(k, config) is None]
    failing = [k for k in keys if expected_failure(k, config) is not None]
    groups: dict[str, int] = {}
    for n, chunk in enumerate([passing[i : i + GROUP] for i in range(0, len(passing), GROUP)]):
        groups.update(dict.fromkeys(chunk, n))
    base = len(groups) and max(groups.values()) + 1
    for n, chunk in enumerate([failing[i : i + GROUP] for i in range(0, len(failing), GROUP)]):
        groups.update(dict.fromkeys(chunk, base + n))
    return groups


GROUPS = {config: _groups(config) for config in CONFIGS}


@cache
def group_outcomes(config: Config, group: int) -> dict[str, Outcome]:
    keys = [k for k, g in GROUPS[config].items() if g == group]
    cases: list[OpCase] = [
        make_case(op_db()[k], config.dtype, DEVICE, config.sample_limit(), config.grad)
        for k in keys
    ]
    return run_group(cases, config.executor)


PARAMS = [
    pytest.param(config, key, id=f"{config.name}-{key}")
    for config in CONFIGS
    for key in GROUPS[config]
]


def _sample_of(failure: str) -> int | None:
    words = failure.split(" sample ", 1)
    if len(words) < 2:
        return None
    head = words[1].split(":", 1)[0]
    return int(head) if head.isdigit() else None


@pytest.mark.parametrize(("config", "key"), PARAMS)
def test_opinfo(config: Config, key: str) -> None:
    outcome = group_outcomes(config, GROUPS[config][key])[key]
    xfail = expected_failure(key, config)
    tally = TALLY[config.name]
    tally["ops"] += 1
    tally["samples passed"] += outcome.passed
    tally["samples skipped"] += len(outcome.skipped)
    if outcome.failures:
        category = "unexpected" if xfail is None else xfail.reason.split(":")[0]
        tally[f"samples failed ({category})"] += outcome.failed
    if xfail is None:
        assert not outcome.failures, "\n".join(outcome.failures)
        if not outcome.passed:
            pytest.skip("; ".join(sorted(set(outcome.skipped)))[:500] or "no sample")
        return
    covered = [
        f for f in outcome.failures if xfail.samples is None or _sample_of(f) in xfail.samples
    ]
    unexpected = [f for f in outcome.failures if f not in covered]
    assert not unexpected, "\n".join(unexpected)
    ran_listed = xfail.samples is None or any(
        (s := _sample_of(f)) is not None and s in xfail.samples for f in outcome.failures
    )
    if not covered:
        limit = config.sample_limit()
        if xfail.samples is not None and not ran_listed and limit is not None:
            if all(s >= limit for s in xfail.samples):
                return  # its failing samples are not in this run
        pytest.fail(f"{key} passes now: remove it from EXPECTED_FAILURES ({xfail.reason})")
    pytest.xfail(xfail.reason)
