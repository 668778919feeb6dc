"""A launch whose arguments do not fit the compiled variant (Triton's launcher raises
``TypeError: function takes exactly N arguments``) names the kernel, the variant and what
kiln passed, instead of a bare ``TypeError`` from inside the wrapper."""

from __future__ import annotations

from typing import Any

import pytest
import sympy
import torch

from kiln.backends.triton.launch import Compiled, KernelRunner, KernelSpec, LaunchError


def _launcher(*args: Any) -> None:
    raise TypeError(f"function takes exactly {len(args) - 1} arguments ({len(args)} given)")


def test_a_launcher_signature_mismatch_names_the_kernel() -> None:
    spec = KernelSpec(
        name="kiln_poi_fused_add_0",
        kind="pointwise",
        n_inputs=1,
        n_pointers=2,
        n_sizes=1,
        constexprs=("XBLOCK",),
        numel=sympy.Symbol("s0"),
        rnumel=sympy.Integer(1),
        ynumel=None,
        configs=({"XBLOCK": 64, "num_warps": 4},),
        implements="add",
    )
    runner = KernelRunner(spec, fn=None, interpret=False)
    x, out = torch.randn(40), torch.empty(40)
    runner.compiled[runner.key([x, out, 40])] = Compiled(_launcher, None, None)
    with pytest.raises(
        LaunchError,
        match=r"kiln_poi_fused_add_0: function takes exactly .*"
        r"kiln passed 3 arguments \(2 pointers, 1 sizes",
    ):
        runner(0, x, out, 40)
