"""How the Python structure of a graph's outputs is recorded on the imported function.

``func.return`` returns a flat list of values; the function attribute ``kiln.outputs``
is a Python expression of the graph's output with each returned value replaced by its
index in ``func.return``, and ``None`` where the graph returns None:

```mlir
func.func @forward(...) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xi64>)
    attributes {kiln.outputs = "(0, None, torch.return_types.max(1, 2))"} { ... }
```

Containers are tuples, lists, dicts (str or int keys) and named tuples / structseqs,
written as a call of their qualified type name; ``permute(k, (1, 0))`` is returned value
``k`` seen through ``Tensor.permute`` (how a graph returns a tensor with the strides
eager gives it, see :mod:`kiln.passes.output_layout`); ``alias("aten::view.default", k,
"{'size': [-1]}")`` is the ATen view op called on returned value ``k`` with these
arguments (a Python literal in a string): an output that is a view of another output is
returned as that view, sharing its storage as in eager, not as a copy.

``kiln.output_strides`` (written only when some output is not contiguous) records the
strides eager gives each returned value (``[]``: not a tensor, or unknown)::

    func.func @forward(...) attributes {kiln.output_strides = [[1, 4], []], ...} :func:`rebuild_outputs` turns the
returned values back into what the GraphModule returns; it reads the expression with
``ast`` (never ``eval``) and only resolves type names in modules already imported.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from xdsl.dialects.builtin import StringAttr
from xdsl.dialects.func import FuncOp

# The attributes themselves live with the aten dialect (passes rewrite them too).
from kiln.dialects.aten.function_attrs import OUTPUT_STRIDES_ATTR as OUTPUT_STRIDES_ATTR
from kiln.dialects.aten.function_attrs import OUTPUTS_ATTR as OUTPUTS_ATTR
from kiln.dialects.aten.function_attrs import contiguous_strides as contiguous_strides
from kiln.dialects.aten.function_attrs import output_strides as output_strides
from kiln.dialects.aten.function_attrs import output_strides_attr as output_strides_attr
from kiln.output_structure import OutputStructureError as OutputStructureError
from kiln.output_structure import rebuild_structure as rebuild_structure
from kiln.output_structure import structure_builder as structure_builder

OutputStructure = Any
"""A nest of containers whose leaves are ints (indices into the returned values) or None."""


def _type_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def encode_structure(structure: OutputStructure) -> str:
    if structure is None or (isinstance(structure, int) and not isinstance(structure, bool)):
        return repr(structure)
    if type(structure) is tuple:
        items = [encode_structure(s) for s in structure]  # pyright: ignore[reportUnknownVariableType]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    if isinstance(structure, tuple):
        # A named tuple or a structseq such as torch.return_types.max.
        items = [encode_structure(s) for s in structure]  # pyright: ignore[reportUnknownVariableType]
        return f"{_type_name(type(structure))}(" + ", ".join(items) + ")"  # pyright: ignore[reportUnknownArgumentType]
    if type(structure) is list:
        return "[" + ", ".join(encode_structure(s) for s in structure) + "]"  # pyright: ignore[reportUnknownVariableType]
    if type(structure) is dict:
        entries: list[str] = []
        for key, value in structure.items():  # pyright: ignore[reportUnknownVariableType]
            if not isinstance(key, str | int):
                raise OutputStructureError(f"output dict key {key!r} is not a str or int")
            entries.append(f"{key!r}: {encode_structure(value)}")
        return "{" + ", ".join(entries) + "}"
    raise OutputStructureError(
        f"cannot record an output container of type {_type_name(type(structure))}"  # pyright: ignore[reportUnknownArgumentType]
    )


def rebuild_outputs(func: FuncOp, values: Sequence[Any]) -> Any:
    """What the FX graph returns, from the values the imported function returned."""
    attr = func.attributes.get(OUTPUTS_ATTR)
    if not isinstance(attr, StringAttr):
        return tuple(values)
    return rebuild_structure(attr.data, values)
