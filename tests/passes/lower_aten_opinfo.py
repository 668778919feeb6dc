"""PyTorch's OpInfo samples through aten -> loop, interpreted and compared with eager.

For each OpInfo of an op family kiln lowers, the samples (float32 CPU, plus int64 and
bool where the op supports them) are captured with make_fx (AOTAutograd, which
functionalizes, when make_fx records an in-place op), imported, lowered with
``lower-aten``, verified, run with the loop interpreter and compared with eager
(``assert_close(equal_nan=True)``, same dtypes). Used by test_lower_aten_opinfo.py;
run it as a script for the per-family report::

    python tests/passes/lower_aten_opinfo.py [--samples N] [--ops a,b]
"""

from __future__ import annotations

import sys
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.testing import assert_close
from xdsl.dialects.func import FuncOp

from kiln.dialects.loop.interpreter import run_function
from kiln.frontends.capture import capture_aot, capture_make_fx
from kiln.frontends.fx import import_graph, rebuild_outputs
from kiln.passes.aten_to_loop import lowering_table
from kiln.passes.lower_aten import LoweringStats, lower_function

FAMILIES: dict[str, tuple[str, ...]] = {
    "pointwise": (
        "abs", "acos", "acosh", "add", "addcdiv", "addcmul", "asin", "asinh", "atan",
        "atan2", "atanh", "bitwise_and", "bitwise_not", "bitwise_or", "bitwise_xor",
        "ceil", "clamp", "clamp_max", "clamp_min", "copysign", "cos", "cosh", "div",
        "eq", "erf", "exp", "exp2", "expm1", "floor", "floor_divide", "fmax", "fmin",
        "fmod", "ge", "gt", "hypot", "isfinite", "isinf", "isnan", "le", "lerp", "log",
        "log10", "log1p", "log2", "logical_and", "logical_not", "logical_or",
        "logical_xor", "lt", "masked_fill", "maximum", "minimum", "mul", "ne", "neg",
        "pow", "reciprocal", "remainder", "round", "rsqrt", "rsub", "sigmoid", "sign",
        "sin", "sinh", "sqrt", "square", "sub", "tan", "tanh", "true_divide", "trunc",
        "where", "nn.functional.relu", "nn.functional.gelu", "nn.functional.silu",
        "nn.functional.elu", "nn.functional.leaky_relu", "nn.functional.hardtanh",
        "nn.functional.hardswish", "nn.functional.hardsigmoid", "nn.functional.softplus",
        "nn.functional.threshold", "nn.functional.relu6", "nn.functional.mish",
        "float", "double", "int", "long", "bool", "half", "to",
    ),
    "reductions": (
        "sum", "prod", "amax", "amin", "max", "min", "argmax", "argmin", "any", "all",
        "mean", "var", "std", "var_mean", "std_mean", "softmax", "log_softmax",
        "logsumexp", "nn.functional.softmin", "cumsum",
    ),
    "views": (
        "view", "reshape", "permute", "transpose", "t", "expand", "squeeze",
        "unsqueeze", "narrow", "select", "split", "split_with_sizes", "chunk", "unbind",
        "as_strided", "diagonal", "flatten", "unflatten", "movedim", "contiguous",
        "clone", "view_as", "reshape_as", "expand_as", "T", "mT",
        "tensor_split", "hsplit", "vsplit", "ravel",
    ),
    "indexing": (
        "cat", "stack", "hstack", "vstack", "constant_pad_nd", "nn.functional.pad",
        "index_select", "gather", "take_along_dim", "nn.functional.embedding",
        "__getitem__", "repeat", "flip", "fliplr", "flipud", "roll", "tril", "triu",
    ),
    "creation": (
        "full", "zeros", "ones", "arange", "full_like", "zeros_like", "ones_like",
        "new_full", "new_zeros", "new_ones", "scalar_tensor", "fill",
    ),
}  # fmt: skip

DTYPES = (torch.float32, torch.int64, torch.bool)

# Samples whose eager result is not a function of the inputs alone.
NONDETERMINISTIC = frozenset({"empty", "empty_like", "new_empty"})


@dataclass
class Outcome:
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    failures: list[str] = field(default_factory=list[str])
    skips: list[str] = field(default_factory=list[str])
    native: Counter[str] = field(default_factory=Counter[str])
    extern: Counter[str] = field(default_factory=Counter[str])


@cache
def opinfos() -> dict[str, list[Any]]:
    """OpInfos by name (an op may have several variants)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torch.testing._internal.common_methods_invocations import op_db

    table: dict[str, list[Any]] = {}
    for info in op_db:
        table.setdefault(info.name, []).append(info)
    return table


def family_of(name: str) -> str:
    return next(f for f, names in FAMILIES.items() if name in names)


def samples(info: Any, dtype: torch.dtype, limit: int) -> Iterator[Any]:
    if dtype not in info.supported_dtypes("cpu"):
        return
    torch.manual_seed(0)
    # sample_inputs_func directly: OpInfo.sample_inputs inspects the call stack per call.
    for k, sample in enumerate(info.sample_inputs_func(info, "cpu", dtype, False)):
        if k >= limit:
            return
        yield sample


def _program(info: Any, sample: Any) -> tuple[Callable[..., Any], list[torch.Tensor]]:
    """The sample as a function of its tensor leaves (everything else is a constant)."""
    leaves, spec = pytree.tree_flatten(([sample.input, *sample.args], sample.kwargs))
    positions = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]

    def program(*tensors: torch.Tensor) -> Any:
        values = list(leaves)
        for pos, tensor in zip(positions, tensors, strict=True):
            values[pos] = tensor
        args, kwargs = pytree.tree_unflatten(values, spec)
        return info.op(*args, **kwargs)

    return program, [leaves[p] for p in positions]


def _writes_in_place(gm: torch.fx.GraphModule) -> bool:
    return any(
        isinstance(node.target, torch._ops.OpOverload)  # pyright: ignore[reportPrivateUsage]
        and node.target._schema.is_mutable  # pyright: ignore[reportPrivateUsage]
        for node in gm.graph.nodes
    )


class Skip(Exception):
    """The sample cannot be run through kiln for a reason outside lowering."""


def run_sample(info: Any, sample: Any, outcome: Outcome) -> None:
    """Raise AssertionError (or any lowering error) when kiln disagrees with eager."""
    program, inputs = _program(info, sample)
    try:
        expected = program(*[t.clone() for t in inputs])
    except Exception as e:
        raise Skip(f"eager raised {type(e).__name__}") from e
    try:
        gm, inputs = capture_make_fx(program, *inputs)
        if _writes_in_place(gm):
            # AOTAutograd's functional graph instead, as torch.compile would give it.
            gm, inputs = capture_aot(program, *inputs)
        module = import_graph(gm)
    except Exception as e:
        raise Skip(f"capture/import: {type(e).__name__}: {str(e)[:200]}") from e
    func = module.body.block.first_op
    assert isinstance(func, FuncOp)
    stats = LoweringStats({}, {})
    lower_function(func, lowering_table(), stats)
    module.verify()
    outcome.native.update(stats.native)
    outcome.extern.update(stats.extern)
    got = rebuild_outputs(func, run_function(module, [t.clone() for t in inputs]))
    exp_leaves = pytree.tree_leaves(expected)
    # AOTAutograd returns the inputs the program mutates first (embedding's max_norm).
    got_leaves = pytree.tree_leaves(got)[-len(exp_leaves) :] if exp_leaves else []
    assert len(exp_leaves) == len(got_leaves), f"{len(got_leaves)} outputs, eager {len(exp_leaves)}"
    for e, g in zip(exp_leaves, got_leaves, strict=True):
        if isinstance(e, torch.Tensor):
            assert isinstance(g, torch.Tensor), f"got {type(g).__name__}, eager a tensor"
            assert_close(g, e, equal_nan=True, check_stride=False)
        else:
            assert g == e or (isinstance(e, float) and e != e and g != g), f"{g} != {e}"


def run_op(name: str, limit: int) -> Outcome:
    outcome = Outcome()
    for info in opinfos().get(name, []):
        for dtype in DTYPES:
            for k, sample in enumerate(samples(info, dtype, limit)):
                label = f"{info.name}.{info.variant_test_name or 'default'} {dtype} #{k}"
                try:
                    run_sample(info, sample, outcome)
                except Skip as e:
                    outcome.skipped += 1
                    outcome.skips.append(f"{label}: {e}")
                except Exception as e:
                    outcome.failed += 1
                    outcome.failures.append(f"{label}: {type(e).__name__}: {str(e)[:300]}")
                else:
                    outcome.passed += 1
    return outcome


def report(names: Sequence[str], limit: int) -> None:
    totals: dict[str, Outcome] = {f: Outcome() for f in FAMILIES}
    for name in names:
        outcome = run_op(name, limit)
        total = totals[family_of(name)]
        total.passed += outcome.passed
        total.failed += outcome.failed
        total.skipped += outcome.skipped
        total.native.update(outcome.native)
        total.extern.update(outcome.extern)
        for failure in outcome.failures:
            print("FAIL", failure)
        for skip in outcome.skips:
            print("SKIP", skip)
    print(f"{'family':12} {'passed':>7} {'failed':>7} {'skipped':>8}")
    for family, t in totals.items():
        print(f"{family:12} {t.passed:7} {t.failed:7} {t.skipped:8}")
    for family, t in totals.items():
        if t.extern:
            print(f"{family} extern: {dict(t.extern)}")


if __name__ == "__main__":
    args = sys.argv[1:]
    limit = int(args[args.index("--samples") + 1]) if "--samples" in args else 1000
    chosen = args[args.index("--ops") + 1].split(",") if "--ops" in args else None
    all_names = [n for names in FAMILIES.values() for n in names]
    report(chosen or all_names, limit)
