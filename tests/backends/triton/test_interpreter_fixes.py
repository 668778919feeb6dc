"""kiln's Triton runtime fixes the interpreter's bfloat16 arithmetic itself (the test
suite's conftest is not there for a user who interprets kernels on the CPU)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from triton_checks import DEVICE

HERE = Path(__file__).parent
ROOT = HERE.parents[2]


@pytest.mark.skipif(DEVICE.type == "cuda", reason="about Triton's interpreter")
def test_a_bfloat16_dot_kernel_is_right_in_a_fresh_interpreter() -> None:
    # A process without the suite's conftest: before the runtime applied the fixes, the
    # interpreter multiplied the bfloat16 bits as integers (1e10 where eager gave 3).
    script = (
        "import torch, test_triton_dot_kernels as t\n"
        "t.test_product_with_its_epilogue_in_one_kernel(torch.bfloat16, 40, 48, 24)\n"
        "print('ok')\n"
    )
    _runs_in_a_fresh_interpreter(script)


@pytest.mark.skipif(DEVICE.type == "cuda", reason="about Triton's interpreter")
def test_bfloat16_constants_are_built_and_rounded_to_nearest_even() -> None:
    # Triton 3.6 and 3.8 have no get_bf16 in the interpreter (torchvision's Swin-T, a
    # slice_scatter mask of bfloat16 constants, raised AttributeError).
    script = (
        "import torch, triton, triton.language as tl\n"
        "from triton.runtime import interpreter\n"
        "if hasattr(interpreter.InterpreterBuilder, 'get_bf16'):\n"
        "    del interpreter.InterpreterBuilder.get_bf16  # as Triton 3.6 and 3.8 have it\n"
        "from kiln.backends.triton import interpreter_fixes\n"
        "interpreter_fixes.apply()\n"
        "@triton.jit\n"
        "def fill(out):\n"
        "    i = tl.arange(0, 2)\n"
        "    tl.store(out + i, tl.where(i == 0, tl.full([], 0.1, tl.bfloat16), "
        "tl.full([], 1.0039062, tl.bfloat16)))\n"
        "out = torch.zeros(2, dtype=torch.bfloat16)\n"
        "fill[(1,)](out)\n"
        "want = torch.tensor([0.1, 1.0039062]).bfloat16()\n"
        "assert torch.equal(out, want), (out.float().tolist(), want.float().tolist())\n"
        "print('ok')\n"
    )
    _runs_in_a_fresh_interpreter(script)


def _runs_in_a_fresh_interpreter(script: str) -> None:
    """Runs ``script`` in a new process under ``TRITON_INTERPRET=1`` (no conftest there),
    which must print ``ok`` last."""
    env = {
        **os.environ,
        "TRITON_INTERPRET": "1",
        "PYTHONPATH": os.pathsep.join([str(HERE), str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("ok")
