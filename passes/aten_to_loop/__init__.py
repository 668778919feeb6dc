"""Lowering tables for ``lower-aten``, one module per op family.

Each family module exports ``LOWERINGS: dict[str, Lowering]`` keyed by the overload's
qualified name (``"add.Tensor"``; another namespace than aten is spelled out:
``"prims::iota"``). :func:`lowering_table` merges them into one dict
keyed by op class (generated aten ops) and one keyed by overload name (``aten.generic``
ops), so that finding an op's lowering is one dict lookup.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from xdsl.ir import Operation

from kiln.dialects.aten.ops import AtenOp, GenericOp
from kiln.passes.aten_to_loop.context import Lowering


@dataclass(frozen=True)
class LoweringTable:
    by_type: dict[type[Operation], Lowering]
    by_overload: dict[str, Lowering]
    """For ``aten.generic``: ``"aten::floor_divide.default"`` -> lowering."""

    def lookup(self, op: AtenOp) -> Lowering | None:
        if isinstance(op, GenericOp):
            return self.by_overload.get(op.overload.data)
        return self.by_type.get(type(op))

    def names(self) -> list[str]:
        """Every overload with a native lowering (``aten::add.Tensor``)."""
        names = [
            f"{t.SCHEMA.namespace}::{t.SCHEMA.qualified_name}"  # pyright: ignore[reportAttributeAccessIssue]
            for t in self.by_type
            if issubclass(t, AtenOp)
        ]
        return sorted([*names, *self.by_overload])


def family_tables() -> dict[str, dict[str, Lowering]]:
    """Each family's lowerings by qualified overload name."""
    from kiln.passes.aten_to_loop import (
        collectives,
        convolution,
        creation,
        indexing,
        matmul,
        pointwise,
        pointwise_backward,
        pooling,
        reductions,
        scatter,
        views,
    )
    from kiln.passes.aten_to_loop.dtype_support import guarded

    # Pointwise kernels are where ATen rejects dtypes its meta functions accept (abs of
    # bool, silu of int, bitwise_and of float): ask ATen first (dtype_support).
    pointwise_table = {**pointwise.LOWERINGS, **pointwise_backward.LOWERINGS}
    tables: dict[str, dict[str, Lowering]] = {
        "pointwise": {name: guarded(lowering) for name, lowering in pointwise_table.items()},
        "reductions": reductions.LOWERINGS,
        "pooling": pooling.LOWERINGS,
        "convolution": convolution.LOWERINGS,
        "matmul": matmul.LOWERINGS,
        "views": views.LOWERINGS,
        "indexing": indexing.LOWERINGS,
        "creation": creation.LOWERINGS,
        "scatter": scatter.LOWERINGS,
        "collectives": collectives.LOWERINGS,
    }
    return tables


@cache
def lowering_table() -> LoweringTable:
    from kiln.dialects.aten.dialect import op_class

    by_type: dict[type[Operation], Lowering] = {}
    by_overload: dict[str, Lowering] = {}
    for table in family_tables().values():
        for name, lowering in table.items():
            namespace, _, name = name.rpartition("::")
            qualified = name if "." in name else f"{name}.default"
            cls = op_class(f"{namespace}::{qualified}" if namespace else qualified)
            if cls is not None:
                by_type[cls] = lowering
            else:
                by_overload[f"{namespace or 'aten'}::{qualified}"] = lowering
    return LoweringTable(by_type, by_overload)


__all__ = ["Lowering", "LoweringTable", "family_tables", "lowering_table"]
