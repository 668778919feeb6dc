"""Dividing by a loop-invariant value as multiplying by its reciprocal.

Softmax ends with ``e / sum`` over a row: a vector division per element, several
times the cost of a multiplication. Eager PyTorch's softmax multiplies by ``1 / sum``
instead; so does this rewrite, for an ``f32``/``f64`` ``arith.divf`` inside a vectorized
loop whose divisor is computed outside it (a reduction's result). A divisor that is a
plain load (``y`` in ``x / y[:, None]``, hoisted by :mod:`.invariants`) keeps the exact
division, as in eager.
``x * (1 / s)`` is within 1.5 ulp of ``x / s`` when ``s`` and ``1 / s`` are both normal
numbers; for any other divisor (zero, subnormal, above ``2^126`` in f32, infinite, NaN)
the original division runs. So the loop is versioned (:mod:`.versioning`)::

    float r = 1.0f / s;  bool ok = fabsf(s) >= 0x1p-126f && fabsf(s) <= 0x1p126f;
    for (v = 0; v < (ok ? 1 : 0); ++v) { <loop with x * r> }
    for (v = (ok ? 1 : 0); v < 1; ++v) { <loop with x / s> }

The versions are the outermost non-parallel loop around the vectorized one that the
divisor is defined outside of (for a row reduction: the r-loop's blocks). Measured
faster on softmax rows: docs/benchmarks/design-notes.md.
"""

from __future__ import annotations

from xdsl.dialects import arith
from xdsl.dialects import math as xmath
from xdsl.dialects.builtin import AnyFloat, Float32Type, Float64Type, FloatAttr
from xdsl.ir import Block, BlockArgument, Operation, SSAValue

from kiln.dialects.cpp.attributes import LoopKind
from kiln.dialects.cpp.func_ops import FuncOp
from kiln.dialects.cpp.loop_ops import ForOp
from kiln.dialects.cpp.memory_ops import LoadOp
from kiln.passes.kernel_to_cpp.versioning import version

_NORMAL_RANGE = {32: (2.0**-126, 2.0**126), 64: (2.0**-1022, 2.0**1022)}
"""Divisor magnitudes whose reciprocal is a normal number, per float width."""


def _width(ty: object) -> int | None:
    if isinstance(ty, Float32Type):
        return 32
    if isinstance(ty, Float64Type):
        return 64
    return None


def _is_vector_loop(op: Operation) -> bool:
    return isinstance(op, ForOp) and op.loop_kind in (LoopKind.SIMD, LoopKind.PARALLEL_SIMD)


def _candidates(loop: ForOp, done: set[Operation]) -> list[arith.DivfOp]:
    """The divisions of ``loop``'s body by a value computed outside it (not a plain load:
    eager divides ``x / y[:, None]`` exactly, and only its softmax multiplies by the
    reciprocal of the row sum)."""
    return [
        op
        for op in loop.body.block.ops
        if isinstance(op, arith.DivfOp)
        and _width(op.rhs.type) is not None
        and not loop.is_ancestor(op.rhs.owner)
        and not _reads_an_argument(op.rhs)
        and op not in done
    ]


def _has_reciprocal(divisor: SSAValue, loop: ForOp) -> bool:
    """This rewrite has versioned ``loop`` already: ``1 / divisor`` and ``|divisor|`` (its
    guard) are computed outside it, and what still divides by it is the exact version. So
    running the rewrite again changes nothing."""
    reciprocal = magnitude = False
    for use in divisor.uses:
        user = use.operation
        if loop.is_ancestor(user):
            continue
        if isinstance(user, xmath.AbsFOp):
            magnitude = True
        elif isinstance(user, arith.DivfOp) and user.rhs is divisor:
            one = user.lhs.owner
            reciprocal |= (
                isinstance(one, arith.ConstantOp)
                and isinstance(one.value, FloatAttr)
                and one.value.value.data == 1.0
            )
    return reciprocal and magnitude


def _versioned_already(func: FuncOp) -> set[Operation]:
    """The divisions left exact by an earlier run of this rewrite (see _has_reciprocal),
    found before this run adds guards of its own."""
    return {
        op
        for loop in func.walk()
        if isinstance(loop, ForOp) and _is_vector_loop(loop)
        for op in loop.body.block.ops
        if isinstance(op, arith.DivfOp) and _has_reciprocal(op.rhs, loop)
    }


def _reads_an_argument(value: SSAValue) -> bool:
    """``value`` is loaded from one of the kernel's buffers (not a local accumulator)."""
    owner = value.owner
    return isinstance(owner, LoadOp) and isinstance(owner.buffer, BlockArgument)


def _version_root(loop: ForOp, divisors: list[SSAValue]) -> ForOp:
    """The outermost serial/SIMD loop around ``loop`` that every divisor is defined outside."""
    root = loop
    while True:
        parent = root.parent_op()
        if not isinstance(parent, ForOp) or parent.loop_kind.is_parallel:
            return root
        if any(parent.is_ancestor(d.owner) for d in divisors):
            return root
        root = parent


def _insert(block: Block, before: Operation, op: Operation) -> SSAValue:
    block.insert_op_before(op, before)
    return op.results[0]


def _reciprocal_guard(
    block: Block, before: Operation, divisor: SSAValue
) -> tuple[SSAValue, SSAValue]:
    """``1 / divisor`` and whether it may replace the division (see the module docstring)."""
    ty = divisor.type
    assert isinstance(ty, AnyFloat)
    width = _width(ty)
    assert width is not None
    low, high = _NORMAL_RANGE[width]
    one = _insert(block, before, arith.ConstantOp(FloatAttr(1.0, ty)))
    reciprocal = _insert(block, before, arith.DivfOp(one, divisor))
    reciprocal.name_hint = "reciprocal"
    magnitude = _insert(block, before, xmath.AbsFOp(divisor))
    low_c = _insert(block, before, arith.ConstantOp(FloatAttr(low, ty)))
    high_c = _insert(block, before, arith.ConstantOp(FloatAttr(high, ty)))
    above = _insert(block, before, arith.CmpfOp(magnitude, low_c, "oge"))
    below = _insert(block, before, arith.CmpfOp(magnitude, high_c, "ole"))
    return reciprocal, _insert(block, before, arith.AndIOp(above, below))


def _version(root: ForOp, loops: list[ForOp], done: set[Operation]) -> None:
    """Replace ``root`` by a multiplying copy and the original, one of which runs."""
    block = root.parent_block()
    assert block is not None
    divisors: list[SSAValue] = []
    for loop in loops:
        for div in _candidates(loop, done):
            if div.rhs not in divisors:
                divisors.append(div.rhs)
    reciprocals: dict[SSAValue, SSAValue] = {}
    ok: SSAValue | None = None
    for divisor in divisors:
        reciprocal, normal = _reciprocal_guard(block, root, divisor)
        reciprocals[divisor] = reciprocal
        ok = normal if ok is None else _insert(block, root, arith.AndIOp(ok, normal))
    assert ok is not None
    fast, _ = version(root, ok, "use_reciprocal")
    for op in list(fast.walk()):
        if isinstance(op, arith.DivfOp) and op.rhs in reciprocals:
            parent = op.parent_op()
            if parent is None or not _is_vector_loop(parent):
                continue
            product = arith.MulfOp(op.lhs, reciprocals[op.rhs])
            product.result.name_hint = op.result.name_hint
            assert op.parent is not None
            op.parent.insert_op_before(product, op)
            op.result.replace_all_uses_with(product.result)
            op.detach()
            op.erase()


def use_reciprocals(func: FuncOp) -> None:
    """Version every vectorized loop that divides by an invariant (module docstring)."""
    done = _versioned_already(func)
    roots: dict[ForOp, list[ForOp]] = {}
    for op in list(func.walk()):
        if not isinstance(op, ForOp) or not _is_vector_loop(op):
            continue
        divisions = _candidates(op, done)
        if not divisions:
            continue
        root = _version_root(op, [d.rhs for d in divisions])
        roots.setdefault(root, []).append(op)
    for root, loops in roots.items():
        _version(root, loops, done)


__all__ = ["use_reciprocals"]
