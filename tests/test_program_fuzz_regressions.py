"""Shrunk failures of the program fuzzer (:mod:`test_program_fuzz`), kept as regression
tests: each program failed before its fix, on the executors named."""

from __future__ import annotations

import pytest
import torch
from test_program_fuzz import Program, Step, check, check_backward, loosest_float, make_inputs


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16])
def test_zero_dim_small_integer_buffers_in_the_kernel_interpreter(dtype: torch.dtype) -> None:
    """The kernel interpreter poisons new buffers with -0x5A5A5A5; ``fill_`` rejects that
    for a 0-d int8/int16 tensor ("value cannot be converted ... without overflow")."""
    abs_step = Step("unary", "abs", (0,))
    check(Program((dtype,), ((),), False, (abs_step,), (1, 0), 0), "kernel")


@pytest.mark.parametrize("executor", ["loop", "cpp"])
@pytest.mark.parametrize("dtype", [torch.int64, torch.bool])
def test_an_op_lowered_as_an_alias_of_an_input_returns_a_new_tensor(
    executor: str, dtype: torch.dtype
) -> None:
    """``nan_to_num`` of integers decomposes to ``clone``, which lowers as an alias: the
    output was the input itself, so an in-place update of the input after the op changed
    the output too (eager: the old values in a new tensor)."""
    to_num = Step("unary", "nan_to_num", (0,))
    returned = Program((dtype,), ((3,),), False, (to_num,), (1,), None)
    check(returned, executor)
    updated = Program((dtype,), ((3,),), False, (to_num, Step("unary", "not", (0,))), (1,), 0)
    check(updated, executor)


@pytest.mark.parametrize("executor", ["loop", "cpp"])
def test_an_op_lowered_as_an_alias_of_another_output_returns_a_new_tensor(executor: str) -> None:
    """``nan_to_num`` of a bool intermediate that is returned too: both outputs were one
    buffer (eager: two tensors)."""
    steps = (Step("binary", "logical_or", (0, 0)), Step("unary", "nan_to_num", (1,)))
    check(Program((torch.int32,), ((2, 4),), False, steps, (2, 1), None), executor)


@pytest.mark.parametrize("executor", ["kernel", "cpp"])
def test_two_channels_last_copies_returned_are_two_tensors(executor: str) -> None:
    """Found by the program fuzzer (session 26): ``a = abs(x); return
    a.contiguous(channels_last), a.contiguous(channels_last)`` came back as one buffer
    twice: the second copy (``clone`` of the first) was lowered as an alias and returned
    through ``output-layout``'s permute, a view, which the return's copy rule did not
    look through. Eager returns two tensors."""
    steps = (
        Step("unary", "abs", (0,)),
        Step("channels_last", "channels_last", (1,)),
        Step("channels_last", "channels_last", (1,)),
    )
    check(Program((torch.float32,), ((4, 5, 3, 5),), False, steps, (3, 2), None), executor)


@pytest.mark.parametrize("executor", ["loop", "kernel", "cpp"])
def test_a_view_of_an_integer_nan_to_num_is_not_the_input(executor: str) -> None:
    """Found by the program fuzzer (session 26): ``nan_to_num(x).flatten()`` of a 0-d
    ``uint8`` tensor came back from the loop interpreter as a view of ``x``: nan_to_num
    of integers is a clone, lowered as an alias of ``x``, and the 0-d view runs in a
    ``loop.extern`` whose result the return's copy rule did not see through. Eager
    returns a new tensor."""
    steps = (Step("unary", "nan_to_num", (0,)), Step("flatten", "flatten", (1,)))
    check(Program((torch.uint8,), ((),), False, steps, (2,), None), executor)


@pytest.mark.parametrize("executor", ["loop", "kernel", "cpp"])
def test_half_square_root_of_negative_infinity_is_std_pow(executor: str) -> None:
    """Found by the program fuzzer (session 27, its new scalar steps): ``x ** 0.5`` of a
    float16 ``-inf`` gave NaN (sqrt); ATen's CPU pow kernel takes its sqrt/rsqrt
    shortcuts for float, double and bfloat16 only, and std::pow gives inf. (Not the
    Triton executor on CPU tensors: Triton's interpreter computes ``libdevice.pow`` of
    ``-inf`` as NaN; on a GPU the program is a CUDA one, where ATen takes sqrt too.)"""
    steps = (Step("scalar", "pow", (0,), (2,)),)
    check(Program((torch.float16,), ((),), True, steps, (1, 0), 0), executor)
    steps = (Step("scalar", "pow", (0,), (2,)), Step("scalar", "pow", (1,), (1,)))
    check(Program((torch.float16,), ((5,),), True, steps, (1, 2), None), executor)


def test_a_float64_cast_of_a_float32_result_is_compared_at_float32_tolerance() -> None:
    """Found by the program fuzzer (session 27): ``exp(x).double()`` differed from eager
    by one float32 unit in ``exp`` (kiln's exp against ATen's: 1.2e-7), judged at
    float64's tolerance (1e-9). The oracle was wrong, not kiln: a value carries the
    rounding of the least precise float it was computed through."""
    steps = (Step("unary", "exp", (0,)), Step("cast", "to", (1,), (1,)))
    program = Program((torch.float32,), ((4,),), False, steps, (2,), None)
    assert loosest_float(program) == torch.float32
    check(program, "cpp")


def test_an_output_viewing_another_output_shares_its_storage_at_loop_level() -> None:
    """Found by the batched program fuzzer: ``e = exp(y); return e.flatten(), e`` through
    the loop interpreter returned the view as a copy (the "loop" executor's pipeline
    lacked output-layout, which is what makes such outputs views)."""
    steps = (Step("unary", "exp", (1,)), Step("flatten", "flatten", (2,)))
    program = Program((torch.uint8, torch.uint8), ((3,), (3, 1)), False, steps, (3, 2, 0), None)
    check(program, "loop")


@pytest.mark.parametrize("executor", ["kernel", "cpp"])
def test_equal_outputs_of_two_nodes_are_two_tensors(executor: str) -> None:
    """Found by the batched program fuzzer: two equal computations returned came back as
    one tensor twice (``cse`` merged them), so an in-place update of one changed the
    other; eager returns two tensors. ``cse`` now returns a copy for the later one."""
    sums = (
        Step("slice", "slice", (2,), (0, 1, 1)),
        Step("reduce", "sum", (3,), (0, 1)),
        Step("reduce", "sum", (3,), (0, 1)),
    )
    dtypes = (torch.uint8, torch.int16, torch.float64)
    check(Program(dtypes, ((4,), (1,), (1,)), False, sums, (4, 5, 3), None), executor)
    squares = (
        Step("unary", "square", (0,)),
        Step("inplace", "mul_", (1, 0)),
        Step("unary", "square", (0,)),
    )
    check(Program((torch.float16,), ((3, 1, 1, 1),), True, squares, (3, 1, 2), 0), executor)


@pytest.mark.parametrize("executor", ["kernel", "cpp"])
def test_an_expanded_intermediate_is_returned_with_eager_strides(executor: str) -> None:
    """Found by the batched program fuzzer: ``x.clone().mul_(2).unsqueeze(0).expand(3, 1)``
    came back as a contiguous copy (strides (1, 1)) where eager returns a view of the
    intermediate with stride 0: output-layout now replays such a view on its base."""
    steps = (
        Step("reduce", "sum", (2,), (0, 1)),
        Step("inplace", "mul_", (0, 3)),
        Step("expand", "expand", (4,), (3,)),
    )
    dtypes = (torch.int8, torch.float16, torch.int8)
    check(Program(dtypes, ((1,), (1,), (1,)), True, steps, (5, 3, 0), None), executor)
    wide = (Step("unary", "abs", (0,)), Step("expand", "expand", (1,), (3,)))
    check(Program((torch.float32,), ((4,),), False, wide, (2,), None), executor)


@pytest.mark.parametrize("name", ["floor", "nan_to_num"])
def test_a_zero_dim_copy_in_the_loop_interpreter_is_a_new_tensor(name: str) -> None:
    """Found by the batched program fuzzer: ``floor`` of a 0-d int32 input (a copy at loop
    level) returned the input tensor itself through the loop interpreter."""
    program = Program((torch.int32,), ((),), True, (Step("unary", name, (0,)),), (1,), None)
    check(program, "loop")


def test_an_integer_cast_to_bfloat16_in_triton() -> None:
    """Found by the batched program fuzzer: ``int64 -> bfloat16`` of small integers came
    back as tiny denormals and NaNs through Triton's interpreter (it cast the integers to
    bfloat16's raw bits); kiln's Triton kernels now cast through float32, as eager does
    (tests/backends/triton/test_triton_casts.py checks the rounding on a GPU too)."""
    steps = (
        Step("cast", "to", (1,), (6,)),
        Step("as_strided", "as_strided", (0,), (4, 0, 0, 1, 4)),
        Step("cast", "to", (0,), (3,)),
    )
    shapes = ((1, 5, 2, 1), (1, 1, 2, 1))
    check(Program((torch.int64, torch.float16), shapes, False, steps, (2, 3, 4), None), "triton")


def test_a_bfloat16_input_updated_from_integers_in_triton() -> None:
    """Found by the batched program fuzzer (same cause): a bfloat16 input updated in place
    with an int32 value (``x.add_(abs(i).to(x.dtype))``) differed from eager after the call
    through Triton's interpreter."""
    steps = (
        Step("as_strided", "as_strided", (1,), (0, 0, 0, 0, 0)),
        Step("flatten", "flatten", (0,)),
        Step("unary", "abs", (2,)),
    )
    dtypes = (torch.bfloat16, torch.bfloat16, torch.int32, torch.bfloat16)
    shapes = ((2, 0, 0), (2, 1, 1), (2, 1, 1), (0, 1))
    check(Program(dtypes, shapes, True, steps, (4, 5), 1), "triton")


@pytest.mark.parametrize("executor", ["kernel", "cpp"])
def test_softmax_of_an_empty_integer_tensor(executor: str) -> None:
    """Found by the batched program fuzzer: ``softmax`` of an empty int32 tensor raised
    "value cannot be converted to type int without overflow" (the decomposition's ``-inf``
    padding); eager returns an empty int32 tensor."""
    steps = (Step("flatten", "flatten", (0,)), Step("reduce", "softmax", (2,), (0, 1)))
    program = Program((torch.int32, torch.int32), ((0, 1, 1), (1, 2)), False, steps, (2, 3), None)
    check(program, executor)


def test_a_cast_of_infinity_to_int32_in_cpp() -> None:
    """Found by the batched program fuzzer: ``x - x.to(torch.int32)`` of a 0-d ``-inf``
    was NaN through C++ (the undefined cast let g++ fold ``(double)(int)x`` to ``x``);
    eager: ``-inf - INT32_MIN = -inf``. The C++ cast now converts as x86 does."""
    steps = (
        Step("cast", "to", (0,), (5,)),
        Step("binary", "sub", (0, 1)),
        Step("as_strided", "as_strided", (2,), (1, 0, 3, 0, 0)),
    )
    check(Program((torch.float64,), ((),), True, steps, (1, 2, 3), None), "cpp")


def test_a_channels_last_view_and_its_contiguous_copy_share_storage() -> None:
    """Found by the batched program fuzzer: ``v = y.unsqueeze(2)`` of shape (3, 1, 1, 4)
    is channels-last contiguous, so eager's ``v.contiguous(memory_format=channels_last)``
    is ``v`` itself; kiln returned the two outputs as two copies."""
    steps = (
        Step("binary", "where", (0, 0)),
        Step("unsqueeze", "unsqueeze", (2,), (2,)),
        Step("slice", "slice", (0,), (0, 2, 2)),
        Step("unary", "sigmoid", (2,)),
        Step("contiguous", "contiguous", (0,)),
        Step("channels_last", "channels_last", (3,)),
    )
    dtypes = (torch.bfloat16, torch.bfloat16)
    program = Program(dtypes, ((3, 1, 4), (4, 1)), True, steps, (7, 3, 5), None)
    for executor in ("kernel", "cpp"):
        check(program, executor)


@pytest.mark.parametrize("executor", ["kernel", "cpp"])
def test_a_stepped_slice_of_a_channels_last_copy_keeps_eager_strides(executor: str) -> None:
    """Found by the batched program fuzzer (session 10): the only output is
    ``x.contiguous(memory_format=torch.channels_last)[..., ::2]``; eager strides
    (125, 1, 25, 10), kiln (125, 25, 5, 2): output-layout replayed the slice on its base,
    but returned that base (no output, so no recorded strides) contiguous. Now the base's
    layout is read off the slice's recorded strides."""
    steps = (
        Step("channels_last", "channels_last", (0,)),
        Step("slice", "slice", (1,), (3, 0, 2)),
    )
    check(Program((torch.float16,), ((1, 5, 5, 5),), False, steps, (2,), None), executor)


def test_a_gradient_eager_computes_otherwise_than_its_traced_formula() -> None:
    """Found by the fuzz campaign (session 46): ``prod`` of a one-element tensor holding an
    infinity. Eager's backward divides the product by the input (NaN); the formula
    AOTAutograd traces is zero-safe (the output gradient), and so is kiln's result, as
    ``aot_eager``'s: the harness holds kiln to the traced formula there."""
    program = Program(
        dtypes=(torch.float32,),
        shapes=((1,),),
        special=True,
        steps=(Step(kind="reduce", name="prod", args=(0,), extra=(0, 0)),),
        outputs=(1, 0),
        mutate=None,
    )
    inputs = make_inputs(program, 1)
    assert inputs[0].isinf().any() or inputs[0].isnan().any()
    check_backward(program, "cpp")
