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


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> None:
    torch._dynamo.reset()


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


# -- item 8: tensor constants traced into the graph ---------------------------------------


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x + torch.tensor(1),
        lambda x: x[torch.tensor([0, 2])],
        lambda x: torch.maximum(x, torch.tensor(0.25)),
        lambda x: torch.masked.cumsum(x, 0, mask=x > 0),
        lambda x: torch.sub(2.0, x),  # aten.sub.Tensor(2.0, x): a wrapped scalar constant
        lambda x: torch.div(3.0, x),
        # Not embedded: too large for a dense attribute, or complex.
        lambda x: x + torch.arange(100.0).reshape(4, 25)[:, :3].contiguous(),
        lambda x: x * torch.tensor([1j, 2.0, -1j]),
    ],
    ids=[
        "add",
        "index",
        "maximum",
        "masked_cumsum",
        "rsub_scalar",
        "rdiv_scalar",
        "large",
        "complex",
    ],
)
def test_traced_constants_keep_their_data(fn: Program) -> None:
    check(fn, torch.randn(4, 3) + 2)


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


@pytest.mark.parametrize(
    ("fn", "make_inputs"),
    [
        (torch.linalg.inv, lambda: (torch.randn(4, 4),)),
        (torch.linalg.solve, lambda: (torch.randn(4, 4), torch.randn(4, 2))),
        (torch.linalg.cholesky, lambda: (_spd(4),)),
        (lambda a: torch.linalg.lu_factor(a), lambda: (torch.randn(4, 4),)),
        (lambda a: torch.linalg.ldl_factor(a), lambda: (_spd(4),)),
        (lambda a: torch.linalg.tensorinv(a, ind=1), lambda: (torch.randn(4, 2, 2),)),
        (torch.linalg.tensorsolve, lambda: (torch.randn(2, 3, 6), torch.randn(2, 3))),
    ],
    ids=["inv", "solve", "cholesky", "lu_factor", "ldl_factor", "tensorinv", "tensorsolve"],
)
def test_linalg_with_effects(fn: Program, make_inputs: Callable[[], tuple[Any, ...]]) -> None:
    check(fn, *make_inputs())


def test_linalg_errors_are_raised_as_in_eager() -> None:
    inv = _compiled(torch.linalg.inv)
    inv(torch.randn(3, 3))
    with pytest.raises(torch.linalg.LinAlgError, match="singular"):
        inv(torch.zeros(3, 3))


# -- item 11: dtypes kiln does not model -----------------------------------------------------


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: torch.fft.fft(x),
        lambda x: torch.fft.rfft(x)[1:4] * 2,
        lambda x: torch.fft.irfft2(torch.fft.rfft2(x.reshape(4, 4)) * 2),
        lambda x: torch.stft(x, 8, return_complex=True, window=torch.hann_window(8)),
        lambda x: torch.linalg.eig(x.reshape(4, 4))[0],
        lambda x: torch.view_as_complex(x.reshape(8, 2))[2:6],
    ],
    ids=["fft", "rfft_slice", "rfft2_roundtrip", "stft", "eig", "view_as_complex_slice"],
)
def test_complex_results(fn: Program) -> None:
    check(fn, torch.randn(16))


@pytest.mark.parametrize(
    "fn",
    [
        lambda z: z[1:3] * 2,
        lambda z: z[1:3],
        lambda z: (z * 2).t(),
        lambda z: (z * 2).t().reshape(-1),  # a view no strided layout expresses
        lambda z: torch.view_as_real(z[:, 1:]),
    ],
    ids=["slice_mul", "slice_out", "transpose_out", "reshape_of_transpose", "view_as_real"],
)
def test_complex_inputs_and_views(fn: Program) -> None:
    check(fn, torch.randn(4, 3, dtype=torch.complex64))


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x.to(torch.float8_e4m3fn).to(torch.float32),
        lambda x: x.to(torch.float8_e5m2),
        lambda x: x.to(torch.float8_e5m2)[1:3],
        lambda x: x.to(torch.float8_e4m3fn).t(),
        lambda x: x.to(torch.float8_e4m3fn).t().reshape(-1),
    ],
    ids=["roundtrip", "out", "slice", "transpose", "reshape_of_transpose"],
)
def test_float8(fn: Program) -> None:
    check(fn, torch.randn(4, 3))


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


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: torch.quantize_per_tensor(x, 0.1, 3, torch.quint8),
        lambda x: torch.quantize_per_tensor(x, 0.1, 0, torch.qint8)[1:3],
        lambda x: torch.quantize_per_tensor(x, 0.1, 0, torch.qint8).t(),
        lambda x: torch.dequantize(torch.quantize_per_tensor(x, 0.05, 0, torch.qint8)) * 2,
    ],
    ids=["quint8", "qint8_slice", "qint8_transpose", "dequantize"],
)
def test_quantized(fn: Program) -> None:
    check(fn, torch.randn(4, 3))


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
