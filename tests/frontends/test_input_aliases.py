"""Outputs that alias graph inputs (``kiln.frontends.input_aliases``): which ones are
rebuilt as ``as_strided`` views of their input, and training through them."""

from __future__ import annotations

import torch
from torch.fx.experimental.proxy_tensor import make_fx

import kiln
from kiln.frontends.input_aliases import InputAliases


def _rope(x: torch.Tensor, freqs_cis: torch.Tensor) -> torch.Tensor:
    """LLaMA's reference rotary embedding: a complex product with ``freqs_cis``."""
    xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(xc * freqs_cis).flatten(3).type_as(x)


def _freqs_cis(length: int, dim: int) -> torch.Tensor:
    inv = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
    angles = torch.outer(torch.arange(length).float(), inv)
    return torch.polar(torch.ones_like(angles), angles).view(1, length, 1, dim // 2)


def test_complex_rotary_embedding_trains_with_eager_gradients() -> None:
    """The backward reads ``freqs_cis.conj()``, which AOTAutograd's partitioner saves as
    an output of the forward that aliases the input: rebuilt as ``as_strided`` of the
    input it lost the conjugate bit, and the gradient was ``x``'s with the rotation
    reversed (max error 4.9)."""
    torch.manual_seed(0)
    x = torch.randn(2, 8, 4, 16, requires_grad=True)
    freqs_cis = _freqs_cis(8, 16)
    grad = torch.randn(2, 8, 4, 16)
    compiled = torch.compile(_rope, backend="kiln", options={"verbose": False})
    (got,) = torch.autograd.grad(compiled(x, freqs_cis), x, grad)
    (want,) = torch.autograd.grad(_rope(x, freqs_cis), x, grad)
    torch.testing.assert_close(got, want)


def test_conjugate_and_negative_views_are_not_rebuilt_as_strided() -> None:
    z = torch.randn(3, 4, dtype=torch.complex64)
    gm = make_fx(
        lambda t: (
            torch.ops.aten._conj(t),
            torch.ops.aten._neg_view(t),
            torch.ops.aten.slice(t, 1, 1, 3),
        ),
        tracing_mode="fake",
    )(z)
    aliases = InputAliases(gm)
    assert [a.output for a in aliases.aliases] == [2]  # only the plain slice


def test_a_conjugated_output_of_a_compiled_function_is_conjugated() -> None:
    z = torch.randn(3, 4, dtype=torch.complex64)
    fn = kiln.compile(lambda t: torch.ops.aten._conj(t) * 2, verbose=False)
    torch.testing.assert_close(fn(z).resolve_conj(), (z.conj() * 2).resolve_conj())


def _views_twice(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    y = x[-1:].transpose(0, 2)[1:2].reshape(1, x.shape[1], 1)
    return y, x.sin(), y


def test_symbolic_views_of_inputs_are_eagers_views_at_every_position() -> None:
    # Symbolic sizes: the views are replayed on the input in eager (size-1 dims get
    # eager's strides), at each position the graph returns one.
    torch._dynamo.reset()
    compiled = torch.compile(_views_twice, backend="kiln", dynamic=True, options={"verbose": False})
    for shape in ((3, 4, 5), (4, 6, 2)):
        x = torch.randn(shape)
        want, have = _views_twice(x), compiled(x)
        torch.testing.assert_close(have, want)
        for k in (0, 2):
            assert have[k]._base is x
            assert have[k].stride() == want[k].stride()
            assert have[k].storage_offset() == want[k].storage_offset()


def test_a_symbolic_view_is_replayed_on_the_input() -> None:
    x = torch.randn(4, 5)
    gm = make_fx(lambda t: (t.transpose(0, 1)[1:], t * 2), tracing_mode="symbolic")(x)
    aliases = InputAliases(gm)
    assert [a.output for a in aliases.aliases] == [0]
    captured = aliases.capture([x])
    assert captured is not None
    view = aliases.apply((x, x * 2), captured)[0]
    assert view._base is x
    assert view.shape == (4, 4)
    assert view.stride() == (1, 5)
