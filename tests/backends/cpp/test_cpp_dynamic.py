"""``torch.compile(..., backend="kiln", dynamic=True)`` on the C++ executor against eager
(cases in ``tests/dynamic_cases.py``): views with symbolic sizes, host arithmetic on
sizes, and the size of index expressions through long chains of views."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from dynamic_cases import ARITH_CASES, SIZES_2D, VIEW_CASES, run_dynamic, sdpa


@pytest.mark.parametrize("name", list(VIEW_CASES))
def test_views_with_symbolic_sizes(name: str) -> None:
    run_dynamic(VIEW_CASES[name], SIZES_2D)


def test_symbolic_chunk_and_split_lower_to_views() -> None:
    """Uneven chunk/split of a symbolic dim are index maps, not ATen fallbacks."""
    from kiln.compiler import compile_history, reset_compile_history

    reset_compile_history()
    run_dynamic(VIEW_CASES["chunk_cat"], SIZES_2D[:2])
    run_dynamic(VIEW_CASES["split_symbolic"], SIZES_2D[:2])
    assert compile_history()
    assert all(not stats.externs for stats in compile_history())


@pytest.mark.parametrize("name", list(ARITH_CASES))
def test_host_arithmetic_on_sizes(name: str) -> None:
    run_dynamic(ARITH_CASES[name], SIZES_2D)


def test_sdpa_scale_from_a_symbolic_head_dim() -> None:
    """SDPA's default scale is 1/sqrt(head_dim): a SymFloat computed on the host."""
    run_dynamic(
        sdpa, [[(2, 3, 5, 8)] * 3, [(2, 3, 7, 16)] * 3, [(1, 2, 9, 4)] * 3], check_strides=False
    )


@pytest.mark.parametrize("mode", ["nearest", "bilinear"])
def test_interpolate_with_symbolic_sizes(mode: str) -> None:
    """``interpolate`` computes its output size as ``trunc(sym_float(h) * scale)``."""
    run_dynamic(
        lambda x: F.interpolate(x, scale_factor=1.5, mode=mode) * 2,
        [(1, 2, 5, 6), (2, 2, 7, 3), (1, 3, 4, 9)],
    )


def _reshape_chain(x: torch.Tensor) -> torch.Tensor:
    """20 reshapes torch cannot view (of a transposed layout), and 20 that it can."""
    a, b, c = x.shape
    for _ in range(20):
        x = x.transpose(1, 2).reshape(a, b, c)
    for k in range(20):
        x = x.reshape(a * b, c).t().reshape(c, a, b).permute(1, 2, 0)
        x = x + 1 if k % 5 == 4 else x
    return x * 2


def test_chains_of_views_keep_index_expressions_small(tmp_path: Path) -> None:
    """Symbolic sizes: tensor dims and SymInt arguments share symbols (views of
    ``a*b`` are views), and reshapes torch cannot view stay under the index-size bound
    (a copy instead of a nested ``//``/``%`` expression, which grew exponentially)."""
    run_dynamic(
        _reshape_chain,
        [(3, 5, 4), (2, 3, 7)],
        executor="cpp",
        options={"debug_dir": str(tmp_path)},
    )
    sources = list(tmp_path.glob("*/kernels.cpp"))
    assert sources
    for source in sources:
        text = source.read_text()
        assert len(text) < 120_000
        assert max(len(line) for line in text.splitlines()) < 4_000


def _division_lines(folder: Path) -> list[str]:
    """Kernel lines (not the prelude's definitions) that divide at run time."""
    out: list[str] = []
    for source in folder.glob("*/kernels.cpp"):
        for line in source.read_text().splitlines():
            if ("kiln_floordiv(" in line or "kiln_mod(" in line) and "KILN_INLINE" not in line:
                out.append(line.strip())
    return out


def _attention_scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    b, t, _ = q.shape
    scores = torch.bmm(q, k.transpose(1, 2))  # an extern: ATen's result
    return scores.view(b * t, t).softmax(-1).view(b, t, t) * 2


def test_extern_results_keep_the_graphs_sizes(tmp_path: Path) -> None:
    """A matrix product's symbolic result sizes are its operands' (``[s0, s1, s1]``),
    not fresh symbols read from the result: a view of it is a strided view, and the
    softmax over it indexes without a per-element ``//`` or ``%``."""
    run_dynamic(
        _attention_scores,
        [[(2, 5, 8)] * 2, [(3, 7, 8)] * 2],
        options={"debug_dir": str(tmp_path)},
    )
    assert not _division_lines(tmp_path)


def _heads_and_transposed_heads(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    b, t, _ = x.shape
    heads = x.view(b, t, 4, 8).transpose(1, 2)
    q = heads.reshape(b * 4, t, 8) * 2  # [4*s0, s1, 8]
    k = heads.transpose(2, 3).reshape(b * 4, 8, t) * 3  # [4*s0, 8, s1]
    return q, k


def test_transposed_shapes_are_not_fused_into_per_element_divisions(tmp_path: Path) -> None:
    """Attention's q and transposed k read one input in shapes whose dims cross
    (``[4*s0, s1, 8]`` and ``[4*s0, 8, s1]``): under symbolic sizes no loop nest fits
    both, so they run as two kernels rather than one dividing by ``s1`` per element."""
    run_dynamic(
        _heads_and_transposed_heads,
        [(2, 5, 32), (3, 7, 32)],
        options={"debug_dir": str(tmp_path)},
    )
    assert not _division_lines(tmp_path)


def _sdpa_heads(x: torch.Tensor) -> torch.Tensor:
    b, t, c = x.shape
    q = x.view(b, t, 4, 8).transpose(1, 2)
    y = F.scaled_dot_product_attention(q, q * 0.5, q)  # an extern: ATen's result
    return y.transpose(1, 2).reshape(b, t, c) * 2


def test_extern_results_take_the_traced_sizes(tmp_path: Path) -> None:
    """An extern without a size rule of its own (SDPA) gets the sizes the tracer gave its
    result (``[s0, 4, s1, 8]``), not fresh symbols: the transpose-and-flatten after it
    is a strided view, indexed without a per-element ``//`` or ``%``."""
    run_dynamic(
        _sdpa_heads,
        [(2, 5, 32), (3, 7, 32)],
        options={"debug_dir": str(tmp_path)},
        check_strides=False,
    )
    assert not _division_lines(tmp_path)


def _regroup(x: torch.Tensor) -> torch.Tensor:
    n, c = x.shape
    groups = x.view(-1, 4, c).sum(1, keepdim=True)  # [n // 4, 1, c]
    return (x.view(-1, 4, c) - groups).view(n, c) * 2  # back to [n, c]


def test_minus_one_views_divide_out_common_sizes(tmp_path: Path) -> None:
    """``view(-1, 4, c)`` of ``[s0, c]``: the ``-1`` is ``(s0*s1) // (4*s1)``, which is
    ``s0 // 4`` (positive sizes cancel), not a division the kernels compute at run time."""
    run_dynamic(_regroup, [(8, 5), (12, 7), (16, 3)], options={"debug_dir": str(tmp_path)})
    assert not _division_lines(tmp_path)


class _ConvBlock(torch.nn.Module):
    """conv, batch norm, relu, conv, residual add: ResNet's block at inference."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 16, 3, padding=1, bias=False)
        self.bn = torch.nn.BatchNorm2d(16)
        self.conv2 = torch.nn.Conv2d(16, 16, 3, padding=1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn(self.conv1(x)))
        return torch.relu(y + self.conv2(y))


def _randomize_running_stats(bn: torch.nn.BatchNorm2d) -> None:
    mean, var = bn.running_mean, bn.running_var
    assert mean is not None
    assert var is not None
    mean.uniform_(-0.5, 0.5)
    var.uniform_(0.5, 1.5)


def test_channels_last_convolutions_keep_the_traced_sizes(tmp_path: Path) -> None:
    """The NHWC result of a channels-last convolution gets the tracer's sizes (permuted),
    not fresh symbols read from ATen's result: the batch norm and residual kernels over
    it index without a per-element ``//`` or ``%`` (ResNet ran 2-3x slower dynamic than
    static), and the strided views the convolutions read are direct
    ``_reinterpret_tensor`` calls, not the interpreter's call plan."""
    torch.manual_seed(0)
    block = _ConvBlock().eval()
    with torch.no_grad():
        _randomize_running_stats(block.bn)
        run_dynamic(block, [(2, 3, 12, 12), (3, 3, 10, 10)], options={"debug_dir": str(tmp_path)})
    assert not _division_lines(tmp_path)
    wrappers = [w.read_text() for w in tmp_path.glob("*/wrapper.py")]
    assert any("_reinterpret_tensor(" in w for w in wrappers)
    assert not any(".run((" in w for w in wrappers)


class _StridedConvBlock(torch.nn.Module):
    """A stride-2 convolution (output size ``(s - 1) // 2 + 1``), batch norm, relu, a
    convolution and a mean over the image (no 4-D result: the chain stays NHWC)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 32, 3, stride=2, padding=1, bias=False)
        self.bn = torch.nn.BatchNorm2d(32)
        self.conv2 = torch.nn.Conv2d(32, 32, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv2(torch.relu(self.bn(self.conv(x)))).mean((2, 3))


def test_strided_convolution_outputs_merge_rows_without_dividing(tmp_path: Path) -> None:
    """The batch norm over a strided convolution's NHWC output ``[s0, h, h, 32]``, with
    ``h = (s1 - 1) // 2 + 1``, runs as ``[s0*h*h, 32]`` rows (as the static kernel does)
    with loads and stores at ``32*x0 + x1``: the merged loop's index is carried through
    the merges that chose it (``LoopSpace.replay``) and ``64*f*(x // h) + 64*(x // h) +
    64*(x % h)`` joins. ResNet-18's dynamic batch-norm kernels recomputed the
    convolution's output size in every load and ran 3-6x slower than the static ones."""
    torch.manual_seed(0)
    block = _StridedConvBlock().eval()
    with torch.no_grad():
        _randomize_running_stats(block.bn)
        run_dynamic(block, [(2, 3, 12, 12), (4, 3, 9, 9)], options={"debug_dir": str(tmp_path)})
    kernels = [
        kernel
        for source in tmp_path.glob("*/kernels.cpp")
        for kernel in source.read_text().split('extern "C"')
    ]
    (batch_norm,) = [k for k in kernels if "out_ptr0[32*x0 + x1] = " in k]  # [rows, 32]
    accesses = [line for line in batch_norm.splitlines() if "_ptr" in line and "[" in line]
    assert not [line for line in accesses if "kiln_floordiv" in line or "kiln_mod" in line]


def _rotate_heads(x: torch.Tensor) -> torch.Tensor:
    b, t, _ = x.shape
    q = x.view(b, t, 4, 8).transpose(1, 2)  # [s0, 4, s1, 8]
    q1, q2 = q.chunk(2, dim=-1)
    return q * 2 + torch.cat([-q2, q1], dim=-1)


def test_rotary_cat_of_a_head_view_does_not_divide(tmp_path: Path) -> None:
    """RoPE's ``cat([-x2, x1])`` of a transposed head view: the inlined ``-x2`` is read
    under the cat's mask (``d3 < 4``), which bounds its unflattened position; without
    that bound every element divided by ``s1`` (LLaMA ran 2x slower dynamic than static)."""
    run_dynamic(
        _rotate_heads,
        [(2, 5, 32), (3, 7, 32)],
        options={"debug_dir": str(tmp_path)},
        check_strides=False,  # eager keeps the transposed layout (not what this checks)
    )
    assert not _division_lines(tmp_path)


class _RotaryTable(torch.nn.Module):
    """``x * table[:t]``: a static table sliced by the symbolic sequence length, and a
    float attribute that dynamo passes as a 0-d float64 tensor under ``dynamic=True``."""

    table: torch.Tensor

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("table", torch.randn(64, 8), persistent=False)
        self.eps = 1e-6

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = x.shape[1]
        norm = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return x * norm * self.table[:t]


def test_a_static_table_sliced_by_a_symbolic_length_is_a_view(tmp_path: Path) -> None:
    """``table[:t]`` (the tracer's result size is the unclamped ``t``: dynamo guarded
    ``t <= 64``) is a view read by the kernel, not an ATen ``slice`` call per step; the
    float attribute's ``convert_element_type`` casts are kernels, not ATen calls."""
    torch.manual_seed(0)
    module = _RotaryTable()
    run_dynamic(module, [(2, 5, 8), (3, 7, 8), (2, 64, 8)], options={"debug_dir": str(tmp_path)})
    wrappers = "\n".join(w.read_text() for w in tmp_path.glob("*/wrapper.py"))
    assert "kernel.extern" not in wrappers


def _attention_out(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    b, t, c = x.shape
    q = x.view(b, t, 4, 8).transpose(1, 2)  # [s0, 4, s1, 8]
    y = torch.softmax(q @ q.transpose(-2, -1), -1) @ q
    return y.transpose(1, 2).reshape(b, t, c) @ w


def test_attention_output_copy_and_softmax_rows_do_not_divide(tmp_path: Path) -> None:
    """The ``[s0*s1, 32]`` copy of the transposed attention output is made in its own
    ``[s0, s1, 4, 8]`` space (it divided by ``s1`` per row), and the softmax over
    ``[4*s0*s1]`` rows of ``[s0, 4, s1, s1]`` scores indexes rows by ``s1*x0`` (the
    ``s1**2`` stride's divisions joined)."""
    run_dynamic(
        _attention_out,
        [[(2, 5, 32), (32, 16)], [(3, 7, 32), (32, 16)]],
        options={"debug_dir": str(tmp_path)},
    )
    assert not _division_lines(tmp_path)


def _size_floats(x: torch.Tensor, n: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Floats computed from sizes on the host, as decompositions make them: a mean's
    count (``var_mean``), an int tensor plus a float (promotes to float), a comparison."""
    width = float(x.shape[1])
    return (
        *torch.var_mean(x, 1, correction=1),
        n + width / 2,
        x > width / 8,
        torch.clamp(x * 2, max=width),
    )


def test_floats_of_sizes_run_in_kernels() -> None:
    """``x.sum(1) / sym_float(s1)`` ran as an ATen ``div.Scalar`` call under
    ``dynamic=True`` (the symbolic float had no loop-level form): now the size is
    converted in the kernel, exactly as ``float(size)``."""
    from kiln.compiler import last_compile_stats

    compiled: Any = torch.compile(
        _size_floats, backend="kiln", dynamic=True, options={"verbose": False, "executor": "cpp"}
    )
    with torch._dynamo.config.patch(cache_size_limit=64):
        for rows, width in [(3, 7), (4, 10), (2, 13)]:
            x = torch.randn(rows, width) * 4
            n = torch.randint(-5, 5, (rows, 1))
            expected, actual = _size_floats(x, n), compiled(x, n)
            for a, e in zip(actual, expected, strict=True):
                assert a.dtype == e.dtype
                torch.testing.assert_close(a, e, atol=1e-5, rtol=1e-5)
    stats = last_compile_stats()
    assert not stats.externs, stats.externs


def test_nodes_on_the_kernels_own_loops_skip_simplification(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node whose loops are its kernel's (its variables the row-major coordinates of
    ``d0`` over the kernel's sizes) takes the kernel's loop variables without sympy work;
    the kernels are the same as when every node's variables are simplified."""
    from kiln.passes.kernel_to_cpp import kernel as kernel_lowering

    calls = [0]
    real_simplify = kernel_lowering.simplify

    def counting(*args: Any) -> Any:
        calls[0] += 1
        return real_simplify(*args)

    monkeypatch.setattr(kernel_lowering, "simplify", counting)
    sources: list[str] = []
    counts: list[int] = []
    for fast in (True, False):
        if not fast:  # no node matches the space's own coordinates
            monkeypatch.setattr(kernel_lowering, "unflatten", lambda flat, sizes: [None])
        torch._dynamo.reset()
        calls[0] = 0
        out = tmp_path / str(fast)
        torch.manual_seed(0)
        block = _StridedConvBlock().eval()
        with torch.no_grad():
            _randomize_running_stats(block.bn)
            run_dynamic(block, [(2, 3, 12, 12), (4, 3, 9, 9)], options={"debug_dir": str(out)})
        sources.append("".join(p.read_text() for p in sorted(out.glob("*/kernels.cpp"))))
        counts.append(calls[0])
    assert sources[0] == sources[1]
    assert counts[0] < counts[1]
