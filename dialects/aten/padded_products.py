"""``kiln.padded_products``: the misaligned matrix products whose padded form was measured
faster on the program's GPU, for ``pad-mm``.

``pad-mm`` pads by rule where padding is known to pay; the other misaligned products
(float32 without TF32, memory-bound ones, ``M`` of a row-major ``a``) are decided by
measurement, as Inductor decides every misaligned product: the driver asks ``pad-mm``
which products it would measure (:class:`PaddingProblem`), times them on the GPU
(:mod:`kiln.backends.triton.matmul_padding`) and lists those that pay on the module::

    builtin.module attributes {"kiln.device" = "cuda:0",
        "kiln.padded_products" = ["float32 2x1000x1024 NN pad m+2 k+0 n+0"]} { ... }

A product listed is padded; one measured and not listed, or not measured, is left.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects.builtin import ArrayAttr, StringAttr
from xdsl.ir import Operation

PADDED_PRODUCTS_ATTR = "kiln.padded_products"


@dataclass(frozen=True)
class PaddingProblem:
    """One product and its padding: ``[batch x] m x k`` times ``k x n`` (``batch`` 0 for
    ``mm``/``addmm``), each matrix stored row-major or as the transpose of a row-major
    one; ``bias``: ``addmm``'s bias vector."""

    dtype: str
    batch: int
    m: int
    k: int
    n: int
    a_transposed: bool
    b_transposed: bool
    bias: bool
    m_pad: int
    k_pad: int
    n_pad: int

    def key(self) -> str:
        """The problem as ``kiln.padded_products`` lists it."""
        batch = f"{self.batch}x" if self.batch else ""
        layout = ("T" if self.a_transposed else "N") + ("T" if self.b_transposed else "N")
        bias = " bias" if self.bias else ""
        pads = f"pad m+{self.m_pad} k+{self.k_pad} n+{self.n_pad}"
        return f"{self.dtype} {batch}{self.m}x{self.k}x{self.n} {layout}{bias} {pads}"


def padded_products(module: Operation) -> frozenset[str]:
    """The keys of the products ``module`` lists as paying padded."""
    attr = module.attributes.get(PADDED_PRODUCTS_ATTR)
    if not isinstance(attr, ArrayAttr):
        return frozenset()
    return frozenset(a.data for a in attr.data if isinstance(a, StringAttr))


def mark_padded_products(module: Operation, problems: list[PaddingProblem]) -> None:
    """List ``problems`` on ``module`` as paying padded (replacing any list)."""
    keys = sorted({p.key() for p in problems})
    module.attributes[PADDED_PRODUCTS_ATTR] = ArrayAttr([StringAttr(k) for k in keys])


__all__ = ["PADDED_PRODUCTS_ATTR", "PaddingProblem", "mark_padded_products", "padded_products"]
