"""lower-aten: views become load indices (no copies), ops compute torch's numbers
(types, promotion, integer rules), unlowered ops become extern, dynamic sizes work."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from lower_aten_checks import (
    assert_same,
    capture_and_lower,
    check,
    function,
    interpret,
    loop_ops,
    pointwise_ops,
)
from xdsl.parser import Parser

from kiln.dialects.loop import ExternOp, LoadOp, PointwiseOp, ReductionOp
from kiln.passes.lower_aten import LowerAtenError, LowerAtenPass
from kiln.registry import default_registry, make_context


def loads(op: PointwiseOp | ReductionOp) -> list[str]:
    return [o.index.text for o in op.body.block.ops if isinstance(o, LoadOp)]


# --- views are index expressions ------------------------------------------------------


def test_permute_folds_into_the_consumer_load() -> None:
    module = check(lambda x: x.permute(1, 0).relu(), torch.randn(4, 8))
    (op,) = pointwise_ops(module)
    assert loads(op) == ["d0 + 8*d1"]


def test_slice_and_select_fold_into_offsets_and_strides() -> None:
    module = check(lambda x: x[1:, 2:7:2] + x[0, 1], torch.randn(4, 8))
    (op,) = pointwise_ops(module)
    assert loads(op) == ["8*d0 + 2*d1 + 10", "1"]


def test_chained_views_compose() -> None:
    module = check(
        lambda x: x.t()[1:3].unsqueeze(0).expand(2, 2, 4).reshape(4, 4) * 2, torch.randn(4, 8)
    )
    (op,) = pointwise_ops(module)
    assert loads(op) == ["8*d1 + d0 % 2 + 1"]


def test_reshape_of_contiguous_data_is_the_flat_index() -> None:
    module = check(lambda x: x.view(2, 16).view(32) + 1, torch.randn(4, 8))
    (op,) = pointwise_ops(module)
    assert loads(op) == ["d0"]


def test_reshape_that_torch_cannot_view_uses_floor_division() -> None:
    module = check(lambda x: x.t().reshape(32).neg(), torch.randn(4, 8))
    (op,) = pointwise_ops(module)
    assert loads(op) == ["d0 // 4 + 8*(d0 % 4)"]


def test_views_of_inputs_returned_are_copied_once() -> None:
    module = check(lambda x: (x.t(), x), torch.randn(4, 8))
    (op,) = loop_ops(module)
    assert isinstance(op, PointwiseOp)
    ret = function(module).body.block.last_op
    assert ret is not None
    assert ret.operands[1] is function(module).args[0]


def _linear_backward(q: torch.Tensor, w: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    g = q.permute(1, 0, 2).reshape(6, 8)
    return g @ w, g.t() @ x, g.sum(0)


def _linear_backward_transposed_first(
    q: torch.Tensor, w: torch.Tensor, x: torch.Tensor
) -> tuple[torch.Tensor, ...]:
    g = q.permute(1, 0, 2).reshape(6, 8)
    return g.t() @ x, g @ w, g.sum(0)


@pytest.mark.parametrize("fn", [_linear_backward, _linear_backward_transposed_first])
def test_a_reshaped_gradient_is_copied_once_for_both_products(fn: Callable[..., Any]) -> None:
    """A linear layer's backward over an attention's stacked q/k/v gradients: ``g`` is a
    reshape of a permute (no strided view), read by ``g @ w``, ``g.t() @ x`` and a sum.
    One contiguous copy of ``g`` serves all three, whichever product comes first: the
    transposed product reads it transposed, the sum reads it (there were two copies, one
    per product, the second gathering ``g.t()`` element by element)."""
    module = check(fn, torch.randn(2, 6, 4), torch.randn(8, 5), torch.randn(6, 3))
    copies = [op for op in pointwise_ops(module) if "contiguous" in str(op.results[0].name_hint)]
    assert len(copies) == 1, str(module)
    assert sum(isinstance(op, ExternOp) for op in loop_ops(module)) == 2


def test_extern_receives_strided_views_not_copies() -> None:
    module = check(lambda x, w: x @ w.t(), torch.randn(4, 8), torch.randn(3, 8))
    (op,) = loop_ops(module)
    assert isinstance(op, ExternOp)
    text = str(op)
    assert "aten.as_strided.default(%1, size = [8, 3], stride = [1, 8])" in re.sub(
        r"%\d+", "%1", text
    )


def test_extern_results_keep_the_layout_aten_writes() -> None:
    """Session 12 (issue 16): attention on heads split off a projection returns
    (batch, heads, length, dim) laid out as (batch, length, heads, dim). The importer
    records that order (``kiln.result_orders``) and the extern yields the result permuted
    to it, ATen's memory as it is, which the multiplication reads through the inverse
    permutation: no copy on either side."""

    def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        q, k, v = (t.view(1, 8, 4, 16).transpose(1, 2) for t in (q, k, v))
        return F.scaled_dot_product_attention(q, k, v) * 2

    module = check(attention, *(torch.randn(1, 8, 64) for _ in range(3)))
    extern = next(op for op in loop_ops(module) if isinstance(op, ExternOp))
    assert "aten.permute.default(%getitem_1, dims = [0, 2, 1, 3])" in str(extern)
    assert extern.outputs[0].type.get_shape() == (1, 8, 4, 16)  # pyright: ignore[reportAttributeAccessIssue]
    (mul,) = pointwise_ops(module)
    assert loads(mul) == ["512*d0 + 16*d1 + 64*d2 + d3"]


# --- pointwise semantics ---------------------------------------------------------------

ints = torch.tensor([[7, -7, 3, 0], [-3, 5, -8, 2]])
divisors = torch.tensor([[2, 2, -2, 3], [4, -3, 3, -5]])
floats = torch.randn(2, 4) * 4
bools = torch.tensor([[True, False, True, True], [False, False, True, False]])

POINTWISE: dict[str, tuple[Callable[..., Any], tuple[Any, ...]]] = {
    "int plus float scalar promotes": (lambda a: a + 2.5, (ints,)),
    "int true division": (lambda a, b: a / b, (ints, divisors)),
    "int floor division": (lambda a, b: a // b, (ints, divisors)),
    "int trunc division": (lambda a, b: torch.div(a, b, rounding_mode="trunc"), (ints, divisors)),
    "int remainder takes the divisor's sign": (lambda a, b: a % b, (ints, divisors)),
    "int fmod takes the dividend's sign": (lambda a, b: torch.fmod(a, b), (ints, divisors)),
    "float trunc division": (
        lambda a, b: torch.div(a, b, rounding_mode="trunc"),
        (floats, divisors.float()),
    ),
    "compare int with float scalar": (lambda a: a < 2.5, (ints,)),
    "bool arithmetic is logical": (lambda a, b: a + b, (bools, bools.flip(1))),
    "bool bitwise and logical ops": (lambda a, b: (a & b) | ~a ^ (a.logical_xor(b)), (bools, bools.t().reshape(2, 4))),
    "where with scalars": (lambda c, x: torch.where(c, x, 1.5), (bools, ints)),
    "float to int truncates": (lambda x: x.to(torch.int32), (floats,)),
    "bool to float": (lambda c: c.float() * 3, (bools,)),
    "integer power": (lambda a: a**3, (ints,)),
    "float power with tensor exponent": (lambda x, y: x.abs() ** y, (floats, floats.t().reshape(2, 4))),
    "sign and abs of ints": (lambda a: torch.sign(a) * a.abs(), (ints,)),
    "nan handling": (
        lambda x: (torch.maximum(x, torch.zeros(())), x != x, torch.relu(x), x.clamp(0, 1)),
        (torch.tensor([float("nan"), 1.0, -2.0, float("inf")]),),
    ),
    "half computes in float": (lambda x: torch.sigmoid(x) * 3 + x.exp(), (floats.half(),)),
    "bfloat16 gelu": (lambda x: F.gelu(x, approximate="tanh"), (floats.bfloat16(),)),
    "activations": (
        lambda x: (F.silu(x), F.elu(x, 0.5), F.leaky_relu(x, 0.2), F.hardswish(x), F.softplus(x, 2.0)),
        (floats,),
    ),
    "clamp with tensors": (lambda x, lo: x.clamp(min=lo, max=lo + 1), (floats, floats[0])),
    "lerp and addcmul": (lambda x, y: (torch.lerp(x, y, 0.7), torch.addcmul(x, x, y, value=0.5)), (floats, floats.flip(0))),
    "masked fill": (lambda x, m: x.masked_fill(m, -1.0), (floats, bools)),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(POINTWISE))
def test_pointwise(case: str) -> None:
    fn, inputs = POINTWISE[case]
    check(fn, *inputs)


def test_float_floor_division_runs_as_extern() -> None:
    """ATen's float floor division needs fmod, which xDSL's arith lacks: extern, exact."""
    module, capture, stats = capture_and_lower(lambda a, b: a // b, floats, divisors.float())
    assert stats.extern == {"aten::floor_divide.default": 1}
    assert_same(interpret(module, capture.example_inputs), floats // divisors.float())


# --- reductions ----------------------------------------------------------------------------

x3 = torch.randn(3, 4, 5)

REDUCTIONS: dict[str, tuple[Callable[..., Any], tuple[Any, ...]]] = {
    "sum with dtype": (lambda x: x.sum((0, 2), dtype=torch.float64), (x3,)),
    "sum of bools is int64": (lambda x: (x > 0).sum(1), (x3,)),
    "mean keepdim": (lambda x: x.mean((0, 2), keepdim=True), (x3,)),
    "var and std with correction": (lambda x: (x.var(1, correction=0), x.std((0, 2))), (x3,)),
    "var_mean": (lambda x: torch.var_mean(x, 2, keepdim=True), (x3,)),
    "max and min with indices": (lambda x: (x.max(1), x.min(-1, keepdim=True)), (x3,)),
    "argmax over everything": (lambda x: (x.argmax(), x.argmin(1, keepdim=True)), (x3,)),
    "amax amin prod": (lambda x: (x.amax((1, 2)), x.amin(0), x.prod(1)), (x3,)),
    "any all": (lambda x: ((x > 1).any(1), (x > -2).all()), (x3,)),
    "softmax and log_softmax": (lambda x: (x.softmax(1), x.log_softmax(-1)), (x3,)),
    "half softmax": (lambda x: x.half().softmax(-1), (x3,)),
    "logsumexp with infinities": (
        lambda x: torch.logsumexp(x, 1),
        (torch.tensor([[float("-inf")] * 3, [1.0, float("inf"), 2.0], [0.5, 1.0, 2.0]]),),
    ),
}


@pytest.mark.parametrize("case", sorted(REDUCTIONS))
def test_reductions(case: str) -> None:
    fn, inputs = REDUCTIONS[case]
    check(fn, *inputs)


def test_var_goes_through_welford() -> None:
    module = check(lambda x: x.var(1), x3)
    kinds = [op.kind.data.value for op in loop_ops(module) if isinstance(op, ReductionOp)]
    assert kinds == ["welford"]


# --- indexing, concatenation, padding, creation ------------------------------------------

idx = torch.tensor([3, -1, 0, 2])
table = torch.randn(6, 5)

INDEXING: dict[str, tuple[Callable[..., Any], tuple[Any, ...]]] = {
    "cat promotes": (lambda a, b: torch.cat([a, b.int(), a * 2], 1), (floats, ints)),
    "stack": (lambda a, b: torch.stack([a, b], 1), (floats, floats.flip(1))),
    "constant pad with negative pads": (
        lambda x: F.pad(x, (2, -1, -1, 3), value=7.0),
        (torch.randn(4, 6),),
    ),
    "reflection and replication pads": (
        lambda x: (F.pad(x, (2, 3), mode="reflect"), F.pad(x, (1, 2, 3, 1), mode="replicate")),
        (torch.randn(2, 4, 5),),
    ),
    "advanced indexing wraps negatives": (lambda t, i: t[i, 1:] * 2, (table, idx)),
    "non-adjacent index tensors": (
        lambda x, i, j: x[i, :, j],
        (torch.randn(4, 3, 5), torch.tensor([[0, 3], [1, 2]]), torch.tensor([4, -2])),
    ),
    "index_select gather embedding": (
        lambda t, i: (
            t.index_select(1, i.abs()),
            torch.gather(t, 0, i.abs().repeat(5, 1).t()),
            F.embedding(i.abs(), t),
        ),
        (table, idx),
    ),
    "repeat flip roll tril": (
        lambda x: (x.repeat(2, 1, 3), x.flip(0, 2), x.roll(1, 2), x[0].tril(1), x[1].triu(-1)),
        (torch.randn(2, 3, 4),),
    ),
    "scatter into slices": (
        lambda x, y: (
            torch.slice_scatter(x, y, 1, 1, 5, 2),
            torch.select_scatter(x, y[:, 0], 1, 3),
        ),
        (torch.randn(3, 6), torch.randn(3, 2)),
    ),
    "creation": (
        lambda x: (
            torch.full((2, 3), 2.5) + x.new_ones(3),
            torch.arange(2, 11, 3, dtype=torch.float32),
            torch.arange(0.1, 1.0, 0.17),
            torch.zeros_like(x, dtype=torch.int64),
            x.fill_(3),
        ),
        (torch.randn(3),),
    ),
}


@pytest.mark.parametrize("case", sorted(INDEXING))
def test_indexing_and_creation(case: str) -> None:
    fn, inputs = INDEXING[case]
    check(fn, *inputs)


def test_cat_selects_between_masked_loads() -> None:
    module = check(lambda a, b: torch.cat([a, b], 1), torch.randn(2, 3), torch.randn(2, 5))
    (op,) = pointwise_ops(module)
    text = str(op)
    assert 'loop.load %in0["3*d0 + d1"] if' in text
    assert 'loop.load %in1["5*d0 + d1 - 3"] if' in text


def test_embedding_is_an_indirect_load() -> None:
    module = check(lambda t, i: F.embedding(i, t), table, idx.abs())
    (op,) = pointwise_ops(module)
    assert loads(op) == ["d0", "d1 + 5*i0"]


# --- extern fallback, dynamic shapes, refusals -------------------------------------------------


def test_ops_without_lowering_become_extern() -> None:
    module, capture, stats = capture_and_lower(lambda x: torch.cumprod(x, 1).sin(), x3)
    assert stats.extern == {"aten::cumprod.default": 1}
    assert_same(interpret(module, capture.example_inputs), torch.cumprod(x3, 1).sin())


def test_dynamic_sizes() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return (x * 2 + x.sum(-1, keepdim=True)).view(-1, 4).t()

    module, _, stats = capture_and_lower(fn, torch.randn(6, 8), dynamic=True)
    assert not stats.extern
    assert '["s0"' in str(module) or '"s0"' in str(module)
    for rows in (3, 5):
        x = torch.randn(rows, 8)
        assert_same(interpret(module, [x]), fn(x))


def test_divisions_of_sizes_get_size_symbols_of_their_own() -> None:
    """Every other column and every third row are ``(s1 + 1) // 2`` and ``(s0 + 2) // 3``
    columns and rows: each division is computed once at the function level and the
    loop ops' sizes are polynomials in their own symbols, with the numbers of eager at
    sizes that divide and that do not."""

    def fn(x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x[:, ::2]) * 2 + x[::3].sum(0)[::2]

    module, _, stats = capture_and_lower(fn, torch.randn(6, 8), dynamic=True)
    assert not stats.extern
    text = str(module)
    assert "arith.floordivsi" in text
    for op in loop_ops(module):
        if isinstance(op, ExternOp):
            continue
        sizes = [*op.sizes.data]
        if isinstance(op, ReductionOp):
            sizes += op.reduction_sizes.data
        assert not any("//" in str(s) for s in sizes), sizes
    for rows, cols in ((3, 5), (7, 8), (2, 2)):
        x = torch.randn(rows, cols)
        assert_same(interpret(module, [x]), fn(x))


def test_reading_after_an_in_place_write_is_refused() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        y = x.clone()
        y[0].add_(1)
        return y * 2

    capture = __import__("kiln.frontends.capture", fromlist=["capture_make_fx"]).capture_make_fx(
        fn, torch.randn(3, 4)
    )
    from kiln.frontends.fx import import_graph

    module = import_graph(capture.gm)
    with pytest.raises(LowerAtenError, match="read after an in-place op wrote it"):
        LowerAtenPass().apply(make_context(), module)


def test_pass_is_registered_and_runs_on_text() -> None:
    text = """
func.func @forward(%x: tensor<4x8xf32>) -> tensor<8x4xf32> {
  %0 = aten.permute.default(%x, dims = [1, 0]) : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %1 = aten.neg.default(%0) : (tensor<8x4xf32>) -> tensor<8x4xf32>
  func.return %1 : tensor<8x4xf32>
}"""
    module = Parser(make_context(), text).parse_module()
    default_registry().get_pass("lower-aten")().apply(make_context(), module)
    module.verify()
    x = torch.randn(4, 8)
    assert_same(interpret(module, [x]), -x.t())
    assert "func.func @forward(%x: memref<4x8xf32>) -> memref<8x4xf32>" in str(module)
