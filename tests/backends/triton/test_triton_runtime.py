"""The Triton runtime: the generated wrapper, the disk cache, autotuning, launch keys."""

from __future__ import annotations

import copy
import gc
import io
import os
import stat
from pathlib import Path

import pytest
import torch
from triton_checks import DEVICE, capture, check, compile_capture, looped, randn

from kiln.backends.cache import CacheError, private_dir, store_json, store_source
from kiln.backends.triton.autotune import Autotuner
from kiln.backends.triton.runtime import TritonOptions, TritonProgram
from kiln.compiler import CompileError, CompileOptions, compile_graph
from kiln.frontends.capture import capture_make_fx


def test_wrapper_runs_externs_reuse_and_in_place() -> None:
    def fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        h = torch.relu(x @ w + 1.0)
        return (h @ w.t()).softmax(-1) + x

    compiled = check(fn, randn(6, 8), randn(8, 8))
    source = compiled.program.source
    assert "_mm(" in source  # the extern, inlined
    assert source.count("run_kiln_") >= 2
    assert "def call(args):" in source


def test_non_contiguous_arguments_are_copied() -> None:
    compiled = compile_capture(capture(lambda x: x * 2.0, randn(4, 6)))
    x = randn(6, 4).to(DEVICE).t()  # same shape, transposed strides
    (out,) = compiled.program([x])
    torch.testing.assert_close(out.cpu(), x.cpu() * 2.0)
    assert out.is_contiguous()


def test_cpu_tensors_for_real_triton_are_a_compile_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # Without the interpreter, a CPU tensor would fail at the first launch with
    # Triton's "Pointer argument cannot be accessed"; kiln says what is wrong up front.
    cap = capture_make_fx(lambda x: x * 2.0, torch.randn(4, 6))  # on the CPU, whatever DEVICE is
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(CompileError, match="input 0 is on cpu"):
        compile_graph(cap.gm, cap.example_inputs, CompileOptions(executor="triton", verbose=False))


def test_generated_module_is_cached_by_content(tmp_path: Path) -> None:
    options = TritonOptions(cache_dir=str(tmp_path))
    graph = capture(lambda x: x + 1.0, randn(8))
    first = compile_capture(graph, options=options).program
    second = compile_capture(graph, options=options).program
    assert isinstance(first, TritonProgram)
    assert isinstance(second, TritonProgram)
    assert first.path == second.path
    assert first.path.is_relative_to(tmp_path)
    assert stat.S_IMODE(first.path.parent.stat().st_mode) == 0o700
    # A corrupt entry is rewritten, never trusted.
    first.path.write_text("garbage")
    third = compile_capture(graph, options=options).program
    assert third.path.read_text() == first.source


def test_store_source_is_atomic_and_idempotent(tmp_path: Path) -> None:
    path = store_source(tmp_path, "triton", "print(1)\n")
    again = store_source(tmp_path, "triton", "print(1)\n")
    assert path == again
    assert path.read_text() == "print(1)\n"
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".")]


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX permissions")
def test_shared_cache_directory_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(CacheError, match="writable by other users"):
        private_dir(shared)


def test_autotune_benchmarks_configs_and_caches_the_winner(tmp_path: Path) -> None:
    def retile(kernel: object) -> None:
        from xdsl.dialects.builtin import ArrayAttr

        from kiln.dialects.kernel.attributes import ConfigAttr

        looped(rblock=8)(kernel)  # pyright: ignore[reportArgumentType]
        configs = [
            ConfigAttr.of({"XBLOCK": x, "RBLOCK": r, "num_warps": 2, "num_stages": 1})
            for x, r in ((2, 8), (4, 16), (1, 32))
        ]
        kernel.configs = ArrayAttr(configs)  # pyright: ignore[reportAttributeAccessIssue]

    options = TritonOptions(cache_dir=str(tmp_path), autotune=True)
    graph = capture(lambda x: x.sum(-1), randn(7, 40))
    compiled = compile_capture(graph, retile=retile, options=options)
    program = compiled.program
    assert isinstance(program, TritonProgram)
    assert program.tuner is not None
    progress = io.StringIO()
    program.tuner.progress = progress
    (out,) = program(compiled.args)
    torch.testing.assert_close(out.cpu(), compiled.expected[0], rtol=1e-4, atol=1e-5)
    (runner,) = program.runners.values()
    assert runner.config in [dict(c) for c in runner.spec.configs]
    assert "3 configs" in progress.getvalue()
    assert "->" in progress.getvalue()
    winners = list((tmp_path / "autotune").rglob("*.json"))
    assert len(winners) == 1
    # A new process (here: a new program) reads the winner instead of searching again.
    again = compile_capture(graph, retile=retile, options=options).program
    assert isinstance(again, TritonProgram)
    assert again.tuner is not None
    again.tuner.progress = progress
    again(compiled.args)
    assert "cached" in progress.getvalue()


def test_autotune_cache_entry_is_validated(tmp_path: Path) -> None:
    tuner = Autotuner(tmp_path, {}, "cpu", interpret=True, progress=None)
    path = tmp_path / "autotune" / "xx" / "bad.json"
    store_json(path, {"XBLOCK": 3})

    class Spec:
        configs = ({"XBLOCK": 4},)

    class Runner:
        spec = Spec()

    assert tuner._cached(Runner(), path) is None  # pyright: ignore[reportPrivateUsage, reportArgumentType]


def test_launch_key_tracks_alignment_and_size_classes() -> None:
    compiled = compile_capture(capture(lambda x: x.exp(), randn(32)))
    (runner,) = compiled.program.runners.values()
    x = torch.randn(33)
    assert runner.key([x, x]) == (1, 1)
    assert runner.key([x[1:], x]) == (0, 1)


@pytest.mark.skipif(
    DEVICE.type != "cuda", reason="CUDA graphs need a GPU (KILN_TRITON_DEVICE=cuda)"
)
def test_cuda_graphs_replay_matches_eager() -> None:
    from kiln.backends.triton.cudagraphs import CudaGraphRunner

    def fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.softmax(torch.relu(x @ w) * 0.5, -1)

    x, w = randn(64, 32), randn(32, 48)
    compiled = compile_capture(capture(fn, x, w), options=TritonOptions(cuda_graphs=True))
    assert isinstance(compiled.program, CudaGraphRunner)
    for _ in range(3):  # first call runs and captures, the others replay
        x2, w2 = randn(64, 32), randn(32, 48)
        (out,) = compiled.program([x2.to(DEVICE), w2.to(DEVICE)])
        torch.testing.assert_close(out.cpu(), fn(x2, w2), rtol=1e-3, atol=1e-4)
    assert len(compiled.program.graphs) == 1


@pytest.mark.skipif(
    DEVICE.type != "cuda", reason="CUDA graphs need a GPU (KILN_TRITON_DEVICE=cuda)"
)
def test_default_cuda_graphs_keep_held_outputs_and_train_like_eager() -> None:
    """``torch.compile(backend="kiln")`` replays CUDA graphs by default (``auto``): results
    the caller keeps are never overwritten, and training steps give eager's gradients."""
    from kiln.backends.triton.cudagraphs import CudaGraphRunner
    from kiln.frontends.dynamo import kiln_backend

    # A Sequential compiled by an earlier test of the process would make dynamo compile
    # this one dynamic (automatic dynamic), which records no CUDA graphs: start fresh, as
    # a user's first compile does.
    torch._dynamo.reset()  # pyright: ignore[reportPrivateImportUsage]
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.LayerNorm(64), torch.nn.Linear(64, 8)
    ).to(DEVICE)
    compiled = torch.compile(model, backend=kiln_backend)
    with torch.no_grad():
        xs = [torch.randn(16, 32, device=DEVICE) for _ in range(5)]
        kept = [compiled(x) for x in xs]
        for x, y in zip(xs, kept, strict=True):
            torch.testing.assert_close(y, model(x), rtol=1e-4, atol=1e-5)
    reference = copy.deepcopy(model)
    compiled = torch.compile(model, backend=kiln_backend)
    for _ in range(4):
        x = torch.randn(16, 32, device=DEVICE)
        for m, f in ((model, compiled), (reference, reference)):
            m.zero_grad()
            f(x).square().mean().backward()
        for p, q in zip(model.parameters(), reference.parameters(), strict=True):
            assert p.grad is not None
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5)
    # type(), not isinstance(): gc also lists dead weak proxies, which isinstance trips on.
    runners = [o for o in gc.get_objects() if type(o) is CudaGraphRunner and o.graphs]
    assert runners  # graphs were recorded and replayed


@pytest.mark.skipif(
    DEVICE.type != "cuda", reason="CUDA graphs need a GPU (KILN_TRITON_DEVICE=cuda)"
)
def test_default_cuda_graphs_replay_training_steps_through_attention() -> None:
    """SDPA's forward returns its dropout seed and offset as CPU tensors outside a capture
    (device tensors inside one): a training step's forward and backward still replay
    graphs in ``auto`` mode, with eager's gradients."""
    from kiln.backends.triton.cudagraphs import CudaGraphRunner
    from kiln.frontends.dynamo import kiln_backend

    class Attention(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.qkv = torch.nn.Linear(64, 3 * 64)
            self.out = torch.nn.Linear(64, 64)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b, t, _ = x.shape
            q, k, v = self.qkv(x).view(b, t, 3, 4, 16).permute(2, 0, 3, 1, 4)
            y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.out(y.transpose(1, 2).reshape(b, t, 64))

    torch.manual_seed(0)
    model = Attention().to(DEVICE)
    reference = copy.deepcopy(model)
    compiled = torch.compile(model, backend=kiln_backend)
    for _ in range(4):
        x = torch.randn(2, 16, 64, device=DEVICE)
        for m, f in ((model, compiled), (reference, reference)):
            m.zero_grad()
            f(x).square().mean().backward()
        for p, q in zip(model.parameters(), reference.parameters(), strict=True):
            assert p.grad is not None
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-3, atol=1e-4)
    runners = [o for o in gc.get_objects() if type(o) is CudaGraphRunner and o.graphs]
    assert len(runners) >= 2  # the forward and the backward both replay graphs


@pytest.mark.skipif(
    DEVICE.type != "cuda", reason="CUDA graphs need a GPU (KILN_TRITON_DEVICE=cuda)"
)
def test_default_cuda_graphs_write_batch_norm_statistics_inside_the_graph() -> None:
    """A training step's running statistics (buffers: they stay put) are written by the
    forward's CUDA graph itself at each replay, once per step, as eager updates them; no
    write is left to the host."""
    from kiln.backends.triton.cudagraphs import CudaGraphRunner
    from kiln.frontends.dynamo import kiln_backend

    torch._dynamo.reset()  # pyright: ignore[reportPrivateImportUsage]
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU(), torch.nn.BatchNorm2d(8)
    ).to(DEVICE)
    reference = copy.deepcopy(model)
    compiled = torch.compile(model, backend=kiln_backend)
    for step in range(5):
        x = torch.randn(4, 3, 12, 12, device=DEVICE) * (step + 1) + step
        for m, f in ((model, compiled), (reference, reference)):
            m.zero_grad()
            f(x).square().mean().backward()
        for (name, got), (_, want) in zip(
            model.named_buffers(), reference.named_buffers(), strict=True
        ):
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5, msg=f"{name}, step {step}")
    runners = [o for o in gc.get_objects() if type(o) is CudaGraphRunner and o.graphs]
    instances = [i for r in runners for group in r.graphs.values() for i in group]
    written = [i for i in instances if i.graph_writes]
    assert written  # the forward's graph writes the statistics
    assert all(not i.host_writes for i in instances)
