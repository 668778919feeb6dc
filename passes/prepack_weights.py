"""``prepack-weights``: mark inference convolutions and linear layers to run on prepacked weights.

ATen's CPU convolution (``mkldnn_convolution``) reorders the plain OIHW weight into
oneDNN's blocked layout on every call. Inductor avoids that under ``freezing`` (the
weights become constants, ``mkldnn._reorder_convolution_weight`` runs once at compile
time, the convolution becomes ``mkldnn._convolution_pointwise``). Under AOTAutograd the
parameters are graph inputs, not constants, so kiln cannot reorder at compile time;
instead this pass marks the convolution ``kiln.prepack`` (:mod:`kiln.dialects.aten.prepack`)
and the C++ wrapper keeps, per call site, the packed copy of the weight it was last
given, keyed on the weight tensor's identity, its version counter (``_version``, bumped
by every in-place update: ``copy_``, ``load_state_dict``, an optimizer step) and its
data pointer, and repacks when any of them changes::

    %y = aten.convolution.default(%x, %w, %b, ...) : (...) -> tensor<1x32x56x56xf32>

becomes::

    %y = aten.convolution.default(%x, %w, %b, ...) {kiln.prepack} : (...) -> tensor<1x32x56x56xf32>

Convolutions with a 1x1 kernel are left to ATen (measured 2-4x faster here than the
packed call). Linear layers: ``mm(x, t(w))`` and ``addmm(b, x, t(w))`` of a weight
argument ``w`` (``nn.Linear``), or ``mm(x, w)`` / ``addmm(b, x, w)`` (GPT-2's ``Conv1D``,
whose weight is ``[in, out]``), run on oneDNN's packed GEMM (``mkldnn._linear_pointwise`` on
``mkldnn._reorder_linear_weight(w, rows)``, as under Inductor's freezing), which skips
packing ``w`` at every call, where that is faster on this machine (option ``linear``):

* ``auto`` (the default): layers with at least :func:`auto_min_rows` rows for their
  weight's size, in a module the driver marked ``kiln.packed_linear``: it does when this
  CPU runs oneDNN's packed GEMM faster than ATen's ``mm`` (MKL), as measured once per
  process by :mod:`kiln.backends.cpp.gemm_calibration` (1.14-1.38x faster on an AMD EPYC
  VM here, slower on the Intel Xeon VMs of earlier sessions). The packed call costs about
  13 us more a call than ``mm`` and reads a large weight up to twice as fast, so the
  threshold falls as the weight grows: a 128 x 128 weight only from 1024 rows, a
  768 x 3072 one from a single row.
* ``always`` / ``never``;
* ``linear-max-rows=N`` (N > 0) marks every linear layer of at most N rows, whatever
  ``linear`` says.

It runs before ``channels-last``, which keeps a function NCHW when ATen would run one of
its convolutions in ``Slow2d`` but does not count a marked one (it runs in oneDNN).

The attribute changes no number the IR computes: the interpreters ignore it, and the
wrapper falls back to ``torch.convolution`` when oneDNN is missing or grad mode is on for
a weight that requires grad. A convolution is marked only when

* the module is an inference graph (``kiln.inference``, written by the driver for
  AOTAutograd's inference graphs when the ``prepack_weights`` option is on; ``force=true``
  marks without it, for ``kiln-opt`` and tests), on the CPU (no ``kiln.device``: the
  Triton wrapper would ignore the mark anyway);
* it is a 2-D, non-transposed float32 or bfloat16 convolution with a static weight (the
  input's size may be symbolic: the packed layout depends on it, so such a site keeps a packed
  copy per input size, :mod:`kiln.backends.cpp.prepack`), or a float32 ``x @ w.T`` or
  ``x @ w`` (``mm``; ``addmm`` with a 1-D bias and unit ``alpha``/``beta``) with static columns
  (its rows may be symbolic, under ``dynamic=True``: the weight is then packed for any
  row count, as Inductor does, and under ``auto`` the op carries
  ``kiln.prepack_min_rows`` = :func:`auto_min_rows` of its weight, below which a call
  runs ATen's product);
* its weight is a function argument (a parameter, or a weight the caller passes in:
  anything computed inside the graph is new at every call, so caching it would buy
  nothing).

**On the GPU** (``kiln.device``) the mark means the weight may be kept in the memory
format cuDNN needs: a channels-last convolution (NHWC input, what ``channels-last``
makes of a CNN) given an OIHW weight has ATen copy the weight to channels-last at every
call (an elementwise copy kernel per 3x3 convolution: 17 of ResNet-18's 62 kernels and
50 of its 225 us a call in bfloat16 on the H200); the Triton wrapper's site keeps that
copy, with the same identity/version/pointer checks
(:mod:`kiln.backends.triton.weight_layouts`). Any floating dtype; linear layers are not
marked (cuBLAS reads a transposed weight as it lies). On the GPU training graphs are
marked too (``kiln.training``, written by the driver for AOTAutograd's forward and
backward graphs with the option on), and so is a backward's ``convolution_backward``
of a weight argument: the copies are kept per weight, so the backward reads the copy
its forward made (ATen copied each weight twice a step, once for each)::

    %gi, %gw, %gb = aten.convolution_backward.default(%g, %x, %w, ...) {kiln.prepack} : ...
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    Float64Type,
    ModuleOp,
    TensorType,
)
from xdsl.dialects.func import FuncOp
from xdsl.ir import Attribute, BlockArgument, SSAValue
from xdsl.passes import ModulePass

from kiln.dialects.aten.encoding import decode_value
from kiln.dialects.aten.function_attrs import runs_on_cpu
from kiln.dialects.aten.ops import AtenOp
from kiln.dialects.aten.prepack import (
    INFERENCE_ATTR,
    PACKED_LINEAR_ATTR,
    TRAINING_ATTR,
    mark_prepacked,
)
from kiln.passes.unfuse_addmm import is_one

CONVOLUTION = "aten::convolution.default"
CONVOLUTION_BACKWARD = "aten::convolution_backward.default"


def _tensor_of(value: SSAValue | None, rank: int, elements: tuple[type[Attribute], ...]) -> bool:
    """``value`` is a tensor of ``rank`` dimensions with one of ``elements``."""
    ty = value.type if value is not None else None
    return (
        isinstance(ty, TensorType)
        and isinstance(ty.element_type, elements)
        and len(ty.get_shape()) == rank  # pyright: ignore[reportUnknownArgumentType, reportUnknownMemberType]
    )


def _f32(value: SSAValue | None, rank: int) -> bool:
    return _tensor_of(value, rank, (Float32Type,))


def _float(value: SSAValue | None, rank: int) -> bool:
    return _tensor_of(value, rank, (BFloat16Type, Float16Type, Float32Type, Float64Type))


def _cpu_convolution_float(bfloat16: bool) -> Callable[[SSAValue | None, int], bool]:
    """float32, and bfloat16 if ``bfloat16`` (:func:`_cpu_packs_bfloat16`): the dtypes
    whose CPU convolutions are packed. A bfloat16 one on a channels-last input had ATen
    copy its OIHW weight at every call, in a state oneDNN slowed by 2-3x (ResNet-18 small
    inference on the AMD EPYC VM: 8.5-19.8 ms against 4.2 ms packed, eager 6.7 ms;
    ResNet-50 32.6 against 14.7)."""
    types = (Float32Type, BFloat16Type) if bfloat16 else (Float32Type,)
    return lambda value, rank: _tensor_of(value, rank, types)


@cache
def _cpu_packs_bfloat16() -> bool:
    """Whether this CPU runs oneDNN's bfloat16 convolutions: they need AVX-512 (BW, VL,
    DQ) or AVX-NE-CONVERT. On an AVX2-only CPU ``mkldnn._reorder_convolution_weight``
    raises ("bf16 path needs the cpu support ..."), and ATen's own convolution is the
    one that runs: the packed program failed there."""
    import torch

    supported = getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", None)
    return bool(supported is not None and supported())


def _static(value: SSAValue | None) -> bool:
    return all(d >= 0 for d in value.type.get_shape())  # pyright: ignore[reportOptionalMemberAccess, reportAttributeAccessIssue, reportUnknownVariableType, reportUnknownMemberType]


def _static_f32(value: SSAValue | None, rank: int) -> bool:
    return _f32(value, rank) and _static(value)


def _spatial(value: SSAValue | None) -> int:
    """kh * kw of an OIHW weight."""
    assert value is not None
    assert isinstance(value.type, TensorType)
    shape: tuple[int, ...] = tuple(value.type.get_shape())  # pyright: ignore[reportUnknownArgumentType, reportUnknownMemberType, reportUnknownVariableType]
    return shape[2] * shape[3]


def _spatial_weight_argument(
    weight: SSAValue | None, func: FuncOp, floating: Callable[[SSAValue | None, int], bool]
) -> bool:
    """``weight`` is a static 4-D function argument with a spatial kernel (not 1x1: ATen's
    own path ran those 2-4x faster than the packed oneDNN call here,
    docs/benchmarks/cpu-profile.md; on the GPU an OIHW 1x1 weight is already
    channels-last)."""
    return (
        floating(weight, 4)
        and _static(weight)
        and _spatial(weight) > 1
        and isinstance(weight, BlockArgument)
        and weight.owner is func.body.block
    )


def packable(op: AtenOp, func: FuncOp, on_gpu: bool = False, cpu_bfloat16: bool = True) -> bool:
    """``op`` is a convolution whose weight the wrapper may keep prepacked (on the
    GPU: in the memory format cuDNN needs; any floating dtype there; on the CPU float32,
    and bfloat16 if ``cpu_bfloat16``)."""
    if op.overload_name != CONVOLUTION or len(op.results) != 1 or op.sym_operands():
        return False
    if op.static_arg("transposed") is not False:
        return False
    tensors = op.tensor_operands()
    x, weight = tensors["input"][0], tensors["weight"][0]
    bias = tensors["bias"][0] if tensors.get("bias") else None
    floating = _float if on_gpu else _cpu_convolution_float(cpu_bfloat16)
    # The input's and result's sizes may be symbolic: the site packs per input size.
    return (
        _spatial_weight_argument(weight, func, floating)
        and floating(x, 4)
        and (bias is None or (floating(bias, 1) and _static(bias)))
        and floating(op.results[0], 4)
    )


def packable_backward(op: AtenOp, func: FuncOp) -> bool:
    """``op`` is a ``convolution_backward`` whose weight the Triton wrapper may read as
    the channels-last copy its forward made."""
    if op.overload_name != CONVOLUTION_BACKWARD or op.sym_operands():
        return False
    if op.static_arg("transposed") is not False:
        return False
    tensors = op.tensor_operands()
    grad, x, weight = tensors["grad_output"][0], tensors["input"][0], tensors["weight"][0]
    return _spatial_weight_argument(weight, func, _float) and _float(grad, 4) and _float(x, 4)


LINEAR = frozenset({"aten::mm.default", "aten::addmm.default"})

# ``linear=auto``'s threshold, from single products on the AMD EPYC VM (addmm against the
# packed call, medians) and end to end on the dashboard's small models
# (docs/benchmarks/cpu-profile.md, "Session 29"): a weight of 16K elements lost packed up
# to 512 rows (0.56x at 32 x 128 x 128) and won 1.1x at 4096; 36-144K elements won from a
# few million multiply-adds (a single product won from 2M, but BERT's 64K weights at 32
# rows lost 7% end to end, so 3M); from 512K elements one row won (1 x 768 x 768: 1.17x,
# 32 x 768 x 3072: 1.9x).
AUTO_SMALL_WEIGHT = 1 << 15
"""Weights of fewer elements are packed only from :data:`AUTO_SMALL_WEIGHT_MIN_ROWS` rows."""
AUTO_SMALL_WEIGHT_MIN_ROWS = 1024
AUTO_MIN_MACS = 3 << 20
"""Larger weights are packed from this many multiply-adds a call (rows x weight elements)."""
AUTO_LARGE_WEIGHT = 1 << 19
"""Weights of at least this many elements are packed at any row count."""


def auto_min_rows(weight_elements: int) -> int:
    """The fewest rows a product of a weight of ``weight_elements`` elements runs faster
    on oneDNN's packed GEMM than on ATen's ``mm`` (``linear=auto``)."""
    if weight_elements >= AUTO_LARGE_WEIGHT:
        return 1
    if weight_elements >= AUTO_SMALL_WEIGHT:
        return -(-AUTO_MIN_MACS // weight_elements)
    return AUTO_SMALL_WEIGHT_MIN_ROWS


def _weight_operand(value: SSAValue | None, func: FuncOp) -> bool:
    """``value`` is a 2-D function argument ``w`` (``x @ w``: GPT-2's ``Conv1D``) or
    ``t(w)`` / ``permute(w, [1, 0])`` of one (``x @ w.T``: ``nn.Linear``)."""
    if isinstance(value, BlockArgument):
        return value.owner is func.body.block and _static_f32(value, 2)
    owner = value.owner if value is not None else None
    if not isinstance(owner, AtenOp) or not owner.operands:
        return False
    if owner.overload_name == "aten::permute.default":
        spec = next(a for a in owner.op_schema().arguments if a.name == "dims")
        if decode_value(spec, owner.arg_attr("dims"), ()) != [1, 0]:
            return False
    elif owner.overload_name != "aten::t.default":
        return False
    weight = owner.operands[0]
    return (
        isinstance(weight, BlockArgument)
        and weight.owner is func.body.block
        and _static_f32(weight, 2)
    )


def _f32_static_columns(value: SSAValue | None) -> bool:
    """A float32 matrix whose columns are static (its rows may be symbolic)."""
    return _f32(value, 2) and value.type.get_shape()[1] >= 0  # pyright: ignore[reportOptionalMemberAccess, reportAttributeAccessIssue, reportUnknownMemberType]


def linear_row_count(op: AtenOp) -> int | None:
    """The row count of ``x`` in a linear layer ``op`` (None: symbolic)."""
    tensors = op.tensor_operands()
    x = tensors["mat1" if op.overload_name == "aten::addmm.default" else "self"][0]
    assert x is not None
    rows: int = x.type.get_shape()[0]  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType, reportUnknownVariableType]
    return rows if rows >= 0 else None  # pyright: ignore[reportUnknownVariableType]


def linear_weight_elements(op: AtenOp) -> int:
    """The element count of the weight of a linear layer ``op`` with static columns (the
    input's columns times the result's)."""
    shape = op.results[0].type.get_shape()  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType, reportUnknownVariableType]
    tensors = op.tensor_operands()
    x = tensors["mat1" if op.overload_name == "aten::addmm.default" else "self"][0]
    assert x is not None
    inner: int = x.type.get_shape()[1]  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType, reportUnknownVariableType]
    return inner * shape[1]  # pyright: ignore[reportUnknownVariableType]


def packable_linear(op: AtenOp, func: FuncOp, rows: Callable[[int | None, int], bool]) -> bool:
    """``op`` is ``x @ w.T`` or ``x @ w`` (``mm``, or ``addmm`` with a 1-D bias and unit
    scales) of a 2-D weight argument ``w``, with a row count ``rows`` accepts for the weight's element
    count (None: symbolic rows, under ``dynamic=True``; the columns are static)."""
    if op.overload_name not in LINEAR or len(op.results) != 1 or op.sym_operands():
        return False
    tensors = op.tensor_operands()
    if op.overload_name == "aten::addmm.default":
        bias, x = tensors["self"][0], tensors["mat1"][0]
        if not (is_one(op, "alpha") and is_one(op, "beta") and _static_f32(bias, 1)):
            return False
    else:
        x = tensors["self"][0]
    return (
        _f32_static_columns(x)
        and _f32_static_columns(op.results[0])
        and _weight_operand(tensors["mat2"][0], func)
        and rows(linear_row_count(op), linear_weight_elements(op))
    )


@dataclass(frozen=True)
class PrepackWeightsPass(ModulePass):
    """Mark inference convolutions ``kiln.prepack`` (see the module docstring)."""

    name: ClassVar[str] = "prepack-weights"  # pyright: ignore[reportIncompatibleVariableOverride]

    force: bool = False
    """Mark without the driver's ``kiln.inference`` (kiln-opt, tests)."""
    linear: str = "auto"
    """Linear layers (``mm``/``addmm`` of a transposed weight argument) on oneDNN's packed
    GEMM: ``auto`` (at least :func:`auto_min_rows` rows, in a module marked
    ``kiln.packed_linear``), ``always`` or ``never``."""
    linear_max_rows: int = 0
    """If above 0: mark every linear layer of at most this many rows, whatever
    ``linear`` says (oneDNN's packed GEMM won 20-35% over ``mm`` alone at 17 rows on an
    Intel VM, but made BERT and ViT at 17 tokens 15-20% slower end to end there,
    docs/benchmarks/cpu-profile.md)."""

    cpu_bfloat16: str = "auto"
    """bfloat16 CPU convolutions: ``auto`` (packed where this CPU has oneDNN's bfloat16
    path, :func:`_cpu_packs_bfloat16`), ``always`` or ``never``."""

    def packs_cpu_bfloat16(self) -> bool:
        if self.cpu_bfloat16 not in ("auto", "always", "never"):
            raise ValueError(
                f"prepack-weights: cpu-bfloat16={self.cpu_bfloat16!r} "
                "(expected auto, always or never)"
            )
        return self.cpu_bfloat16 == "always" or (
            self.cpu_bfloat16 == "auto" and _cpu_packs_bfloat16()
        )

    def linear_rows(self, module: ModuleOp) -> Callable[[int | None, int], bool]:
        """Which row counts of a CPU linear layer of ``module`` to mark, given its weight's
        element count (None: symbolic; under ``auto`` marked with :func:`auto_min_rows`
        as the call's threshold)."""
        if self.linear_max_rows > 0:
            return lambda rows, _: rows is not None and rows <= self.linear_max_rows
        if self.linear == "always":
            return lambda rows, _: True
        if self.linear == "never":
            return lambda rows, _: False
        if self.linear != "auto":
            raise ValueError(
                f"prepack-weights: linear={self.linear!r} (expected auto, always or never)"
            )
        faster = PACKED_LINEAR_ATTR in module.attributes
        return lambda rows, weight: faster and (rows is None or rows >= auto_min_rows(weight))

    def _auto_rows(self) -> bool:
        """Whether row counts decide (``linear=auto``, no ``linear-max-rows``)."""
        return self.linear == "auto" and self.linear_max_rows <= 0

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        on_gpu = not runs_on_cpu(op)
        allowed = INFERENCE_ATTR in op.attributes or (on_gpu and TRAINING_ATTR in op.attributes)
        if not self.force and not allowed:
            return
        # oneDNN's packed GEMM is CPU-only; cuBLAS reads a transposed weight in place.
        rows = (lambda *_: False) if on_gpu else self.linear_rows(op)
        cpu_bfloat16 = not on_gpu and self.packs_cpu_bfloat16()
        for func in op.walk():
            if not isinstance(func, FuncOp) or not func.body.blocks:
                continue
            for inner in func.body.block.ops:
                if not isinstance(inner, AtenOp):
                    continue
                if packable_linear(inner, func, rows):
                    symbolic_auto = linear_row_count(inner) is None and self._auto_rows()
                    min_rows = auto_min_rows(linear_weight_elements(inner))
                    mark_prepacked(inner, min_rows if symbolic_auto else 0)
                elif packable(inner, func, on_gpu, cpu_bfloat16) or (
                    on_gpu and packable_backward(inner, func)
                ):
                    mark_prepacked(inner)
