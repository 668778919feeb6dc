"""The fallback contract (docs/fallback.md), end to end through
``torch.compile(..., backend="kiln")`` on the CPU (C++ executor), against eager.

Anything kiln cannot lower or does not model (an op, a dtype, a higher-order op, a
side-effect node, a traced constant) runs as an ATen call inside the compiled graph; the
graph compiles, and every output has eager's device, dtype, shape, strides and values.
Checks that eager raises for are raised at run time too.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from kiln.compiler import last_compile_stats

Program = Callable[..., Any]


def _compiled(fn: Program) -> Program:
    return torch.compile(fn, backend="kiln", options={"verbose": False, "executor": "cpp"})


def _comparable(t: torch.Tensor) -> torch.Tensor:
    if t.is_quantized:
        return t.dequantize()
    if t.dtype in (torch.float8_e4m3fn, torch.float8_e5m2, torch.complex32):
        return t.to(torch.complex64 if t.is_complex() else torch.float32)
    return t


def assert_like_eager(actual: Any, expected: Any) -> None:
    """Same structure; tensors with eager's device, dtype, shape, strides and values."""
    if isinstance(expected, list | tuple):
        assert isinstance(actual, list | tuple)
        assert len(actual) == len(expected)  # pyright: ignore[reportUnknownArgumentType]
        for a, e in zip(actual, expected, strict=True):  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
            assert_like_eager(a, e)
        return
    assert isinstance(actual, torch.Tensor)
    assert isinstance(expected, torch.Tensor)
    assert actual.device == expected.device
    assert actual.dtype == expected.dtype
    assert actual.shape == expected.shape
    if expected.numel() > 1:
        assert actual.stride() == expected.stride()
    if expected.is_quantized:
        assert actual.is_quantized
        assert actual.q_scale() == expected.q_scale()
        assert actual.q_zero_point() == expected.q_zero_point()
        torch.testing.assert_close(actual.int_repr(), expected.int_repr())
        return
    torch.testing.assert_close(_comparable(actual), _comparable(expected), atol=1e-5, rtol=1e-4)


def check(fn: Program, *inputs: Any) -> None:
    assert_like_eager(_compiled(fn)(*inputs), fn(*inputs))
    assert last_compile_stats().executor == "cpp"


Inputs = Callable[[], tuple[Any, ...]]
_BATCHES: dict[str, dict[str, tuple[Any, Any]]] = {}


def _run_batch(cases: dict[str, tuple[Program, Inputs]]) -> dict[str, tuple[Any, Any]]:
    """Every case's function in ONE compiled program (one graph, one C++ build instead of
    one per case): case name -> (compiled result, eager result); empty when the program
    as a whole does not compile or run (each case is then checked alone)."""
    names = list(cases)
    inputs = {name: cases[name][1]() for name in names}
    bounds, flat = [], []
    for name in names:
        bounds.append((len(flat), len(flat) + len(inputs[name])))
        flat.extend(inputs[name])

    def program(*tensors: Any) -> tuple[Any, ...]:
        return tuple(cases[n][0](*tensors[a:b]) for n, (a, b) in zip(names, bounds, strict=True))

    try:
        torch._dynamo.reset()
        got = _compiled(program)(*flat)
        assert last_compile_stats().executor == "cpp"
    except Exception:
        return {}
    return dict(zip(names, zip(got, program(*flat), strict=True), strict=True))


def check_case(group: str, cases: dict[str, tuple[Program, Inputs]], name: str) -> None:
    """``check`` of one case of a group, the group compiled once as one program; alone
    when the group's program fails (so that the failing case is the one named)."""
    if group not in _BATCHES:
        _BATCHES[group] = _run_batch(cases)
    if name not in _BATCHES[group]:
        fn, make_inputs = cases[name]
        check(fn, *make_inputs())
        return
    assert_like_eager(*_BATCHES[group][name])


# -- item 8: tensor constants traced into the graph ---------------------------------------


def _offset() -> tuple[torch.Tensor]:
    return (torch.randn(4, 3) + 2,)


CONSTANTS: dict[str, tuple[Program, Inputs]] = {
    "add": (lambda x: x + torch.tensor(1), _offset),
    "index": (lambda x: x[torch.tensor([0, 2])], _offset),
    "maximum": (lambda x: torch.maximum(x, torch.tensor(0.25)), _offset),
    "masked_cumsum": (lambda x: torch.masked.cumsum(x, 0, mask=x > 0), _offset),
    # aten.sub.Tensor(2.0, x): a wrapped scalar constant
    "rsub_scalar": (lambda x: torch.sub(2.0, x), _offset),
    "rdiv_scalar": (lambda x: torch.div(3.0, x), _offset),
    # Not embedded: too large for a dense attribute, or complex.
    "large": (lambda x: x + torch.arange(100.0).reshape(4, 25)[:, :3].contiguous(), _offset),
    "complex": (lambda x: x * torch.tensor([1j, 2.0, -1j]), _offset),
}


@pytest.mark.parametrize("name", CONSTANTS)
def test_traced_constants_keep_their_data(name: str) -> None:
    check_case("constants", CONSTANTS, name)


def test_large_traced_constant_is_passed_at_run_time() -> None:
    table = [float(i) * 0.5 for i in range(120)]

    def fn(x: torch.Tensor) -> torch.Tensor:
        return x * torch.tensor(table)

    check(fn, torch.randn(120))


# -- item 9: side-effect nodes -------------------------------------------------------------


def test_one_hot_runs_and_checks_its_classes() -> None:
    fn = _compiled(lambda x: F.one_hot(x, 5))
    x = torch.randint(0, 5, (7,))
    assert_like_eager(fn(x), F.one_hot(x, 5))
    with pytest.raises(RuntimeError, match="num_classes"):
        fn(torch.tensor([0, 9, 1, 2, 3, 4, 0]))  # eager raises the same


def test_assert_scalar_runs_at_run_time() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        n = x.sum().item()
        torch._check(n >= 0)
        torch._check(n <= 64)
        return torch.ones(n) * 2

    with torch._dynamo.config.patch(capture_scalar_outputs=True):
        compiled = _compiled(fn)
        x = torch.randint(1, 4, (6,))
        assert_like_eager(compiled(x), fn(x))
        with pytest.raises(RuntimeError, match="u0 <= 64"):
            compiled(torch.full((6,), 20))


def test_sym_constrain_range_runs_at_run_time() -> None:
    from kiln.compiler import CompileOptions, compile_graph
    from kiln.frontends.capture import capture_make_fx

    def fn(x: torch.Tensor) -> torch.Tensor:
        n = x.sum().item()
        torch.ops.aten.sym_constrain_range_for_size.default(n, min=2, max=64)
        torch.ops.aten.sym_constrain_range.default(n, min=2, max=64)
        return torch.ones(n) * 2

    x = torch.randint(1, 4, (6,))
    capture = capture_make_fx(fn, x, dynamic=True)
    compiled = compile_graph(capture.gm, capture.example_inputs, CompileOptions(verbose=False))
    assert_like_eager(compiled(x), fn(x))
    with pytest.raises(RuntimeError, match="Invalid value range"):
        compiled(torch.full((6,), 20))


# -- item 10: with_effects ------------------------------------------------------------------


def _spd(n: int) -> torch.Tensor:
    a = torch.randn(n, n)
    return a @ a.T + n * torch.eye(n)


LINALG: dict[str, tuple[Program, Inputs]] = {
    "inv": (torch.linalg.inv, lambda: (torch.randn(4, 4),)),
    "solve": (torch.linalg.solve, lambda: (torch.randn(4, 4), torch.randn(4, 2))),
    "cholesky": (torch.linalg.cholesky, lambda: (_spd(4),)),
    "lu_factor": (lambda a: torch.linalg.lu_factor(a), lambda: (torch.randn(4, 4),)),
    "ldl_factor": (lambda a: torch.linalg.ldl_factor(a), lambda: (_spd(4),)),
    "tensorinv": (lambda a: torch.linalg.tensorinv(a, ind=1), lambda: (torch.randn(4, 2, 2),)),
    "tensorsolve": (torch.linalg.tensorsolve, lambda: (torch.randn(2, 3, 6), torch.randn(2, 3))),
}


@pytest.mark.parametrize("name", LINALG)
def test_linalg_with_effects(name: str) -> None:
    check_case("linalg", LINALG, name)


def test_linalg_errors_are_raised_as_in_eager() -> None:
    inv = _compiled(torch.linalg.inv)
    inv(torch.randn(3, 3))
    with pytest.raises(torch.linalg.LinAlgError, match="singular"):
        inv(torch.zeros(3, 3))


# -- item 11: dtypes kiln does not model -----------------------------------------------------


def _signal() -> tuple[torch.Tensor]:
    return (torch.randn(16),)


COMPLEX_RESULTS: dict[str, tuple[Program, Inputs]] = {
    "fft": (lambda x: torch.fft.fft(x), _signal),
    "rfft_slice": (lambda x: torch.fft.rfft(x)[1:4] * 2, _signal),
    "rfft2_roundtrip": (lambda x: torch.fft.irfft2(torch.fft.rfft2(x.reshape(4, 4)) * 2), _signal),
    "stft": (lambda x: torch.stft(x, 8, return_complex=True, window=torch.hann_window(8)), _signal),
    "eig": (lambda x: torch.linalg.eig(x.reshape(4, 4))[0], _signal),
    "view_as_complex_slice": (lambda x: torch.view_as_complex(x.reshape(8, 2))[2:6], _signal),
}


@pytest.mark.parametrize("name", COMPLEX_RESULTS)
def test_complex_results(name: str) -> None:
    check_case("complex_results", COMPLEX_RESULTS, name)


def _complex() -> tuple[torch.Tensor]:
    return (torch.randn(4, 3, dtype=torch.complex64),)


COMPLEX_INPUTS: dict[str, tuple[Program, Inputs]] = {
    "slice_mul": (lambda z: z[1:3] * 2, _complex),
    "slice_out": (lambda z: z[1:3], _complex),
    "transpose_out": (lambda z: (z * 2).t(), _complex),
    # a view no strided layout expresses
    "reshape_of_transpose": (lambda z: (z * 2).t().reshape(-1), _complex),
    "view_as_real": (lambda z: torch.view_as_real(z[:, 1:]), _complex),
}


@pytest.mark.parametrize("name", COMPLEX_INPUTS)
def test_complex_inputs_and_views(name: str) -> None:
    check_case("complex_inputs", COMPLEX_INPUTS, name)


def _matrix() -> tuple[torch.Tensor]:
    return (torch.randn(4, 3),)


FLOAT8: dict[str, tuple[Program, Inputs]] = {
    "roundtrip": (lambda x: x.to(torch.float8_e4m3fn).to(torch.float32), _matrix),
    "out": (lambda x: x.to(torch.float8_e5m2), _matrix),
    "slice": (lambda x: x.to(torch.float8_e5m2)[1:3], _matrix),
    "transpose": (lambda x: x.to(torch.float8_e4m3fn).t(), _matrix),
    "reshape_of_transpose": (lambda x: x.to(torch.float8_e4m3fn).t().reshape(-1), _matrix),
}


@pytest.mark.parametrize("name", FLOAT8)
def test_float8(name: str) -> None:
    check_case("float8", FLOAT8, name)


def test_complex32() -> None:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "ComplexHalf support is experimental")
        check(lambda z: z.to(torch.complex32)[1:], torch.randn(5, dtype=torch.complex64))


@pytest.mark.skipif(not hasattr(torch, "_scaled_mm"), reason="no _scaled_mm")
def test_scaled_mm() -> None:
    def fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        one = torch.tensor(1.0)
        a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)
        return torch._scaled_mm(a8, b8.t(), scale_a=one, scale_b=one, out_dtype=torch.float32)

    a, b = torch.randn(16, 32), torch.randn(16, 32)
    try:
        fn(a, b)
    except (RuntimeError, NotImplementedError) as e:
        pytest.skip(f"_scaled_mm does not run on this CPU build: {e}")
    check(fn, a, b)


QUANTIZED: dict[str, tuple[Program, Inputs]] = {
    "quint8": (lambda x: torch.quantize_per_tensor(x, 0.1, 3, torch.quint8), _matrix),
    "qint8_slice": (lambda x: torch.quantize_per_tensor(x, 0.1, 0, torch.qint8)[1:3], _matrix),
    "qint8_transpose": (lambda x: torch.quantize_per_tensor(x, 0.1, 0, torch.qint8).t(), _matrix),
    "dequantize": (
        lambda x: torch.dequantize(torch.quantize_per_tensor(x, 0.05, 0, torch.qint8)) * 2,
        _matrix,
    ),
}


@pytest.mark.parametrize("name", QUANTIZED)
def test_quantized(name: str) -> None:
    check_case("quantized", QUANTIZED, name)


# -- item 5 (CPU): SDPA training ----------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"is_causal": True}, {"attn_mask": "mask"}],
    ids=["plain", "causal", "mask"],
)
def test_sdpa_training_gives_eager_gradients(kwargs: dict[str, Any]) -> None:
    q, k, v = (torch.randn(2, 3, 8, 16, requires_grad=True) for _ in range(3))
    options = {n: torch.randn(8, 8) if a == "mask" else a for n, a in kwargs.items()}

    def step(fn: Program) -> list[torch.Tensor]:
        for t in (q, k, v):
            t.grad = None
        out = fn(q, k, v)
        (out * torch.arange(out.numel()).reshape(out.shape).sin()).sum().backward()
        return [out.detach(), *(t.grad for t in (q, k, v) if t.grad is not None)]

    def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, **options)

    expected = step(attention)
    actual = step(_compiled(attention))
    assert len(actual) == 4
    for a, e in zip(actual, expected, strict=True):
        torch.testing.assert_close(a, e, atol=1e-4, rtol=1e-4)
