"""Differential fuzzing of programs as users write them (issue 20), through
``kiln.compile`` (Dynamo, AOTAutograd, kiln) against eager PyTorch.

Where :mod:`test_graph_fuzz` draws float graphs of a few op kinds, a program here mixes
every dtype kiln models (float32/64, half types, integers, bool) with type promotion and
casts; views and layout-changing copies followed by views (``as_strided`` on a copy,
``contiguous``, channels-last, slices with steps, ``expand``, ``reshape``, ``flip``,
``roll``); Python scalars in arithmetic (their own promotion rules); gathers
(``index_select``, ``gather``) by in-program indices; ``cat`` of mixed dtypes;
``masked_fill``; in-place updates of intermediate buffers, of strided views of them, and
of the inputs; outputs that alias each other or are inputs;
zero-size and size-1 dims; NaN and infinities in the inputs; integer division,
remainder and ``fmod`` with negative operands; and, for float programs, the backward
graph. A program is drawn step by step while it runs eagerly (a step eager rejects is
not taken), so every program is one eager runs.

Each program runs through the executors (the aten, loop and kernel interpreters, C++,
Triton's interpreter) on fresh random inputs; values (NaN where eager has NaN), dtypes,
devices, shapes, strides, aliasing among outputs and inputs, and the inputs' values
after the call (mutation) must match eager. CI: a few derandomized examples;
``KILN_FUZZ_EXAMPLES=N`` is the long mode.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st
from test_graph_fuzz import _broadcast_partner  # pyright: ignore[reportPrivateUsage]

import kiln
from kiln.compiler import compile_history, reset_compile_history

EXAMPLES = int(os.environ.get("KILN_FUZZ_EXAMPLES", "2"))

FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
INTS = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)
DTYPES = (*FLOATS, *INTS, torch.bool)

# Executor name -> kiln options. aten / loop: the pipeline stops early and the
# interpreter of that level runs the graph.
EXECUTORS: dict[str, dict[str, Any]] = {
    "aten": {"executor": "interpret", "pipeline": "decompose,canonicalize,cse,dce"},
    # output-layout: outputs that are views of other outputs share their storage only
    # through it (without it, kiln returns them as copies: see docs/fuzzing.md).
    "loop": {
        "executor": "interpret",
        "pipeline": "decompose,canonicalize,cse,dce,output-layout,lower-aten",
    },
    "kernel": {"executor": "interpret"},
    "cpp": {"executor": "cpp"},
    "triton": {"executor": "triton"},
}


def _odd(t: torch.Tensor) -> torch.Tensor:
    """A divisor that is never zero and keeps its sign (integer division by zero raises)."""
    return t | 1 if not t.dtype.is_floating_point else t


UNARY: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "neg": torch.neg,
    "abs": torch.abs,
    "relu": torch.relu,
    "sign": torch.sign,
    "square": torch.square,
    "exp": lambda t: torch.exp(t.clamp(-8, 8)),
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "sqrt": torch.sqrt,  # NaN for negatives, as eager
    "log": torch.log,
    "floor": torch.floor,
    "reciprocal": torch.reciprocal,
    "not": torch.logical_not,
    "bitwise_not": torch.bitwise_not,
    "isnan": torch.isnan,
    "nan_to_num": torch.nan_to_num,
    "clamp": lambda t: t.clamp(-2, 3),
}
BINARY: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "add": torch.add,
    "sub": torch.sub,
    "mul": torch.mul,
    "div": torch.div,
    "floor_divide": lambda a, b: torch.div(a, _odd(b), rounding_mode="floor"),
    "trunc_divide": lambda a, b: torch.div(a, _odd(b), rounding_mode="trunc"),
    "remainder": lambda a, b: torch.remainder(a, _odd(b)),
    "fmod": lambda a, b: torch.fmod(a, _odd(b)),
    "maximum": torch.maximum,
    "minimum": torch.minimum,
    "bitwise_and": torch.bitwise_and,
    "bitwise_xor": torch.bitwise_xor,
    "logical_or": torch.logical_or,
    "gt": torch.gt,
    "eq": torch.eq,
    "where": lambda a, b: torch.where(a > 0, a, b),
    "atan2": torch.atan2,
}
REDUCE: dict[str, Callable[[torch.Tensor, int, bool], torch.Tensor]] = {
    "sum": lambda t, d, k: t.sum(d, keepdim=k),
    "prod": lambda t, d, k: t.prod(d, keepdim=k),
    "amax": lambda t, d, k: t.amax(d, keepdim=k),
    "amin": lambda t, d, k: t.amin(d, keepdim=k),
    "mean": lambda t, d, k: t.mean(d, keepdim=k),
    "argmax": lambda t, d, k: t.argmax(d, keepdim=k),
    "any": lambda t, d, k: t.any(d, keepdim=k),
    "softmax": lambda t, d, k: t.softmax(d),
    "cumsum": lambda t, d, k: t.cumsum(d),
}


# Python scalars: ints, floats and a bool promote by category, not by dtype (``int8 * 2``
# stays int8, ``int8 * 0.5`` is the default float dtype, ``x + True`` adds one).
SCALARS: tuple[int | float | bool, ...] = (2, -3, 0.5, -1.5, True)

SCALAR_OPS: dict[str, Callable[[torch.Tensor, Any], torch.Tensor]] = {
    "add": lambda t, s: t + s,
    "rsub": lambda t, s: s - t,
    "mul": lambda t, s: t * s,
    "div": lambda t, s: t / s,
    "floor_divide": lambda t, s: t // s,
    "remainder": lambda t, s: t % s,
    "pow": lambda t, s: t**s,
    "rpow": lambda t, s: s**t,
    "gt": lambda t, s: t > s,
    "clamp_min": lambda t, s: t.clamp(min=s),
    "where": lambda t, s: torch.where(t > 0, t, s),
}


NO_DERIVATIVE = frozenset({("scalar", "floor_divide")})
"""Steps eager cannot differentiate (``t // 2.0`` is ``aten::floor_divide``, which has no
derivative): kept out of the backward fuzzer's programs."""


def _indices(n: int, pattern: int, device: torch.device) -> torch.Tensor:
    """Indices into a dim of ``n``, computed in the program (traced as ops, not as a
    constant): reversed, a stride-2 walk, or each index twice."""
    i = torch.arange(n, device=device)
    if pattern == 0:
        return n - 1 - i
    if pattern == 1:
        return (i * 2) % max(n, 1)
    return i // 2


@dataclass(frozen=True)
class Step:
    """One op: ``kind``/``name`` applied to values ``args`` with integer ``extra``."""

    kind: str
    name: str
    args: tuple[int, ...]
    extra: tuple[int, ...] = ()

    def apply(self, values: Sequence[torch.Tensor]) -> torch.Tensor:
        a = values[self.args[0]]
        e = self.extra
        match self.kind:
            case "unary":
                return UNARY[self.name](a)
            case "binary":
                return BINARY[self.name](a, values[self.args[1]])
            case "reduce":
                return REDUCE[self.name](a, e[0], bool(e[1]))
            case "cast":
                return a.to(DTYPES[e[0]])
            case "transpose":
                return a.transpose(e[0], e[1])
            case "unsqueeze":
                return a.unsqueeze(e[0])
            case "flatten":
                return a.flatten()
            case "slice":
                return a[(slice(None),) * e[0] + (slice(e[1], None, e[2]),)]
            case "expand":
                return a.unsqueeze(0).expand(e[0], *a.shape)
            case "contiguous":
                return a.contiguous()
            case "channels_last":
                return a.contiguous(memory_format=torch.channels_last)
            case "as_strided":
                return a.contiguous().as_strided((e[0], e[1]), (e[2], e[3]), e[4])
            case "matmul":
                return a @ values[self.args[1]]
            case "inplace":
                # An intermediate buffer updated in place (a clone: never an input).
                c = a.clone()
                return c.add_(values[self.args[1]]) if self.name == "add_" else c.mul_(2)
            case "inplace_view":
                # A strided view of an intermediate buffer updated in place: the buffer
                # (not the view) is the value, its other elements unchanged.
                c = a.clone()
                view = c[(slice(None),) * e[0] + (slice(e[1], None, e[2]),)]
                view.mul_(2) if self.name == "mul_" else view.add_(1)
                return c
            case "scalar":
                return SCALAR_OPS[self.name](a, SCALARS[e[0]])
            case "index_select":
                return a.index_select(e[0], _indices(a.shape[e[0]], e[1], a.device))
            case "gather":
                shape = [1] * a.dim()
                shape[e[0]] = a.shape[e[0]]
                index = _indices(a.shape[e[0]], e[1], a.device).view(shape).expand(a.shape)
                return a.gather(e[0], index)
            case "cat":
                return torch.cat((a, values[self.args[1]]), e[0])
            case "masked_fill":
                return a.masked_fill(values[self.args[1]] > 0, SCALARS[e[0]])
            case "reshape":
                return a.reshape(e[0], -1)
            case "flip":
                return a.flip(e[0])
            case "roll":
                return a.roll(e[1], e[0])
            case _:
                raise AssertionError(self.kind)


@dataclass(frozen=True)
class Program:
    dtypes: tuple[torch.dtype, ...]
    shapes: tuple[tuple[int, ...], ...]
    special: bool  # NaN and infinities in the float inputs
    steps: tuple[Step, ...]
    outputs: tuple[int, ...]  # value indices: inputs too (an output that is an input)
    mutate: int | None  # input updated in place at the end (x.add_(last value))

    def run(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        values = list(inputs)
        for step in self.steps:
            values.append(step.apply(values))
        if self.mutate is not None:
            target = inputs[self.mutate]
            target.add_(values[-1].to(target.dtype))
        return tuple(values[k] for k in self.outputs)


def make_inputs(program: Program, seed: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    out: list[torch.Tensor] = []
    for dtype, shape in zip(program.dtypes, program.shapes, strict=True):
        if dtype.is_floating_point:
            t = torch.randn(shape, generator=generator, dtype=torch.float64) * 3
            if program.special and t.numel():
                flat = t.view(-1)
                picks = torch.randint(0, t.numel(), (3,), generator=generator)
                flat[picks[0]] = float("nan")
                flat[picks[1]] = float("inf")
                flat[picks[2]] = float("-inf")
        elif dtype == torch.bool:
            t = torch.randint(0, 2, shape, generator=generator).bool()
        else:
            low = 0 if dtype == torch.uint8 else -9
            t = torch.randint(low, 10, shape, generator=generator)
        out.append(t.to(dtype))
    return out


KINDS = (
    *("unary", "binary", "binary", "reduce", "cast", "transpose", "unsqueeze", "flatten"),
    *("slice", "expand", "contiguous", "channels_last", "as_strided", "matmul", "inplace"),
    *("inplace_view", "scalar", "index_select", "gather", "cat", "masked_fill", "reshape"),
    *("flip", "roll"),
)


def _draw_step(draw: st.DrawFn, values: list[torch.Tensor]) -> Step | None:
    a = draw(st.integers(0, len(values) - 1))
    t = values[a]
    kind = draw(st.sampled_from(KINDS))
    rank = t.dim()
    if kind == "unary":
        return Step(kind, draw(st.sampled_from(sorted(UNARY))), (a,))
    if kind in ("binary", "inplace"):
        b = _broadcast_partner(draw, values, a)
        if b is None:
            return None
        name = draw(st.sampled_from(sorted(BINARY))) if kind == "binary" else "add_"
        if kind == "inplace" and draw(st.booleans()):
            name = "mul_"
        return Step(kind, name, (a, b))
    if kind == "reduce":
        if rank == 0:
            return None
        dim = draw(st.integers(0, rank - 1))
        return Step(
            kind, draw(st.sampled_from(sorted(REDUCE))), (a,), (dim, int(draw(st.booleans())))
        )
    if kind == "cast":
        return Step(kind, "to", (a,), (draw(st.integers(0, len(DTYPES) - 1)),))
    if kind == "transpose":
        if rank < 2:
            return None
        d0, d1 = draw(st.permutations(range(rank)))[:2]
        return Step(kind, kind, (a,), (d0, d1))
    if kind == "unsqueeze":
        return None if rank >= 4 else Step(kind, kind, (a,), (draw(st.integers(0, rank)),))
    if kind == "slice":
        if rank == 0:
            return None
        dim = draw(st.integers(0, rank - 1))
        return Step(kind, kind, (a,), (dim, draw(st.integers(0, 2)), draw(st.integers(1, 3))))
    if kind == "expand":
        return None if rank >= 4 else Step(kind, kind, (a,), (draw(st.integers(0, 3)),))
    if kind == "channels_last":
        return Step(kind, kind, (a,)) if rank == 4 else None
    if kind == "as_strided":
        n = t.numel()
        if n == 0:
            return None
        s0, s1 = draw(st.integers(0, 4)), draw(st.integers(0, 4))
        t0, t1 = draw(st.integers(0, 3)), draw(st.integers(0, 3))
        reach = max(s0 - 1, 0) * t0 + max(s1 - 1, 0) * t1
        if reach >= n:
            return None
        offset = draw(st.integers(0, n - 1 - reach))
        return Step(kind, kind, (a,), (s0, s1, t0, t1, offset))
    if kind == "inplace_view":
        if rank == 0:
            return None
        dim = draw(st.integers(0, rank - 1))
        extra = (dim, draw(st.integers(0, 2)), draw(st.integers(1, 3)))
        return Step(kind, draw(st.sampled_from(["add_", "mul_"])), (a,), extra)
    if kind in ("scalar", "masked_fill"):
        scalar = draw(st.integers(0, len(SCALARS) - 1))
        if kind == "scalar":
            return Step(kind, draw(st.sampled_from(sorted(SCALAR_OPS))), (a,), (scalar,))
        b = _broadcast_partner(draw, values, a)
        return None if b is None else Step(kind, kind, (a, b), (scalar,))
    if kind in ("index_select", "gather", "flip", "roll"):
        if rank == 0:
            return None
        dim = draw(st.integers(0, rank - 1))
        if kind == "flip":
            return Step(kind, kind, (a,), (dim,))
        if kind == "roll":  # a shift, negative ones and ones beyond the size included
            return Step(kind, kind, (a,), (dim, draw(st.integers(-2, 6))))
        return Step(kind, kind, (a,), (dim, draw(st.integers(0, 2))))  # an index pattern
    if kind == "cat":
        if rank == 0:
            return None
        dim = draw(st.integers(0, rank - 1))
        fits = [
            k
            for k, v in enumerate(values)
            if v.dim() == rank and all(v.shape[d] == t.shape[d] for d in range(rank) if d != dim)
        ]
        return Step(kind, kind, (a, draw(st.sampled_from(fits))), (dim,))
    if kind == "reshape":
        n = t.numel()
        divisors = [d for d in range(1, min(n, 12) + 1) if n % d == 0]
        return Step(kind, kind, (a,), (draw(st.sampled_from(divisors)),)) if divisors else None
    if kind == "matmul":
        fits = [
            k
            for k, v in enumerate(values)
            if v.dim() == 2 and rank >= 1 and v.shape[0] == t.shape[-1]
        ]
        return Step(kind, kind, (a, draw(st.sampled_from(fits)))) if fits else None
    return Step(kind, kind, (a,))


@st.composite
def programs(draw: st.DrawFn, float_only: bool = False) -> Program:
    family = draw(st.sampled_from(FLOATS if float_only else (*FLOATS, *FLOATS, *INTS, torch.bool)))
    n_inputs = draw(st.integers(1, 3))
    rank = draw(st.integers(0, 4))
    base = tuple(draw(st.sampled_from([0, 1, 1, 2, 3, 4, 5])) for _ in range(rank))
    shapes = [base] + [
        tuple(s if draw(st.booleans()) else 1 for s in base) for _ in range(n_inputs - 1)
    ]
    dtypes = [family] + [
        family if float_only or draw(st.booleans()) else draw(st.sampled_from(DTYPES))
        for _ in range(n_inputs - 1)
    ]
    if not float_only and draw(st.booleans()) and rank >= 1:  # a weight for matmul
        shapes.append((base[-1], draw(st.integers(1, 4))))
        dtypes.append(family)
    program = Program(tuple(dtypes), tuple(shapes), draw(st.booleans()), (), (), None)
    values = make_inputs(program, 0)
    steps: list[Step] = []
    for _ in range(draw(st.integers(1, 6))):
        step = _draw_step(draw, values)
        if step is None:
            continue
        try:
            value = step.apply(values)
        except (RuntimeError, ValueError, IndexError, TypeError):
            continue  # eager rejects it: not a program
        if float_only and (
            not value.dtype.is_floating_point or (step.kind, step.name) in NO_DERIVATIVE
        ):
            continue
        values.append(value)
        steps.append(step)
    produced = list(range(len(shapes), len(values))) or [0]
    outputs = draw(st.lists(st.sampled_from(produced), min_size=1, max_size=3, unique=True))
    if draw(st.integers(0, 5)) == 0:
        outputs.append(draw(st.integers(0, len(shapes) - 1)))  # an input returned as it is
    mutate = None
    if not float_only and draw(st.integers(0, 3)) == 0:
        k = draw(st.integers(0, len(shapes) - 1))
        if dtypes[k] == torch.float64 and not shapes[k]:
            # torch's own bug, not kiln's: AOTAutograd drops the in-place update of a
            # 0-d float64 input (backend="aot_eager" too, torch 2.13).
            k = None
        last = values[-1]
        if k is not None and _storage(last) == _storage(values[k]):
            k = None  # eager refuses an update from a view of the target itself
        try:  # the update must fit eager's in-place rules (no resize, castable)
            if k is not None:
                values[k].clone().add_(last.to(values[k].dtype))
                mutate = k
        except RuntimeError:
            pass
    return Program(
        tuple(dtypes), tuple(shapes), program.special, tuple(steps), tuple(outputs), mutate
    )


TOLERANCE: dict[torch.dtype, tuple[float, float]] = {
    torch.float64: (1e-9, 1e-9),
    torch.float32: (1e-4, 1e-5),
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (5e-2, 5e-2),
}


def loosest_float(program: Program) -> torch.dtype | None:
    """The least precise float dtype among the program's inputs and values: a float64
    output of a float32 computation (``exp(x).double()``) carries float32's rounding (one
    unit of float32 in ``exp``, 1e-7, is far outside float64's tolerance)."""
    values = make_inputs(program, 0)
    for step in program.steps:
        values.append(step.apply(values))
    floats = [v.dtype for v in values if v.dtype.is_floating_point]
    return max(floats, key=lambda d: TOLERANCE[d][0], default=None)


def _close(
    have: torch.Tensor, want: torch.Tensor, what: str, loosest: torch.dtype | None = None
) -> None:
    assert have.dtype == want.dtype, (what, have.dtype, want.dtype)
    assert have.device == want.device, (what, have.device, want.device)
    assert have.shape == want.shape, (what, have.shape, want.shape)
    if want.dtype.is_floating_point:
        rtol, atol = max(TOLERANCE[want.dtype], TOLERANCE[loosest or want.dtype])
        # Half types: kiln computes in float32 and rounds once per stored value; eager
        # rounds after every op, so chains can drift by a few units in the last place.
        torch.testing.assert_close(have, want, rtol=rtol, atol=atol, equal_nan=True, msg=what)
    else:
        assert torch.equal(have, want), (what, have, want)


def _layout(t: torch.Tensor) -> list[int]:
    return [s for s, n in zip(t.stride(), t.shape, strict=True) if n > 1]


def _storage(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr() if t.numel() else -1


def _aliasing(outputs: Sequence[torch.Tensor], inputs: Sequence[torch.Tensor]) -> list[int]:
    """For each output: the index of the first tensor (inputs, then outputs) sharing its
    storage, or -1 (zero-size tensors share nothing)."""
    pool = [*inputs, *outputs]
    found: list[int] = []
    for k, out in enumerate(outputs):
        ptr = _storage(out)
        same = [
            j for j, t in enumerate(pool[: len(inputs) + k]) if ptr != -1 and _storage(t) == ptr
        ]
        found.append(same[0] if same else -1)
    return found


def check(program: Program, executor: str, seed: int = 1) -> None:
    torch._dynamo.reset()
    reset_compile_history()
    compiled = kiln.compile(program.run, fullgraph=True, verbose=False, **EXECUTORS[executor])
    eager_inputs = make_inputs(program, seed)
    kiln_inputs = [t.clone() for t in eager_inputs]
    want = program.run(*eager_inputs)
    have = compiled(*kiln_inputs)
    history = compile_history()
    assert history or not program.steps, "nothing was compiled"
    level = EXECUTORS[executor]["executor"]
    assert all(s.executor == level for s in history), [s.executor for s in history]
    assert len(have) == len(want)
    loosest = loosest_float(program)
    for k, (h, w) in enumerate(zip(have, want, strict=True)):
        _close(h, w, f"output {k}", loosest)
        if w.numel() > 1:
            assert _layout(h) == _layout(w), (f"output {k} strides", h.stride(), w.stride())
    for k, (h, w) in enumerate(zip(kiln_inputs, eager_inputs, strict=True)):
        _close(h, w, f"input {k} after the call", loosest)
    assert _aliasing(have, kiln_inputs) == _aliasing(want, eager_inputs), "aliasing"


def _gradients(
    program: Program, fn: Callable[..., Any], base: list[torch.Tensor], seed: int, is_eager: bool
) -> tuple[tuple[torch.Tensor, ...], list[torch.Tensor | None]]:
    """``fn``'s outputs and the gradients of a weighted sum of them for every input."""
    inputs = [t.clone().requires_grad_() for t in base]
    out = fn(*inputs)
    weights = torch.Generator().manual_seed(seed + 1)
    loss = sum(
        (
            (o.double() * torch.randn(o.shape, generator=weights, dtype=torch.float64)).nan_to_num()
        ).sum()
        for o in out
        if o.requires_grad
    )
    if isinstance(loss, torch.Tensor) and loss.requires_grad:
        try:
            loss.backward()
        except RuntimeError:
            if not is_eager:
                raise
            reject()  # eager fails (True ** x's backward asserts in PyTorch): not kiln's
    return tuple(o.detach() for o in out), [t.grad for t in inputs]


def check_backward(program: Program, executor: str, seed: int = 1) -> None:
    """Gradients of a weighted sum of the outputs with respect to every input.

    Where a gradient differs from eager's, kiln is held to AOTAutograd's traced backward
    run by ATen (``aot_eager``) instead: PyTorch's autograd formulas differ between eager
    and tracing in places (``prod``'s backward divides the product by the input in
    eager, NaN for an infinite element, and is zero-safe when traced: the gradient of a
    one-element product is the output gradient), and the traced formula is the program
    every compiler is given."""
    torch._dynamo.reset()
    reset_compile_history()
    compiled = kiln.compile(program.run, fullgraph=True, verbose=False, **EXECUTORS[executor])
    base = make_inputs(program, seed)
    want_out, want = _gradients(program, program.run, base, seed, is_eager=True)
    have_out, have = _gradients(program, compiled, base, seed, is_eager=False)
    loosest = loosest_float(program)
    for k, (h, w) in enumerate(zip(have_out, want_out, strict=True)):
        _close(h, w, f"output {k}", loosest)
    traced: list[list[torch.Tensor | None]] = []
    for k, (h, w) in enumerate(zip(have, want, strict=True)):
        assert (h is None) == (w is None), f"grad {k}"
        if h is None or w is None:
            continue
        try:
            _close(h, w, f"grad {k}", loosest)
        except AssertionError:
            if not traced:
                torch._dynamo.reset()
                aot = torch.compile(program.run, backend="aot_eager", fullgraph=True)
                traced.append(_gradients(program, aot, base, seed, is_eager=False)[1])
            reference = traced[0][k]
            if reference is None:
                raise
            _close(h, reference, f"grad {k} (against aot_eager, where eager differs)", loosest)


def fuzz(examples: int) -> settings:
    return settings(
        max_examples=examples,
        deadline=None,
        derandomize=not os.environ.get("KILN_FUZZ_RANDOM"),  # long runs: random programs
        database=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.filter_too_much,
        ],
    )


pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::RuntimeWarning")


@pytest.mark.parametrize("executor", list(EXECUTORS))
def test_random_programs(executor: str) -> None:
    @fuzz(EXAMPLES if executor != "triton" else max(1, EXAMPLES // 2))
    @given(programs())
    def run(program: Program) -> None:
        check(program, executor)

    run()


def test_random_programs_backward() -> None:
    @fuzz(max(1, EXAMPLES // 2))
    @given(programs(float_only=True))
    def run(program: Program) -> None:
        check_backward(program, "cpp")

    run()
