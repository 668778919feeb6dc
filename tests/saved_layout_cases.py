"""A small convolution network trained through ``torch.compile(backend="kiln")``, for
the layout of the activations the forward saves for the backward
(:mod:`kiln.frontends.saved_layout`): conv + batch norm + ReLU, a depthwise convolution,
a residual add, max pooling and a linear head."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import torch

from kiln.compiler import DEFAULT_PIPELINE, CompiledGraph

SAVED_NHWC = DEFAULT_PIPELINE.replace(
    "channels-last", "channels-last{saved-nhwc=true saved-nhwc-cpu=true}"
)
"""The default pipeline with saved activations channels-last on the GPU and the CPU
(``channels-last``'s ``saved-nhwc``, on by default, and ``saved-nhwc-cpu``, off)."""


class SmallCnn(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(8)
        self.depthwise = torch.nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(8)
        self.pointwise = torch.nn.Conv2d(8, 8, 1)
        self.head = torch.nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        z = torch.relu(self.bn2(self.depthwise(y)))
        z = torch.nn.functional.max_pool2d(self.pointwise(z) + y, 2)
        return self.head(z.mean((2, 3)))


def is_channels_last(value: object) -> bool:
    """A 4-D tensor laid out NHWC and not NCHW (its channels are not all of size 1)."""
    return (
        isinstance(value, torch.Tensor)
        and value.dim() == 4
        and value.is_contiguous(memory_format=torch.channels_last)
        and not value.is_contiguous()
    )


@contextmanager
def recording_compiles(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, list[Any]]]]:
    """Records each graph compiled through the Dynamo backend: its name and its example
    inputs (a backward's are what AOTAutograd re-strided to the forward's outputs)."""
    import kiln.frontends.dynamo as dynamo

    compiled: list[tuple[str, list[Any]]] = []
    original = dynamo.compile_graph

    def recording(gm: Any, inputs: Any, *args: Any, **kwargs: Any) -> CompiledGraph:
        compiled.append((kwargs.get("name", ""), list(inputs)))
        return original(gm, inputs, *args, **kwargs)

    monkeypatch.setattr(dynamo, "compile_graph", recording)
    yield compiled


@contextmanager
def counting_copies(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The tensor copies made through ``Tensor.clone`` / ``Tensor.contiguous`` (how a
    program's wrapper lays out an argument or an ATen result it did not expect)."""
    copies: list[str] = []
    with monkeypatch.context() as patch:
        for name in ("clone", "contiguous"):
            original = getattr(torch.Tensor, name)

            def counting(
                self: torch.Tensor, *args: Any, _original: Any = original, **kwargs: Any
            ) -> Any:
                out = _original(self, *args, **kwargs)
                if out.data_ptr() != self.data_ptr():
                    copies.append(f"{tuple(self.shape)} strides {self.stride()}")
                return out

            patch.setattr(torch.Tensor, name, counting)
        yield copies


def train_like_eager(
    model: torch.nn.Module,
    make_input: Callable[[], torch.Tensor],
    options: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    rtol: float = 1e-4,
    atol: float = 1e-5,
) -> tuple[list[tuple[str, list[Any]]], list[str]]:
    """Two training steps of ``model`` compiled by kiln against a copy run eagerly: the
    same losses and gradients. Returns the graphs compiled (:func:`recording_compiles`)
    and the copies the second step made (:func:`counting_copies`)."""
    reference = copy.deepcopy(model)
    torch._dynamo.reset()  # compile again (a model of a class compiled before too)
    compiled_model = torch.compile(model, backend="kiln", options=options)
    copies: list[str] = []
    with recording_compiles(monkeypatch) as compiled:
        for step in range(2):
            x = make_input()
            model.zero_grad()
            reference.zero_grad()
            if step == 1:
                with counting_copies(monkeypatch) as copies:
                    loss = compiled_model(x).square().mean()
                    loss.backward()
            else:
                loss = compiled_model(x).square().mean()
                loss.backward()
            want = reference(x).square().mean()
            want.backward()
            torch.testing.assert_close(loss, want, rtol=rtol, atol=atol)
            for p, q in zip(model.parameters(), reference.parameters(), strict=True):
                assert p.grad is not None
                assert q.grad is not None
                torch.testing.assert_close(p.grad, q.grad, rtol=rtol, atol=atol)
                assert _strides(p.grad) == _strides(q.grad), (p.grad.stride(), q.grad.stride())
    return compiled, copies


def _strides(value: torch.Tensor) -> list[int]:
    """The strides that matter (dims of size 1 have none)."""
    return [s for s, n in zip(value.stride(), value.shape, strict=True) if n != 1]


def saved_batches(
    compiled: list[tuple[str, list[Any]]], batch: int
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """The 4-D inputs of the backward graph compiled with ``batch`` rows (not weights):
    the image (3 channels) and the activations."""
    (inputs,) = [inputs for name, inputs in compiled if name.startswith("backward")]
    batches = [v for v in inputs if isinstance(v, torch.Tensor) and v.dim() == 4]
    batches = [v for v in batches if v.shape[0] == batch]
    return [v for v in batches if v.shape[1] == 3], [v for v in batches if v.shape[1] != 3]
