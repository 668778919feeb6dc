"""Whether padding a misaligned cuBLAS product pays, measured on the GPU it runs on.

``pad-mm`` pads by rule where padding is known to pay (tensor-core products that are
compute bound). Elsewhere cuBLAS's choice of kernel decides, and no rule predicts it:
a float32 ``[2, 1000] x [1000, 1024]`` product (MobileNet-v3's classifier gradient at
batch 2) runs cuBLAS's ``gemmSN_NN`` kernel in 16-21 us on an H100, and the same
product with two zero rows added (``M = 4``) a split-K kernel in about 5 us; other
small products gain nothing. Inductor times both forms of every misaligned product at
compile time (``pad_mm``'s ``_should_pad``, padding when the padded form, the copies
included, is more than 1.1x faster); this module does the same for the products the rules
leave (the driver asks ``pad-mm`` for them and lists the winners on the module,
:mod:`kiln.dialects.aten.padded_products`), and keeps each verdict on disk (one JSON per
problem, device and torch build), so a later compile of the same shapes measures nothing.

The padded form is timed as ``pad-mm`` writes it: each padded operand copied with
``constant_pad_nd`` (a transposed operand's source padded and transposed back), the
product, its result sliced (a view).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from kiln.dialects.aten.padded_products import PaddingProblem

PAYS_ABOVE = 1.1
"""The padded form must be this many times faster (Inductor's ``is_padded_faster``)."""


@dataclass(frozen=True)
class PaddingTiming:
    original_ms: float
    padded_ms: float

    @property
    def pays(self) -> bool:
        return self.original_ms > self.padded_ms * PAYS_ABOVE


def can_measure() -> bool:
    """A CUDA device to time on (the compile runs where the program will), not capturing
    a CUDA graph (a compile inside a capture: timing there would break the capture)."""
    return torch.cuda.is_available() and not torch.cuda.is_current_stream_capturing()


def padding_pays(problem: PaddingProblem, device: str = "cuda") -> bool:
    """Whether ``problem``'s padded form is faster on the GPU ``device`` (stored verdict,
    else measured now and stored; an unwritable cache only means measuring again)."""
    return padding_timing(problem, device).pays


def padding_timing(problem: PaddingProblem, device: str = "cuda") -> PaddingTiming:
    path = _stored_path(problem, device)
    stored = _read(path) if path is not None else None
    if stored is not None:
        return stored
    timing = _measured(problem, device)
    if path is not None:
        from kiln.backends.cache import store_json

        try:
            store_json(path, {**asdict(timing), "problem": problem.key()})
        except OSError:
            pass
    return timing


@functools.cache
def _device_identity(device: str) -> str:
    props = torch.cuda.get_device_properties(torch.device(device))
    return f"{props.name} sm{props.major}{props.minor} {props.multi_processor_count} SMs"


def _stored_path(problem: PaddingProblem, device: str) -> Path | None:
    from kiln.backends.cache import cache_root, content_hash, usable_dir

    try:
        directory = usable_dir(cache_root() / "matmul-padding", "matmul-padding")
    except OSError:
        return None
    key = content_hash(
        _device_identity(device),
        f"torch {torch.__version__} {torch.version.git_version} cuda {torch.version.cuda}",
        f"tf32 {torch.backends.cuda.matmul.allow_tf32}",
        repr(problem),
    )
    return directory / f"{key}.json"


def _read(path: Path) -> PaddingTiming | None:
    from kiln.backends.cache import load_timings

    times = load_timings(path, "original_ms", "padded_ms")
    return PaddingTiming(*times) if times is not None else None


@functools.cache
def _measured(problem: PaddingProblem, device: str) -> PaddingTiming:
    from triton.testing import do_bench

    original, padded = _programs(problem, device)
    with torch.no_grad(), torch.cuda.device(torch.device(device)):
        original_ms = float(do_bench(original, warmup=5, rep=25, return_mode="median"))  # pyright: ignore[reportArgumentType]
        padded_ms = float(do_bench(padded, warmup=5, rep=25, return_mode="median"))  # pyright: ignore[reportArgumentType]
    return PaddingTiming(original_ms, padded_ms)


def _programs(
    problem: PaddingProblem, device: str
) -> tuple[Callable[[], torch.Tensor], Callable[[], torch.Tensor]]:
    """The product as it is, and as ``pad-mm`` would write it, on random operands."""
    dtype = getattr(torch, problem.dtype)
    batch = (problem.batch,) if problem.batch else ()

    def matrix(rows: int, cols: int, transposed: bool) -> torch.Tensor:
        if transposed:
            return torch.randn(*batch, cols, rows, device=device, dtype=dtype).transpose(-2, -1)
        return torch.randn(*batch, rows, cols, device=device, dtype=dtype)

    def padded(value: torch.Tensor, cols: int, rows: int, transposed: bool) -> torch.Tensor:
        if not (cols or rows):
            return value
        if transposed:  # pad the row-major source, read it transposed
            source = value.transpose(-2, -1)
            return torch.constant_pad_nd(source, [0, rows, 0, cols]).transpose(-2, -1)
        return torch.constant_pad_nd(value, [0, cols, 0, rows])

    a = matrix(problem.m, problem.k, problem.a_transposed)
    b = matrix(problem.k, problem.n, problem.b_transposed)
    bias = torch.randn(problem.n, device=device, dtype=dtype) if problem.bias else None
    m, n = problem.m, problem.n

    def product(x: torch.Tensor, y: torch.Tensor, vector: torch.Tensor | None) -> torch.Tensor:
        if vector is not None:
            return torch.addmm(vector, x, y)
        return torch.bmm(x, y) if problem.batch else torch.mm(x, y)

    def original() -> torch.Tensor:
        return product(a, b, bias)

    # pad-mm keeps a bias in the product only where N alone is padded; else it adds it
    # to the sliced product (``_padded_bias``).
    bias_in_product = bias is not None and problem.n_pad > 0 and problem.m_pad == 0

    def padded_form() -> torch.Tensor:
        x = padded(a, problem.k_pad, problem.m_pad, problem.a_transposed)
        y = padded(b, problem.n_pad, problem.k_pad, problem.b_transposed)
        if bias is not None and bias_in_product:
            return product(x, y, torch.constant_pad_nd(bias, [0, problem.n_pad]))[..., :m, :n]
        sliced = product(x, y, None)[..., :m, :n]
        return sliced if bias is None else sliced + bias

    return original, padded_form


__all__ = [
    "PAYS_ABOVE",
    "PaddingTiming",
    "can_measure",
    "padding_pays",
    "padding_timing",
]
