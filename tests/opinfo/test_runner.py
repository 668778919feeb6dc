"""The OpInfo runner's comparison catches what it must (no compilation here)."""

from __future__ import annotations

import pytest
import torch
from runner import Sample, check_sample, make_case, op_db
from torch._subclasses.fake_tensor import FakeTensorMode


def _sample(fn, *inputs: torch.Tensor, random: bool = False) -> Sample:
    def program(*tensors: torch.Tensor) -> list[torch.Tensor]:
        return [fn(*tensors)]

    return Sample(0, program, list(inputs), program(*inputs), random, None)


def test_equal_results_pass() -> None:
    x = torch.randn(4, 5)
    check_sample(_sample(torch.sin, x), [torch.sin(x)])


@pytest.mark.parametrize(
    ("got", "message"),
    [
        (lambda y: y + 1e-3, "not close"),
        (lambda y: y.double(), "dtype"),
        (lambda y: y.reshape(5, 4), "shape"),
        (lambda y: y.t().contiguous().t(), "strides"),
        (lambda y: torch.where(y > 0, torch.nan, y), "not close"),
    ],
)
def test_differences_fail(got, message: str) -> None:
    x = torch.randn(4, 5)
    with pytest.raises(AssertionError, match=message):
        check_sample(_sample(torch.sin, x), [got(torch.sin(x))])


def test_nan_positions_must_match() -> None:
    x = torch.tensor([-1.0, 1.0, 4.0])
    check_sample(_sample(torch.sqrt, x), [torch.sqrt(x)])  # NaN where eager has NaN
    with pytest.raises(AssertionError):
        check_sample(_sample(torch.sqrt, x), [torch.sqrt(x).nan_to_num()])


def test_random_ops_compare_metadata_only() -> None:
    x = torch.randn(4, 5)
    sample = _sample(torch.rand_like, x, random=True)
    check_sample(sample, [torch.rand_like(x)])
    with pytest.raises(AssertionError, match="dtype"):
        check_sample(sample, [torch.rand_like(x).double()])


def test_more_accurate_than_eager_passes() -> None:
    """A half-precision sum accumulated in float32 (as kiln does) is further from eager's
    float16 result than the tolerance, but closer to the exact value."""
    torch.manual_seed(0)
    x = torch.rand(4096, dtype=torch.float16) * 100
    exact = x.double().sum().to(torch.float16)
    check_sample(_sample(torch.sum, x), [exact])


def test_where_eager_overflows_the_exact_value_is_the_oracle() -> None:
    """float16 soft_margin_loss on the H200: eager's exp overflows to inf where the exact
    value fits float16; kiln and Inductor both compute the exact value."""
    x = torch.tensor([12.0, 1.0], dtype=torch.float16)
    sample = _sample(lambda t: torch.exp(t).log(), x)
    assert sample.expected[0].isinf()[0]  # eager overflows: exp(12) > 65504
    check_sample(sample, [x.clone()])  # the exact value
    with pytest.raises(AssertionError):
        check_sample(sample, [x * 1.5])
    with pytest.raises(AssertionError):  # where the exact value overflows too, inf it is
        check_sample(_sample(lambda t: torch.exp(t), x), [torch.full_like(x, 65504.0)])


def test_the_float64_oracle_takes_float64_dtype_arguments() -> None:
    """``_softmax_backward_data(grad, out, dim, input_dtype=bfloat16)`` returns its
    ``input_dtype``: the oracle run must ask for float64, or it rounds the exact value to
    bfloat16 and a result closer to the exact one than eager's fails (the H200's bf16
    OpInfo run: kiln 0.0077 from exact, eager 0.0104, yet reported as a mismatch)."""
    from types import SimpleNamespace

    from runner import _float64_run, _program  # pyright: ignore[reportPrivateUsage]

    grad, out = torch.randn(5, 5, dtype=torch.bfloat16), torch.rand(5, 5, dtype=torch.bfloat16)
    info = SimpleNamespace(op=torch.ops.aten._softmax_backward_data)
    sample = SimpleNamespace(input=grad, args=(out, 1, torch.bfloat16), kwargs={})
    program, inputs = _program(info, sample)
    built = Sample(0, program, inputs, program(*inputs), False, sample)
    built.float64 = _program(info, sample, float64=True)[0]
    reference = _float64_run(built)
    assert reference is not None
    assert reference[0].dtype == torch.float64


def test_where_torch_meta_disagrees_with_eager_the_meta_strides_are_the_contract() -> None:
    """max_unpool2d of a channels-last input: eager returns channels-last; torch's meta
    kernel (what AOTAutograd gives kiln) returned it contiguous before torch 2.14, and
    channels-last since. kiln is held to the meta's strides, whichever they are."""
    x = torch.randn(1, 2, 2, 4).contiguous(memory_format=torch.channels_last)
    pooled, indices = torch.nn.functional.max_pool2d(x, 2, return_indices=True)
    assert pooled.stride() != pooled.contiguous().stride()  # the sample is channels-last

    def unpool(p: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.max_unpool2d(p, i, 2)

    with FakeTensorMode() as mode:
        meta = unpool(mode.from_tensor(pooled), mode.from_tensor(indices)).stride()
    sample = _sample(unpool, pooled, indices)
    eager = sample.expected[0]
    assert eager.stride() == (16, 1, 8, 2)  # channels-last
    assert meta in ((16, 8, 4, 1), (16, 1, 8, 2))  # contiguous before torch 2.14
    check_sample(sample, [torch.empty_strided(eager.shape, meta).copy_(eager)])
    with pytest.raises(AssertionError, match="strides"):
        check_sample(sample, [eager.transpose(2, 3).contiguous().transpose(2, 3)])


def test_gradient_samples_check_the_outputs_and_the_input_gradients() -> None:
    """``make_case(grad=True)``: each sample returns its outputs, then the gradient of
    each input that requires grad for fixed random output gradients (the tangents are the
    sample's last inputs); a wrong gradient fails the check."""
    case = make_case(op_db()["sin"], torch.float32, "cpu", limit=1, grad=True)
    (sample,) = case.samples
    x, tangent = sample.inputs
    assert not x.requires_grad
    out, grad = sample.expected
    torch.testing.assert_close(out, torch.sin(x))
    torch.testing.assert_close(grad, torch.cos(x) * tangent)
    check_sample(sample, [torch.sin(x), torch.cos(x) * tangent])
    with pytest.raises(AssertionError, match="output 1"):
        check_sample(sample, [torch.sin(x), -torch.cos(x) * tangent])


def test_gradient_samples_leave_out_what_opinfo_does_not_differentiate() -> None:
    """Batch norm's running statistics are inputs OpInfo leaves without grad: they get
    no gradient (asking for one made eager's in-place update of a leaf fail)."""
    info = op_db()["nn.functional.batch_norm"]
    case = make_case(info, torch.float32, "cpu", limit=4, grad=True)
    generated = list(info.sample_inputs("cpu", torch.float32, requires_grad=True))[:4]
    assert len(case.samples) == len(generated)
    for sample, opinfo_sample in zip(case.samples, generated, strict=True):
        leaves = [opinfo_sample.input, *opinfo_sample.args, *opinfo_sample.kwargs.values()]
        tensors = [t for t in leaves if isinstance(t, torch.Tensor)]
        wanted = sum(t.requires_grad for t in tensors)
        assert wanted < len(tensors)  # the running statistics
        assert len(sample.expected) == 1 + wanted  # the output, then those gradients
