"""``conv1x1-to-mm``: a 1x1 convolution of a channels-last activation as one matrix product (CPU).

On an activation stored NHWC, a 1x1 convolution with stride 1, no padding and one group
is exactly a matrix product: the ``[N*H*W, C]`` rows of the input times the ``[O, C]``
weight transposed give the ``[N*H*W, O]`` rows of the NHWC result. ATen runs it instead
as a oneDNN convolution that reorders the plain weight into its blocked layout on every
call (kiln cannot keep a packed 1x1 weight: the packed call ran 2-4x slower than ATen's
here, see ``prepack-weights``); as an ``mm`` it is one MKL call on the buffers as they
are, with no copy on either side (figures: docs/benchmarks/design-notes.md). Depthwise
separable CNNs (MobileNet, EfficientNet) run most of their FLOPs in such convolutions.

It runs after ``channels-last``, whose rewrite stores the activations NHWC::

    %6 = aten.permute.default(%5, dims = [0, 3, 1, 2]) : (tensor<1x6x6x4xf32>) -> tensor<1x4x6x6xf32>
    %7 = aten.convolution.default(%6, %w, padding = [0, 0], stride = [1, 1], ..., groups = 1) : (tensor<1x4x6x6xf32>, tensor<8x4x1x1xf32>) -> tensor<1x8x6x6xf32>

becomes::

    %x2 = aten.view.default(%5, size = [36, 4]) : (tensor<1x6x6x4xf32>) -> tensor<36x4xf32>
    %w2 = aten.view.default(%w, size = [8, 4]) : (tensor<8x4x1x1xf32>) -> tensor<8x4xf32>
    %wt = aten.permute.default(%w2, dims = [1, 0]) : (tensor<8x4xf32>) -> tensor<4x8xf32>
    %mm = aten.mm.default(%x2, %wt) : (tensor<36x4xf32>, tensor<4x8xf32>) -> tensor<36x8xf32>
    %nhwc = aten.view.default(%mm, size = [1, 6, 6, 8]) : (tensor<36x8xf32>) -> tensor<1x6x6x8xf32>
    %7 = aten.permute.default(%nhwc, dims = [0, 3, 1, 2]) : (tensor<1x6x6x8xf32>) -> tensor<1x8x6x6xf32>

(with a bias, ``addmm(bias, x2, wt)``). Every op added is a view except the product, so
``lower-aten`` passes MKL strided views of the NHWC buffer and the weight, and the
consumers read the product's buffer as the NHWC tensor ``channels-last`` expects.

An input counts as stored NHWC when it is ``permute(v, [0, 3, 1, 2])`` of a 4-D value (the
NCHW view ``channels-last`` writes), a ``clone(..., memory_format = "channels_last")``,
or the result of a convolution, pool or batch norm (``FollowsChannelsLast``) of such an
input, as ``lower-aten`` stores them; or when its map is 1x1 (squeeze-and-excitation's
pooled ``[N, C, 1, 1]``, whose NCHW buffer is its NHWC one: MobileNet-v3 and
EfficientNet run two such convolutions per block, 80-105 us each in oneDNN against
9-28 us as ``addmm`` here). Were it not contiguous after all, ``lower-aten``
copies the view for the extern: slower, never wrong.

Only float32 and bfloat16 CPU programs are rewritten (bfloat16 MobileNet-v2 small
inference on the AMD EPYC VM: 4.6-5.4 -> 3.6 ms; GPU programs keep cuDNN's convolution),
and a convolution whose result the function returns is left alone (its layout is the
function's output layout). The batch and image sizes may be symbolic (``dynamic=True``):
the views then take them as ``aten.sym_size.int`` values of the input and the row count
as their ``arith.muli`` product, which ``lower-aten`` reads back as the same size
expressions (``s0*s1*s1`` rows of an ``[s0, s1, s1, C]`` buffer: a view, no copy)::

    %batch = aten.sym_size.int(%x, dim = 0) : (tensor<?x4x?x?xf32>) -> index
    %height = aten.sym_size.int(%x, dim = 2) : (tensor<?x4x?x?xf32>) -> index
    %width = aten.sym_size.int(%x, dim = 3) : (tensor<?x4x?x?xf32>) -> index
    %rows_partial = arith.muli %batch, %height : index
    %rows = arith.muli %rows_partial, %width : index
    %x_rows = aten.view.default(%5, size = [%rows, 4]) : (tensor<?x?x?x4xf32>, index) -> tensor<?x4xf32>
    ...
    %y_nhwc = aten.view.default(%mm, size = [%batch, %height, %width, 8]) : (tensor<?x8xf32>, index, index, index) -> tensor<?x?x?x8xf32>

In an inference module the driver marked ``kiln.packed_linear`` (this machine runs
oneDNN's packed GEMM faster than ATen's ``mm``: :mod:`kiln.backends.cpp.gemm_calibration`),
a product whose weight is a function argument is marked ``kiln.prepack`` when it has at
least ``auto_min_rows`` static rows for its weight's size, or symbolic rows (with that
threshold as its ``kiln.prepack_min_rows``, checked by the call), as
``prepack-weights{linear=auto}`` marks linear layers (it runs before this pass): the C++
wrapper packs the ``[O, C, 1, 1]`` weight as its ``[O, C]`` matrix once and repacks when
it changes (1.03-1.30x faster per product on an AMD EPYC VM,
docs/benchmarks/cpu-profile.md, "Session 25").

The channel counts (the weight's) must be static. Numbers change only by rounding (a different
summation order in the same float32 dot products), as between ATen's own convolution
algorithms.

**NCHW activations** (a CPU training step at a small size keeps its activations NCHW:
``channels-last``'s ``saved-nhwc-cpu-min-elements``). A float32 1x1 convolution of a small
weight (at most :data:`MAX_NCHW_WEIGHT` elements) and its ``convolution_backward`` become
batched products over the NCHW buffers as they are, each result NCHW as ATen's::

    y[n] = W @ x[n]                       bmm(expand(W, [N, O, C]), view(x, [N, C, H*W]))
    grad_x[n] = W^T @ grad_y[n]           bmm(expand(permute(W), [N, C, O]), view(grad_y, ...))
    grad_W = sum_n grad_y[n] @ x[n]^T     sum(bmm(view(grad_y), permute(view(x), [0, 2, 1])), [0])
    grad_b = sum(grad_y, [0, 2, 3])

oneDNN took 62-69 us a forward and 144-161 us a backward for ShuffleNet-v2's small
convolutions (2x116x4x4, 2x58x8x8, 2x24x16x16) against 9-17 and 28-41 us as products on
the AMD EPYC VM (session 41, ``/tmp/s41/mm_vs_conv.py``); with a larger weight and few
pixels (1024x464 over 2x2 pixels) MKL's product is the slower (553 us against 127), hence
the bound. bfloat16 keeps the convolution (the batched partial sums of ``grad_W`` would
round to bfloat16 once per image).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, cast

from xdsl.context import Context
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    BFloat16Type,
    Float32Type,
    ModuleOp,
    StringAttr,
    TensorType,
)
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Attribute, Block, BlockArgument, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from kiln.dialects.aten.builder import AtenBuilder, Size
from kiln.dialects.aten.function_attrs import runs_on_cpu
from kiln.dialects.aten.memory_format import NCHW, NHWC
from kiln.dialects.aten.ops import AtenOp
from kiln.dialects.aten.prepack import (
    INFERENCE_ATTR,
    PACKED_LINEAR_ATTR,
    is_prepacked,
    mark_prepacked,
)
from kiln.dialects.aten.traits import FollowsChannelsLast, has_aten_trait
from kiln.passes.prepack_weights import auto_min_rows

CONVOLUTION = "aten::convolution.default"
_PERMUTE = "aten::permute.default"
_CLONE = "aten::clone.default"


def _float_shape(value: SSAValue | None, rank: int) -> tuple[int, ...] | None:
    """The shape of ``value`` (``DYNAMIC_INDEX`` for a symbolic dim) when it is a float32
    or bfloat16 tensor of ``rank`` dimensions, else None."""
    ty = value.type if value is not None else None
    if not isinstance(ty, TensorType) or not isinstance(
        ty.element_type, Float32Type | BFloat16Type
    ):
        return None
    shape: tuple[int, ...] = tuple(ty.get_shape())  # pyright: ignore[reportUnknownArgumentType, reportUnknownMemberType, reportUnknownVariableType]
    return shape if len(shape) == rank else None


def _static_shape(value: SSAValue | None, rank: int) -> tuple[int, ...] | None:
    """The float32 shape of ``value`` when it has ``rank`` dimensions, all static."""
    shape = _float_shape(value, rank)
    return shape if shape is not None and DYNAMIC_INDEX not in shape else None


def _stored_nhwc(value: SSAValue, known: set[SSAValue]) -> bool:
    """Whether ``lower-aten`` stores ``value`` (4-D, NCHW order) as an NHWC buffer."""
    if value in known:
        return True
    shape = _float_shape(value, 4)
    if shape is not None and shape[2:] == (1, 1):
        # A 1x1 map (squeeze-and-excitation's pooled ``[N, C, 1, 1]``): NCHW and NHWC
        # are the same buffer.
        return True
    owner = value.owner
    if not isinstance(owner, AtenOp) or not owner.operands:
        return False
    if owner.overload_name == _PERMUTE:
        source = owner.operands[0]
        return (
            isinstance(source.type, TensorType)
            and len(source.type.get_shape()) == 4  # pyright: ignore[reportUnknownArgumentType, reportUnknownMemberType]
            and list(owner.static_arg("dims")) == list(NCHW)
        )
    if owner.overload_name == _CLONE:
        memory_format = owner.arg_attr("memory_format")
        return isinstance(memory_format, StringAttr) and memory_format.data == "channels_last"
    return False


MAX_ROWS = 4096
"""Above this many static rows (``N*H*W``) a 1x1 convolution stays a oneDNN convolution.
At the dashboard's large size (batch 32, 224x224: 1,568 to 401,408 rows) the matrix
products ran slower than oneDNN's NHWC convolutions: ResNet-50 1919 ms a call without the
rewrite against 2587 ms with it, ShuffleNet-v2's 36 convolutions 83 ms against 103 ms as
``mm`` (this 2-core VM, session 16). At the small size (batch 2, at most 2,048 rows) the
products are the faster (sessions 8 and 11)."""


def _unit_geometry(op: AtenOp) -> bool:
    """Not transposed, one group, stride 1, no padding (a convolution or its backward)."""
    return (
        op.static_arg("transposed") is False
        and op.static_arg("groups") == 1
        and all(s == 1 for s in op.static_arg("stride"))
        and all(p == 0 for p in op.static_arg("padding"))
    )


def is_pointwise_convolution(op: AtenOp) -> bool:
    """A non-transposed 1x1 float32 or bfloat16 convolution (one element type throughout),
    stride 1, no padding, one group, with static channel counts (the batch and image sizes
    may be symbolic) and at most :data:`MAX_ROWS` rows when they are static."""
    if op.overload_name != CONVOLUTION or len(op.results) != 1 or op.sym_operands():
        return False
    if is_prepacked(op):
        return False
    tensors = op.tensor_operands()
    values = [v for vs in tensors.values() for v in vs if v is not None] + [op.results[0]]
    if len({cast(TensorType[Attribute], v.type).element_type for v in values}) != 1:
        return False
    x = _float_shape(tensors["input"][0], 4)
    w = _static_shape(tensors["weight"][0], 4)
    y = _float_shape(op.results[0], 4)
    bias = tensors["bias"][0] if tensors.get("bias") else None
    if x is None or w is None or y is None:
        return False
    if bias is not None and _static_shape(bias, 1) != (w[0],):
        return False
    n, c, h, width = x
    if DYNAMIC_INDEX not in (n, h, width) and n * h * width > MAX_ROWS:
        return False
    # A symbolic dim of y matches the same of x: a 1x1 stride-1 unpadded convolution keeps
    # the batch and image sizes (the types only say which are symbolic).
    return _unit_geometry(op) and w == (w[0], c, 1, 1) and y == (n, w[0], h, width)


def _returned(value: SSAValue) -> bool:
    return any(isinstance(use.operation, ReturnOp) for use in value.uses)


@dataclass(frozen=True)
class _Dims:
    """A pointwise convolution's sizes for a rewrite, and the builder that inserts its
    ops: static ints, or ``sym_size`` values of the input where symbolic."""

    build: AtenBuilder
    n: Size
    c: int
    h: Size
    w: Size
    out: int


def _convolution_operands(op: AtenOp) -> tuple[SSAValue, SSAValue, SSAValue | None]:
    """A convolution's input, weight and bias (None: none)."""
    tensors = op.tensor_operands()
    x, weight = tensors["input"][0], tensors["weight"][0]
    assert x is not None
    assert weight is not None
    return x, weight, tensors["bias"][0] if tensors.get("bias") else None


def _dims(op: AtenOp, x: SSAValue, weight: SSAValue) -> _Dims:
    x_shape, w_shape = _float_shape(x, 4), _static_shape(weight, 4)
    assert x_shape is not None
    assert w_shape is not None
    element = cast(TensorType[Attribute], x.type).element_type
    build = AtenBuilder(InsertPoint.before(op), op.location, element)
    n = build.size(x, 0, x_shape[0], "batch")
    h = build.size(x, 2, x_shape[2], "height")
    w = build.size(x, 3, x_shape[3], "width")
    return _Dims(build, n, x_shape[1], h, w, w_shape[0])


def _rewrite(op: AtenOp, pack: bool = False) -> SSAValue:
    """``op`` (a pointwise convolution of an NHWC-stored input) as views around one ``mm``;
    returns the NCHW view of the product that replaces its result. ``pack``: mark the
    product ``kiln.prepack`` when its weight is a function argument and it has at least
    ``auto_min_rows`` static rows for its weight's size, or symbolic rows (see the module
    docstring)."""
    x, weight, bias = _convolution_operands(op)
    dims = _dims(op, x, weight)
    build, n, c, h, w, out = dims.build, dims.n, dims.c, dims.h, dims.w, dims.out
    element = build.element
    rows = build.product([n, h, w], "rows")
    owner = x.owner
    if isinstance(owner, AtenOp) and owner.overload_name == _PERMUTE:
        nhwc = owner.operands[0]  # x is permute(nhwc, NCHW): read the NHWC value itself
    else:
        nhwc = build("permute.default", {"self": x, "dims": list(NHWC)}, [n, h, w, c], "x_nhwc")
    x2 = build("view.default", {"self": nhwc, "size": [rows, c]}, [rows, c], "x_rows")
    w2 = build("view.default", {"self": weight, "size": [out, c]}, [out, c], "w_2d")
    wt = build("permute.default", {"self": w2, "dims": [1, 0]}, [c, out], "w_t")
    if bias is None:
        product = build("mm.default", {"self": x2, "mat2": wt}, [rows, out], "mm")
    else:
        product = build(
            "addmm.default", {"self": bias, "mat1": x2, "mat2": wt}, [rows, out], "addmm"
        )
    # Packed products (oneDNN's packed GEMM) are calibrated in float32 only.
    pack = pack and isinstance(element, Float32Type)
    if pack and isinstance(weight, BlockArgument) and isinstance(product.owner, AtenOp):
        min_rows = auto_min_rows(c * out)
        if not isinstance(rows, int):
            # Symbolic rows (``dynamic=True``): the call decides, as for linear layers.
            mark_prepacked(product.owner, min_rows)
        elif rows >= min_rows:
            mark_prepacked(product.owner)
    y_nhwc = build(
        "view.default", {"self": product, "size": [n, h, w, out]}, [n, h, w, out], "y_nhwc"
    )
    name = op.results[0].name_hint or "conv"
    return build("permute.default", {"self": y_nhwc, "dims": list(NCHW)}, [n, out, h, w], name)


MAX_NCHW_WEIGHT = 1 << 15
"""Weight elements (``O*C``) up to which a 1x1 convolution of an NCHW activation, and its
backward, become batched products (see the module docstring; the pass option
``nchw-max-weight``). At 1 << 17 (EfficientNet-b0's and MobileNet-v3's 55K-75K weights
too) a small training step moved by noise only (AMD EPYC VM, 7 interleaved rounds:
MobileNet-v3 25.3 -> 24.3 ms, EfficientNet-b0 39.4 -> 40.2); at 400K-475K weights over
2x2 pixels MKL's product is 2x slower than oneDNN's convolution."""

CONVOLUTION_BACKWARD = "aten::convolution_backward.default"


def _small_float32_weight(op: AtenOp, weight: SSAValue | None, limit: int) -> bool:
    shape = _static_shape(weight, 4)
    return (
        shape is not None
        and shape[0] * shape[1] <= limit
        and isinstance(cast(TensorType[Attribute], op.operands[0].type).element_type, Float32Type)
    )


def _pointwise_backward(op: AtenOp, limit: int) -> bool:
    """A float32 ``convolution_backward`` of a 1x1 convolution as
    :func:`is_pointwise_convolution` takes them, of a small weight, no bias gradient
    asked for where the bias has another size."""
    if op.overload_name != CONVOLUTION_BACKWARD or op.sym_operands() or is_prepacked(op):
        return False
    tensors = op.tensor_operands()
    grad, x, weight = tensors["grad_output"][0], tensors["input"][0], tensors["weight"][0]
    g, xs, w = _float_shape(grad, 4), _float_shape(x, 4), _static_shape(weight, 4)
    if g is None or xs is None or w is None or not _small_float32_weight(op, weight, limit):
        return False
    if len({cast(TensorType[Attribute], v.type).element_type for v in (grad, x, weight)}) != 1:  # pyright: ignore[reportOptionalMemberAccess]
        return False
    n, c, h, width = xs
    if DYNAMIC_INDEX not in (n, h, width) and n * h * width > MAX_ROWS:
        return False
    mask = list(op.static_arg("output_mask"))
    if any(not asked and result.uses for asked, result in zip(mask, op.results, strict=True)):
        return False
    return (
        _unit_geometry(op)
        and all(d == 1 for d in op.static_arg("dilation"))
        and w == (w[0], c, 1, 1)
        and g == (n, w[0], h, width)
    )


def _nchw_rewrite(op: AtenOp) -> SSAValue:
    """``op`` (a pointwise convolution of an NCHW activation, small float32 weight) as
    one ``bmm`` over the buffers as they are; the NCHW result (see the module doc)."""
    x, weight, bias = _convolution_operands(op)
    dims = _dims(op, x, weight)
    build, n, c, h, w, out = dims.build, dims.n, dims.c, dims.h, dims.w, dims.out
    pixels = build.product([h, w], "pixels")
    x3 = build("view.default", {"self": x, "size": [n, c, pixels]}, [n, c, pixels], "x_3d")
    w2 = build("view.default", {"self": weight, "size": [out, c]}, [out, c], "w_2d")
    wb = build("expand.default", {"self": w2, "size": [n, out, c]}, [n, out, c], "w_batched")
    y3 = build("bmm.default", {"self": wb, "mat2": x3}, [n, out, pixels], "bmm")
    name = op.results[0].name_hint or "conv"
    y = build("view.default", {"self": y3, "size": [n, out, h, w]}, [n, out, h, w], name)
    if bias is None:
        return y
    b3 = build("view.default", {"self": bias, "size": [out, 1, 1]}, [out, 1, 1], "bias_3d")
    return build("add.Tensor", {"self": y, "other": b3}, [n, out, h, w], name)


def _nchw_backward_rewrite(op: AtenOp) -> list[SSAValue | None]:
    """``op`` (:func:`_pointwise_backward`) as batched products and sums; its results'
    replacements (None where not asked for)."""
    tensors = op.tensor_operands()
    grad, x, weight = tensors["grad_output"][0], tensors["input"][0], tensors["weight"][0]
    assert grad is not None
    assert x is not None
    assert weight is not None
    dims = _dims(op, x, weight)
    build, n, c, h, w, out = dims.build, dims.n, dims.c, dims.h, dims.w, dims.out
    pixels = build.product([h, w], "pixels")
    g3 = build("view.default", {"self": grad, "size": [n, out, pixels]}, [n, out, pixels], "g_3d")
    asked = list(op.static_arg("output_mask"))
    results: list[SSAValue | None] = [None, None, None]
    if asked[0]:
        w2 = build("view.default", {"self": weight, "size": [out, c]}, [out, c], "w_2d")
        wt = build("permute.default", {"self": w2, "dims": [1, 0]}, [c, out], "w_t")
        wb = build("expand.default", {"self": wt, "size": [n, c, out]}, [n, c, out], "w_t_batched")
        gx = build("bmm.default", {"self": wb, "mat2": g3}, [n, c, pixels], "grad_x_3d")
        results[0] = build(
            "view.default", {"self": gx, "size": [n, c, h, w]}, [n, c, h, w], "grad_x"
        )
    if asked[1]:
        x3 = build("view.default", {"self": x, "size": [n, c, pixels]}, [n, c, pixels], "x_3d")
        xt = build("permute.default", {"self": x3, "dims": [0, 2, 1]}, [n, pixels, c], "x_t")
        per_image = build("bmm.default", {"self": g3, "mat2": xt}, [n, out, c], "grad_w_3d")
        gw = build("sum.dim_IntList", {"self": per_image, "dim": [0]}, [out, c], "grad_w_2d")
        results[1] = build(
            "view.default", {"self": gw, "size": [out, c, 1, 1]}, [out, c, 1, 1], "grad_w"
        )
    if asked[2]:
        results[2] = build("sum.dim_IntList", {"self": grad, "dim": [0, 2, 3]}, [out], "grad_b")
    return results


def _rewrite_block(block: Block, pack: bool, nchw_max_weight: int) -> None:
    nhwc: set[SSAValue] = set()
    """Values ``lower-aten`` stores NHWC because an op made them from such a value."""
    for op in list(block.ops):
        if not isinstance(op, AtenOp):
            continue
        first = op.operands[0] if op.operands else None
        input_nhwc = first is not None and _stored_nhwc(first, nhwc)
        if input_nhwc and is_pointwise_convolution(op) and not _returned(op.results[0]):
            replacement = _rewrite(op, pack)
            op.results[0].replace_all_uses_with(replacement)
            Rewriter.erase_op(op)
            continue
        if (
            not input_nhwc
            and is_pointwise_convolution(op)
            and _small_float32_weight(op, op.tensor_operands()["weight"][0], nchw_max_weight)
        ):
            # NCHW in and out, as ATen's: returned or not, the layout is the same.
            op.results[0].replace_all_uses_with(_nchw_rewrite(op))
            Rewriter.erase_op(op)
            continue
        if _pointwise_backward(op, nchw_max_weight) and not any(
            _stored_nhwc(v, nhwc) for v in op.operands[:2]
        ):
            for result, replacement in zip(op.results, _nchw_backward_rewrite(op), strict=True):
                if replacement is not None:
                    result.replace_all_uses_with(replacement)
            Rewriter.erase_op(op)
            continue
        if input_nhwc and has_aten_trait(op, FollowsChannelsLast):
            nhwc.update(r for r in op.results if _float_shape(r, 4) is not None)


def _on_gpu(module: ModuleOp) -> bool:
    return not runs_on_cpu(module)


def _rewrite_function(func: FuncOp, pack: bool, nchw_max_weight: int) -> None:
    if func.body.blocks:
        _rewrite_block(func.body.block, pack, nchw_max_weight)


@dataclass(frozen=True)
class Conv1x1ToMmPass(ModulePass):
    """1x1 convolutions of NHWC-stored activations as matrix products (see the module
    docstring)."""

    name: ClassVar[str] = "conv1x1-to-mm"  # pyright: ignore[reportIncompatibleVariableOverride]

    nchw_max_weight: int = MAX_NCHW_WEIGHT
    """Weight elements up to which a 1x1 convolution of an NCHW activation (and its
    backward) becomes batched products (0: never)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if _on_gpu(op):
            return
        # prepack-weights' linear=auto, for the products made here (it runs before).
        pack = INFERENCE_ATTR in op.attributes and PACKED_LINEAR_ATTR in op.attributes
        for func in [f for f in op.walk() if isinstance(f, FuncOp)]:
            _rewrite_function(func, pack, self.nchw_max_weight)


__all__: list[str] = ["Conv1x1ToMmPass", "is_pointwise_convolution"]
