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
  ``aten.addmm.default`` whose second operand is a weight or its transpose, or on the GPU
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

from xdsl.dialects.builtin import IntegerAttr, IntegerType, TensorType, UnitAttr
from xdsl.ir import Operation, SSAValue
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


def linear_weight(mat2: SSAValue | None) -> tuple[SSAValue, bool] | None:
    """The weight a prepacked product's second operand reads, and whether it reads it
    transposed, in an extern body: ``(w, True)`` when ``mat2`` is ``as_strided(w, [K, N],
    [1, K])`` of a 2-D ``[N, K]`` value (how ``lower-aten`` writes ``w.T``) or of a 1x1
    convolution's ``[N, K, 1, 1]`` weight (``conv1x1-to-mm``'s product); ``(mat2, False)``
    when it is a ``[K, N]`` value read as it is (GPT-2's ``Conv1D``: ``addmm(b, x, w)``);
    None otherwise."""
    from kiln.dialects.aten.encoding import decode_value
    from kiln.dialects.aten.ops import AtenOp

    if mat2 is None or not isinstance(mat2.type, TensorType):
        return None
    owner = mat2.owner
    if not isinstance(owner, AtenOp) or owner.overload_name != "aten::as_strided.default":
        return (mat2, False) if len(mat2.type.get_shape()) == 2 else None  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
    source = owner.operands[0]
    shape = source.type.get_shape() if isinstance(source.type, TensorType) else ()  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    if len(shape) == 4 and tuple(shape[2:]) == (1, 1):  # pyright: ignore[reportUnknownArgumentType]
        shape = shape[:2]  # pyright: ignore[reportUnknownVariableType]
    if len(shape) != 2 or owner.sym_operands():  # pyright: ignore[reportUnknownArgumentType]
        return None
    specs = {a.name: a for a in owner.op_schema().arguments}
    n, k = shape  # pyright: ignore[reportUnknownVariableType]
    size = decode_value(specs["size"], owner.arg_attr("size"), ())
    stride = decode_value(specs["stride"], owner.arg_attr("stride"), ())
    offset = decode_value(specs["storage_offset"], owner.arg_attr("storage_offset"), ())
    if size != [k, n] or stride != [1, k] or offset not in (None, 0):
        return None
    return source, True


__all__ = [
    "INFERENCE_ATTR",
    "PACKED_LINEAR_ATTR",
    "PREPACK_ATTR",
    "PREPACK_MIN_ROWS_ATTR",
    "TRAINING_ATTR",
    "is_prepacked",
    "linear_weight",
    "mark_prepacked",
    "prepack_min_rows",
    "verify_prepack",
]
