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
  copied out with ``clone`` where it is returned: outputs keep eager's strides; where
  eager returns a view of it, such as GPT-2's logits, the view of the padded product is
  returned instead, in eager's stride order, as Inductor does: :func:`~kiln.passes.output_layout.return_views_of_roots`);
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
feeds it), so it is done only where it pays: on CUDA (``kiln.device``), static sizes, a
float32 product only where torch runs float32 products in TF32 (``kiln.tf32_matmul``, set
by the driver: without TF32, cuBLAS runs float32 in FFMA kernels that gain nothing from
alignment; ViT-small's training step on the H200 ran the same cuBLAS kernels, in the same
time, as Inductor's unpadded products, plus 96 padding kernels, 116 us of 1.99 ms; Inductor
times both and keeps the unpadded ones), and a product that is compute bound (arithmetic
intensity above half the H100/H200 machine balance, Inductor's rule: ``compute_bound``). ``mm``, ``bmm`` and ``addmm`` (``alpha =
beta = 1``) are padded. An ``addmm`` still here feeds something other than pointwise ops
(``unfuse-addmm`` ran first): a returned LM head with a bias, BERT's (``N = 30522`` ran an
``align2`` kernel, 0.81 ms of a 2.4 ms bfloat16 call at batch 8 x 512 on the H200, against
Inductor's 0.28 ms padded). Its bias vector is padded too and stays in the product
(cuBLAS's epilogue), and a returned view of it is the padded product's, as for ``mm``
(a bias ``add`` after the slice was a pass of its own over the logits, 167 us on an H100);
a bias that is no vector goes into an ``add`` of the slice instead.

The other misaligned products (float32 without TF32, memory bound, ``M`` of a row-major
``a``) are decided by measurement where the compile runs on a GPU (``measure=auto``, as
Inductor times every misaligned product): cuBLAS picks its kernel by the sizes, and no
rule predicts it. MobileNet-v3's classifier gradient at batch 2, float32
``[2, 1000] x [1000, 1024]``, ran ``gemmSN_NN`` in 16-21 us on an H100 and, with two zero
rows (``M = 4``), a split-K kernel in 5 us, which is what Inductor ran. The driver
asks :meth:`PadMmPass.to_measure` for them, times both forms on the GPU
(:mod:`kiln.backends.triton.matmul_padding`, verdicts kept on disk) and lists those that
pay on the module (``kiln.padded_products``, :mod:`kiln.dialects.aten.padded_products`);
this pass pads what is listed.

```mlir
%0 = aten.addmm.default(%b, %x, %w) : (tensor<1001xbf16>, tensor<64x32xbf16>, tensor<32x1001xbf16>) -> tensor<64x1001xbf16>
```

becomes::

```mlir
%padded = aten.constant_pad_nd.default(%w, pad = [0, 7]) : (tensor<32x1001xbf16>) -> tensor<32x1008xbf16>
%bias_padded = aten.constant_pad_nd.default(%b, pad = [0, 7]) : (tensor<1001xbf16>) -> tensor<1008xbf16>
%mm_padded = aten.addmm.default(%bias_padded, %x, %padded) : (tensor<1008xbf16>, tensor<64x32xbf16>, tensor<32x1008xbf16>) -> tensor<64x1008xbf16>
%0 = aten.slice.Tensor(%mm_padded, dim = 1, start = 0, end = 1001) : (tensor<64x1008xbf16>) -> tensor<64x1001xbf16>
```
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
from xdsl.context import Context
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    ModuleOp,
    TensorType,
)
from xdsl.dialects.func import FuncOp
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint

from kiln.dialects.aten import AtenOp
from kiln.dialects.aten.dialect import op_class
from kiln.dialects.aten.dtypes import type_to_dtype
from kiln.dialects.aten.function_attrs import module_device, tf32_matmul
from kiln.dialects.aten.padded_products import PaddingProblem, padded_products
from kiln.dialects.aten.shapes import static_shape
from kiln.passes.output_layout import return_views_of_roots
from kiln.passes.unfuse_addmm import is_one

_PADDED = ("aten::mm.default", "aten::bmm.default", "aten::addmm.default")

# Peak dense tensor-core FLOP per byte of DRAM traffic on an H100/H200, halved as
# Inductor's ``is_mm_compute_bound`` does (989 TFLOP/s bf16 / 4.8 TB/s, 67 TFLOP/s fp32).
_BALANCE: dict[type[Attribute], float] = {
    BFloat16Type: 100.0,
    Float16Type: 100.0,
    Float32Type: 7.0,
}
ALIGNMENT: dict[type[Attribute], int] = {BFloat16Type: 8, Float16Type: 8, Float32Type: 4}
"""Elements a padded dimension is a multiple of, by element type."""


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


@dataclass(frozen=True)
class _Product:
    """A static misaligned-or-not product ``pad-mm`` may pad: its matrices and sizes."""

    a: SSAValue
    b: SSAValue
    element: Attribute
    alignment: int
    batch: int
    m: int
    k: int
    n: int


def _product(op: AtenOp) -> _Product | None:
    if op.overload_name not in _PADDED or op.sym_operands():
        return None
    if _is_addmm(op) and not (is_one(op, "alpha") and is_one(op, "beta")):
        return None
    a, b = _matrices(op)
    a_shape, b_shape = static_shape(a), static_shape(b)
    if a_shape is None or b_shape is None:
        return None
    ty = a.type
    assert isinstance(ty, TensorType)
    element = ty.element_type
    alignment = ALIGNMENT.get(type(element))
    if alignment is None or b.type != TensorType(element, b_shape):
        return None
    m, k, n = a_shape[-2], a_shape[-1], b_shape[-1]
    if 0 in (m, k, n):
        return None
    batch = a_shape[0] if len(a_shape) == 3 else 0
    return _Product(a, b, element, alignment, batch, m, k, n)


def _ruled(product: _Product, tf32: bool) -> _Plan | None:
    """The rules' plan: tensor-core products (16-bit, or float32 in TF32) that are compute
    bound, ``M`` padded only for a transposed ``a`` (its leading dimension)."""
    p = product
    if isinstance(p.element, Float32Type) and not tf32:
        return None
    m_pad = _padding(p.m, p.alignment) if _transposed(p.a) else 0
    plan = _Plan(m_pad, _padding(p.k, p.alignment), _padding(p.n, p.alignment))
    if plan.m_pad == plan.k_pad == plan.n_pad == 0:
        return None
    return plan if compute_bound(p.m, p.k, p.n, p.element) else None


def measurement(op: AtenOp, tf32: bool) -> tuple[_Plan, PaddingProblem] | None:
    """The padding of ``op`` to measure (every misaligned dimension, ``M`` of a row-major
    ``a`` too: cuBLAS picks its kernel by the sizes, a float32 ``[2, 1000] x [1000, 1024]``
    ran ``gemmSN_NN`` in 16-21 us on an H100, with ``M = 4`` a split-K kernel in 5 us), or
    None where the rules decide or nothing is misaligned."""
    product = _product(op)
    if product is None or _ruled(product, tf32) is not None:
        return None
    return _measured_padding(op, product)


def _measured_padding(op: AtenOp, p: _Product) -> tuple[_Plan, PaddingProblem] | None:
    plan = _Plan(_padding(p.m, p.alignment), _padding(p.k, p.alignment), _padding(p.n, p.alignment))
    if plan.m_pad == plan.k_pad == plan.n_pad == 0:
        return None
    problem = PaddingProblem(
        dtype=str(type_to_dtype(p.element)).removeprefix("torch."),
        batch=p.batch,
        m=p.m,
        k=p.k,
        n=p.n,
        a_transposed=_transposed(p.a),
        b_transposed=_transposed(p.b),
        bias=_is_addmm(op) and op.operands[0].type == TensorType(p.element, [p.n]),
        m_pad=plan.m_pad,
        k_pad=plan.k_pad,
        n_pad=plan.n_pad,
    )
    return plan, problem


def plan_padding(op: AtenOp, tf32: bool, measured: frozenset[str] = frozenset()) -> _Plan | None:
    """How to pad ``op`` (``mm``/``bmm``/``addmm``), or ``None`` to leave it; ``tf32``:
    whether float32 products run on the tensor cores (in TF32); ``measured``: the keys of
    the products measured faster padded (``kiln.padded_products``)."""
    product = _product(op)
    if product is None:
        return None
    ruled = _ruled(product, tf32)
    if ruled is not None or not measured:
        return ruled
    candidate = _measured_padding(op, product)
    if candidate is None or candidate[1].key() not in measured:
        return None
    return candidate[0]


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

    def __init__(self, tf32: bool, measured: frozenset[str] = frozenset()) -> None:
        self.tf32 = tf32
        """Whether float32 products run in TF32 (else the rules leave them alone)."""
        self.measured = measured
        """The products the rules leave that were measured faster padded (their keys)."""
        self.sliced: list[SSAValue] = []
        """The sliced products whose rows are padded (for :func:`~kiln.passes.output_layout.return_views_of_roots`)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: AtenOp, rewriter: PatternRewriter) -> None:
        plan = plan_padding(op, self.tf32, self.measured)
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
        bias = _padded_bias(op, plan, new_ops) if _is_addmm(op) else None
        product_class = op_class("mm.default") if _is_addmm(op) and bias is None else type(op)
        assert product_class is not None
        operands: dict[str, object] = {"self": a, "mat2": b}
        if bias is not None:
            operands = {"self": bias, "mat1": a, "mat2": b}
        product = product_class.from_args(operands, [TensorType(out_ty.element_type, padded_shape)])
        product.location = op.location
        product.results[0].name_hint = "mm_padded"
        new_ops.append(product)
        for dim, pad in ((len(out_shape) - 2, plan.m_pad), (len(out_shape) - 1, plan.n_pad)):
            if pad:
                new_ops.append(_slice(new_ops[-1].results[0], dim, out_shape[dim], op.location))
        if _is_addmm(op) and bias is None:
            # The bias add writes a fresh contiguous tensor: no clone for a return.
            add_class = op_class("add.Tensor")
            assert add_class is not None
            sliced = new_ops[-1].results[0]
            sliced.name_hint = "sliced"
            add = add_class.from_args({"self": sliced, "other": op.operands[0]}, [out_ty])
            add.location = op.location
            new_ops.append(add)
        name = result.name_hint
        value = new_ops[-1].results[0]
        rewriter.replace(op, new_ops, [value])
        value.name_hint = name
        if plan.n_pad and (bias is not None or not _is_addmm(op)):  # sliced rows: contiguous
            self.sliced.append(value)
            _copy_for_views(value, rewriter)


def _padded_bias(op: AtenOp, plan: _Plan, new_ops: list[Operation]) -> SSAValue | None:
    """``addmm``'s bias padded to the padded product's ``N`` (ops appended to ``new_ops``),
    where it is a vector and only ``N`` is padded; ``None``: the bias goes into an ``add``.
    The ``addmm`` left here feeds no pointwise op only (``unfuse-addmm`` ran first), so an
    ``add`` would be a pass of its own over the result: BERT's returned LM head (8 x 512 x
    30522, bfloat16) spent 167 us in it on an H100, Inductor pads the bias instead (2 us)
    and returns the padded product's view."""
    bias = op.operands[0]
    out_ty = op.results[0].type
    assert isinstance(out_ty, TensorType)
    vector = TensorType(out_ty.element_type, [out_ty.get_shape()[-1]])
    if plan.m_pad or not plan.n_pad or bias.type != vector:
        return None
    padded = _pad(bias, [0, plan.n_pad], op.location)
    padded.results[0].name_hint = "bias_padded"
    new_ops.append(padded)
    return padded.results[0]


_STRIDE_VIEWS = ("aten::view.default", "aten::_unsafe_view.default")
"""Views that exist only for some strides (eager raises on the others)."""


def _copy_for_views(sliced: SSAValue, rewriter: PatternRewriter) -> None:
    """Give the ``view`` ops that read the sliced product ``sliced`` and cannot be views
    of its padded rows (``view(-1)``: the rows are not adjacent) a contiguous copy of it
    to read, so that the IR keeps eager's semantics (the aten interpreter runs it)."""
    shape = static_shape(sliced)
    assert shape is not None
    padded = torch.empty([*shape[:-1], shape[-1] + 1], device="meta")[..., : shape[-1]]
    copy: SSAValue | None = None
    for use in list(sliced.uses):
        user = use.operation
        if not isinstance(user, AtenOp) or user.overload_name not in _STRIDE_VIEWS:
            continue
        try:
            padded.view(user.static_arg("size"))
            continue
        except (RuntimeError, ValueError):  # torch's message for meta tensors differs
            pass
        if copy is None:
            clone_class = op_class("clone.default")
            assert clone_class is not None
            clone = clone_class.from_args({"self": sliced}, [sliced.type])
            clone.location = user.location
            rewriter.insert(clone, InsertPoint.after(sliced.owner))  # pyright: ignore[reportArgumentType]
            copy = clone.results[0]
        user.operands[use.index] = copy


def _on_cuda(module: ModuleOp) -> bool:
    return module_device(module).startswith("cuda")


@dataclass(frozen=True)
class PadMmPass(ModulePass):
    """Pad misaligned, compute-bound ``mm``/``bmm``/``addmm`` on CUDA (see the module
    docstring)."""

    name: ClassVar[str] = "pad-mm"  # pyright: ignore[reportIncompatibleVariableOverride]

    force: bool = False
    """Pad whatever the device, and float32 products as if in TF32 (``kiln-opt`` tests;
    the driver leaves it off)."""

    measure: str = "auto"
    """The misaligned products the rules leave: ``auto`` pads those the module lists as
    measured faster padded (``kiln.padded_products``: the driver times what
    :meth:`to_measure` returns on the program's GPU before this pass, as Inductor times
    every misaligned product); ``never`` leaves them."""

    def _measuring(self) -> bool:
        if self.measure not in ("auto", "never"):
            raise ValueError(f"pad-mm: measure={self.measure!r} (expected auto or never)")
        return self.measure == "auto" and not self.force

    def to_measure(self, module: ModuleOp) -> list[PaddingProblem]:
        """The products of ``module`` whose padding this pass leaves to measurement (none
        off CUDA, under ``force`` or ``measure=never``), each once."""
        if not (self._measuring() and _on_cuda(module)):
            return []
        tf32 = tf32_matmul(module)
        found: dict[PaddingProblem, None] = {}
        for op in module.walk():
            if isinstance(op, AtenOp) and (candidate := measurement(op, tf32)) is not None:
                found[candidate[1]] = None
        return list(found)

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if not (self.force or _on_cuda(op)):
            return
        measured = padded_products(op) if self._measuring() else frozenset()
        pattern = PadMatmul(tf32=self.force or tf32_matmul(op), measured=measured)
        PatternRewriteWalker(pattern, apply_recursively=False).rewrite_module(op)
        if pattern.sliced:
            for func in op.walk():
                if isinstance(func, FuncOp):
                    return_views_of_roots(func, pattern.sliced)


__all__ = ["PadMatmul", "PadMmPass", "compute_bound", "measurement", "plan_padding"]
