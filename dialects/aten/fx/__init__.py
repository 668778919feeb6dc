"""Importing ATen-level FX graphs into kiln IR (the ``aten`` dialect in a ``func.func``).

It lives with the aten dialect, below the passes, because ``decompose`` imports the
graphs it traces as well; the frontend (:mod:`kiln.frontends.fx`) re-exports it.

```python
class Model(nn.Module):                          # model.py
    def __init__(self):
        super().__init__()
        self.l = nn.Linear(8, 4)

    def forward(self, x):
        y = self.l(x).relu()
        return y.view(-1), None, y.shape[0] * 2

gm, inputs = capture_make_fx(Model(), torch.randn(3, 8), dynamic=True)
module = import_graph(gm)
```

gives (``Printer(print_debuginfo=True)`` adds ``loc("relu"("model.py":7:0))`` to each op):

```mlir
builtin.module {
  func.func @forward(%l_weight: tensor<4x8xf32> {kiln.name = "l_weight"},
                     %l_bias: tensor<4xf32> {kiln.name = "l_bias"},
                     %x: tensor<?x8xf32> {kiln.name = "x"}) -> (tensor<?xf32>, index)
      attributes {kiln.outputs = "(0, None, 1)"} {
    %t = aten.t.default(%l_weight) : (tensor<4x8xf32>) -> tensor<8x4xf32>
    %addmm = aten.addmm.default(%l_bias, %x, %t) : (tensor<4xf32>, tensor<?x8xf32>, tensor<8x4xf32>) -> tensor<?x4xf32>
    %relu = aten.relu.default(%addmm) : (tensor<?x4xf32>) -> tensor<?x4xf32>
    %view = aten.view.default(%relu, size = [-1]) : (tensor<?x4xf32>) -> tensor<?xf32>
    %sym_size_int = aten.sym_size.int(%x, dim = 0) : (tensor<?x8xf32>) -> index
    %0 = arith.constant 2 : index
    %mul = arith.muli %sym_size_int, %0 : index
    func.return %view, %mul : tensor<?xf32>, index
  }
}
```

One op per FX node: ATen overloads become their generated op (``aten.generic`` when kiln
has none), ``getitem`` picks a result, SymInt arithmetic becomes ``arith`` on
``index`` (:mod:`.symbolic`), ``get_attr`` tensors become arguments or
``aten.constant``, and ``output`` becomes ``func.return`` plus the ``kiln.outputs``
structure (:mod:`.outputs`). A Python or symbolic number in a tensor argument
(``add.Tensor(x, 1)``) selects the overload's ``Scalar`` twin (``add.Scalar``). Results
an ``output_mask`` switched off have type ``none``. FX names of arguments are the
``kiln.name`` argument attributes; value names in the text are the FX names with
``_<n>`` written ``<n>`` (xDSL would renumber them otherwise).
"""

from kiln.dialects.aten.fx.errors import FxImportError
from kiln.dialects.aten.fx.importer import (
    GET_ATTR_ATTR,
    NAME_ATTR,
    ParamMode,
    import_graph,
    lifted_constants,
    returned_values,
)
from kiln.dialects.aten.fx.outputs import OUTPUTS_ATTR, rebuild_outputs, rebuild_structure

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
