"""``conv-epilogue``: an inference convolution's per-channel affine tail and activation,
run by oneDNN inside the convolution (CPU).

A CNN's convolution is followed by a batch norm in eval mode (``(y - mean) * invstd *
gamma + beta`` per channel, decomposed) and an activation; kiln ran them as one pointwise
kernel after the convolution, which reads and writes the whole activation once more (at
batch 32, MobileNet-v2's batch norms and ReLU6s were a fifth of its time). The affine
part folds into the convolution's weight and bias (``W' = W * a``, ``b' = b * a + c``
per output channel ``a``, ``c``: what Inductor's ``freezing`` does with constant
weights; here the weights stay arguments, so the fold is a few weight-sized ops in the
graph), and oneDNN applies the activation to its accumulators as a post-op
(``mkldnn._convolution_pointwise``, what Inductor's CPU convolution fusion calls)::

    %y = aten.convolution.default(%x, %w, ...)                  // x NHWC-stored
    %y_nhwc = aten.permute.default(%y, dims = [0, 2, 3, 1])
    %t = aten.sub.Tensor(%y_nhwc, %mean)                        // per channel
    %u = aten.mul.Tensor(%t, %scale)                            // per channel
    %v = aten.add.Tensor(%u, %shift)                            // per channel
    %r = aten.hardtanh.default(%v, min_val = 0.0, max_val = 6.0)

becomes::

    %a = ... %scale as [C]; %c = %shift - %mean * %scale, as [C]
    %w2 = aten.mul.Tensor(%w, %a viewed [C, 1, 1, 1])
    %y2 = aten.generic "mkldnn::_convolution_pointwise"(%x, %w2, %c, ..., attr = "hardtanh",
        scalars = [0.0, 6.0]) {kiln.result_orders = [[0, 2, 3, 1]]}
    %r = aten.permute.default(%y2, dims = [0, 2, 3, 1])

Only for float32 inference graphs on the CPU (``kiln.inference``, no ``kiln.device``) with
oneDNN, channels-last convolutions (after ``channels-last``: their results are read
through a permute to NHWC), each value of the chain read only by the next op, and the
activations of :data:`_ACTIVATIONS`. The fold
rounds the weights once more (``W * a`` in float32, as freezing does), the sums then
differ from the unfused ones by float32 rounding. Runs after ``conv1x1-to-mm``: a 1x1
convolution that became a matrix product stays one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import torch
from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, Float32Type, IntegerAttr, ModuleOp, TensorType, i64
from xdsl.dialects.func import FuncOp
from xdsl.ir import SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from kiln.dialects.aten.builder import AtenBuilder
from kiln.dialects.aten.function_attrs import runs_on_cpu
from kiln.dialects.aten.memory_format import NHWC
from kiln.dialects.aten.ops import AtenOp, GenericOp
from kiln.dialects.aten.prepack import INFERENCE_ATTR
from kiln.dialects.aten.result_layout import RESULT_ORDERS_ATTR

FUSED = "mkldnn::_convolution_pointwise"

MIN_OUTPUT = 1 << 20
"""Fewer output elements than this: left as it is. The fold costs two small kernels a
call (weight and bias) and oneDNN reorders the new weight at every call (a prepacked
convolution's stays packed): 30-45 us a call on this VM, more than the pass over a small
output saves (MobileNet-v2 at batch 2 and 64x64, every convolution fused: 2.6 -> 3.1 ms
a call; a 64x3x7x7 convolution over 2x3x64x64, packed 122 us + 14 us for a ReLU pass,
fused 152 us). Caching the folded, packed weight per call site would lift this."""
MIN_OUTPUT_PER_WEIGHT = 64
"""A convolution with a spatial kernel (one ``prepack-weights`` packs) is fused only with
at least this many output elements per weight element: its reorder at every call grows
with the weight (ResNet-18's 512-channel layers at 2x2, fused: 4.4 -> 28 ms a call)."""

_AFFINE = {"aten::add.Tensor", "aten::sub.Tensor", "aten::mul.Tensor"}
_ACTIVATIONS = {
    "aten::relu.default": "relu",
    "aten::hardtanh.default": "hardtanh",
    "aten::silu.default": "swish",
    "aten::hardswish.default": "hardswish",
    "aten::gelu.default": "gelu",
}
"""Activations by their oneDNN post-op names. ReLU and ``hardtanh`` (maxima, minima) are
exact; SiLU, hardswish and GELU came out within float32 rounding of ATen's here
(2x16x32x32 through a 3x3 convolution, outputs up to 45: largest differences 1.9e-6,
1.9e-6 and 1.2e-6, the convolution's own rounding between layouts being of that
order)."""


def available() -> bool:
    """Whether this torch runs oneDNN convolutions with post-ops."""
    return bool(
        torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_convolution_pointwise")
    )


@dataclass
class _Epilogue:
    """The tail of one convolution: ``act(a * y + c)`` per channel (``a``, ``c`` None:
    1 and 0), the ops it replaces, in order."""

    channels: int
    scale: SSAValue | None = None
    shift: SSAValue | None = None
    attr: str = "none"
    scalars: list[float] = field(default_factory=list)
    algorithm: str = ""
    ops: list[AtenOp] = field(default_factory=list)


def _sole_user(value: SSAValue) -> AtenOp | None:
    uses = list(value.uses)
    if len(uses) != 1 or not isinstance(uses[0].operation, AtenOp):
        return None
    return uses[0].operation


def _shape(value: SSAValue) -> tuple[int, ...] | None:
    ty = value.type
    if not isinstance(ty, TensorType) or not isinstance(ty.element_type, Float32Type):
        return None
    shape: tuple[int, ...] = tuple(ty.get_shape())  # pyright: ignore[reportUnknownArgumentType, reportUnknownMemberType, reportUnknownVariableType]
    return shape if all(d >= 0 for d in shape) else None


def _per_channel(value: SSAValue, channels: int) -> bool:
    """A float32 tensor that broadcasts against NHWC along the channels only (``[C]``,
    ``[1, 1, 1, C]``)."""
    shape = _shape(value)
    return (
        shape is not None
        and 1 <= len(shape) <= 4
        and shape[-1] == channels
        and all(d == 1 for d in shape[:-1])
    )


def _tail(perm: AtenOp, channels: int) -> _Epilogue | None:
    """The affine ops and activation reading ``perm`` (the convolution's NHWC view), each
    value read by the next alone; None when there is nothing to fold."""
    tail = _Epilogue(channels)
    current = perm.results[0]
    terms: list[tuple[str, SSAValue]] = []
    while (user := _sole_user(current)) is not None:
        name = user.overload_name
        if name in _ACTIVATIONS:
            tail.attr = _ACTIVATIONS[name]
            if name == "aten::hardtanh.default":
                tail.scalars = [
                    float(user.static_arg("min_val")),
                    float(user.static_arg("max_val")),
                ]
            if name == "aten::gelu.default":
                tail.algorithm = str(user.static_arg("approximate") or "none")
            tail.ops.append(user)
            break
        if name not in _AFFINE or len(user.results) != 1:
            break
        tensors = user.tensor_operands()
        lhs, rhs = tensors["self"][0], tensors["other"][0]
        if name != "aten::mul.Tensor" and user.static_arg("alpha") not in (1, 1.0, None):
            break
        if lhs is current and rhs is not None and _per_channel(rhs, channels):
            other = rhs
        elif (
            rhs is current
            and lhs is not None
            and name != "aten::sub.Tensor"
            and _per_channel(lhs, channels)
        ):
            other = lhs
        else:
            break
        terms.append((name, other))
        tail.ops.append(user)
        current = user.results[0]
    if not tail.ops:
        return None
    if len(tail.ops) == 1 and tail.attr == "none":
        return None  # one affine op alone: its kernel is as cheap as the fold
    tail.scale, tail.shift = _fold(
        terms, channels, AtenBuilder(InsertPoint.before(tail.ops[-1]), perm.location)
    )
    return tail


def _fold(
    terms: list[tuple[str, SSAValue]], channels: int, build: AtenBuilder
) -> tuple[SSAValue | None, SSAValue | None]:
    """``a`` and ``c`` of ``a * y + c`` after ``terms`` (each as a ``[C]`` vector)."""
    scale: SSAValue | None = None
    shift: SSAValue | None = None
    for k, (name, value) in enumerate(terms):
        vector = build(
            "reshape.default", {"self": value, "shape": [channels]}, [channels], f"epilogue_p{k}"
        )
        if name == "aten::mul.Tensor":
            scale = (
                vector
                if scale is None
                else build(
                    "mul.Tensor", {"self": scale, "other": vector}, [channels], "epilogue_scale"
                )
            )
            if shift is not None:
                shift = build(
                    "mul.Tensor", {"self": shift, "other": vector}, [channels], "epilogue_shift"
                )
        elif shift is None:
            shift = (
                vector
                if name == "aten::add.Tensor"
                else build("neg.default", {"self": vector}, [channels], "epilogue_shift")
            )
        else:
            overload = "add.Tensor" if name == "aten::add.Tensor" else "sub.Tensor"
            shift = build(overload, {"self": shift, "other": vector}, [channels], "epilogue_shift")
    return scale, shift


def _convolution(op: AtenOp, limits: tuple[int, int]) -> tuple[AtenOp, int] | None:
    """``op`` as a float32 2-D convolution read only through its NHWC permute: that
    permute and the output channels."""
    if op.overload_name != "aten::convolution.default" or op.static_arg("transposed") is not False:
        return None
    tensors = op.tensor_operands()
    x, w = tensors["input"][0], tensors["weight"][0]
    y = op.results[0]
    if x is None or w is None or _shape(x) is None or _shape(w) is None:
        return None
    shape, w_shape = _shape(y), _shape(w)
    if shape is None or len(shape) != 4 or any(p != 0 for p in op.static_arg("output_padding")):
        return None
    assert w_shape is not None
    outputs = shape[0] * shape[1] * shape[2] * shape[3]
    weights = w_shape[0] * w_shape[1] * w_shape[2] * w_shape[3]
    spatial = w_shape[2] * w_shape[3] > 1
    min_output, per_weight = limits
    if outputs < min_output or (spatial and outputs < per_weight * weights):
        return None
    perm = _sole_user(y)
    if perm is None or perm.overload_name != "aten::permute.default":
        return None
    if tuple(perm.static_arg("dims")) != NHWC:
        return None
    return perm, shape[1]


def _rewrite(conv: AtenOp, perm: AtenOp, tail: _Epilogue) -> None:
    tensors = conv.tensor_operands()
    x, w = tensors["input"][0], tensors["weight"][0]
    bias = tensors["bias"][0] if tensors.get("bias") else None
    assert x is not None
    assert w is not None
    w_shape = _shape(w)
    assert w_shape is not None
    last = tail.ops[-1]
    build = AtenBuilder(InsertPoint.before(last), conv.location)
    channels = tail.channels
    weight, shift = w, tail.shift
    if tail.scale is not None:
        column = build(
            "reshape.default",
            {"self": tail.scale, "shape": [channels, 1, 1, 1]},
            [channels, 1, 1, 1],
            "epilogue_scale_w",
        )
        weight = build("mul.Tensor", {"self": w, "other": column}, list(w_shape), "epilogue_weight")
        if bias is not None:
            bias = build(
                "mul.Tensor", {"self": bias, "other": tail.scale}, [channels], "epilogue_bias"
            )
    if bias is not None:
        shift = (
            bias
            if shift is None
            else build("add.Tensor", {"self": bias, "other": shift}, [channels], "epilogue_bias")
        )
    fused = GenericOp.build_generic(
        FUSED,
        {
            "X": x,
            "W": weight,
            "B": shift,
            "padding": list(conv.static_arg("padding")),
            "stride": list(conv.static_arg("stride")),
            "dilation": list(conv.static_arg("dilation")),
            "groups": conv.static_arg("groups"),
            "attr": tail.attr,
            "scalars": tail.scalars,
            "algorithm": tail.algorithm,
        },
        [conv.results[0].type],
    )
    # oneDNN writes a channels-last input's result channels-last: lower-aten reads it so.
    fused.attributes[RESULT_ORDERS_ATTR] = ArrayAttr(
        [ArrayAttr([IntegerAttr(d, i64) for d in NHWC])]
    )
    y = build.insert(fused, conv.results[0].name_hint or "conv_fused")
    nhwc = build(
        "permute.default",
        {"self": y, "dims": list(NHWC)},
        list(_nhwc_shape(perm)),
        f"{y.name_hint}_nhwc",
    )
    last.results[0].replace_all_uses_with(nhwc)
    for op in [*reversed(tail.ops), perm, conv]:
        Rewriter.erase_op(op)


def _nhwc_shape(perm: AtenOp) -> tuple[int, ...]:
    shape = _shape(perm.results[0])
    assert shape is not None
    return shape


def _rewrite_function(func: FuncOp, limits: tuple[int, int]) -> int:
    count = 0
    for op in list(func.body.walk()):
        if not isinstance(op, AtenOp) or op.parent is None:
            continue
        found = _convolution(op, limits)
        if found is None:
            continue
        perm, channels = found
        tail = _tail(perm, channels)
        if tail is None:
            continue
        _rewrite(op, perm, tail)
        count += 1
    return count


@dataclass(frozen=True)
class ConvEpiloguePass(ModulePass):
    """Fold inference convolutions' per-channel affine tails and activations into oneDNN's
    fused convolution (see the module docstring)."""

    name: ClassVar[str] = "conv-epilogue"  # pyright: ignore[reportIncompatibleVariableOverride]

    force: bool = False
    """Rewrite without the module's ``kiln.inference`` (for ``kiln-opt`` and tests)."""
    min_output: int = MIN_OUTPUT
    """:data:`MIN_OUTPUT` (tests fuse small convolutions with 0)."""
    min_output_per_weight: int = MIN_OUTPUT_PER_WEIGHT
    """:data:`MIN_OUTPUT_PER_WEIGHT`."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if not runs_on_cpu(op) or not available():
            return
        if not self.force and INFERENCE_ATTR not in op.attributes:
            return
        for func in [f for f in op.walk() if isinstance(f, FuncOp)]:
            _rewrite_function(func, (self.min_output, self.min_output_per_weight))


__all__ = ["ConvEpiloguePass", "available"]
