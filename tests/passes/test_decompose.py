"""decompose: PyTorch's decompositions, traced, imported and spliced; numbers unchanged."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.parser import Parser

from kiln.dialects.aten import AtenOp
from kiln.dialects.aten.interpreter import run_function
from kiln.frontends.fx import import_graph
from kiln.passes.decompose import DecomposePass
from kiln.registry import make_context


def _import(fn: Callable[..., Any], *inputs: torch.Tensor) -> ModuleOp:
    return import_graph(make_fx(fn, tracing_mode="fake")(*inputs))


def _overloads(module: ModuleOp) -> set[str]:
    return {op.overload_name for op in module.walk() if isinstance(op, AtenOp)}


CASES: dict[str, tuple[Callable[..., Any], tuple[torch.Tensor, ...], str]] = {
    "softmax": (lambda x: torch.softmax(x, -1), (torch.randn(4, 8),), "aten::_softmax.default"),
    "log_softmax": (
        lambda x: torch.log_softmax(x, 0),
        (torch.randn(4, 8),),
        "aten::_log_softmax.default",
    ),
    "layer_norm": (
        lambda x, w, b: F.layer_norm(x, (8,), w, b),
        (torch.randn(2, 4, 8), torch.randn(8), torch.randn(8)),
        "aten::native_layer_norm.default",
    ),
    "group_norm": (
        lambda x, w, b: F.group_norm(x, 2, w, b),
        (torch.randn(2, 4, 3, 3), torch.randn(4), torch.randn(4)),
        "aten::native_group_norm.default",
    ),
    "var_mean": (
        lambda x: torch.var_mean(x, dim=1, correction=1),
        (torch.randn(4, 8),),
        "aten::var_mean.correction",
    ),
    "hardswish": (lambda x: F.hardswish(x), (torch.randn(4, 8),), "aten::hardswish.default"),
    "softmax_half": (
        lambda x: torch.softmax(x, -1),
        (torch.randn(4, 8).half(),),
        "aten::_softmax.default",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_decompose_preserves_numbers(case: str) -> None:
    fn, inputs, composite = CASES[case]
    module = _import(fn, *inputs)
    assert composite in _overloads(module)
    before = run_function(module, list(inputs))
    DecomposePass().apply(make_context(), module)
    module.verify()
    assert composite not in _overloads(module)
    after = run_function(module, list(inputs))
    tol = {"atol": 1e-2, "rtol": 1e-2} if inputs[0].dtype == torch.half else {}
    torch.testing.assert_close(after, before, **tol)
    # The decomposed IR also prints and parses back.
    reparsed = Parser(make_context(), str(module)).parse_module()
    assert str(reparsed) == str(module)


def test_gpt_block_decomposes_to_eager_numbers() -> None:
    from kiln.examples import gpt_block

    model, (x,) = gpt_block()
    params = dict(model.named_parameters())

    def fn(p: dict[str, torch.Tensor], inp: torch.Tensor) -> torch.Tensor:
        return torch.func.functional_call(model, p, (inp,))

    gm = make_fx(fn, tracing_mode="fake")(params, x)
    module = import_graph(gm)
    DecomposePass().apply(make_context(), module)
    module.verify()
    names = _overloads(module)
    assert "aten::native_layer_norm.default" not in names
    assert "aten::_softmax.default" not in names
    (out,) = run_function(module, [*params.values(), x])
    with torch.no_grad():
        expected = model(x)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    "overload",
    [
        torch.ops.aten._native_batch_norm_legit_no_training.default,
        torch.ops.aten._batch_norm_no_update.default,
    ],
)
def test_eval_batch_norm_decomposes_to_pointwise_ops(overload: Any) -> None:
    """Eval batch norm decomposes through ``_native_batch_norm_legit(training=False)``
    down to pointwise ops (no opaque mutating op is left for an ATen fallback)."""
    x, mean, var, w, b = (
        torch.randn(2, 3, 4, 4),
        torch.randn(3),
        torch.rand(3) + 0.5,
        torch.randn(3),
        torch.randn(3),
    )

    def fn(*a: torch.Tensor) -> torch.Tensor:
        return torch.ops.aten._native_batch_norm_legit_no_training.default(
            a[0], a[3], a[4], a[1], a[2], 0.1, 1e-5
        )[0]

    module = _import(fn, x, mean, var, w, b)
    DecomposePass().apply(make_context(), module)
    module.verify()
    names = _overloads(module)
    assert not any("batch_norm" in n for n in names), names
    assert not [op for op in module.walk() if op.name == "aten.generic"]
    (out,) = run_function(module, [x, mean, var, w, b])
    torch.testing.assert_close(out, F.batch_norm(x, mean, var, w, b, training=False, eps=1e-5))


def test_training_batch_norm_with_running_stats_is_kept() -> None:
    """The mutating overload with ``training=True`` updates running stats in place: it is
    left alone (functionalized graphs use the ``_functional`` overload instead)."""
    x, mean, var = torch.randn(2, 3, 4, 4), torch.zeros(3), torch.ones(3)

    def fn(x: torch.Tensor, m: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return torch.ops.aten._native_batch_norm_legit.default(
            x, None, None, m, v, True, 0.1, 1e-5
        )[0]

    module = _import(fn, x, mean, var)
    DecomposePass().apply(make_context(), module)
    assert [op for op in module.walk() if op.name == "aten.generic"]


def test_ops_and_exclude_options() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, -1) + torch.log_softmax(x, -1)

    x = torch.randn(4, 8)
    only = _import(fn, x)
    DecomposePass(ops=("aten._softmax.default",)).apply(make_context(), only)
    assert "aten::_softmax.default" not in _overloads(only)
    assert "aten::_log_softmax.default" in _overloads(only)

    excluded = _import(fn, x)
    DecomposePass(exclude=("aten::_softmax.default",)).apply(make_context(), excluded)
    assert "aten::_softmax.default" in _overloads(excluded)
    assert "aten::_log_softmax.default" not in _overloads(excluded)


def test_option_syntax_in_pipeline() -> None:
    from xdsl.passes import PassPipeline

    module = _import(lambda x: torch.softmax(x, -1) + torch.log_softmax(x, -1), torch.randn(2, 3))
    pipeline = PassPipeline.parse_spec(
        {"decompose": lambda: DecomposePass}, 'decompose{ops="aten._log_softmax.default"}'
    )
    pipeline.apply(make_context(), module)
    assert "aten::_log_softmax.default" not in _overloads(module)
    assert "aten::_softmax.default" in _overloads(module)


def test_user_decompositions_by_subclassing() -> None:
    aten = torch.ops.aten

    def relu_as_clamp(x: torch.Tensor) -> torch.Tensor:
        return aten.clamp_min.default(x, 0.0)

    @dataclass(frozen=True)
    class MyDecompose(DecomposePass):
        name = "my-decompose"

        def decompositions(self) -> dict[Any, Callable[..., Any]]:
            return {aten.relu.default: relu_as_clamp}

    x = torch.randn(4, 8)
    module = _import(torch.relu, x)
    MyDecompose().apply(make_context(), module)
    assert _overloads(module) == {"aten::clamp_min.default"}
    torch.testing.assert_close(run_function(module, [x])[0], torch.relu(x))


def test_traces_once_per_signature(traced: list[str]) -> None:

    def fn(x: torch.Tensor) -> torch.Tensor:
        y = torch.softmax(x, -1)
        return torch.softmax(y * 2, -1) + torch.softmax(x, 0)

    DecomposePass().apply(make_context(), _import(fn, torch.randn(3, 5)))
    # dim=-1 twice (one signature) and dim=0 once.
    assert traced.count("aten::_softmax.default") == 2


def test_symbolic_sizes_decompose_for_every_size() -> None:
    """With a dynamic batch, composites still decompose (traced with a size symbol, the
    body reads sizes from its inputs) and compute eager's numbers at several sizes."""
    text = """
    func.func @f(%x: tensor<?x32xf32>, %w: tensor<32xf32>, %b: tensor<32xf32>) -> tensor<?x32xf32> {
      %0, %1, %2 = aten.native_layer_norm.default(%x, normalized_shape = [32], weight = %w, bias = %b, eps = 1.0e-05) : (tensor<?x32xf32>, tensor<32xf32>, tensor<32xf32>) -> (tensor<?x32xf32>, tensor<?x1xf32>, tensor<?x1xf32>)
      %3 = aten._softmax.default(%0, dim = 1, half_to_float = false) : (tensor<?x32xf32>) -> tensor<?x32xf32>
      func.return %3 : tensor<?x32xf32>
    }
    """
    module = Parser(make_context(), text).parse_module()
    DecomposePass().apply(make_context(), module)
    module.verify()
    names = _overloads(module)
    assert "aten::native_layer_norm.default" not in names
    assert "aten::_softmax.default" not in names
    w, b = torch.randn(32), torch.randn(32)
    for rows in (1, 3, 7):
        x = torch.randn(rows, 32)
        (out,) = run_function(module, [x, w, b], "f")
        torch.testing.assert_close(out, torch.softmax(F.layer_norm(x, (32,), w, b), 1))


def test_size_dependent_decomposition_is_kept() -> None:
    """A decomposition that would only hold for some sizes (it guards on the symbol) is
    not applied: the op stays for ATen."""
    text = """
    func.func @f(%x: tensor<?x8xf32>, %y: tensor<?x8xf32>) -> tensor<?x8xf32> {
      %0 = aten.addcmul.default(%x, %y, %y, value = 2) : (tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
      func.return %0 : tensor<?x8xf32>
    }
    """
    module = Parser(make_context(), text).parse_module()
    DecomposePass().apply(make_context(), module)
    # x and y get distinct size symbols: broadcasting them needs a guard, so the op stays.
    assert "aten::addcmul.default" in _overloads(module)


def test_eval_batch_norm_with_cuda_result_types_decomposes() -> None:
    """On CUDA eval batch norm's saved statistics are ``[C]`` (``[0]`` on the CPU, where
    decompositions are traced): unused, they do not stop the decomposition."""
    text = """
    func.func @f(%x: tensor<2x3x4x4xf32>, %m: tensor<3xf32>, %v: tensor<3xf32>, %w: tensor<3xf32>, %b: tensor<3xf32>) -> tensor<2x3x4x4xf32> {
      %0, %1, %2 = aten._native_batch_norm_legit_no_training.default(%x, %m, %v, weight = %w, bias = %b, momentum = 0.1, eps = 1.0e-05) : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>)
      func.return %0 : tensor<2x3x4x4xf32>
    }
    """
    module = Parser(make_context(), text).parse_module()
    DecomposePass().apply(make_context(), module)
    module.verify()
    assert not any("batch_norm" in n for n in _overloads(module))
    x, m, v, w, b = (
        torch.randn(2, 3, 4, 4),
        torch.randn(3),
        torch.rand(3) + 0.5,
        torch.randn(3),
        torch.randn(3),
    )
    (out,) = run_function(module, [x, m, v, w, b], "f")
    torch.testing.assert_close(out, F.batch_norm(x, m, v, w, b, training=False, eps=1e-5))
    # Where the statistics are used, the op stays.
    used = Parser(
        make_context(),
        text.replace(
            "func.return %0 : tensor<2x3x4x4xf32>", "func.return %1 : tensor<3xf32>"
        ).replace(") -> tensor<2x3x4x4xf32> {", ") -> tensor<3xf32> {"),
    )
    module = used.parse_module()
    DecomposePass().apply(make_context(), module)
    assert "aten::_native_batch_norm_legit_no_training.default" in _overloads(module)


def _scale_by(factor: float) -> Callable[..., torch.Tensor]:
    """A "decomposition" of softmax as ``x * factor`` (to tell tables apart)."""

    def scale(x: torch.Tensor, dim: int, half_to_float: bool) -> torch.Tensor:
        return x * factor

    return scale


def test_a_table_changed_or_freed_is_never_mistaken_for_another() -> None:
    """Traces are cached by the table's content. They used to be cached by its ``id()``:
    a table updated between runs (a user registering a decomposition), or built per run
    and freed (another dict then taking its address), got the old table's traces back."""
    text = """
    func.func @f(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
      %0 = aten._softmax.default(%x, dim = 1, half_to_float = false) : (tensor<4x8xf32>) -> tensor<4x8xf32>
      func.return %0 : tensor<4x8xf32>
    }
    """
    table: dict[Any, Callable[..., Any]] = {}
    copies = [False]

    class UserTable(DecomposePass):
        def decompositions(self) -> Any:
            return dict(table) if copies[0] else table

    x = torch.randn(4, 8)
    for copy in (False, True):
        copies[0] = copy
        for factor in (0.5, 2.0, 3.0):
            table[torch.ops.aten._softmax.default] = _scale_by(factor)
            module = Parser(make_context(), text).parse_module()
            UserTable().apply(make_context(), module)
            (out,) = run_function(module, [x], "f")
            torch.testing.assert_close(out, x * factor)


def test_decompositions_are_traced_on_the_program_device() -> None:
    # bf16 var_mean's decomposition makes a tensor (empty_permuted); traced on the CPU
    # for a CUDA program it was made on the CPU: the H200 returned a CPU tensor.
    module = _import(
        lambda x: torch.var_mean(x, dim=1, correction=1), torch.randn(4, 7, dtype=torch.bfloat16)
    )
    on_cpu = module.clone()
    DecomposePass().apply(make_context(), on_cpu)
    assert 'device = "cpu"' in str(on_cpu)  # what the CPU trace makes: the check can fail
    module.attributes["kiln.device"] = StringAttr("cuda:0")
    DecomposePass().apply(make_context(), module)
    assert 'device = "cpu"' not in str(module)


@pytest.mark.parametrize(
    ("dtype", "overload", "half_to_float"),
    [
        (torch.int32, torch.ops.aten._softmax.default, False),
        (torch.int16, torch.ops.aten._log_softmax.default, False),
        (torch.float32, torch.ops.aten._softmax.default, False),
    ],
    ids=["softmax-int32", "log_softmax-int16", "softmax-float32"],
)
def test_softmax_of_an_empty_tensor_is_an_empty_tensor(
    dtype: torch.dtype, overload: Any, half_to_float: bool
) -> None:
    """PyTorch's decomposition pads the empty dim with ``-inf``, which an integer tensor
    cannot hold (``aten.full`` raised "value cannot be converted to type int"); eager
    returns an empty tensor of the input's dtype (found by the batched program fuzzer)."""
    x = torch.zeros(0, 3, dtype=dtype)
    module = _import(lambda t: overload(t, 0, half_to_float), x)
    DecomposePass().apply(make_context(), module)
    module.verify()
    assert overload.name() not in _overloads(module)
    (out,) = run_function(module, [x])
    assert isinstance(out, torch.Tensor)
    want = overload(x, 0, half_to_float)
    assert (out.dtype, out.shape, out.stride()) == (want.dtype, want.shape, want.stride())


_ATTENTION = """
func.func @f(%q: tensor<1x2x?x16xf32> {kiln.size_symbols = ["", "", "s0", ""]},
             %k: tensor<1x2x?x16xf32> {kiln.size_symbols = ["", "", "s0", ""]},
             %v: tensor<1x2x?x16xf32> {kiln.size_symbols = ["", "", "s0", ""]})
    -> tensor<1x?x2x16xf32> HINTS {
  %kt = aten.transpose.int(%k, dim0 = 1, dim1 = 2) {kiln.traced_sizes = [["", "s0", "", ""]]} : (tensor<1x2x?x16xf32>) -> tensor<1x?x2x16xf32>
  %k2 = aten.transpose.int(%kt, dim0 = 1, dim1 = 2) {kiln.traced_sizes = [["", "", "s0", ""]]} : (tensor<1x?x2x16xf32>) -> tensor<1x2x?x16xf32>
  %o, %lse = aten._scaled_dot_product_flash_attention_for_cpu.default(%q, %k2, %v, is_causal = true) {kiln.traced_sizes = [["", "", "s0", ""], ["", "", "s0"]]} : (tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>) -> (tensor<1x2x?x16xf32>, tensor<1x2x?xf32>)
  %r = aten.transpose.int(%o, dim0 = 1, dim1 = 2) {kiln.traced_sizes = [["", "s0", "", ""]]} : (tensor<1x2x?x16xf32>) -> tensor<1x?x2x16xf32>
  func.return %r : tensor<1x?x2x16xf32>
}
"""
FLASH_CPU = "aten::_scaled_dot_product_flash_attention_for_cpu.default"


@pytest.mark.parametrize(
    ("hints", "kept"),
    [
        ("attributes {kiln.size_hints = {s0 = 12 : i64}}", False),
        ("attributes {kiln.size_hints = {s0 = 64 : i64}}", True),
        ("", True),  # no traced length: judged long
    ],
    ids=["short", "long", "unknown"],
)
def test_attention_of_a_symbolic_length_is_chosen_by_its_hint(hints: str, kept: bool) -> None:
    """q, k and v of one traced length (``s0``, even where k went through transposes
    that decompose first) share a size symbol, so the decomposition traces without a
    guard; the traced length (``kiln.size_hints``) decides, as a static length does.
    Either program computes eager's numbers at every length."""
    module = Parser(make_context(), _ATTENTION.replace("HINTS", hints)).parse_module()
    DecomposePass().apply(make_context(), module)
    module.verify()
    assert (FLASH_CPU in _overloads(module)) == kept
    for length in (3, 12, 70):
        q, k, v = (torch.randn(1, 2, length, 16) for _ in range(3))
        (out,) = run_function(module, [q, k, v], "f")
        expected = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2)
        torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)


def test_decomposed_results_keep_the_traced_sizes() -> None:
    """The op that computes a decomposed op's result takes its ``kiln.traced_sizes``
    (the trace's own symbols are dropped): a transpose's permute still says ``s0``."""
    text = _ATTENTION.replace("HINTS", "")
    module = Parser(make_context(), text).parse_module()
    DecomposePass(ops=("aten.transpose.int",)).apply(make_context(), module)
    permutes = [op for op in module.walk() if op.name == "aten.permute.default"]
    assert len(permutes) == 3
    for permute in permutes:
        assert str(permute.attributes["kiln.traced_sizes"]).count('"s0"') == 1


_ZERO_TENSOR = """
func.func @forward() -> tensor<2x3xf32> {
  %z = aten.generic "aten::_efficientzerotensor.default"(size = [2, 3], dtype = f32, layout = "strided", device = "cpu") : () -> tensor<2x3xf32>
  func.return %z : tensor<2x3xf32>
}
"""


def test_efficient_zero_tensor_becomes_materialised_zeros() -> None:
    """Autograd's zero gradients (``sgn``, ``sign``) are ZeroTensors, which have no
    storage for a buffer: kiln's runtime failed on one ("invalid python storage", found
    by the gradient OpInfo sweep); decomposed, they are plain zeros."""
    module = Parser(make_context(), _ZERO_TENSOR).parse_module()
    DecomposePass().apply(make_context(), module)
    module.verify()
    assert _overloads(module) == {"aten::full.default"}
    (out,) = run_function(module, [])
    assert isinstance(out, torch.Tensor)
    assert not out._is_zerotensor()
    torch.testing.assert_close(out, torch.zeros(2, 3))
