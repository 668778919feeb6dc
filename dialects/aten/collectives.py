"""torch's functional collectives (``_c10d_functional``) as ops of the aten dialect.

Traced distributed programs (tensor parallelism through DTensor, functional collectives
called directly, compiled FSDP/DDP) hold communication as ``_c10d_functional`` ops whose
results are not ready until a ``wait_tensor`` of them:

```mlir
%r = aten._c10d_functional.all_reduce.default(%x, reduce_op = "sum", group_name = "0") : (tensor<4x8xf32>) -> tensor<4x8xf32>
%w = aten._c10d_functional.wait_tensor.default(%r) : (tensor<4x8xf32>) -> tensor<4x8xf32>
```

The ops are generated from the schemas below like the aten ones (``schemas.py``), with
the group and the reduction as string properties. They carry the ``Collective`` /
``CollectiveWait`` traits and are never ``Pure`` (every rank must issue the same
collectives in the same order); ``lower-aten`` runs them as ATen calls, the wait keeping
the collective's input alive (``passes/aten_to_loop/collectives.py``), and
``reorder-collectives`` overlaps them with independent compute. Other overloads of the
namespace (the ``_coalesced`` ones) import as ``aten.generic`` with the same traits.

torch 2.13 types ``group_name`` ``Any`` (a name, or a ProcessGroup under
``compile_on_one_rank``), earlier versions ``str``: kiln stores names, so the schemas
here say ``str`` and are the same IR on every supported torch.
"""

from __future__ import annotations

from functools import cache

from kiln.dialects.aten.ops import AtenOp, make_op_class

COLLECTIVE_SCHEMAS: tuple[str, ...] = (
    "_c10d_functional::all_reduce(Tensor input, str reduce_op, str group_name) -> Tensor",
    "_c10d_functional::all_reduce_(Tensor(a!) input, str reduce_op, str group_name) -> Tensor(a!)",
    "_c10d_functional::all_gather_into_tensor(Tensor input, int group_size, str group_name) -> Tensor",
    "_c10d_functional::reduce_scatter_tensor(Tensor input, str reduce_op, int group_size, str group_name) -> Tensor",
    "_c10d_functional::all_to_all_single(Tensor input, SymInt[] output_split_sizes, SymInt[] input_split_sizes, str group_name) -> Tensor",
    "_c10d_functional::broadcast(Tensor input, int src, str group_name) -> Tensor",
    "_c10d_functional::wait_tensor(Tensor tensor) -> Tensor",
)
"""The collectives kiln generates ops for (argument names as torch's)."""


@cache
def collective_op_classes() -> dict[str, type[AtenOp]]:
    """Generated collective ops by overload name (``_c10d_functional::all_reduce.default``)."""
    classes: dict[str, type[AtenOp]] = {}
    for text in COLLECTIVE_SCHEMAS:
        cls = make_op_class(text)
        schema = cls.SCHEMA
        classes[f"{schema.namespace}::{schema.qualified_name}"] = cls
    return classes


__all__ = ["COLLECTIVE_SCHEMAS", "collective_op_classes"]
