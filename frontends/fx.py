"""The frontend's name for the FX importer: ``from kiln.frontends.fx import import_graph``.

The translation of an ATen-level FX graph into aten IR lives in
:mod:`kiln.dialects.aten.fx`, below the passes, because ``decompose`` imports the graphs
it traces too (docs/architecture.md, "Layers"); this module re-exports its public API so
that the frontend (capture, Dynamo glue) and its users keep one entry point.
"""

from kiln.dialects.aten.fx import (
    GET_ATTR_ATTR,
    NAME_ATTR,
    OUTPUTS_ATTR,
    FxImportError,
    ParamMode,
    import_graph,
    lifted_constants,
    rebuild_outputs,
    rebuild_structure,
    returned_values,
)

__all__ = [
    "GET_ATTR_ATTR",
    "NAME_ATTR",
    "OUTPUTS_ATTR",
    "FxImportError",
    "ParamMode",
    "import_graph",
    "lifted_constants",
    "rebuild_outputs",
    "rebuild_structure",
    "returned_values",
]
