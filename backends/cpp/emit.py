"""``emit-cpp``: print cpp-dialect IR as a C++ translation unit (it only prints).

Every ``cpp.func`` becomes an ``extern "C"`` function after a comment block naming what
the kernel computes (its nodes, their FX nodes and source lines); every op one C
statement (``float tmp3 = in_ptr0[16*x0 + r0];``), constants inline; ``cpp.for``
becomes a ``for`` nest under its OpenMP pragma. A function that may raise an error
(an out-of-range indirect index, an integer division by zero) keeps the flags in
``kiln_err`` (OR-reduced across OpenMP threads and SIMD lanes) and returns them.

The xDSL output target ``cpp`` (``kiln-opt -t cpp``, or ``--emit-cpp``) is the driver's
(:class:`kiln.targets.CppTarget`): it lowers kernel-level IR first, then prints with this.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerAttr, MemRefType, ModuleOp
from xdsl.ir import Block, BlockArgument, Operation, SSAValue

from kiln.backends.cpp.c_types import float_literal, int_literal, storage_type, value_type
from kiln.backends.cpp.index_exprs import c_index, is_nonnegative
from kiln.backends.cpp.prelude import HEADER as HEADER
from kiln.backends.cpp.prelude import unit_source as unit_source
from kiln.backends.cpp.scalar_ops import UnsupportedOp, constant_text, scalar_expression
from kiln.dialects.cpp.attributes import LoopKind
from kiln.dialects.cpp.errors import may_divide_by_zero, may_fail
from kiln.dialects.cpp.func_ops import FuncOp, ReturnOp
from kiln.dialects.cpp.loop_ops import ForOp, YieldOp
from kiln.dialects.cpp.memory_ops import (
    AllocaOp,
    AtomicAddOp,
    CheckIndexOp,
    IndexOp,
    LoadOp,
    StoreOp,
)
from kiln.dialects.cpp.tile_ops import TransposeTileOp

_KEYWORDS = frozenset(
    "alignas alignof and asm auto bool break case catch char class const continue default "
    "delete do double else enum explicit extern false float for friend goto if inline int "
    "long mutable namespace new not operator or private protected public register return "
    "short signed sizeof static struct switch template this throw true try typedef typeid "
    "typename union unsigned using virtual void volatile while xor".split()
)
_IDENTIFIER = re.compile(r"[^A-Za-z0-9_]")

ERROR_FLAG = "kiln_err"


class EmitError(ValueError):
    """IR the C++ emitter cannot print (the message names the op)."""


@dataclass
class FunctionEmitter:
    """Prints one ``cpp.func``."""

    func: FuncOp
    lines: list[str] = field(default_factory=list[str])
    names: dict[SSAValue, str] = field(default_factory=dict[SSAValue, str])
    used: set[str] = field(default_factory=set[str])
    nonnegative: set[SSAValue] = field(default_factory=set[SSAValue])
    failing: set[Operation] = field(default_factory=set[Operation])
    """Loops whose bodies may raise an error flag."""
    depth: int = 1
    counter: int = 0
    uses_flag: bool = False

    # -- names and operands -------------------------------------------------------------

    def _fresh(self, hint: str | None) -> str:
        base = _IDENTIFIER.sub("_", hint) if hint else f"tmp{self.counter}"
        if not hint:
            self.counter += 1
        if not base or base[0].isdigit():
            base = f"v_{base}"
        if base in _KEYWORDS or base.startswith("kiln_"):
            base = f"{base}_"
        name = base
        k = 1
        while name in self.used:
            name = f"{base}_{k}"
            k += 1
        self.used.add(name)
        return name

    def name(self, value: SSAValue) -> str:
        if value not in self.names:
            self.names[value] = self._fresh(value.name_hint)
        return self.names[value]

    def operand(self, value: SSAValue) -> str:
        """The C text for a value: a literal for constants, else its variable."""
        owner = value.owner
        if isinstance(owner, arith.ConstantOp):
            return constant_text(owner)
        return self.name(value)

    def _is_nonnegative(self, value: SSAValue) -> bool:
        owner = value.owner
        if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
            return int(owner.value.value.data) >= 0  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
        return value in self.nonnegative

    def index_text(self, op: LoadOp | StoreOp | AtomicAddOp | IndexOp | TransposeTileOp) -> str:
        operands = op.indices
        expr = op.expr.data if isinstance(op, IndexOp) else op.index.data
        return c_index(
            expr,
            [self.operand(v) for v in operands],
            [self._is_nonnegative(v) for v in operands],
        )

    def line(self, text: str) -> None:
        self.lines.append("    " * self.depth + text)

    # -- the function -------------------------------------------------------------------

    def emit(self) -> list[str]:
        func = self.func
        for op in func.walk():
            if may_fail(op):
                parent = op.parent_op()
                while parent is not None and parent is not func:
                    if isinstance(parent, ForOp):
                        self.failing.add(parent)
                    parent = parent.parent_op()
        params: list[str] = []
        for arg in func.input_args():
            params.append(self._param(arg, const=True))
        for arg in func.output_args():
            params.append(self._param(arg, const=False))
        header = ["// " + "-" * 86]
        provenance = func.provenance
        if provenance is not None:
            header += [f"// {line.data}" for line in provenance.data]
        header.append("// " + "-" * 86)
        signature = f'extern "C" int {func.sym_name.data}({", ".join(params)})'
        self.lines = [*header, signature, "{"]
        self.uses_flag = any(may_fail(op) for op in func.walk())
        if self.uses_flag:
            self.line(f"int {ERROR_FLAG} = 0;")
        self.block(func.body.block)
        self.lines.append("}")
        return self.lines

    def _param(self, arg: BlockArgument, const: bool) -> str:
        name = self.name(arg)
        if isinstance(arg.type, IndexType):
            self.nonnegative.add(arg)
            return f"int64_t {name}"
        assert isinstance(arg.type, MemRefType)
        ctype = storage_type(arg.type.element_type)
        return f"{'const ' if const else ''}{ctype}* {name}"

    def block(self, block: Block) -> None:
        for op in block.ops:
            self.op(op)

    def op(self, op: Operation) -> None:
        if isinstance(op, arith.ConstantOp | YieldOp):
            return
        if isinstance(op, ReturnOp):
            self.line(f"return {ERROR_FLAG};" if self.uses_flag else "return 0;")
            return
        if isinstance(op, ForOp):
            self.for_op(op)
        elif isinstance(op, LoadOp):
            self.load(op)
        elif isinstance(op, StoreOp):
            self.store(op)
        elif isinstance(op, AtomicAddOp):
            self.atomic_add(op)
        elif isinstance(op, TransposeTileOp):
            source = f"{self.name(op.source)} + ({self.index_text(op)})"
            self.line(f"kiln_transpose16({source}, {op.stride.data}LL, {self.name(op.tile)});")
        elif isinstance(op, CheckIndexOp):
            # One unsigned compare catches both a negative index and one past the end.
            index, bound = self.operand(op.index), self.operand(op.bound)
            self.line(
                f"{ERROR_FLAG} |= (uint64_t)({index}) < (uint64_t)({bound}) ? 0 : KILN_ERR_INDEX;"
            )
        elif isinstance(op, IndexOp):
            result = self.name(op.result)
            if is_nonnegative(op.expr.data, [self._is_nonnegative(v) for v in op.indices]):
                self.nonnegative.add(op.result)
            self.line(f"int64_t {result} = {self.index_text(op)};")
        elif isinstance(op, AllocaOp):
            ty = op.result.type
            assert isinstance(ty, MemRefType)
            count = 1
            for d in ty.get_shape():
                count *= d
            self.line(f"{storage_type(ty.element_type)} {self.name(op.result)}[{count}];")
        else:
            self.scalar(op)

    def scalar(self, op: Operation) -> None:
        if len(op.results) != 1:
            raise EmitError(
                f"the C++ emitter cannot print {op.name} with {len(op.results)} results"
            )
        try:
            expression = scalar_expression(op, [self.operand(v) for v in op.operands])
            ctype = value_type(op.results[0].type)
        except (UnsupportedOp, ValueError) as e:
            raise EmitError(f"{op.name}: {e}") from e
        if expression.div_check is not None and may_divide_by_zero(op):
            self.line(f"{ERROR_FLAG} |= ({expression.div_check}) ? KILN_ERR_DIV_ZERO : 0;")
        result = op.results[0]
        if isinstance(op, arith.MinSIOp | arith.MaxSIOp) and all(
            self._is_nonnegative(v) for v in op.operands
        ):
            self.nonnegative.add(result)
        self.line(f"{ctype} {self.name(result)} = {expression.text};")

    def load(self, op: LoadOp) -> None:
        ty = op.buffer.type
        assert isinstance(ty, MemRefType)
        element = ty.element_type
        pointer = self.name(op.buffer)
        index = self.index_text(op)
        result = self.name(op.result)
        read = _from_storage(f"{pointer}[{index}]", element)
        fill = f"({value_type(element)})0" if op.fill is None else self._fill(op.fill, element)
        condition = None if op.mask is None else self.operand(op.mask)
        if op.checked is not None:
            shape = ty.get_shape()
            if all(d >= 0 for d in shape):
                count = 1
                for d in shape:
                    count *= d
                position = f"{result}_at"
                self.line(f"int64_t {position} = {index};")
                inside = f"(uint64_t){position} < (uint64_t){count}LL"
                flagged = inside if condition is None else f"(!{condition} || {inside})"
                self.line(f"{ERROR_FLAG} |= {flagged} ? 0 : KILN_ERR_INDEX;")
                # Read only in range (the value of an out-of-range read is never used:
                # the flag fails the call). A guarded read at a contiguous address is
                # a masked vector load; clamping the address instead would be a gather.
                read = _from_storage(f"{pointer}[{position}]", element)
                condition = inside if condition is None else f"{condition} && {inside}"
        if condition is not None:
            read = f"({condition}) ? {read} : {fill}"
        self.line(f"{value_type(element)} {result} = {read};")

    def _fill(self, attr: object, element: object) -> str:
        value = attr.value.data  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType, reportUnknownVariableType]
        if isinstance(value, float):
            return float_literal(value, element)  # pyright: ignore[reportArgumentType]
        return int_literal(int(value), element)  # pyright: ignore[reportArgumentType, reportUnknownArgumentType]

    def store(self, op: StoreOp) -> None:
        ty = op.buffer.type
        assert isinstance(ty, MemRefType)
        value = _to_storage(self.operand(op.value), ty.element_type)
        self.line(f"{self.name(op.buffer)}[{self.index_text(op)}] = {value};")

    def atomic_add(self, op: AtomicAddOp) -> None:
        ty = op.buffer.type
        assert isinstance(ty, MemRefType)
        target = f"{self.name(op.buffer)}[{self.index_text(op)}]"
        value = self.operand(op.value)
        if self.uses_flag:
            # An index this thread found out of range raised the flag just before: add
            # nothing past it (the call fails; the write would corrupt memory).
            self.line(f"if (!{ERROR_FLAG})")
            self.line("{")
            self.depth += 1
        self.line("#pragma omp atomic")
        self.line(f"{target} += {value};")
        if self.uses_flag:
            self.depth -= 1
            self.line("}")

    def for_op(self, op: ForOp) -> None:
        kind = op.loop_kind
        if op in self.failing and kind is LoopKind.SIMD:
            # No ``omp simd reduction(|:kiln_err)``: g++ 12 with -march=native miscompiled
            # it (the lane copies of the flag came back as garbage, 0x41FFFFFF, when the
            # loop also carried an i64 and an f32 accumulator: every cross-entropy training
            # step raised IndexOutOfBounds). A plain loop; g++ still vectorizes what it can.
            kind = LoopKind.SERIAL
        elif op in self.failing and kind is LoopKind.PARALLEL_SIMD:
            kind = LoopKind.PARALLEL
        clauses: list[str] = []
        if kind is LoopKind.PARALLEL:
            clauses.append("#pragma omp parallel for")
            if len(op.ivs) > 1:
                clauses.append(f"collapse({len(op.ivs)})")
            clauses.append("schedule(static)")
        elif kind is LoopKind.PARALLEL_SIMD:
            clauses.append("#pragma omp parallel for simd schedule(simd:static)")
        elif kind is LoopKind.SIMD:
            clauses.append("#pragma omp simd")
            if len(op.ivs) > 1:
                clauses.append(f"collapse({len(op.ivs)})")
        if op.condition is not None:
            clauses.append(f"if({self.operand(op.condition)})")
        if clauses and op in self.failing:
            clauses.append(f"reduction(|:{ERROR_FLAG})")
        if clauses:
            self.line(" ".join(clauses))
        opened = 0
        for iv, lower, upper, step in zip(
            op.ivs, op.lower_bounds, op.upper_bounds, op.step_values(), strict=True
        ):
            name = self.name(iv)
            if self._is_nonnegative(lower):
                self.nonnegative.add(iv)
            increment = f"++{name}" if step == 1 else f"{name} += {step}"
            self.line(
                f"for (int64_t {name} = {self.operand(lower)}; {name} < {self.operand(upper)}; {increment})"
            )
            self.line("{")
            self.depth += 1
            opened += 1
        self.block(op.body.block)
        for _ in range(opened):
            self.depth -= 1
            self.line("}")


def _from_storage(text: str, element: object) -> str:
    from xdsl.dialects.builtin import BFloat16Type, Float16Type

    if isinstance(element, Float16Type):
        return f"(float){text}"
    if isinstance(element, BFloat16Type):
        return f"kiln_bf16_to_float({text})"
    return text


def _to_storage(text: str, element: object) -> str:
    from xdsl.dialects.builtin import BFloat16Type, Float16Type

    if isinstance(element, Float16Type):
        return f"(kiln_half)({text})"
    if isinstance(element, BFloat16Type):
        return f"kiln_float_to_bf16({text})"
    return text


def emit_function(func: FuncOp) -> str:
    """One function's C++ (no prelude)."""
    return "\n".join(FunctionEmitter(func).emit()) + "\n"


def emit_functions(functions: Sequence[FuncOp], emitted: Mapping[FuncOp, str] | None = None) -> str:
    """A translation unit holding these functions (prelude first). ``emitted``: their
    text where the caller already emitted it (:func:`emit_function`; emitting costs as
    much as lowering, so it is done once per function)."""
    texts: list[str] = []
    for func in functions:
        text = emitted.get(func) if emitted is not None else None
        texts.append(text if text is not None else emit_function(func))
    return unit_source(texts)


def cpp_functions(module: ModuleOp) -> list[FuncOp]:
    return [op for op in module.body.block.ops if isinstance(op, FuncOp)]


def emit_module(module: ModuleOp) -> str:
    """The C++ source of every ``cpp.func`` of a module (lowered to the cpp dialect)."""
    return emit_functions(cpp_functions(module))


__all__ = [
    "EmitError",
    "FunctionEmitter",
    "cpp_functions",
    "emit_function",
    "emit_functions",
    "emit_module",
    "unit_source",
]
