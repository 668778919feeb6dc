"""Argument attributes that name the shape-environment symbols of a function's sizes.

The FX importer writes them on ``func.func`` arguments; ``lower-aten`` reads them, so that
a SymInt argument and the tensor dims that are the same symbol (``arg0_1 = s77`` and
``x: f32[s77, s27]``) get one size symbol, and views over them compare structurally
(``x.view(s77 * s27)`` is a view, not a reshape through ``//`` and ``%``)::

    func.func @forward(%arg0 : index {kiln.size_symbol = "s77"},
                       %x : tensor<?x?xf32> {kiln.size_symbols = ["s77", "s27"]})
        attributes {kiln.size_hints = {s77 = 32 : i64, s27 = 8 : i64}}

The function's ``kiln.size_hints`` are the sizes the graph was traced at (what Inductor
calls size hints): heuristics may read them to choose between programs that are both
right for every size (``decompose`` keeps long attention as one call), never to
specialise.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, IntegerAttr, StringAttr
from xdsl.ir import Operation

SIZE_SYMBOL_ATTR = "kiln.size_symbol"
"""On a SymInt argument: its symbol (``"s77"``)."""
SIZE_SYMBOLS_ATTR = "kiln.size_symbols"
"""On a tensor argument: per dim, the symbol its size is (``""`` where it is not a plain
symbol)."""

SIZE_HINTS_ATTR = "kiln.size_hints"
"""On a ``func.func``: per size symbol of its arguments, the size it had when traced."""

TRACED_SIZES_ATTR = "kiln.traced_sizes"
"""On an aten op: per result, per dim, the size the tracer's shape environment gave it, in
the index-expression syntax over the shape-environment symbols (``"4*s77"``; ``""`` where
the dim is static or the expression has no such form). ``lower-aten`` gives extern results
and views these sizes, so that they compare structurally with the graph's own (an
extern's result is not a fresh symbol, ``view(-1, 4, ...)`` of ``[s77, ...]`` is not
``4*(s77 // 4)``)."""


def traced_size_texts(op: Operation, index: int) -> list[str | None] | None:
    """Result ``index``'s :data:`TRACED_SIZES_ATTR` entry: per dim the tracer's
    expression, None where it recorded none (a static dim); None without the attribute."""
    attr = op.attributes.get(TRACED_SIZES_ATTR)
    if not isinstance(attr, ArrayAttr) or index >= len(attr.data):
        return None
    dims = attr.data[index]
    if not isinstance(dims, ArrayAttr):
        return None
    return [t.data if isinstance(t, StringAttr) and t.data else None for t in dims.data]


def size_hints(function: Operation) -> dict[str, int]:
    """A function's :data:`SIZE_HINTS_ATTR`: symbol -> traced size (empty without it)."""
    attr = function.attributes.get(SIZE_HINTS_ATTR)
    if not isinstance(attr, DictionaryAttr):
        return {}
    return {k: v.value.data for k, v in attr.data.items() if isinstance(v, IntegerAttr)}


__all__ = [
    "SIZE_HINTS_ATTR",
    "SIZE_SYMBOLS_ATTR",
    "SIZE_SYMBOL_ATTR",
    "TRACED_SIZES_ATTR",
    "size_hints",
    "traced_size_texts",
]
