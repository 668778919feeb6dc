"""The attributes of weight prepacking (``prepack-weights``), declared once with verifiers.

* ``kiln.inference`` (unit, on the ``builtin.module``): the driver compiled an inference
  graph (AOTAutograd's ``inference_compiler``: grad mode off, or no input requiring
  grad) and weight prepacking is allowed (the ``prepack_weights`` option). Without it
  ``prepack-weights`` changes nothing (``prepack-weights{force=true}`` ignores it).
* ``kiln.training`` (unit, on the ``builtin.module``): the driver compiled a training
  graph (a forward or backward) and weight prepacking is allowed; only the GPU's
  channels-last weight copies use it (they are made in a step's forward and read by its
  backward).
* ``kiln.prepack`` (unit, on an ``aten.convolution.default``, or an ``aten.mm.default`` /
  ``aten.addmm.default`` whose second operand is the transpose of a weight, or on the GPU
  an ``aten.convolution_backward.default``): the weight is a function argument (a
  parameter under AOTAutograd) that the backend may run through a cached,
  oneDNN-prepacked copy (on the GPU, convolutions only: a cached channels-last copy,
  :mod:`kiln.backends.triton.weight_layouts`). The op computes exactly what it computes
  without the attribute (the interpreters ignore it).
* ``kiln.prepack_min_rows`` (``i64``, beside ``kiln.prepack`` on an ``mm``/``addmm`` whose
  row count is symbolic): calls with fewer rows run ATen's product on the plain weight
  (the packed GEMM loses on few rows; the pass knows the threshold, the size only the
  call does).
"""

from __future__ import annotations

from xdsl.dialects.builtin import IntegerAttr, IntegerType, UnitAttr
from xdsl.ir import Operation
from xdsl.utils.exceptions import VerifyException

INFERENCE_ATTR = "kiln.inference"
TRAINING_ATTR = "kiln.training"
PREPACK_ATTR = "kiln.prepack"
PREPACK_MIN_ROWS_ATTR = "kiln.prepack_min_rows"
PACKED_LINEAR_ATTR = "kiln.packed_linear"
"""On a module: this machine runs oneDNN's packed GEMM faster than ATen's ``mm`` (the
driver's measurement, :mod:`kiln.backends.cpp.gemm_calibration`), so ``prepack-weights``
in its default ``linear=auto`` mode marks linear layers too."""
PREPACKABLE = frozenset(
    {
        "aten.convolution.default",
        "aten.convolution_backward.default",
        "aten.mm.default",
        "aten.addmm.default",
    }
)
"""The ops ``kiln.prepack`` may mark."""


def verify_prepack(op: Operation) -> None:
    """``kiln.prepack`` is a unit attribute, on a convolution only."""
    attr = op.attributes.get(PREPACK_ATTR)
    if attr is None:
        return
    if op.name not in PREPACKABLE:
        raise VerifyException(
            f"{op.name}: {PREPACK_ATTR} belongs on one of {', '.join(sorted(PREPACKABLE))}"
        )
    if not isinstance(attr, UnitAttr):
        raise VerifyException(f"{op.name}: {PREPACK_ATTR} must be a unit attribute, got {attr}")
    rows = op.attributes.get(PREPACK_MIN_ROWS_ATTR)
    if rows is not None and (
        op.name not in ("aten.mm.default", "aten.addmm.default")
        or not isinstance(rows, IntegerAttr)
        or rows.value.data < 0
    ):
        raise VerifyException(
            f"{op.name}: {PREPACK_MIN_ROWS_ATTR} must be a non-negative integer on a "
            f"prepacked mm/addmm, got {rows}"
        )


def prepack_min_rows(op: Operation) -> int:
    """The fewest rows a prepacked product runs packed with (0: every call)."""
    attr = op.attributes.get(PREPACK_MIN_ROWS_ATTR)
    return attr.value.data if isinstance(attr, IntegerAttr) else 0


def is_prepacked(op: Operation) -> bool:
    """Whether ``op`` carries a (valid) ``kiln.prepack``."""
    verify_prepack(op)
    return PREPACK_ATTR in op.attributes


def mark_prepacked(op: Operation, min_rows: int = 0) -> None:
    op.attributes[PREPACK_ATTR] = UnitAttr()
    if min_rows:
        op.attributes[PREPACK_MIN_ROWS_ATTR] = IntegerAttr(min_rows, IntegerType(64))
    verify_prepack(op)


__all__ = [
    "INFERENCE_ATTR",
    "PACKED_LINEAR_ATTR",
    "PREPACK_ATTR",
    "PREPACK_MIN_ROWS_ATTR",
    "TRAINING_ATTR",
    "is_prepacked",
    "mark_prepacked",
    "prepack_min_rows",
    "verify_prepack",
]
