"""torch.compile(backend="kiln"): inference, training, fallbacks, options, debug output."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from models import ALL_MODELS  # tests/models.py
from torch import nn

import kiln
from kiln.compiler import CompileError, last_compile_stats


def test_backend_is_found_without_importing_kiln() -> None:
    code = (
        "import sys, torch\n"
        "f = torch.compile(lambda x: (x.relu() + 1) * 2, backend='kiln')\n"
        "x = torch.randn(8, 4)\n"
        "torch.testing.assert_close(f(x), (x.relu() + 1) * 2)\n"
        "assert 'kiln' in torch._dynamo.list_backends()\n"
        "print('ok')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().endswith("ok")
    assert "kiln: " in proc.stderr  # the one-line summary per graph


@pytest.mark.parametrize(
    "name", ["mlp", "layer_norm", "attention", "gpt_block", "embedding_indexing"]
)
def test_models_compile_and_equal_eager(name: str) -> None:
    model, inputs = ALL_MODELS[name]()
    model.eval()
    compiled = kiln.compile(model, verbose=False)
    with torch.no_grad():
        expected = model(*inputs)
        actual = compiled(*inputs)
    torch.testing.assert_close(actual, expected, atol=1e-4, rtol=1e-4)


def test_training_step_gives_eager_gradients() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 4))
    reference = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 4))
    reference.load_state_dict(model.state_dict())
    x, target = torch.randn(6, 8), torch.randn(6, 4)

    compiled = kiln.compile(model, verbose=False)
    for net, fn in ((model, compiled), (reference, reference)):
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        loss = F.mse_loss(fn(x), target)
        loss.backward()
        opt.step()
    for p, q in zip(model.parameters(), reference.parameters(), strict=True):
        assert p.grad is not None
        assert q.grad is not None
        torch.testing.assert_close(p.grad, q.grad, atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(p, q, atol=1e-5, rtol=1e-4)


def test_unsupported_op_falls_back_to_aten() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return torch.cumprod(x.relu(), dim=1) + torch.linalg.vector_norm(x, dim=1, keepdim=True)

    x = torch.randn(4, 8)
    out = kiln.compile(fn, verbose=False)(x)
    torch.testing.assert_close(out, fn(x))
    assert any("cumprod" in name for name in last_compile_stats().externs)


def test_debug_dir_holds_graph_ir_and_report(tmp_path: Path) -> None:
    fn = kiln.compile(lambda x: torch.softmax(x, -1) * 2, debug_dir=str(tmp_path), verbose=False)
    x = torch.randn(4, 8)
    torch.testing.assert_close(fn(x), torch.softmax(x, -1) * 2)
    (graph_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    files = sorted(p.name for p in graph_dir.iterdir())
    assert "fx_graph.py" in files
    assert "00_aten.mlir" in files
    assert any(name.endswith("_lower-aten.mlir") for name in files)


def test_unknown_option_is_a_clear_error() -> None:
    with pytest.raises(Exception, match="unknown kiln option"):
        kiln.compile(lambda x: x + 1, no_such_option=True)(torch.randn(2))


def test_custom_pipeline_option() -> None:
    fn = kiln.compile(
        lambda x: torch.softmax(x, -1), pipeline="decompose,lower-aten", verbose=False
    )
    x = torch.randn(3, 5)
    torch.testing.assert_close(fn(x), torch.softmax(x, -1))
    # output-layout joins a pipeline that lacks it (outputs alias as in eager).
    assert list(last_compile_stats().pass_seconds) == ["decompose", "output-layout", "lower-aten"]


def test_compile_error_type_is_exported() -> None:
    assert issubclass(CompileError, RuntimeError)


def test_explain_reports_graphs_fallbacks_and_fusion() -> None:
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.LayerNorm(16)).eval()
    text = kiln.explain(model, torch.randn(4, 8), print_report=False)
    assert "1 graph(s), 0 graph break(s)" in text
    assert "aten::mm.default" in text  # addmm feeding GELU: unfuse-addmm splits off the bias
    assert "fusion decisions:" in text
    assert "fused (vertical" in text


def test_explain_reports_stamped_layers() -> None:
    """Repeated layers are lowered once and stamped (lower-aten), and scheduled once
    (fuse): the report says so."""
    layers = [nn.Sequential(nn.Linear(8, 8), nn.Tanh()) for _ in range(8)]
    text = kiln.explain(nn.Sequential(*layers).eval(), torch.randn(4, 8), print_report=False)
    assert re.search(r"lowered once \(lower-aten\): stamped \d+ of \d+ periods", text), text
    assert re.search(r"scheduled once \(fuse\): stamped \d+ of \d+ periods", text), text


def test_dynamic_shapes_compile_once_for_several_sizes() -> None:
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.LayerNorm(32), nn.Softmax(-1)).eval()
    compiled = kiln.compile(model, dynamic=True, verbose=False)
    from kiln.compiler import compile_history, reset_compile_history

    reset_compile_history()
    with torch.no_grad():
        for batch in (3, 5, 9):
            x = torch.randn(batch, 16)
            torch.testing.assert_close(compiled(x), model(x))
    assert len(compile_history()) == 1
    # Composites decompose with symbolic sizes too: only the matmul runs through ATen.
    assert set(compile_history()[0].externs) == {"aten::mm.default"}


def test_outputs_have_eager_strides() -> None:
    """Outputs come back with the strides eager gives them (a transposed result stays
    transposed), at no extra kernel: the permuted layout is written directly."""

    def fn(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return x.t() * 2, torch.relu(y.permute(0, 2, 3, 1)) + 1, x + 1

    x, y = torch.randn(4, 8), torch.randn(2, 3, 5, 6)
    expected = fn(x, y)
    got = kiln.compile(fn, verbose=False)(x, y)
    for want, have in zip(expected, got, strict=True):
        torch.testing.assert_close(have, want)
        assert have.stride() == want.stride()
    assert last_compile_stats().kernels == 2


def test_a_zero_gradient_of_sign_trains() -> None:
    """``sgn``'s gradient is autograd's ZeroTensor: the backward graph of a step whose
    input reaches the loss only through ``sgn`` is one ``_efficientzerotensor``, which
    kiln ran as an ATen call whose result has no storage ("invalid python storage")."""
    x = torch.randn(6, 5, requires_grad=True)
    grad = torch.randn(6, 5)
    (got,) = torch.autograd.grad(kiln.compile(torch.sgn, verbose=False)(x), x, grad)
    (want,) = torch.autograd.grad(torch.sgn(x), x, grad)
    torch.testing.assert_close(got, want)
    assert not got._is_zerotensor()


def test_the_gradient_of_an_empty_qr_trains() -> None:
    """QR of a [5, 0] matrix: inlining into the empty backward's loops composed an index
    that divides by the zero size (``zoo*d0``, a verifier error); found by the OpInfo
    gradient sweep (``qr`` samples 2 and 5). Empty loops are not inlined into."""
    x = torch.randn(5, 0, requires_grad=True)

    def fn(a: torch.Tensor) -> torch.Tensor:
        q, r = torch.linalg.qr(a)
        return q.sum() + r.sum() + a.sum()

    (got,) = torch.autograd.grad(kiln.compile(fn, verbose=False)(x), x)
    (want,) = torch.autograd.grad(fn(x), x)
    assert got.shape == want.shape == (5, 0)
