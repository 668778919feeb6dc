"""Convolutions on cached oneDNN-prepacked weights (issue 15, pass ``prepack-weights``).

Inference graphs mark their parameter convolutions ``kiln.prepack``; the C++ wrapper keeps
the packed weight per call site and repacks when the weight tensor, its version counter
or its data pointer changes. Every test compares with eager on fresh random inputs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import kiln
from kiln.backends.cpp.prepack import PackedConvolution, PackedLinear, available
from kiln.compiler import DEFAULT_PIPELINE, compile_history, reset_compile_history
from kiln.passes import prepack_weights as prepack_weights_pass

pytestmark = pytest.mark.skipif(not available(), reason="this torch has no oneDNN")


class _Net(nn.Module):
    """A plain, a depthwise (no bias) and a 1x1 convolution (left to ATen: faster there),
    channels-last between them."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False)
        self.conv3 = nn.Conv2d(8, 4, 1, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.conv1(x))
        y = self.conv2(y) + y
        return self.conv3(y).sigmoid()


@pytest.fixture
def packs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts weight (re)packs across all call sites."""
    count = [0]
    pack = PackedConvolution.pack

    def counting(
        self: PackedConvolution, weight: torch.Tensor, input_size: tuple[int, ...]
    ) -> torch.Tensor:
        count[0] += 1
        return pack(self, weight, input_size)

    monkeypatch.setattr(PackedConvolution, "pack", counting)
    return count


@pytest.fixture
def linear_sites(monkeypatch: pytest.MonkeyPatch) -> list[PackedLinear]:
    """Every linear call site built from here on, on a machine whose calibration says
    oneDNN's packed GEMM is faster."""
    from kiln.backends.cpp import gemm_calibration

    monkeypatch.setattr(gemm_calibration, "packed_linear_faster", lambda: True)
    sites: list[PackedLinear] = []
    init = PackedLinear.__init__

    def recording(
        self: PackedLinear, batch: int | None, min_rows: int = 0, transposed: bool = True
    ) -> None:
        init(self, batch, min_rows, transposed)
        sites.append(self)

    monkeypatch.setattr(PackedLinear, "__init__", recording)
    return sites


def _compile(model: Callable[..., Any], **options: Any) -> Callable[..., Any]:
    torch._dynamo.reset()
    reset_compile_history()
    return kiln.compile(model, verbose=False, **options)


def _check(compiled: Callable[..., Any], model: Callable[..., Any], *args: torch.Tensor) -> None:
    torch.testing.assert_close(compiled(*args), model(*args), atol=1e-5, rtol=1e-5)


def test_inference_runs_prepacked_weights(packs: list[int]) -> None:
    model = _Net().eval()
    compiled = _compile(model)
    with torch.no_grad():
        _check(compiled, model, torch.randn(2, 3, 10, 10))
        assert [s.prepacked for s in compile_history()] == [2]
        assert packs[0] == 2
        _check(compiled, model, torch.randn(2, 3, 10, 10))
        assert packs[0] == 2  # the cached packs are reused


def test_weight_updated_in_place_is_repacked(packs: list[int]) -> None:
    """The same tensor objects at the same addresses, new values: only the version
    counter tells (a cache keyed on identity or address alone returns stale results)."""
    model = _Net().eval()
    compiled = _compile(model)
    with torch.no_grad():
        x = torch.randn(1, 3, 9, 9)
        _check(compiled, model, x)
        pointer = model.conv1.weight.data_ptr()
        model.conv1.weight.mul_(-1.5)
        model.conv2.weight.copy_(torch.randn_like(model.conv2.weight))
        assert model.conv1.weight.data_ptr() == pointer
        _check(compiled, model, torch.randn(1, 3, 9, 9))
        assert packs[0] == 4
        # load_state_dict copies in place too.
        other = _Net().eval()
        model.load_state_dict(other.state_dict())
        _check(compiled, model, torch.randn(1, 3, 9, 9))
        assert packs[0] == 6


def test_symbolic_input_size_packs_per_size(packs: list[int]) -> None:
    """``dynamic=True``: the batch and image sizes are symbolic, the convolutions still
    run on packed weights (issue 21: ResNet's dynamic convolutions were 1.7x slower than
    the static ones, all of it oneDNN's reorder of the weight at every call), one packed
    copy per input size (oneDNN's packed layout depends on it), kept for the next call
    at that size and dropped when the weight changes."""
    model = _Net().eval()
    compiled = _compile(model, dynamic=True)
    # Sizes apart from each other and from the 3 channels (dynamo would specialise
    # equal ones as one symbol).
    sizes = [(2, 10, 12), (4, 10, 12), (2, 7, 9), (4, 10, 12), (2, 10, 12)]
    with torch.no_grad():
        for batch, height, width in sizes:
            _check(compiled, model, torch.randn(batch, 3, height, width))
        assert [s.prepacked for s in compile_history()] == [2]  # one graph
        assert packs[0] == 2 * 3  # two sites, three distinct input sizes
        model.conv1.weight.mul_(-1.5)  # in place: every size of conv1 is stale
        _check(compiled, model, torch.randn(4, 3, 10, 12))
        _check(compiled, model, torch.randn(4, 3, 10, 12))
        assert packs[0] == 2 * 3 + 1


def test_symbolic_site_keeps_a_bounded_number_of_sizes() -> None:
    from kiln.backends.cpp.prepack import SIZES_KEPT

    conv = nn.Conv2d(4, 6, 3, padding=1).eval()
    site = PackedConvolution([1, 1], [1, 1], [1, 1], 1, None)
    with torch.no_grad():
        for batch in range(1, SIZES_KEPT + 3):
            x = torch.randn(batch, 4, 5, 5).contiguous(memory_format=torch.channels_last)
            torch.testing.assert_close(site(x, conv.weight, conv.bias), conv(x))
    assert len(site.by_size) == SIZES_KEPT
    assert site.repacks == SIZES_KEPT + 2


class _Mlp(nn.Module):
    """Linear layers: an addmm (its result feeds a reshape, not only pointwise ops) and
    an mm + add (unfuse-addmm), on 3-D input flattened to rows."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(12, 16)
        self.fc2 = nn.Linear(16, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc1(x).transpose(0, 1).reshape(-1, 16).sum(0)
        return F.gelu(self.fc2(x @ torch.ones(12, 16) + h))


def test_linear_layers_run_packed_and_see_in_place_updates() -> None:
    """Layers this small are left to ATen by default; ``linear-max-rows`` packs them."""
    model = _Mlp().eval()
    pipeline = DEFAULT_PIPELINE.replace("prepack-weights", "prepack-weights{linear-max-rows=64}")
    compiled = _compile(model, pipeline=pipeline)
    with torch.no_grad():
        _check(compiled, model, torch.randn(3, 5, 12))
        assert compile_history()[0].prepacked >= 2
        model.fc1.weight.mul_(0.5)
        model.fc2.weight.copy_(torch.randn_like(model.fc2.weight))
        _check(compiled, model, torch.randn(3, 5, 12))


def test_weight_argument_changes_each_call() -> None:
    """A weight the caller passes (not a parameter): each new tensor is packed anew."""

    def conv(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return F.conv2d(x, w, padding=1).relu()

    compiled = _compile(conv)
    with torch.no_grad():
        for _ in range(3):
            _check(compiled, conv, torch.randn(1, 4, 6, 6), torch.randn(5, 4, 3, 3))
    assert [s.prepacked for s in compile_history()] == [1]


def test_training_graph_is_not_prepacked() -> None:
    model = _Net()
    reference = _Net()
    reference.load_state_dict(model.state_dict())
    compiled = _compile(model)
    x = torch.randn(2, 3, 8, 8)
    out = compiled(x)
    expected = reference(x)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    out.sum().backward()
    expected.sum().backward()
    assert reference.conv1.weight.grad is not None
    torch.testing.assert_close(model.conv1.weight.grad, reference.conv1.weight.grad)
    assert all(s.prepacked == 0 for s in compile_history())


def _check_bfloat16_net() -> None:
    """A bfloat16 ``_Net`` compiled, against eager at bfloat16 tolerances, twice."""
    model = _Net().to(torch.bfloat16).eval()
    compiled = _compile(model)
    with torch.no_grad():
        for _ in range(2):
            x = torch.randn(2, 3, 10, 10, dtype=torch.bfloat16)
            torch.testing.assert_close(compiled(x), model(x), atol=2e-2, rtol=2e-2)


@pytest.mark.skipif(
    not prepack_weights_pass._cpu_packs_bfloat16(),  # pyright: ignore[reportPrivateUsage]
    reason="this CPU has no oneDNN bfloat16 path (AVX-512 BW/VL/DQ or AVX-NE-CONVERT)",
)
def test_bfloat16_inference_runs_prepacked_weights(packs: list[int]) -> None:
    """bfloat16 convolutions are packed too (unpacked, ATen copied each OIHW weight to
    the channels-last input's layout at every call, 2-3x slower on ResNets); the values
    are eager's to bfloat16 rounding of the same oneDNN products."""
    _check_bfloat16_net()
    assert [s.prepacked for s in compile_history()] == [2]
    assert packs[0] == 2


def test_bfloat16_convolutions_stay_atens_without_onednn_bfloat16(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On a CPU without oneDNN's bfloat16 path (an AVX2-only AMD EPYC) packing raised
    "bf16 path needs the cpu support avx_ne_convert or avx512bw, avx512vl and avx512dq"
    at the first call: there the convolutions stay ATen's (float32 ones are packed)."""
    monkeypatch.setattr(prepack_weights_pass, "_cpu_packs_bfloat16", lambda: False)
    _check_bfloat16_net()
    assert [s.prepacked for s in compile_history()] == [0]


def test_option_off_and_float64_run_plain_convolutions() -> None:
    model = _Net().eval()
    compiled = _compile(model, prepack_weights=False)
    with torch.no_grad():
        _check(compiled, model, torch.randn(1, 3, 8, 8))
    assert [s.prepacked for s in compile_history()] == [0]
    model64 = _Net().double().eval()
    compiled = _compile(model64)
    with torch.no_grad():
        _check(compiled, model64, torch.randn(1, 3, 8, 8, dtype=torch.float64))
    assert [s.prepacked for s in compile_history()] == [0]


class _Wide(nn.Module):
    """Linear layers of 48K-element weights (``linear=auto`` packs them from 64 rows),
    one with a bias."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(192, 256)
        self.fc2 = nn.Linear(256, 192, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


@pytest.mark.parametrize("faster", [True, False])
def test_auto_linear_follows_this_machines_calibration(
    monkeypatch: pytest.MonkeyPatch, faster: bool
) -> None:
    """The default (``linear=auto``) packs linear layers of at least ``auto_min_rows``
    rows exactly when the machine's measurement says oneDNN is faster; eager's numbers
    either way, and after an in-place weight update."""
    from kiln.backends.cpp import gemm_calibration

    monkeypatch.setattr(gemm_calibration, "packed_linear_faster", lambda: faster)
    model = _Wide().eval()
    compiled = _compile(model, graph_cache=False)
    with torch.no_grad():
        _check(compiled, model, torch.randn(4, 64, 192))
        assert [s.prepacked for s in compile_history()] == [2 if faster else 0]
        model.fc1.weight.mul_(-0.5)
        _check(compiled, model, torch.randn(4, 64, 192))


def test_auto_linear_leaves_small_layers_to_aten(monkeypatch: pytest.MonkeyPatch) -> None:
    from kiln.backends.cpp import gemm_calibration

    monkeypatch.setattr(gemm_calibration, "packed_linear_faster", lambda: True)
    model = _Wide().eval()
    compiled = _compile(model, graph_cache=False)
    with torch.no_grad():
        _check(compiled, model, torch.randn(2, 16, 192))  # 32 rows
    assert [s.prepacked for s in compile_history()] == [0]


def test_auto_linear_packs_large_weights_at_few_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """A weight of 512K elements or more is packed at any row count (a language model's
    head at a few tokens: 1.2-1.9x faster than ATen's product on the AMD VM)."""
    from kiln.backends.cpp import gemm_calibration

    monkeypatch.setattr(gemm_calibration, "packed_linear_faster", lambda: True)
    model = nn.Linear(512, 1024).eval()
    compiled = _compile(model, graph_cache=False)
    with torch.no_grad():
        _check(compiled, model, torch.randn(2, 512))
    assert [s.prepacked for s in compile_history()] == [1]


class _Conv1D(nn.Module):
    """GPT-2's ``Conv1D``: ``addmm(b, x, w)`` of an ``[in, out]`` weight, read as it is."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(192, 256) * 0.05)
        self.bias = nn.Parameter(torch.randn(256))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = torch.addmm(self.bias, x.view(-1, 192), self.weight)
        return F.gelu(rows).view(*x.shape[:-1], 256)


def test_auto_linear_packs_weights_read_as_they_are(monkeypatch: pytest.MonkeyPatch) -> None:
    """``x @ w`` of an ``[in, out]`` weight argument (GPT-2's ``Conv1D``) runs packed:
    the site packs ``w.T``; eager's numbers, and after an in-place weight update."""
    from kiln.backends.cpp import gemm_calibration

    monkeypatch.setattr(gemm_calibration, "packed_linear_faster", lambda: True)
    model = _Conv1D().eval()
    compiled = _compile(model, graph_cache=False)
    with torch.no_grad():
        _check(compiled, model, torch.randn(4, 64, 192))
        assert [s.prepacked for s in compile_history()] == [1]
        model.weight.mul_(-0.5)
        _check(compiled, model, torch.randn(4, 64, 192))


def test_user_inputs_as_weights_are_not_packed(linear_sites: list[PackedLinear]) -> None:
    """``a @ b`` of two user inputs is marked (``b`` is a function argument) but the site
    packs only parameters and buffers: a user's ``b`` is likely new at every call, and
    repacking it each time would cost more than the packed GEMM saves."""

    def product(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a @ b

    compiled = _compile(product, graph_cache=False)
    with torch.no_grad():
        for _ in range(2):
            a, b = torch.randn(4, 512), torch.randn(512, 1024)
            _check(compiled, product, a, b)
    assert [s.prepacked for s in compile_history()] == [1]
    assert [s.repacks for s in linear_sites] == [0]


def test_symbolic_rows_pack_for_any_row_count_above_the_threshold(
    linear_sites: list[PackedLinear],
) -> None:
    """Under ``dynamic=True`` the layers' rows are symbolic: the sites pack each weight
    once for any row count (oneDNN's batch size None, as Inductor does) and run calls of
    fewer than ``auto_min_rows`` rows (64 for these weights) on ATen's product; eager's
    numbers for every size, and after an in-place weight update."""
    model = _Wide().eval()
    compiled = _compile(model, graph_cache=False, dynamic=True)
    with torch.no_grad():
        _check(compiled, model, torch.randn(2, 16, 192))  # 32 rows: ATen's product
        assert [(s.batch, s.min_rows, s.repacks) for s in linear_sites] == [(None, 64, 0)] * 2
        _check(compiled, model, torch.randn(4, 64, 192))  # 256 rows: packed
        _check(compiled, model, torch.randn(3, 100, 192))  # 300 rows: the same packs
        assert [s.repacks for s in linear_sites] == [1, 1]
        model.fc1.weight.mul_(-0.5)
        _check(compiled, model, torch.randn(5, 40, 192))
        assert [s.repacks for s in linear_sites] == [2, 1]
    assert [s.prepacked for s in compile_history()] == [2]


def test_bad_linear_option_is_a_clear_error() -> None:
    from xdsl.dialects.builtin import ModuleOp

    from kiln.passes.prepack_weights import PrepackWeightsPass

    with pytest.raises(ValueError, match="linear='sometimes'"):
        PrepackWeightsPass(linear="sometimes").linear_rows(ModuleOp([]))


class _Pointwise(nn.Module):
    """A 3x3 then 1x1 convolutions (the 1x1s become products: conv1x1-to-mm), 1024 rows
    at a batch of 4 (``linear=auto`` packs small weights from 1024 rows)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 24, 1)
        self.conv3 = nn.Conv2d(24, 8, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv3(F.relu(self.conv2(F.relu(self.conv1(x))))).sigmoid()


def test_auto_linear_packs_pointwise_convolutions_made_products(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """conv1x1-to-mm's products of a 1x1 weight argument run packed under linear=auto
    (the site packs the [O, C, 1, 1] weight as its [O, C] matrix); in-place updates of
    that 4-D weight are seen."""
    from kiln.backends.cpp import gemm_calibration

    monkeypatch.setattr(gemm_calibration, "packed_linear_faster", lambda: True)
    model = _Pointwise().eval()
    compiled = _compile(model, graph_cache=False)
    with torch.no_grad():
        _check(compiled, model, torch.randn(4, 3, 16, 16))
        # conv1 (3x3, packed as a convolution) and both 1x1 products.
        assert [s.prepacked for s in compile_history()] == [3]
        model.conv2.weight.mul_(-0.5)
        model.conv3.weight.copy_(torch.randn_like(model.conv3.weight))
        _check(compiled, model, torch.randn(4, 3, 16, 16))


def test_pointwise_convolutions_of_symbolic_sizes_pack_above_the_threshold(
    linear_sites: list[PackedLinear],
) -> None:
    """Under ``dynamic=True`` conv1x1-to-mm's products have symbolic rows (``n*h*w``):
    they are marked as symbolic linear layers are, packed for any row count, with calls
    of fewer than ``auto_min_rows`` rows (1024 for these weights) on ATen's product.
    They ran ATen's product at every size (ConvNeXt-atto dynamic 1.28x its static
    compile on the CPU, its 16 MLP products 2.0 vs 1.5 ms). Eager's numbers at every
    size, and after an in-place weight update."""
    model = _Pointwise().eval()
    compiled = _compile(model, graph_cache=False, dynamic=True)
    with torch.no_grad():
        # Images of unequal sides: a square one would have one symbol for both.
        _check(compiled, model, torch.randn(2, 3, 8, 9))  # 144 rows: ATen's product
        assert [(s.batch, s.min_rows) for s in linear_sites] == [(None, 1024)] * 2
        assert [s.repacks for s in linear_sites] == [0, 0]
        _check(compiled, model, torch.randn(4, 3, 16, 17))  # 1088 rows: packed
        _check(compiled, model, torch.randn(3, 3, 20, 18))  # 1080 rows: the same packs
        assert [s.repacks for s in linear_sites] == [1, 1]
        model.conv2.weight.mul_(-0.5)
        _check(compiled, model, torch.randn(5, 3, 16, 15))
        assert [s.repacks for s in linear_sites] == [2, 1]
    assert [s.prepacked for s in compile_history()] == [3]


def test_symbolic_rows_below_the_threshold_skip_the_site(
    linear_sites: list[PackedLinear], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Below ``kiln.prepack_min_rows`` the wrapper runs the product as written, on the
    views it made, without calling the site: the site's own fallback transposed the
    weight and dispatched ``mm`` again, 3-4 us a call (T5 at 32 tokens, ``dynamic=True``:
    36 products, 1.18x its static compile)."""
    calls: list[int] = []
    site_call = PackedLinear.__call__

    def counted(self: PackedLinear, *args: Any) -> Any:
        calls.append(args[0].shape[0])
        return site_call(self, *args)

    monkeypatch.setattr(PackedLinear, "__call__", counted)
    model = _Wide().eval()
    compiled = _compile(model, graph_cache=False, dynamic=True)
    with torch.no_grad():
        _check(compiled, model, torch.randn(2, 16, 192))  # 32 rows: ATen's product
        assert calls == []
        _check(compiled, model, torch.randn(4, 64, 192))  # 256 rows: packed
        assert calls == [256, 256]
