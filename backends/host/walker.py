"""One walk over ``kernel.program`` that writes the host wrapper, for every backend.

A backend's wrapper is straight-line Python (like Inductor's): argument unpacking,
allocations, kernel launches, ATen calls, frees, views where a buffer is reused, and
the results. All of it is the same on every device except how a kernel is launched,
how arguments are checked and allocations and views are made, and what the function
does before its first op. :class:`ProgramWalker` writes the common part once and
calls hooks for the rest, the way Inductor shares one wrapper codegen across devices:

====================  =========================================================
``prologue``          after the arguments are unpacked (checks, device, stream)
``prepare_argument``  before an argument's first use (layout copy, device move)
``allocate``          the expression that allocates a fresh contiguous buffer
``view``              the expression that sees a reused buffer with a new shape
``launch``            the lines that launch one ``kernel.launch``
``extern_fallback``   an extern body that cannot be written inline (default: the
                      aten interpreter)
``after_extern``      after an extern's results exist (device moves)
``prepacked_site``    the call of a ``kiln.prepack`` convolution (default: none,
                      a plain convolution)
``dropped``           extra names that die with a buffer (cached pointers)
====================  =========================================================

Memory follows what ``buffer-reuse`` planned: arguments are released after their
last use (:func:`~kiln.dialects.kernel.liveness.argument_releases`; the argument list
is taken over, AOTAutograd's boxed convention), ``kernel.free`` deletes the name,
``kernel.reuse`` deletes the old name, and extern temporaries are deleted, so that no
name outlives its buffer's planned free. An extern that updates a buffer the wrapper
allocated, at that buffer's last use (``index_put`` of the embedding gradient), runs in
place (:data:`~kiln.backends.host.externs.IN_PLACE`).
"""

from __future__ import annotations

import keyword
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import MemRefType, ModuleOp, StringAttr
from xdsl.ir import BlockArgument, Operation, SSAValue

from kiln.backends.host.externs import ExternCall, inline_extern
from kiln.backends.host.scalars import HELPERS, constant_python, scalar_python
from kiln.backends.host.size_checks import size_check_lines
from kiln.dialects.aten import AtenOp
from kiln.dialects.aten.arg_layout import arg_strides
from kiln.dialects.kernel.liveness import argument_first_uses, argument_releases
from kiln.dialects.kernel.program_ops import (
    AllocOp,
    ExternOp,
    FreeOp,
    LaunchOp,
    ProgramOp,
    ReturnOp,
    ReuseOp,
)


class WrapperError(ValueError):
    """A program op a wrapper cannot run (the message names the op)."""


_IDENTIFIER = re.compile(r"[^A-Za-z0-9_]")

RESERVED = frozenset(
    {"args", "torch", "math", "max", "min", "abs", "int", "float", "isinstance", "len"}
)
"""Names the generated code itself uses; a value is never called that."""


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """Row-major strides of a static shape."""
    strides: list[int] = []
    stride = 1
    for size in reversed(shape):
        strides.append(stride)
        stride *= size
    return tuple(reversed(strides))


def _product(a: str, b: str) -> str:
    if a.isdigit() and b.isdigit():
        return str(int(a) * int(b))
    if a == "1":
        return b
    if b == "1":
        return a
    return f"{a} * {b}"


def contiguous_stride_texts(shape: Sequence[str]) -> list[str]:
    """Row-major strides of a shape given as source text (ints or size variables)."""
    strides: list[str] = []
    stride = "1"
    for size in reversed(shape):
        strides.append(stride)
        stride = _product(stride, size)
    return list(reversed(strides))


def py_tuple(items: Sequence[str]) -> str:
    return f"({', '.join(items)}{',' if len(items) == 1 else ''})"


UNPACK_CHUNK = 16
"""Arguments unpacked by one statement (see :meth:`ProgramWalker.write`)."""


@dataclass
class ProgramWalker:
    """Writes ``def <function>(args):`` for one program (see the module docstring)."""

    program: ProgramOp
    lines: list[str] = field(default_factory=list[str])
    names: dict[SSAValue, str] = field(default_factory=dict[SSAValue, str])
    used: set[str] = field(default_factory=set[str])
    namespace: dict[str, Any] = field(default_factory=dict[str, Any])
    """Module-level objects the wrapper uses (``_``-prefixed names, so they never
    collide with a value's name)."""
    profile: dict[str, list[float]] | None = None
    """When set, the wrapper adds each launch's and extern call's count and seconds here."""
    counter: int = 0
    positions: dict[Operation, int] | None = None
    """Each program op's index, computed when first needed."""
    temporaries: list[str] = field(default_factory=list[str])
    """The names extern bodies' temporaries take, shared by all externs: each deletes
    its own at its end, and the fewer locals the smaller the wrapper's frame (see the
    C++ wrapper's ``pointer``)."""

    reserved: ClassVar[frozenset[str]] = RESERVED
    """A backend adds the names its prologue and namespace define."""
    function_name: ClassVar[str | None] = None
    """The generated function's name (default: the program's)."""
    backend: ClassVar[str] = "the"
    """For error messages: 'the C++ wrapper cannot run ...'."""

    # -- names ------------------------------------------------------------------------

    def fresh(self, hint: str | None, default: str) -> str:
        """A new local name: the hint made an identifier, else ``<default><n>``."""
        base = _IDENTIFIER.sub("_", hint) if hint else ""
        if base and (base[0].isdigit() or keyword.iskeyword(base) or base.startswith("_")):
            base = f"v_{base}"
        if not base:
            while True:
                name = f"{default}{self.counter}"
                self.counter += 1
                if name not in self.used and name not in self.reserved:
                    break
        else:
            name, k = base, 1
            while name in self.used or name in self.reserved:
                name, k = f"{base}_{k}", k + 1
        self.used.add(name)
        return name

    def name(self, value: SSAValue, default: str = "t") -> str:
        """The value's name (a literal for a scalar constant), made on first use."""
        found = self.names.get(value)
        if found is None:
            owner = value.owner
            if isinstance(owner, arith.ConstantOp) and (literal := constant_python(owner)):
                found = literal
            else:
                found = self.fresh(value.name_hint, default)
            self.names[value] = found
        return found

    def constant(self, value: object, hint: str) -> str:
        """A module-level name for an object the wrapper uses."""
        name = "_" + self.fresh(hint, "c")
        while name in self.namespace:  # taken by an inlined extern's binding (``_mm``)
            name = "_" + self.fresh(hint, "c")
        self.namespace[name] = value
        return name

    def line(self, text: str) -> None:
        self.lines.append("    " + text)

    def shape(self, ty: MemRefType, dynamic: Sequence[SSAValue]) -> list[str]:
        """A buffer type's sizes as source text (its dynamic sizes from ``dynamic``)."""
        sizes = iter(self.name(v) for v in dynamic)
        return [str(d) if d >= 0 else next(sizes) for d in ty.get_shape()]

    # -- the program ------------------------------------------------------------------

    def write(self) -> str:
        block = self.program.body.block
        self.namespace.update(HELPERS)
        params = [self.argument_name(k, arg) for k, arg in enumerate(block.args)]
        self.lines = [f"def {self.function_name or self.program.sym_name.data}(args):"]
        # Unpacked a slice at a time: one unpacking of n values needs n slots of the
        # frame's stack (283 for ShuffleNet-v2's parameters), the frame's size.
        for start in range(0, len(params), UNPACK_CHUNK):
            chunk = params[start : start + UNPACK_CHUNK]
            whole = len(chunk) == len(params)
            source = "args" if whole else f"args[{start}:{start + len(chunk)}]"
            self.line(f"{', '.join(chunk)}{',' if len(chunk) == 1 else ''} = {source}")
        if params:
            # Boxed calling convention (as AOTAutograd's and Inductor's): the caller
            # hands over the list, so an argument is freed once its last use is done.
            self.line("args.clear()")
        # Sizes traced as one symbol must be equal at the call (size_checks).
        for check in size_check_lines(block.args, self.program.arg_attrs, params):
            self.line(check)
        self.prologue()
        released = argument_releases(self.program)
        # Arguments are converted at their first use, not in the prologue: a backward
        # graph's strided saved activations would otherwise all be copied at once.
        prepared = argument_first_uses(self.program)
        self.release(released.get(None, []))
        for op in block.ops:
            for arg in prepared.get(op, ()):
                self.prepare_argument(arg)
            self.op(op)
            self.release(released.get(op, []))
        return "\n".join(self.lines) + "\n"

    def argument_name(self, position: int, arg: SSAValue) -> str:
        hint = arg.name_hint
        attrs = self.program.arg_attrs
        if not hint and attrs is not None:
            named = attrs.data[position].data.get("kiln.name")
            hint = named.data if isinstance(named, StringAttr) else None
        self.names[arg] = self.fresh(hint, "arg")
        return self.names[arg]

    def recorded_strides(self, arg: SSAValue) -> tuple[int, ...] | None:
        """The strides ``lower-aten`` reads program argument ``arg`` through (None:
        contiguous); see :mod:`kiln.dialects.aten.arg_layout`."""
        attrs = self.program.arg_attrs
        if not isinstance(arg, BlockArgument) or attrs is None or arg.index >= len(attrs.data):
            return None
        return arg_strides(attrs.data[arg.index])

    def release(self, values: Sequence[SSAValue]) -> None:
        names: list[str] = []
        for value in values:
            names += [self.name(value), *self.dropped(value)]
        if names:
            self.line(f"del {', '.join(names)}")

    def op(self, op: Operation) -> None:
        if isinstance(op, AllocOp):
            ty = op.result.type
            assert isinstance(ty, MemRefType)
            shape = self.shape(ty, op.dynamic_sizes)
            self.line(f"{self.name(op.result, 'buf')} = {self.allocate(ty, shape)}")
        elif isinstance(op, LaunchOp):
            self.launch(op)
        elif isinstance(op, ExternOp):
            self.extern(op)
        elif isinstance(op, FreeOp):
            self.release([op.buffer])
        elif isinstance(op, ReuseOp):
            self.reuse(op)
        elif isinstance(op, ReturnOp):
            values = [self.name(v) for v in op.values]
            # In slices too, for the frame's stack (a training forward returns hundreds).
            chunks = [
                py_tuple(values[k : k + UNPACK_CHUNK]) for k in range(0, len(values), UNPACK_CHUNK)
            ]
            self.line(f"return {' + '.join(chunks) or '()'}")
        else:
            self.scalar(op)

    def reuse(self, op: ReuseOp) -> None:
        ty = op.result.type
        assert isinstance(ty, MemRefType)
        source = self.name(op.source)
        shape = [str(d) if d >= 0 else f"{source}.shape[{k}]" for k, d in enumerate(ty.get_shape())]
        name = self.name(op.result, "buf")
        self.line(f"{name} = {self.view(source, ty, shape)}  # reuses {source}'s memory")
        # The old name would keep the memory alive past the new buffer's free.
        self.line(f"del {source}")
        self.moved(op.source, op.result)

    def scalar(self, op: Operation) -> None:
        """Host arithmetic on sizes and scalars (see :mod:`kiln.backends.host.scalars`)."""
        if isinstance(op, arith.ConstantOp) and constant_python(op) is not None:
            return  # a literal where used
        if len(op.results) != 1:
            raise WrapperError(f"{self.backend} wrapper cannot run {op.name} in a kernel.program")
        args = [self.name(v) for v in op.operands]
        if isinstance(op, memref.DimOp):
            text = f"{args[0]}.shape[{args[1]}]"
        else:
            text = scalar_python(op, args)
        if text is None:
            raise WrapperError(f"{self.backend} wrapper cannot run {op.name} in a kernel.program")
        self.line(f"{self.name(op.results[0], 's')} = {text}")

    def extern(self, op: ExternOp) -> None:
        outputs = [self.name(r, "buf") for r in op.outputs]
        inputs = [self.name(v) for v in (*op.inputs, *op.syms)]
        earlier = iter(list(self.temporaries))

        def temporary() -> str:
            name = next(earlier, None)
            if name is None:
                name = self.fresh(None, "tmp")
                self.temporaries.append(name)
            return name

        lines = inline_extern(
            op,
            inputs,
            outputs,
            self.namespace,
            temporary,
            donated=[self.donated(v, op) for v in op.inputs],
            prepacked=self.prepacked_site,
        )
        if lines is None:
            self.extern_fallback(op, inputs, outputs)
        else:
            label = ", ".join(o.overload_name for o in op.body.block.ops if isinstance(o, AtenOp))
            self.line(f"# kernel.extern: {label or 'no ATen call'}")
            self.timed(f"extern {label or 'extern'}", lines)
        self.after_extern(op)

    def donated(self, value: SSAValue, op: Operation) -> bool:
        """Whether ``op`` may update buffer ``value`` in place: memory the wrapper itself
        allocated (an extern's result may be a tensor someone else holds: a constant),
        which nothing uses after ``op``."""
        if self.positions is None:
            self.positions = {o: k for k, o in enumerate(self.program.body.block.ops)}
        root = value
        while isinstance(root.owner, ReuseOp):
            root = root.owner.source
        if not isinstance(root.owner, AllocOp):
            return False
        here = self.positions[op]
        # Used later only by its kernel.free (a return, a read or a reuse keeps it).
        return all(
            isinstance(use.operation, FreeOp)
            for use in value.uses
            if self.positions.get(use.operation, here + 1) > here
        )

    def timed(self, label: str, lines: list[str]) -> None:
        """Emit ``lines``; with profiling on, add their wall time to ``label``'s entry."""
        if self.profile is None:
            for text in lines:
                self.line(text)
            return
        self.namespace["_clock"] = time.perf_counter
        self.namespace["_profile"] = self.profile
        self.line("_start = _clock()")
        for text in lines:
            self.line(text)
        self.line(f"_entry = _profile.setdefault({label!r}, [0, 0.0])")
        self.line("_entry[0] += 1; _entry[1] += _clock() - _start")

    # -- hooks ------------------------------------------------------------------------

    def prologue(self) -> None:
        """Lines after the arguments are unpacked."""

    def prepare_argument(self, arg: SSAValue) -> None:
        """Lines before the first op that uses buffer argument ``arg`` (none by default)."""

    def allocate(self, ty: MemRefType, shape: list[str]) -> str:
        raise NotImplementedError

    def view(self, source: str, ty: MemRefType, shape: list[str]) -> str:
        raise NotImplementedError

    def launch(self, op: LaunchOp) -> None:
        raise NotImplementedError

    def extern_fallback(self, op: ExternOp, inputs: list[str], outputs: list[str]) -> None:
        """A body :func:`~kiln.backends.host.externs.inline_extern` cannot write (it holds
        more than ATen calls): one call of a compiled :class:`ExternCall`, which runs the
        body in the aten interpreter."""
        module = self.program.parent_op()
        assert isinstance(module, ModuleOp)
        call = ExternCall(op, module)
        handle = self.constant(call, "extern")
        text = f"{handle}({', '.join(inputs)})  # {call.name}"
        if outputs:
            text = f"{', '.join(outputs)}{',' if len(outputs) == 1 else ''} = {text}"
        self.timed(f"extern {call.name}", [text])

    def after_extern(self, op: ExternOp) -> None:
        """Lines after an extern's results exist."""

    def prepacked_site(self, op: AtenOp) -> Callable[..., Any] | None:
        """The call site of a ``kiln.prepack`` convolution (``site(input, weight, bias)``);
        None (the default) runs it as a plain convolution."""
        return None

    def dropped(self, value: SSAValue) -> list[str]:
        """Other names to delete with ``value`` (none by default)."""
        return []

    def moved(self, source: SSAValue, result: SSAValue) -> None:
        """``result`` reuses ``source``'s memory (``source`` is gone)."""


__all__ = [
    "RESERVED",
    "ProgramWalker",
    "WrapperError",
    "contiguous_stride_texts",
    "contiguous_strides",
    "py_tuple",
]
