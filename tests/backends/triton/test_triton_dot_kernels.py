"""Dot kernels (``dot-kernels``, issue 16): matrix products as ``tl.dot`` kernels with
their pointwise epilogue, against eager (in Triton's interpreter on the CI machine, on
the GPU with ``KILN_TRITON_DEVICE=cuda``)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from triton_checks import DEVICE, TOLERANCE, capture
from xdsl.dialects.builtin import ModuleOp, StringAttr

from kiln.compile_options import DEFAULT_PIPELINE
from kiln.dialects.aten.function_attrs import DEVICE_ATTR
from kiln.dialects.aten.fx import import_graph
from kiln.dialects.kernel.kernel_ops import KernelOp
from kiln.dialects.kernel.program_ops import LaunchOp
from kiln.frontends.dynamo import kiln_backend
from kiln.passes.dot_kernels import DotKernelsPass
from kiln.registry import default_registry
from kiln.targets import build_triton_program

BEFORE = ("decompose", "canonicalize", "cse", "dce", "unfuse-addmm")
AFTER = ("lower-aten", "fuse", "tile", "buffer-reuse")


def _compile(
    fn: Callable[..., Any], *inputs: torch.Tensor, mode: str = "all"
) -> tuple[Any, ModuleOp]:
    module = import_graph(capture(fn, *inputs).gm)
    module.attributes[DEVICE_ATTR] = StringAttr("cuda")
    registry = default_registry()
    ctx = registry.make_context()
    for name in BEFORE:
        registry.get_pass(name)().apply(ctx, module)
    DotKernelsPass(mode=mode).apply(ctx, module)
    for name in AFTER:
        registry.get_pass(name)().apply(ctx, module)
    kinds = [str(k.kernel_kind) for k in module.ops if isinstance(k, KernelOp)]
    return build_triton_program(module), module, kinds  # pyright: ignore[reportReturnType]


def _check(fn: Callable[..., Any], inputs: list[torch.Tensor], dtype: torch.dtype) -> str:
    program, _, kinds = _compile(fn, *inputs)
    assert "matmul" in kinds, kinds
    got = program([x.clone().to(DEVICE) for x in inputs])
    want = fn(*(x.double() for x in inputs))
    rtol, atol = TOLERANCE[dtype]
    scale = max(1.0, want.abs().max().item())
    torch.testing.assert_close(got[0].double().cpu(), want, rtol=rtol, atol=atol * scale)
    return program.source


def _epilogue(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    return torch.relu(x @ w + b) + r


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize(("m", "k", "n"), [(40, 48, 24), (37, 45, 29), (16, 64, 32)])
def test_product_with_its_epilogue_in_one_kernel(
    dtype: torch.dtype, m: int, k: int, n: int
) -> None:
    torch.manual_seed(m + k + n)
    inputs = [torch.randn(m, k), torch.randn(k, n) / k**0.5, torch.randn(n), torch.randn(m, n)]
    inputs = [x.to(dtype) for x in inputs]
    program, module, kinds = _compile(_epilogue, *inputs)
    assert kinds == ["matmul"], kinds  # bias, ReLU and the residual add run in its epilogue
    assert "extern" not in str(module.ops.last)  # no ATen call left
    got = program([x.clone().to(DEVICE) for x in inputs])[0]
    want = _epilogue(*(x.double() for x in inputs))
    rtol, atol = TOLERANCE[dtype]
    torch.testing.assert_close(got.double().cpu(), want, rtol=rtol, atol=atol * 4)
    source = program.source
    assert "tl.dot(" in source
    if dtype == torch.float32:
        assert "input_precision='ieee'" in source  # no TF32 unless torch allows it
    if k % 64 == 0:
        # every candidate chunk divides k: the loads check no inner bound
        assert f"< {k}" not in source


def test_transposed_operands() -> None:
    torch.manual_seed(1)
    a, b, c = torch.randn(45, 37), torch.randn(29, 45), torch.randn(37, 29)
    _check(lambda a, b, c: torch.sigmoid(a.t() @ b.t()) * c, [a, b, c], torch.float32)


def test_addmm_bias_in_the_epilogue() -> None:
    torch.manual_seed(2)
    x, w, b = torch.randn(24, 40), torch.randn(32, 40), torch.randn(32)
    # the product is also returned: unfuse-addmm keeps the addmm, the dot kernel takes it
    source = _check(lambda x, w, b: torch.addmm(b, x, w.t()), [x, w, b], torch.float32)
    assert "tl.dot(" in source


def test_a_row_reduction_of_the_product_stays_its_own_kernel() -> None:
    """LayerNorm's statistics reduce the product's rows: not the output tiles a dot
    kernel computes, so they run in a kernel after it."""
    torch.manual_seed(3)
    x, w = torch.randn(20, 48), torch.randn(48, 40)
    fn = lambda x, w: torch.nn.functional.layer_norm(x @ w, (40,))  # noqa: E731
    program, _, kinds = _compile(fn, x, w)
    assert sorted(kinds) == ["matmul", "persistent"], kinds
    got = program([x.to(DEVICE), w.to(DEVICE)])[0]
    torch.testing.assert_close(got.cpu(), fn(x, w), rtol=1e-4, atol=1e-4)


def test_an_operand_s_producer_is_not_inlined() -> None:
    """``tl.dot`` reads plain tiles: a pointwise producer of an operand stays a kernel."""
    torch.manual_seed(4)
    x, w = torch.randn(20, 48), torch.randn(48, 40)
    fn = lambda x, w: torch.relu(x) @ torch.tanh(w)  # noqa: E731
    program, _, kinds = _compile(fn, x, w)
    assert "matmul" in kinds, kinds
    got = program([x.to(DEVICE), w.to(DEVICE)])[0]
    torch.testing.assert_close(got.cpu(), fn(x, w), rtol=1e-4, atol=1e-4)


class _Mlp(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = torch.nn.Linear(48, 64)
        self.down = torch.nn.Linear(64, 40)
        self.norm = torch.nn.LayerNorm(40)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.nn.functional.gelu(self.up(x))
        return self.norm(self.down(h) + x[:, :40])


def _step(model: torch.nn.Module, x: torch.Tensor) -> list[torch.Tensor]:
    y = model(x)
    y.float().square().mean().backward()
    return [y, *(p.grad for p in model.parameters() if p.grad is not None)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_training_step_through_torch_compile(
    tmp_path: Path, fresh_dynamo: None, dtype: torch.dtype
) -> None:
    """Forward and backward of an MLP block with every product a dot kernel: as close to
    float64 as eager is, output and gradients (the backward's weight gradients are
    products of transposes)."""
    del fresh_dynamo
    torch.manual_seed(5)
    model = _Mlp().to(DEVICE, dtype)
    eager = copy.deepcopy(model)
    exact = copy.deepcopy(model).double()
    pipeline = DEFAULT_PIPELINE.replace("dot-kernels", "dot-kernels{mode=all cpu=true}")
    options = {
        "executor": "triton",
        "verbose": False,
        "cuda_graphs": False,
        "graph_cache": False,
        "pipeline": pipeline,
        "debug_dir": str(tmp_path),
    }
    compiled = torch.compile(model, backend=kiln_backend, options=options)
    x = torch.randn(37, 48, device=DEVICE, dtype=dtype)
    got = _step(compiled, x)
    want = _step(eager, x)
    truth = _step(exact, x.double())
    assert len(got) == len(want) == len(truth) == 7
    for g, w, t in zip(got, want, truth, strict=True):
        kiln_error = (g.double() - t).abs().max().item()
        eager_error = (w.double() - t).abs().max().item()
        assert kiln_error <= 2 * eager_error + 1e-6 * max(1.0, t.abs().max().item())
    dots = {
        path.parent.name.split("_")[0]: path.read_text().count("tl.dot(")
        for path in tmp_path.glob("*/triton_module.py")
    }
    # forward: both linears; backward: the input gradient of each linear but the first
    # (its input needs none) and both weight gradients
    assert dots == {"forward": 2, "backward": 3}, dots


def test_the_output_never_overwrites_an_operand() -> None:
    """Other programs still read an operand's rows and columns while one stores its tile:
    buffer-reuse must not write the product into an operand's buffer in place (the
    operand here is a temporary of the same size, dead after the product)."""

    def fn(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        x = a * 2
        return torch.relu(x @ w) + 1

    a, w = torch.randn(32, 32), torch.randn(32, 32)
    program, module, kinds = _compile(fn, a, w)
    assert kinds == ["pointwise", "matmul"], kinds
    launches = [op for op in module.walk() if isinstance(op, LaunchOp)]
    product = launches[-1]
    assert product.outs[0] not in list(product.args), str(module.ops.last)
    got = program([a.to(DEVICE), w.to(DEVICE)])[0]
    torch.testing.assert_close(got.cpu(), fn(a, w), rtol=1e-4, atol=1e-4)


def _two_projections_of_one_input(
    x: torch.Tensor, wk: torch.Tensor, wv: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """LLaMA's key and value projections (grouped-query attention: one shape) of one
    normalized input."""
    h = x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6)
    return h @ wk, h @ wv


def test_products_of_one_shape_reading_one_result_stay_apart() -> None:
    # Regression: sibling-reduction merging put both products (alike reductions reading
    # one group's result) in one kernel, which the matmul lowering could not write
    # (GPU bfloat16 inference of LLaMA, Mistral, Qwen2, BART, BERT, T5 failed to compile).
    torch.manual_seed(0)
    inputs = [torch.randn(32, 64), torch.randn(64, 16) / 8, torch.randn(64, 16) / 8]
    inputs = [x.to(torch.bfloat16) for x in inputs]
    program, _, kinds = _compile(_two_projections_of_one_input, *inputs)
    assert kinds.count("matmul") == 2, kinds
    got = program([x.clone().to(DEVICE) for x in inputs])
    rtol, atol = TOLERANCE[torch.bfloat16]
    for actual, want in zip(
        got, _two_projections_of_one_input(*(x.double() for x in inputs)), strict=True
    ):
        torch.testing.assert_close(actual.double().cpu(), want, rtol=rtol, atol=atol * 4)
