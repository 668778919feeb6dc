"""The aten dialect: one op per ATen overload, with value semantics on builtin tensors.

Ops are generated from torch's schema strings (:mod:`kiln.dialects.aten.schemas`); see
:mod:`kiln.dialects.aten.ops` for the syntax. Look ops up with :func:`op_class`.
"""

from kiln.dialects.aten.dialect import Aten, ConstantOp, op_class, op_classes
from kiln.dialects.aten.ops import AtenOp, GenericOp

__all__ = ["Aten", "AtenOp", "ConstantOp", "GenericOp", "op_class", "op_classes"]
