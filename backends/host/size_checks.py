"""The size equalities a program assumes of its arguments, checked at its entry.

With symbolic shapes, arguments traced with the same shape-environment symbol (two
tensors whose dim 0 is ``s77``, a SymInt argument ``s77``) share one size symbol from
``lower-aten`` on (see :mod:`kiln.dialects.aten.size_symbols`): kernels index both with
it and allocate by it. A call that breaks the equality (a ``make_fx`` graph or a
``kiln.compile``-d graph called outside dynamo's guards) would read out of bounds, so
the wrappers check it first and raise :class:`SizeMismatch` naming the arguments.

Backend-neutral: both wrappers are Python functions and print :func:`size_check_lines`
after unpacking their arguments; :data:`HELPERS` goes into their namespace (through
:data:`kiln.backends.host.scalars.HELPERS`). The reference interpreters (executor
``interpret``) run the same lines through :func:`size_checker`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, MemRefType, StringAttr
from xdsl.ir import Attribute, SSAValue

from kiln.backends.host.runtime import SIZE_CHECK_HELPERS
from kiln.backends.host.runtime import SizeMismatch as SizeMismatch
from kiln.dialects.aten.size_symbols import SIZE_SYMBOL_ATTR, SIZE_SYMBOLS_ATTR

HELPERS: dict[str, Callable[..., Any]] = SIZE_CHECK_HELPERS


def size_places(
    args: Sequence[SSAValue], arg_attrs: ArrayAttr[DictionaryAttr] | None, names: Sequence[str]
) -> dict[str, list[tuple[str, str]]]:
    """Per symbol, the ``(label, python)`` of every argument size that is it: a SymInt
    argument (``arg0_1``) or a tensor dim (``arg3_1.shape[0]``), in argument order."""
    attrs: list[Mapping[str, Attribute]] = (
        [a.data for a in arg_attrs.data] if arg_attrs is not None else []
    )
    places: dict[str, list[tuple[str, str]]] = {}
    for k, (arg, name) in enumerate(zip(args, names, strict=True)):
        own = attrs[k] if k < len(attrs) else {}
        label = own.get("kiln.name")
        shown = label.data if isinstance(label, StringAttr) else name
        if isinstance(arg.type, MemRefType):
            symbols = own.get(SIZE_SYMBOLS_ATTR)
            if not isinstance(symbols, ArrayAttr):
                continue
            shape = arg.type.get_shape()
            for dim, symbol in enumerate(symbols.data):
                if isinstance(symbol, StringAttr) and symbol.data and shape[dim] < 0:
                    at = f"{name}.shape[{dim}]"
                    places.setdefault(symbol.data, []).append((f"{shown}.shape[{dim}]", at))
        elif isinstance(symbol := own.get(SIZE_SYMBOL_ATTR), StringAttr):
            places.setdefault(symbol.data, []).append((shown, name))
    return places


def size_checker(
    args: Sequence[SSAValue], arg_attrs: ArrayAttr[DictionaryAttr] | None
) -> Callable[[Sequence[Any]], None] | None:
    """The checks of :func:`size_check_lines` as a function of the call's argument list,
    for executors that run no generated wrapper (the reference interpreters): it raises
    :class:`SizeMismatch` as the wrappers do. None when no symbol is shared."""
    names = [f"args[{k}]" for k in range(len(args))]
    shared = [(s, w) for s, w in size_places(args, arg_attrs, names).items() if len(w) > 1]
    if not shared:
        return None
    code = "\n".join(
        ["def check(args):"] + [f"    {line}" for line in size_check_lines(args, arg_attrs, names)]
    )
    namespace: dict[str, Any] = dict(HELPERS)
    exec(compile(code, "<kiln size checks>", "exec"), namespace)  # the wrappers' own lines
    return namespace["check"]


def size_check_lines(
    args: Sequence[SSAValue], arg_attrs: ArrayAttr[DictionaryAttr] | None, names: Sequence[str]
) -> list[str]:
    """Python lines (one per shared symbol) that raise :class:`SizeMismatch` unless the
    argument sizes of each symbol are equal; ``names``: the arguments' Python names."""
    lines: list[str] = []
    for symbol, where in size_places(args, arg_attrs, names).items():
        if len(where) < 2:
            continue
        first = where[0][1]
        differs = " or ".join(f"{at} != {first}" for _, at in where[1:])
        labels = tuple(label for label, _ in where)
        values = ", ".join(at for _, at in where)
        lines.append(f"if {differs}: _host_size_mismatch({symbol!r}, {labels!r}, ({values},))")
    return lines


__all__ = ["HELPERS", "SizeMismatch", "size_check_lines", "size_checker", "size_places"]
