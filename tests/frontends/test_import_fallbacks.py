"""What the importer does with programs kiln does not model: undefined tensors
(SDPA's ``attn_bias=None``), ``with_effects``, side-effect ops without ``meta['val']``,
dtypes without a loop-body type. Each imports, verifies and round-trips as text; the CPU
ones also run through the aten interpreter against eager."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx
from xdsl.dialects.builtin import ModuleOp, NoneType
from xdsl.dialects.func import FuncOp
from xdsl.parser import Parser

from kiln.dialects.aten import GenericOp
from kiln.dialects.aten.attributes import OpaqueDtypeType
from kiln.dialects.aten.dtypes import dtype_to_type, type_to_dtype
from kiln.dialects.aten.interpreter import run_function
from kiln.frontends.capture import capture_make_fx
from kiln.frontends.fx import import_graph
from kiln.registry import make_context

aten = torch.ops.aten


def round_trips(module: ModuleOp) -> None:
    module.verify()
    text = str(module)
    parsed = Parser(make_context(), text).parse_module()
    parsed.verify()
    assert str(parsed) == text


def generic_ops(module: ModuleOp) -> dict[str, GenericOp]:
    return {op.overload.data: op for op in module.walk() if isinstance(op, GenericOp)}


# -- item 5: SDPA variants with None optionals --------------------------------------------


def _efficient(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> Any:
    out, lse, seed, offset = aten._scaled_dot_product_efficient_attention(q, k, v, None, True)
    return aten._scaled_dot_product_efficient_attention_backward(
        out, q, k, v, None, out, lse, seed, offset, 0.0, [True, True, True, False]
    )


def _flash(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> Any:
    out, lse, cum_q, cum_k, max_q, max_k, seed, offset, _ = (
        aten._scaled_dot_product_flash_attention(q, k, v)
    )
    return aten._scaled_dot_product_flash_attention_backward(
        out, q, k, v, out, lse, cum_q, cum_k, max_q, max_k, 0.0, False, seed, offset
    )


def _cudnn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> Any:
    result = aten._scaled_dot_product_cudnn_attention(q, k, v, None, True)
    out, lse, cum_q, cum_k, max_q, max_k, seed, offset, _ = result
    return aten._scaled_dot_product_cudnn_attention_backward(
        out, q, k, v, out, lse, seed, offset, None, cum_q, cum_k, max_q, max_k, 0.0, False
    )


@pytest.mark.parametrize(
    "program", [_efficient, _flash, _cudnn], ids=["efficient", "flash", "cudnn"]
)
def test_cuda_sdpa_variants_import_with_undefined_tensors(program: Callable[..., Any]) -> None:
    """The CUDA-only overloads, traced on fake CUDA tensors (no GPU needed): a None in a
    ``Tensor`` argument (``attn_bias``, ``cum_seq_q``) or result imports as aten.generic."""
    with FakeTensorMode():
        q, k, v = (torch.empty(2, 4, 8, 16, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    gm = make_fx(program, tracing_mode="fake")(q, k, v)
    module = import_graph(gm)
    round_trips(module)
    backward = next(
        op for name, op in generic_ops(module).items() if name.endswith("_backward.default")
    )
    assert "= none" in str(backward)  # the undefined tensor argument, printed by name


def _flash_cpu(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> Any:
    out, lse = aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, attn_mask=None)
    return aten._scaled_dot_product_flash_attention_for_cpu_backward(
        out * 0.5, q, k, v, out, lse, 0.0, False, attn_mask=None
    )


def _math_cpu(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> Any:
    return aten._scaled_dot_product_attention_math(q, k, v, None, 0.0, True)


@pytest.mark.parametrize("program", [_flash_cpu, _math_cpu], ids=["flash_for_cpu", "math"])
def test_cpu_sdpa_variants_run_with_none_optionals(program: Callable[..., Any]) -> None:
    inputs = [torch.randn(2, 3, 8, 16) for _ in range(3)]
    capture = capture_make_fx(program, *inputs)
    module = import_graph(capture.gm)
    round_trips(module)
    expected = program(*inputs)
    actual = run_function(module, list(capture.example_inputs))
    for a, e in zip(actual, expected, strict=True):
        torch.testing.assert_close(a, e)


def test_undefined_tensor_argument_round_trips_by_name() -> None:
    text = """
    func.func @f(%g: tensor<2x4x8x16xbf16>, %lse: tensor<2x4x32xf32>, %s: tensor<i64>) -> tensor<2x4x8x16xbf16> {
      %a, %b, %c, %d = aten.generic "aten::_scaled_dot_product_efficient_attention_backward.default"(%g, %g, %g, %g, attn_bias = none, %g, %lse, %s, %s, dropout_p = 0.0, grad_input_mask = [true, true, true, false]) : (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x32xf32>, tensor<i64>, tensor<i64>) -> (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, none)
      func.return %a : tensor<2x4x8x16xbf16>
    }
    """
    module = Parser(make_context(), text).parse_module()
    round_trips(module)
    (op,) = generic_ops(module).values()
    operands = op.tensor_operands()
    assert operands["attn_bias"] == []
    assert operands["out"] == [op.operands[0]]


# -- item 9: side-effect ops without meta['val'] ------------------------------------------------


def test_side_effect_ops_import_with_no_results_and_are_not_pure() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.one_hot(x, 5)

    def backend(gm: torch.fx.GraphModule, inputs: list[Any]) -> Any:
        from torch._dynamo.backends.common import aot_autograd

        def compiler(fx: torch.fx.GraphModule, _: Any) -> Any:
            graphs.append(fx)
            return fx

        return aot_autograd(fw_compiler=compiler)(gm, inputs)

    graphs: list[torch.fx.GraphModule] = []
    torch._dynamo.reset()
    torch.compile(fn, backend=backend)(torch.randint(0, 5, (6,)))
    module = import_graph(graphs[0])
    round_trips(module)
    asserts = [
        op
        for op in module.walk()
        if isinstance(op, GenericOp) and "_assert_async" in op.overload.data
    ]
    assert len(asserts) == 2
    assert all(not op.results for op in asserts)
    from xdsl.traits import is_side_effect_free

    assert not any(is_side_effect_free(op) for op in asserts)


# -- item 10: with_effects ----------------------------------------------------------------------


def test_with_effects_imports_its_op_and_a_none_token() -> None:
    graphs: list[torch.fx.GraphModule] = []

    def backend(gm: torch.fx.GraphModule, inputs: list[Any]) -> Any:
        from torch._dynamo.backends.common import aot_autograd

        def compiler(fx: torch.fx.GraphModule, _: Any) -> Any:
            graphs.append(fx)
            return fx

        return aot_autograd(fw_compiler=compiler)(gm, inputs)

    torch._dynamo.reset()
    torch.compile(torch.linalg.inv, backend=backend)(torch.randn(3, 3))
    if not any(
        n.target is getattr(torch.ops.higher_order, "with_effects", None)
        for n in graphs[0].graph.nodes
    ):
        pytest.skip("this torch does not wrap linalg checks in with_effects")
    module = import_graph(graphs[0])
    round_trips(module)
    assert "aten::_linalg_check_errors.default" in generic_ops(module)
    function = next(op for op in module.ops if isinstance(op, FuncOp))
    assert isinstance(function.args[0].type, NoneType)  # the token AOTAutograd passes as None


# -- item 11: dtypes ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "dtype",
    [
        torch.complex32,
        torch.float8_e4m3fn,
        torch.float8_e5m2,
        torch.qint8,
        torch.quint8,
        torch.bits8,
    ],
)
def test_every_dtype_has_an_element_type(dtype: torch.dtype) -> None:
    assert type_to_dtype(dtype_to_type(dtype)) is dtype


def test_opaque_dtype_round_trips_as_text() -> None:
    assert isinstance(dtype_to_type(torch.qint8), OpaqueDtypeType)
    text = """
    func.func @f(%x: tensor<5xf32>) -> tensor<5x!aten.dtype<"qint8">> {
      %q = aten.generic "aten::quantize_per_tensor.default"(%x, scale = 0.1, zero_point = 0, dtype = !aten.dtype<"qint8">) : (tensor<5xf32>) -> tensor<5x!aten.dtype<"qint8">>
      func.return %q : tensor<5x!aten.dtype<"qint8">>
    }
    """
    round_trips(Parser(make_context(), text).parse_module())


def test_quantized_values_get_their_dtype_not_the_fake_float32() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        q = torch.quantize_per_tensor(x, 0.1, 0, torch.qint8)
        return q[1:3].dequantize() * 2

    capture = capture_make_fx(fn, torch.randn(5))
    module = import_graph(capture.gm)
    round_trips(module)
    types = [(op.name, str(op.result_types[0])) for op in module.walk() if op.results]
    assert types[:3] == [
        ("aten.generic", 'tensor<5x!aten.dtype<"qint8">>'),  # quantize_per_tensor
        ("aten.slice.Tensor", 'tensor<2x!aten.dtype<"qint8">>'),
        ("aten.generic", "tensor<2xf32>"),  # dequantize
    ]
    x = torch.randn(5)
    torch.testing.assert_close(run_function(module, [x])[0], fn(x))
