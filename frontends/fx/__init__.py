"""Importing ATen-level FX graphs into kiln IR (the ``aten`` dialect in a ``func.func``).

```python
gm, inputs = capture_make_fx(model, x)          # kiln.frontends.capture
module = import_graph(gm)
```

gives (``Printer(print_debuginfo=True)`` adds each op's ``loc("node"("file.py":12:0))``):

```mlir
builtin.module {
  func.func @forward(%l_weight: tensor<4x8xf32> {kiln.name = "l_weight"},
                     %l_bias: tensor<4xf32> {kiln.name = "l_bias"},
                     %x: tensor<?x8xf32> {kiln.name = "x"}) -> (tensor<?x4xf32>, index)
      attributes {kiln.outputs = "(0, None, 1)"} {
    %t = aten.t.default(%l_weight) : (tensor<4x8xf32>) -> tensor<8x4xf32>
    %addmm = aten.addmm.default(%l_bias, %x, %t) : (...) -> tensor<?x4xf32>
    %relu = aten.relu.default(%addmm) : (tensor<?x4xf32>) -> tensor<?x4xf32>
    %sym_size_int = aten.sym_size.int(%x, dim = 0) : (tensor<?x8xf32>) -> index
    func.return %relu, %sym_size_int : tensor<?x4xf32>, index
  }
}
```

One op per FX node: ATen overloads become their generated op (``aten.generic`` when kiln
has none), ``getitem`` picks a result, SymInt arithmetic becomes ``arith`` on
``index`` (:mod:`.symbolic`), ``get_attr`` tensors become arguments or
``aten.constant``, and ``output`` becomes ``func.return`` plus the ``kiln.outputs``
structure (:mod:`.outputs`). FX names of arguments are the ``kiln.name`` argument
attributes; value names in the text are the FX names with ``_<n>`` written ``<n>``.
"""

from kiln.frontends.fx.errors import FxImportError
from kiln.frontends.fx.importer import (
    GET_ATTR_ATTR,
    NAME_ATTR,
    ParamMode,
    import_graph,
    returned_values,
)
from kiln.frontends.fx.outputs import OUTPUTS_ATTR, rebuild_outputs, rebuild_structure

__all__ = [
    "GET_ATTR_ATTR",
    "NAME_ATTR",
    "OUTPUTS_ATTR",
    "FxImportError",
    "ParamMode",
    "import_graph",
    "rebuild_outputs",
    "rebuild_structure",
    "returned_values",
]
