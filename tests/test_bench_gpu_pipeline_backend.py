"""benchmarks/gpu_pipeline_backend.py: kiln's GPU pipeline on a machine without a GPU (the
program marked ``cuda:0``, kernels in Triton's interpreter). Run in a fresh process: the
module points ``kiln.compiler.gpu_device`` at ``cuda:0`` for the process that imports it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

SCRIPT = """
import json, sys
sys.path.insert(0, sys.argv[1])
import torch
import gpu_pipeline_backend
from kiln.compiler import compile_history


class Projections(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.q = torch.nn.Linear(32, 32, bias=False)
        self.k = torch.nn.Linear(32, 8, bias=False)

    def forward(self, x):
        return torch.relu(self.q(x)).sum(-1) + torch.relu(self.k(x)).sum(-1)


torch.manual_seed(0)
model = Projections().eval()
compiled = torch.compile(model, backend=gpu_pipeline_backend.kiln_as_on_a_gpu)
with torch.no_grad():
    x = torch.randn(2, 6, 32)
    error = (compiled(x) - model(x)).abs().max().item()
stats = compile_history()[-1]
print(json.dumps({"error": error, "executor": stats.executor, "externs": dict(stats.externs)}))
"""


def test_the_gpu_pipeline_runs_on_the_cpu() -> None:
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(REPO / "benchmarks")],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["executor"] == "triton"
    assert result["error"] < 1e-5
    # merge-products runs only in GPU programs: the two projections became one product.
    assert result["externs"] == {"aten::mm.default": 1}
