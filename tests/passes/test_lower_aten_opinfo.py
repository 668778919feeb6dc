"""PyTorch's OpInfo samples as an oracle for lower-aten (see lower_aten_opinfo.py).

Every op of every family runs its first few float32, int64 and bool CPU samples
(``KILN_OPINFO_SAMPLES``, default 3) through AOTAutograd -> aten -> loop -> the loop
interpreter and must match eager. A sample kiln cannot run for a reason outside
lowering (the capture or import fails, eager raises) is skipped, never counted as
passed. Ops whose samples need ``loop.extern`` (float ``fmod``, ...) still compare.
"""

from __future__ import annotations

import os

import pytest
from lower_aten_opinfo import FAMILIES, opinfos, run_op

SAMPLES = int(os.environ.get("KILN_OPINFO_SAMPLES", "3"))

# Genuine limitations only, each with its reason. (None today.)
EXPECTED_FAILURES: dict[str, str] = {}

OPS = [(family, name) for family, names in FAMILIES.items() for name in names]


@pytest.mark.parametrize(("family", "name"), OPS, ids=[f"{f}:{n}" for f, n in OPS])
def test_opinfo_samples(family: str, name: str) -> None:
    if name not in opinfos():
        pytest.skip(f"torch has no OpInfo named {name}")
    outcome = run_op(name, SAMPLES)
    if name in EXPECTED_FAILURES:
        assert outcome.failed, f"{name} passes now: remove it from EXPECTED_FAILURES"
        pytest.xfail(EXPECTED_FAILURES[name])
    assert not outcome.failures, "\n".join(outcome.failures)
    assert outcome.passed > 0 or outcome.skipped > 0
