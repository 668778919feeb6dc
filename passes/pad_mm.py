"""``pad-mm``: pad matrix multiplies whose leading dimensions cuBLAS cannot vectorize.

cuBLAS's tensor-core kernels need every matrix's leading dimension to be a multiple of
16 bytes (8 elements in bfloat16/float16, 4 in float32). A row-major product
``mm(a[M, K], b[K, N])`` has leading dimensions ``K`` (of ``a``) and ``N`` (of ``b`` and
of the result): when either is odd, cuBLAS falls back to ``align1`` kernels. On the H200,
GPT-2's LM head (``N = 50257``, bfloat16, 4096 x 768 x 50257) took 3.36 ms that way and
0.45 ms padded, Inductor's figure (docs/benchmarks/design-notes.md). Inductor pads the
same products (``pad_mm``); kiln pads with zeros, which changes no value:

* ``K``: ``a`` gets zero columns, ``b`` zero rows, so the extra products add ``0``;
* ``N``: ``b`` gets zero columns and the result is sliced back to ``N`` columns (and
  copied out with ``clone`` where it is returned: outputs keep eager's strides);
* ``M``, where ``a`` is a transpose (its leading dimension is ``M``: a weight gradient
  ``grad_logits.t() @ h``, GPT-2's ``M = 50257`` took 2.2 ms in an ``align1`` kernel on
  the H200): ``a`` gets zero rows and the result is sliced back to ``M`` rows. A
  row-major ``a`` is not padded for ``M``: its leading dimension is ``K``.

```mlir
%0 = aten.mm.default(%x, %w) : (tensor<64x32xbf16>, tensor<32x1001xbf16>) -> tensor<64x1001xbf16>
```

becomes::

```mlir
%padded = aten.constant_pad_nd.default(%w, pad = [0, 7]) : (tensor<32x1001xbf16>) -> tensor<32x1008xbf16>
%mm_padded = aten.mm.default(%x, %padded) : (tensor<64x32xbf16>, tensor<32x1008xbf16>) -> tensor<64x1008xbf16>
%0 = aten.slice.Tensor(%mm_padded, dim = 1, start = 0, end = 1001) : (tensor<64x1008xbf16>) -> tensor<64x1001xbf16>
```

Padding costs a copy of the padded operand (a kernel, which fuses with a transpose that
feeds it), so it is done only where it pays: on CUDA (``kiln.device``), static sizes, and
a product that is compute bound (arithmetic intensity above half the H100/H200 machine
balance, Inductor's rule: ``compute_bound``). ``mm`` and ``bmm`` are padded, and
``addmm`` (``alpha = beta = 1``) as a padded ``mm`` whose sliced result gets the bias in
an ``add``: that kernel writes the contiguous result the ``clone`` would have (a returned
LM head with a bias, BERT's: ``N = 30522`` ran an ``align2`` kernel, 0.81 ms of a 2.4 ms
bfloat16 call at batch 8 x 512 on the H200, against Inductor's 0.28 ms padded).

```mlir
%0 = aten.addmm.default(%b, %x, %w) : (tensor<1001xbf16>, tensor<64x32xbf16>, tensor<32x1001xbf16>) -> tensor<64x1001xbf16>
```

becomes::

```mlir
%padded = aten.constant_pad_nd.default(%w, pad = [0, 7]) : (tensor<32x1001xbf16>) -> tensor<32x1008xbf16>
%mm_padded = aten.mm.default(%x, %padded) : (tensor<64x32xbf16>, tensor<32x1008xbf16>) -> tensor<64x1008xbf16>
%sliced = aten.slice.Tensor(%mm_padded, dim = 1, start = 0, end = 1001) : (tensor<64x1008xbf16>) -> tensor<64x1001xbf16>
%0 = aten.add.Tensor(%sliced, %b) : (tensor<64x1001xbf16>, tensor<1001xbf16>) -> tensor<64x1001xbf16>
```

(a low-precision result then rounds twice, product and sum, as under ``unfuse-addmm``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    ModuleOp,
    TensorType,
)
from xdsl.dialects.func import ReturnOp
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)

from kiln.dialects.aten import AtenOp
from kiln.dialects.aten.dialect import op_class
from kiln.dialects.aten.function_attrs import module_device
from kiln.passes.unfuse_addmm import is_one

_PADDED = ("aten::mm.default", "aten::bmm.default", "aten::addmm.default")

# Peak dense tensor-core FLOP per byte of DRAM traffic on an H100/H200, halved as
# Inductor's ``is_mm_compute_bound`` does (989 TFLOP/s bf16 / 4.8 TB/s, 67 TFLOP/s fp32).
_BALANCE: dict[type[Attribute], float] = {
    BFloat16Type: 100.0,
    Float16Type: 100.0,
    Float32Type: 7.0,
}
_ALIGNMENT: dict[type[Attribute], int] = {BFloat16Type: 8, Float16Type: 8, Float32Type: 4}


def _padding(size: int, alignment: int) -> int:
    """Elements to add so that ``size`` is a multiple of ``alignment`` (none for size 1,
    a dimension cuBLAS squeezes away)."""
    if size <= 1 or size % alignment == 0:
        return 0
    return alignment - size % alignment


def compute_bound(m: int, k: int, n: int, element: Attribute) -> bool:
    """Whether an ``m x k x n`` product does more arithmetic per byte than the machine
    balance of its dtype (Inductor's ``is_mm_compute_bound``)."""
    traffic = m * k + k * n + m * n
    return traffic > 0 and m * k * n / traffic > _BALANCE[type(element)]


def _static_shape(value: SSAValue) -> list[int] | None:
    ty = value.type
    if not isinstance(ty, TensorType):
        return None
    shape = list(ty.get_shape())
    return None if any(d < 0 for d in shape) else shape


@dataclass(frozen=True)
class _Plan:
    m_pad: int
    k_pad: int
    n_pad: int


def _transposed(value: SSAValue) -> bool:
    """Whether ``value`` is a transpose of its last two dimensions (so stored with ``M``
    as its leading dimension)."""
    op = value.owner
    if not isinstance(op, AtenOp):
        return False
    ty = value.type
    rank = len(ty.get_shape()) if isinstance(ty, TensorType) else 0
    if op.overload_name == "aten::t.default":
        return rank == 2
    if op.overload_name == "aten::permute.default":
        dims = [int(d) % rank for d in op.static_arg("dims")] if rank else []
        return rank >= 2 and dims == [*range(rank - 2), rank - 1, rank - 2]
    if op.overload_name == "aten::transpose.int":
        pair = (
            {int(op.static_arg("dim0")) % rank, int(op.static_arg("dim1")) % rank}
            if rank
            else set()
        )
        return rank >= 2 and pair == {rank - 2, rank - 1}
    return False


def _is_addmm(op: AtenOp) -> bool:
    return op.overload_name == "aten::addmm.default"


def _matrices(op: AtenOp) -> tuple[SSAValue, SSAValue]:
    """The two operands multiplied (``addmm``'s first operand is its bias)."""
    first = 1 if _is_addmm(op) else 0
    return op.operands[first], op.operands[first + 1]


def plan_padding(op: AtenOp) -> _Plan | None:
    """How to pad ``op`` (``mm``/``bmm``), or ``None`` to leave it."""
    if op.overload_name not in _PADDED or op.sym_operands():
        return None
    if _is_addmm(op) and not (is_one(op, "alpha") and is_one(op, "beta")):
        return None
    a, b = _matrices(op)
    a_shape, b_shape = _static_shape(a), _static_shape(b)
    if a_shape is None or b_shape is None:
        return None
    ty = a.type
    assert isinstance(ty, TensorType)
    element = ty.element_type
    alignment = _ALIGNMENT.get(type(element))
    if alignment is None or b.type != TensorType(element, b_shape):
        return None
    m, k, n = a_shape[-2], a_shape[-1], b_shape[-1]
    if 0 in (m, k, n):
        return None
    m_pad = _padding(m, alignment) if _transposed(a) else 0
    plan = _Plan(m_pad, _padding(k, alignment), _padding(n, alignment))
    if plan.m_pad == plan.k_pad == plan.n_pad == 0 or not compute_bound(m, k, n, element):
        return None
    return plan


def _pad(value: SSAValue, pads: list[int], location: object) -> AtenOp:
    """``constant_pad_nd(value, pads, 0)``: ``pads`` as torch spells them (last dim first)."""
    pad_class = op_class("constant_pad_nd.default")
    assert pad_class is not None
    ty = value.type
    assert isinstance(ty, TensorType)
    shape = list(ty.get_shape())
    for k in range(len(pads) // 2):
        shape[-1 - k] += pads[2 * k] + pads[2 * k + 1]
    op = pad_class.from_args(
        {"self": value, "pad": pads, "value": 0}, [TensorType(ty.element_type, shape)]
    )
    op.location = location  # pyright: ignore[reportAttributeAccessIssue]
    op.results[0].name_hint = "padded"
    return op


def _pad_matrix(
    value: SSAValue, last: int, second_last: int, location: object, new_ops: list[Operation]
) -> SSAValue:
    """``value`` padded by ``last`` columns and ``second_last`` rows (ops appended to
    ``new_ops``). A transpose of the last two dimensions (a linear layer's ``t(w)``) pads
    its source instead and transposes the padded copy: a contiguous copy rather than a
    transposing one, and the product reads the operand in its own layout (GPT-2's LM
    head on the H200: Inductor's padded weight copy 35 us and ``TNN`` product 445 us,
    kiln's transposing copy 58 us and ``NNN`` product 471 us)."""
    op = value.owner
    if _transposed(value) and isinstance(op, AtenOp):
        source = op.operands[0]
        padded = _pad(source, _pads(second_last, last), location)
        new_ops.append(padded)
        ty = value.type
        assert isinstance(ty, TensorType)
        shape = list(ty.get_shape())
        shape[-1] += last
        shape[-2] += second_last
        transpose_class = op_class("transpose.int")
        assert transpose_class is not None
        transposed = transpose_class.from_args(
            {"self": padded.results[0], "dim0": -2, "dim1": -1},
            [TensorType(ty.element_type, shape)],
        )
        transposed.location = location  # pyright: ignore[reportAttributeAccessIssue]
        new_ops.append(transposed)
        return transposed.results[0]
    padded = _pad(value, _pads(last, second_last), location)
    new_ops.append(padded)
    return padded.results[0]


def _pads(last: int, second_last: int) -> list[int]:
    """``constant_pad_nd``'s list (last dimension first) padding the ends of the last two."""
    return [0, last, 0, second_last] if second_last else [0, last]


def _slice(value: SSAValue, dim: int, end: int, location: object) -> AtenOp:
    """``value[..., :end, ...]`` along ``dim``."""
    slice_class = op_class("slice.Tensor")
    assert slice_class is not None
    ty = value.type
    assert isinstance(ty, TensorType)
    shape = list(ty.get_shape())
    shape[dim] = end
    op = slice_class.from_args(
        {"self": value, "dim": dim, "start": 0, "end": end, "step": 1},
        [TensorType(ty.element_type, shape)],
    )
    op.location = location  # pyright: ignore[reportAttributeAccessIssue]
    return op


class PadMatmul(RewritePattern):
    """``mm``/``bmm``/``addmm`` with a misaligned ``K`` or ``N`` (or ``M`` of a transposed
    ``a``) -> padded operands, sliced result (plus the bias for ``addmm``)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: AtenOp, rewriter: PatternRewriter) -> None:
        plan = plan_padding(op)
        if plan is None:
            return
        a, b = _matrices(op)
        result = op.results[0]
        new_ops: list[Operation] = []
        if plan.m_pad or plan.k_pad:
            a = _pad_matrix(a, plan.k_pad, plan.m_pad, op.location, new_ops)
        if plan.k_pad or plan.n_pad:
            b = _pad_matrix(b, plan.n_pad, plan.k_pad, op.location, new_ops)
        out_ty = result.type
        assert isinstance(out_ty, TensorType)
        out_shape = list(out_ty.get_shape())
        padded_shape = [*out_shape[:-2], out_shape[-2] + plan.m_pad, out_shape[-1] + plan.n_pad]
        product_class = op_class("mm.default") if _is_addmm(op) else type(op)
        assert product_class is not None
        product = product_class.from_args(
            {"self": a, "mat2": b}, [TensorType(out_ty.element_type, padded_shape)]
        )
        product.location = op.location
        product.results[0].name_hint = "mm_padded"
        new_ops.append(product)
        for dim, pad in ((len(out_shape) - 2, plan.m_pad), (len(out_shape) - 1, plan.n_pad)):
            if pad:
                new_ops.append(_slice(new_ops[-1].results[0], dim, out_shape[dim], op.location))
        if _is_addmm(op):
            # The bias add writes a fresh contiguous tensor: no clone for a return.
            add_class = op_class("add.Tensor")
            assert add_class is not None
            sliced = new_ops[-1].results[0]
            sliced.name_hint = "sliced"
            add = add_class.from_args({"self": sliced, "other": op.operands[0]}, [out_ty])
            add.location = op.location
            new_ops.append(add)
        name = result.name_hint
        returns = [use for use in result.uses if isinstance(use.operation, ReturnOp)]
        value = new_ops[-1].results[0]
        clone = None
        if plan.n_pad and returns and not _is_addmm(op):  # a slice of rows is contiguous
            # A returned product keeps eager's contiguous strides: the copy out of the
            # padded buffer is explicit (one kernel), not a strided view.
            clone_class = op_class("clone.default")
            assert clone_class is not None
            clone = clone_class.from_args({"self": value}, [out_ty])
            clone.location = op.location
            new_ops.append(clone)
        rewriter.replace(op, new_ops, [value])
        value.name_hint = name
        if clone is not None:
            for use in returns:
                use.operation.operands[use.index] = clone.results[0]


def _on_cuda(module: ModuleOp) -> bool:
    return module_device(module).startswith("cuda")


@dataclass(frozen=True)
class PadMmPass(ModulePass):
    """Pad misaligned, compute-bound ``mm``/``bmm``/``addmm`` on CUDA (see the module
    docstring)."""

    name: ClassVar[str] = "pad-mm"  # pyright: ignore[reportIncompatibleVariableOverride]

    force: bool = False
    """Pad whatever the device (``kiln-opt`` tests; the driver leaves it off)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if not (self.force or _on_cuda(op)):
            return
        PatternRewriteWalker(PadMatmul(), apply_recursively=False).rewrite_module(op)


__all__ = ["PadMatmul", "PadMmPass", "compute_bound", "plan_padding"]
