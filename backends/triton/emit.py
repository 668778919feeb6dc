"""``triton.kernel`` as ``@triton.jit`` Python source: one line per op, nothing else.

The printer only prints: every decision was made by ``lower-to-triton``. Values are
named after their role where the lowering gave them a name (``xindex``, ``rmask``,
``roffset``) and ``tmp<n>`` otherwise; constants print as literals where Triton gives a
literal the partner operand's type, and as ``tl.full([], v, dtype)`` elsewhere;
``addptr``, ``expand_dims``, ``arange`` and block-size reads print inline. Each kernel
starts with a comment block: the ``kernel.kernel`` it implements and the fused nodes
(their FX names and what they compute). The reduction combiners it calls
(``_kiln_maximum``, ``_kiln_argmax``, ``_kiln_welford_combine``, ...) are emitted once
per module, before the kernels.

```python
@triton.jit
def kiln_poi_fused_add_relu_0(in_ptr0, in_ptr1, out_ptr0, XBLOCK: tl.constexpr):
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)
    xmask = xindex < 1024
    tmp0 = tl.load(in_ptr0 + xindex, xmask, other=0.0)
    ...
```
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.dialects import scf
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    Float64Type,
    IntegerType,
    Signedness,
)
from xdsl.ir import Attribute, BlockArgument, Operation, SSAValue

from kiln.dialects.triton import (
    MATH_FUNCTIONS,
    PREDICATES,
    AddPtrOp,
    ArangeOp,
    AtomicAddOp,
    BinaryOp,
    BroadcastToOp,
    CastOp,
    CmpOp,
    CombineOp,
    ConstantOp,
    ConstexprOp,
    DeviceAssertOp,
    DotOp,
    ExpandDimsOp,
    FullOp,
    KernelOp,
    LoadOp,
    MathOp,
    ProgramIdOp,
    ReduceOp,
    ReturnOp,
    StoreOp,
    WhereOp,
)
from kiln.dialects.triton.literals import literal_value
from kiln.dialects.triton.types import element_of, shape_of

INDENT = "    "


class EmitError(ValueError):
    """IR the emitter cannot print (not triton dialect)."""


def dtype_name(ty: Attribute) -> str:
    """``tl.float32`` and friends."""
    if isinstance(ty, Float16Type):
        return "tl.float16"
    if isinstance(ty, BFloat16Type):
        return "tl.bfloat16"
    if isinstance(ty, Float32Type):
        return "tl.float32"
    if isinstance(ty, Float64Type):
        return "tl.float64"
    if isinstance(ty, IntegerType):
        width = ty.width.data
        if width == 1:
            return "tl.int1"
        prefix = "uint" if ty.signedness.data is Signedness.UNSIGNED else "int"
        return f"tl.{prefix}{width}"
    raise EmitError(f"no Triton dtype for {ty}")


def literal(value: float | int | bool, ty: Attribute | None = None) -> str:
    """Python source for a constant (floats of 32 bits or fewer in their shortest form)."""
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return 'float("nan")'
    if math.isinf(value):
        return 'float("inf")' if value > 0 else 'float("-inf")'
    if ty is not None and not isinstance(ty, Float64Type):
        text = _shortest_float32(value)
        return text if any(c in text for c in ".en") else f"{text}.0"
    return repr(value)


def _shortest_float32(value: float) -> str:
    """The shortest decimal that reads back as the float32 nearest ``value`` (what
    ``str(numpy.float32(value))`` prints; emitting source must not need numpy)."""
    try:
        (single,) = struct.unpack("<f", struct.pack("<f", value))
    except OverflowError:  # beyond float32's range: what the kernel's f32 holds
        return 'float("inf")' if value > 0 else 'float("-inf")'
    for digits in range(1, 10):  # 9 significant digits always round-trip a float32
        text = f"{single:.{digits}g}"
        try:
            if struct.unpack("<f", struct.pack("<f", float(text)))[0] == single:
                return text
        except OverflowError:  # rounded up past float32's largest value
            continue
    return repr(single)


# -- helpers the kernels call ----------------------------------------------------------------

HELPERS: dict[str, str] = {
    "_kiln_maximum": """@triton.jit
def _kiln_maximum(a, b):
    # max that propagates NaN, as torch.amax does
    return tl.where((a > b) | (a != a), a, b)""",
    "_kiln_minimum": """@triton.jit
def _kiln_minimum(a, b):
    # min that propagates NaN, as torch.amin does
    return tl.where((a < b) | (a != a), a, b)""",
    "_kiln_prod": """@triton.jit
def _kiln_prod(a, b):
    return a * b""",
    "_kiln_any": """@triton.jit
def _kiln_any(a, b):
    return a | b""",
    "_kiln_all": """@triton.jit
def _kiln_all(a, b):
    return a & b""",
    "_kiln_argmax": """@triton.jit
def _kiln_argmax(a_value, a_index, b_value, b_index):
    # the larger value (NaN is largest); among equal ones the first index
    a_nan = a_value != a_value
    b_nan = b_value != b_value
    better = (a_value > b_value) | (a_nan & ~b_nan)
    tie = (a_value == b_value) | (a_nan & b_nan)
    take_a = better | (tie & (a_index < b_index))
    return tl.where(take_a, a_value, b_value), tl.where(take_a, a_index, b_index)""",
    "_kiln_argmin": """@triton.jit
def _kiln_argmin(a_value, a_index, b_value, b_index):
    # the smaller value (NaN wins, as in torch); among equal ones the first index
    a_nan = a_value != a_value
    b_nan = b_value != b_value
    better = (a_value < b_value) | (a_nan & ~b_nan)
    tie = (a_value == b_value) | (a_nan & b_nan)
    take_a = better | (tie & (a_index < b_index))
    return tl.where(take_a, a_value, b_value), tl.where(take_a, a_index, b_index)""",
    "_kiln_welford_update": """@triton.jit
def _kiln_welford_update(mean, m2, weight, shift, x):
    # one Welford step per lane, on x less the lane's first value (small running means)
    shift = tl.where(weight == 0.0, x, shift)
    x = x - shift
    weight = weight + 1.0
    delta = x - mean
    mean = mean + delta / weight
    m2 = m2 + delta * (x - mean)
    return mean, m2, weight, shift""",
    "_kiln_welford_combine": """@triton.jit
def _kiln_welford_combine(mean_a, m2_a, weight_a, shift_a, mean_b, m2_b, weight_b, shift_b):
    # Chan et al.'s parallel combination of two partial (mean, m2, weight, shift): the
    # means differ by that of the shifts (exact for nearby values) plus the shifted means'
    weight = weight_a + weight_b
    fraction = tl.where(weight == 0.0, 0.0, weight_b / weight)
    shift = tl.where(weight_a == 0.0, shift_b, shift_a)
    delta = tl.where(weight_b == 0.0, 0.0, (shift_b - shift) + (mean_b - mean_a))
    mean = mean_a + delta * fraction
    return mean, m2_a + m2_b + delta * delta * weight_a * fraction, weight, shift""",
}


@dataclass
class EmittedKernel:
    name: str
    source: str
    helpers: list[str]
    """Names of the :data:`HELPERS` the kernel calls."""
    uses_libdevice: bool


@dataclass
class _KernelPrinter:
    kernel: KernelOp
    lines: list[str] = field(default_factory=list[str])
    names: dict[SSAValue, str] = field(default_factory=dict[SSAValue, str])
    taken: set[str] = field(default_factory=set[str])
    helpers: list[str] = field(default_factory=list[str])
    uses_libdevice: bool = False
    counter: int = 0
    inlined: set[SSAValue] = field(default_factory=set[SSAValue])
    inline_ops: set[Operation] = field(default_factory=set[Operation])

    # -- names -----------------------------------------------------------------------

    def fresh(self, hint: str | None) -> str:
        if hint and hint.isidentifier() and not hint.startswith("tmp") and hint not in self.taken:
            self.taken.add(hint)
            return hint
        if hint and hint.isidentifier() and not hint.startswith("tmp"):
            k = 1
            while f"{hint}_{k}" in self.taken:
                k += 1
            self.taken.add(f"{hint}_{k}")
            return f"{hint}_{k}"
        while f"tmp{self.counter}" in self.taken:
            self.counter += 1
        name = f"tmp{self.counter}"
        self.taken.add(name)
        self.counter += 1
        return name

    def helper(self, name: str) -> str:
        if name not in self.helpers:
            self.helpers.append(name)
        return name

    # -- operand text ---------------------------------------------------------------------

    def text(self, value: SSAValue, partner: SSAValue | None = None) -> str:
        """How ``value`` reads as an operand (``partner``: the other operand of a binary op)."""
        owner = value.owner
        if isinstance(owner, ConstantOp):
            v = literal_value(owner.value)
            if partner is not None and not isinstance(partner.owner, ConstantOp):
                return self._literal_operand(literal(v, value.type))
            return f"tl.full([], {literal(v, value.type)}, {dtype_name(value.type)})"
        if isinstance(owner, Operation) and owner in self.inline_ops:
            return self.expr(owner)
        name = self.names.get(value)
        if name is None:
            raise EmitError(f"value used before it is defined: {value}")
        return name

    @staticmethod
    def _literal_operand(text: str) -> str:
        return f"({text})" if text.startswith("-") else text

    def precedence(self, value: SSAValue) -> int:
        """How tightly ``value``'s text binds (Python's operator precedence)."""
        owner = value.owner
        if value in self.inlined and isinstance(owner, BinaryOp):
            return (
                _PRECEDENCE.get(owner.PYTHON.split(" ")[1], _ATOM) if " " in owner.PYTHON else _ATOM
            )
        if isinstance(owner, AddPtrOp) and owner in self.inline_ops:
            return _PRECEDENCE["+"]
        return _ATOM

    def operand(
        self, value: SSAValue, outer: int, right: bool, partner: SSAValue | None = None
    ) -> str:
        """``value`` as an operand of an operator of precedence ``outer``."""
        text = self.text(value, partner)
        inner = self.precedence(value)
        return f"({text})" if inner < outer or (right and inner == outer) else text

    def atom(self, value: SSAValue) -> str:
        """Operand text that binds as tightly as a name (parenthesized if needed)."""
        return self.operand(value, _ATOM, False)

    def inline(self, op: Operation) -> bool:
        """Ops printed where they are used rather than assigned to a name."""
        if self._decide_inline(op):
            self.inline_ops.add(op)
            return True
        return False

    def _decide_inline(self, op: Operation) -> bool:
        if isinstance(op, ConstantOp | ConstexprOp | ArangeOp | AddPtrOp | ProgramIdOp):
            return True
        if len(op.results) != 1 or op.results[0].name_hint:
            return False  # a named value (xindex, rmask, ...) keeps its name
        if isinstance(op, ExpandDimsOp):
            return True
        result = op.results[0]
        if isinstance(op, FullOp) and result.has_one_use():
            return True
        if isinstance(op, CastOp) and isinstance(op.source.owner, ConstexprOp):
            return True
        if (
            isinstance(op, BinaryOp)
            and isinstance(element_of(result.type), IntegerType)
            and result.has_one_use()
        ):
            # single-use index arithmetic reads best inside the load/store it feeds
            user = next(iter(result.uses)).operation
            if user.parent is op.parent and not isinstance(user, scf.ForOp | scf.YieldOp):
                self.inlined.add(result)
                return True
        return False

    # -- ops ---------------------------------------------------------------------------------

    def assign(self, op: Operation, expr: str, indent: int) -> None:
        names = [self.fresh(r.name_hint) for r in op.results]
        for result, name in zip(op.results, names, strict=True):
            self.names[result] = name
        self.lines.append(f"{INDENT * indent}{', '.join(names)} = {expr}")

    def op(self, op: Operation, indent: int) -> None:
        if self.inline(op) or isinstance(op, ReturnOp):
            return
        if isinstance(op, scf.ForOp):
            self.loop(op, indent)
            return
        if isinstance(op, scf.YieldOp):
            return
        if isinstance(op, DeviceAssertOp):
            self.lines.append(
                f"{INDENT * indent}tl.device_assert({self.text(op.cond)}, {op.msg.data!r})"
            )
            return
        if isinstance(op, StoreOp):
            mask = f", {self.text(op.mask)}" if op.mask is not None else ""
            self.lines.append(
                f"{INDENT * indent}tl.store({self.text(op.ptr)}, {self.text(op.value)}{mask})"
            )
            return
        if isinstance(op, AtomicAddOp):
            mask = f", {self.text(op.mask)}" if op.mask is not None else ""
            self.lines.append(
                f"{INDENT * indent}tl.atomic_add({self.text(op.ptr)}, {self.text(op.value)}"
                f"{mask}, sem='relaxed')"
            )
            return
        self.assign(op, self.expr(op), indent)

    def expr(self, op: Operation) -> str:
        if isinstance(op, ProgramIdOp):
            return f"tl.program_id({op.axis.data})"
        if isinstance(op, ConstexprOp):
            return op.param.data
        if isinstance(op, ArangeOp):
            return f"tl.arange(0, {op.end.data})"
        if isinstance(op, ExpandDimsOp):
            rank = len(shape_of(op.result.type))
            index = ["None" if k == op.axis.data else ":" for k in range(rank)]
            return f"{self.atom(op.source)}[{', '.join(index)}]"
        if isinstance(op, AddPtrOp):
            return f"{self.text(op.ptr)} + {self.atom(op.offset)}"
        if isinstance(op, BinaryOp):
            return self.binary(op)
        if isinstance(op, CmpOp):
            symbol = PREDICATES[op.predicate.data]
            p = _PRECEDENCE["<"]
            return f"{self.operand(op.lhs, p, False, op.rhs)} {symbol} {self.operand(op.rhs, p, True, op.lhs)}"
        if isinstance(op, MathOp):
            template = MATH_FUNCTIONS[op.fn.data][0]
            if template.startswith("libdevice."):
                self.uses_libdevice = True
            args = [self.atom(a) for a in op.args]
            return template.format(*args)
        if isinstance(op, WhereOp):
            return (
                f"tl.where({self.text(op.cond)}, {self.text(op.true_value, op.false_value)}, "
                f"{self.text(op.false_value, op.true_value)})"
            )
        if isinstance(op, CastOp):
            bitcast = ", bitcast=True" if op.bitcast is not None else ""
            dtype = dtype_name(element_of(op.result.type))
            if isinstance(op.source.owner, ConstexprOp):
                # a block size is a Python int: it takes its partner's type in arithmetic
                return self.text(op.source)
            if isinstance(op.source, BlockArgument):
                # an integer parameter may arrive as a constexpr (Triton specializes 1)
                return f"tl.cast({self.text(op.source)}, {dtype}{bitcast})"
            return f"{self.atom(op.source)}.to({dtype}{bitcast})"
        if isinstance(op, BroadcastToOp):
            return f"tl.broadcast_to({self.text(op.source)}, [{_shape_text(op.result.type)}])"
        if isinstance(op, FullOp):
            value = literal(literal_value(op.value), element_of(op.result.type))
            return f"tl.full([{_shape_text(op.result.type)}], {value}, {dtype_name(element_of(op.result.type))})"
        if isinstance(op, LoadOp):
            args = [self.text(op.ptr)]
            if op.mask is not None and op.other is not None:
                other = literal(literal_value(op.other), element_of(op.result.type))
                args += [self.text(op.mask), f"other={other}"]
            if op.eviction_policy is not None:
                args.append(f"eviction_policy='{op.eviction_policy.data}'")
            return f"tl.load({', '.join(args)})"
        if isinstance(op, ReduceOp):
            return self.reduce(op)
        if isinstance(op, DotOp):
            precision = (
                f", input_precision={op.precision.data!r}" if op.precision is not None else ""
            )
            return (
                f"tl.dot({self.text(op.lhs)}, {self.text(op.rhs)}, {self.text(op.acc)}{precision})"
            )
        if isinstance(op, CombineOp):
            kind = op.kind.data
            name = self.helper("_kiln_welford_update" if kind == "welford" else f"_kiln_{kind}")
            return f"{name}({', '.join(self.text(v) for v in op.inputs)})"
        raise EmitError(f"cannot print {op.name} as Triton")

    def binary(self, op: BinaryOp) -> str:
        a, b = self.text(op.lhs, op.rhs), self.text(op.rhs, op.lhs)
        name = op.name.removeprefix("triton.")
        is_float = not isinstance(element_of(op.lhs.type), IntegerType)
        if name in ("maximum", "minimum") and is_float:
            return f"tl.{name}({a}, {b}, tl.PropagateNan.ALL)"
        if op.PYTHON.startswith("tl."):
            return op.PYTHON.format(a, b)
        p = _PRECEDENCE[op.PYTHON.split(" ")[1]]
        return op.PYTHON.format(
            self.operand(op.lhs, p, False, op.rhs), self.operand(op.rhs, p, True, op.lhs)
        )

    def reduce(self, op: ReduceOp) -> str:
        kind = op.kind.data
        axis = op.axis.data
        values = [self.text(v) for v in op.inputs]
        is_float = not isinstance(element_of(op.inputs[0].type), IntegerType)
        if kind == "sum":
            return f"tl.sum({values[0]}, {axis})"
        if kind in ("max", "min") and not is_float:
            return f"tl.{kind}({values[0]}, {axis})"
        combiner = {
            "max": "_kiln_maximum",
            "min": "_kiln_minimum",
            "prod": "_kiln_prod",
            "any": "_kiln_any",
            "all": "_kiln_all",
            "argmax": "_kiln_argmax",
            "argmin": "_kiln_argmin",
            "welford": "_kiln_welford_combine",
        }[kind]
        self.helper(combiner)
        operand = values[0] if len(values) == 1 else f"({', '.join(values)})"
        return f"tl.reduce({operand}, {axis}, {combiner})"

    def bound(self, value: SSAValue) -> str:
        """A loop bound: a Python int where it is a constant."""
        if isinstance(value.owner, ConstantOp):
            return literal(literal_value(value.owner.value))
        return self.text(value)

    def loop(self, op: scf.ForOp, indent: int) -> None:
        body = op.body.block
        carried = [self.fresh(r.name_hint or f"acc{k}") for k, r in enumerate(op.results)]
        for name, init in zip(carried, op.iter_args, strict=True):
            self.lines.append(f"{INDENT * indent}{name} = {self.text(init)}")
        for name, arg, result in zip(carried, body.args[1:], op.results, strict=True):
            self.names[arg] = name
            self.names[result] = name
        iv = self.fresh(body.args[0].name_hint or "roffset")
        self.names[body.args[0]] = iv
        bounds = ", ".join(self.bound(v) for v in (op.lb, op.ub, op.step))
        self.lines.append(f"{INDENT * indent}for {iv} in range({bounds}):")
        for inner in body.ops:
            self.op(inner, indent + 1)
        terminator = body.last_op
        assert isinstance(terminator, scf.YieldOp)
        for name, value in zip(carried, terminator.operands, strict=True):
            text = self.text(value)
            if text != name:
                self.lines.append(f"{INDENT * (indent + 1)}{name} = {text}")

    # -- the kernel ---------------------------------------------------------------------------

    def print(self) -> EmittedKernel:
        kernel = self.kernel
        params = kernel.param_names
        for arg, name in zip(kernel.body.block.args, params, strict=True):
            self.names[arg] = name
            self.taken.add(name)
        self.taken.update(kernel.constexpr_names)
        signature = ", ".join([*params, *(f"{c}: tl.constexpr" for c in kernel.constexpr_names)])
        for op in kernel.body.block.ops:
            self.op(op, 1)
        header = _comment_block(kernel)
        source = "\n".join(
            [*header, "@triton.jit", f"def {kernel.sym_name.data}({signature}):", *self.lines]
        )
        return EmittedKernel(kernel.sym_name.data, source, self.helpers, self.uses_libdevice)


_ATOM = 100
_PRECEDENCE = {
    "<": 4,
    "<=": 4,
    ">": 4,
    ">=": 4,
    "==": 4,
    "!=": 4,
    "|": 5,
    "^": 6,
    "&": 7,
    "<<": 8,
    ">>": 8,
    "+": 9,
    "-": 9,
    "*": 10,
    "/": 10,
    "//": 10,
    "%": 10,
}
"""Python's binding strength of the infix operators kernels use (higher binds tighter)."""


def _is_call_or_index(text: str) -> bool:
    """``f(...)``, ``x[...]``, ``f(...)[...]``: a primary expression (balanced brackets)."""
    if not text or not (text[0].isalpha() or text[0] == "_"):
        return False
    depth = 0
    for k, ch in enumerate(text):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif depth == 0 and not (ch.isalnum() or ch in "._"):
            return False
        if depth == 0 and ch in ")]" and k + 1 < len(text) and text[k + 1] not in "([.":
            return False
    return depth == 0


def _shape_text(ty: Attribute) -> str:
    return ", ".join(str(d) for d in shape_of(ty))


def _comment_block(kernel: KernelOp) -> list[str]:
    from xdsl.dialects.builtin import ArrayAttr, StringAttr, SymbolRefAttr

    lines: list[str] = []
    implements = kernel.attributes.get("implements")
    numel = f"{kernel.numel.text} x {kernel.rnumel.text}"
    source = (
        f"kernel.kernel @{implements.string_value()}"
        if isinstance(implements, SymbolRefAttr)
        else "kernel"
    )
    lines.append(f"# {source}: {kernel.kind.data}, {numel} points")
    provenance = kernel.attributes.get("provenance")
    if isinstance(provenance, ArrayAttr):
        lines.append("# fused nodes (FX names):")
        for entry in provenance.data:
            if isinstance(entry, StringAttr):
                lines.append(f"#   {entry.data}")
    config = kernel.attributes.get("config")
    if config is not None:
        lines.append(f"# config: {_config_text(config)}")
    return lines


def _config_text(config: Attribute) -> str:
    data = getattr(config, "data", ())
    return ", ".join(f"{k}={v}" for k, v in data)


def emit_kernel(kernel: KernelOp) -> EmittedKernel:
    """The ``@triton.jit`` source of one kernel (with its comment block)."""
    return _KernelPrinter(kernel).print()


MODULE_HEADER = """# Generated by kiln (lower-to-triton, emit-triton).
import math

import torch
import triton
import triton.language as tl

from kiln.backends.triton.libdevice import libdevice"""


def emit_kernels(kernels: Sequence[KernelOp]) -> str:
    """A Python module with the kernels and the helpers they call."""
    emitted = [emit_kernel(k) for k in kernels]
    helpers: list[str] = []
    for e in emitted:
        helpers += [h for h in e.helpers if h not in helpers]
    parts = [MODULE_HEADER, *(HELPERS[h] for h in helpers), *(e.source for e in emitted)]
    return "\n\n\n".join(parts) + "\n"


__all__ = [
    "HELPERS",
    "MODULE_HEADER",
    "EmitError",
    "EmittedKernel",
    "dtype_name",
    "emit_kernel",
    "emit_kernels",
    "literal",
]
