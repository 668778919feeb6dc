"""Attributes that passes write and backends read: declared once, with verifiers.

The lowerings (``lower-to-cpp``, ``lower-to-triton``) leave facts on the ops they make
that the backends need at build time. Both sides name them through the declarations
below, never through each other's modules (the layering: passes and backends import
dialects, not one another). Each declaration checks the attribute's shape where it is
read and where it is written, so a malformed one is an error that names the op, not a
Python traceback inside a backend.

* :data:`CPP_FALLBACK` (``kiln.cpp_fallback``, a string on ``kernel.kernel``): the
  C++ lowering could not translate this kernel, and why; the C++ wrapper runs it in
  the kernel interpreter. A kernel that already carries it is left as it is by
  ``lower-to-cpp`` (the driver marks kernels whose C++ the emitter rejects).
* :data:`READ_AFTER_WRITE` (``read_after_write``, ``[[i, j], ...]`` on ``cpp.func``):
  the function reads input ``i`` after writing output ``j``; when a launch passes one
  buffer as both, the wrapper hands the kernel a copy of the old contents.
* :data:`IMPLEMENTS` (``implements``, a symbol on ``triton.kernel``): the
  ``kernel.kernel`` this Triton kernel implements (the program launches the latter).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects.builtin import (
    ArrayAttr,
    IntAttr,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    SymbolRefAttr,
)
from xdsl.ir import Attribute, Operation
from xdsl.utils.exceptions import VerifyException


def _where(op: Operation) -> str:
    name = op.attributes.get("sym_name") or op.properties.get("sym_name")
    return f"{op.name} @{name.data}" if isinstance(name, StringAttr) else op.name


def _placed(op: Operation, name: str, op_name: str) -> Attribute | None:
    """``op``'s attribute ``name`` (None when absent), which only an ``op_name`` may carry."""
    attr = op.attributes.get(name)
    if attr is not None and op.name != op_name:
        raise VerifyException(f"{_where(op)}: {name} belongs on a {op_name}")
    return attr


@dataclass(frozen=True)
class FallbackReason:
    """``kiln.cpp_fallback = "why"`` on a ``kernel.kernel``."""

    name: str = "kiln.cpp_fallback"
    op_name: str = "kernel.kernel"

    def verify(self, op: Operation) -> None:
        attr = _placed(op, self.name, self.op_name)
        if attr is None:
            return
        if not isinstance(attr, StringAttr):
            raise VerifyException(f"{_where(op)}: {self.name} must be a string, got {attr}")

    def get(self, op: Operation) -> str | None:
        self.verify(op)
        attr = op.attributes.get(self.name)
        return attr.data if isinstance(attr, StringAttr) else None

    def set(self, op: Operation, reason: str) -> None:
        op.attributes[self.name] = StringAttr(reason)
        self.verify(op)


@dataclass(frozen=True)
class ReadAfterWrite:
    """``read_after_write = [[i, j], ...]`` on a ``cpp.func`` (input ``i``, output ``j``)."""

    name: str = "read_after_write"
    op_name: str = "cpp.func"

    def verify(self, op: Operation) -> None:
        attr = _placed(op, self.name, self.op_name)
        if attr is None:
            return
        if not isinstance(attr, ArrayAttr) or not all(
            _pair(pair) is not None
            for pair in attr.data  # pyright: ignore[reportUnknownVariableType]
        ):
            raise VerifyException(
                f"{_where(op)}: {self.name} must be a list of [input, output] index pairs, "
                f"got {attr}"
            )

    def get(self, op: Operation) -> list[tuple[int, int]]:
        self.verify(op)
        attr = op.attributes.get(self.name)
        if not isinstance(attr, ArrayAttr):
            return []
        return [p for pair in attr.data if (p := _pair(pair)) is not None]  # pyright: ignore[reportUnknownVariableType]

    def set(self, op: Operation, pairs: list[tuple[int, int]]) -> None:
        op.attributes[self.name] = ArrayAttr(
            [ArrayAttr([IntAttr(i), IntAttr(j)]) for i, j in pairs]
        )
        self.verify(op)


def _pair(attr: Attribute) -> tuple[int, int] | None:
    if not isinstance(attr, ArrayAttr) or len(attr.data) != 2:  # pyright: ignore[reportUnknownArgumentType]
        return None
    values: list[int] = []
    for x in attr.data:  # pyright: ignore[reportUnknownVariableType]
        if isinstance(x, IntegerAttr):
            values.append(int(x.value.data))  # pyright: ignore[reportUnknownArgumentType]
        elif isinstance(x, IntAttr):
            values.append(x.data)
        else:
            return None
    if min(values) < 0:
        return None
    return values[0], values[1]


@dataclass(frozen=True)
class Implements:
    """``implements = @kernel0`` on a ``triton.kernel``."""

    name: str = "implements"
    op_name: str = "triton.kernel"

    def verify(self, op: Operation) -> None:
        attr = _placed(op, self.name, self.op_name)
        if attr is None:
            return
        if not isinstance(attr, SymbolRefAttr) or attr.nested_references.data:
            raise VerifyException(
                f"{_where(op)}: {self.name} must name a kernel.kernel (@name), got {attr}"
            )

    def get(self, op: Operation) -> str | None:
        self.verify(op)
        attr = op.attributes.get(self.name)
        return attr.string_value() if isinstance(attr, SymbolRefAttr) else None

    def set(self, op: Operation, kernel: str) -> None:
        op.attributes[self.name] = SymbolRefAttr(kernel)
        self.verify(op)

    def implementations(self, module: ModuleOp) -> dict[str, Operation]:
        """``kernel.kernel`` name -> the top-level op (a ``triton.kernel``) implementing it."""
        found: dict[str, Operation] = {}
        for op in module.ops:
            if op.name == self.op_name and (kernel := self.get(op)) is not None:
                found[kernel] = op
        return found


CPP_FALLBACK = FallbackReason()
READ_AFTER_WRITE = ReadAfterWrite()
IMPLEMENTS = Implements()

CONTRACT_ATTRS = (CPP_FALLBACK, READ_AFTER_WRITE, IMPLEMENTS)


def verify_contract_attrs(module: ModuleOp) -> None:
    """Check every declared attribute on the module's top-level ops."""
    for op in module.ops:
        for contract in CONTRACT_ATTRS:
            contract.verify(op)


__all__ = [
    "CONTRACT_ATTRS",
    "CPP_FALLBACK",
    "IMPLEMENTS",
    "READ_AFTER_WRITE",
    "FallbackReason",
    "Implements",
    "ReadAfterWrite",
    "verify_contract_attrs",
]
