"""Per-overload facts the importer needs, computed once per ``OpOverload``.

ATen-level FX graphs may pass a Python number where the schema wants a tensor
(``aten.add.Tensor(x, 1)``): the dispatcher wraps it as a "wrapped number" tensor,
which takes part in type promotion like a Python scalar. :meth:`OverloadTable.scalar_variant`
finds the overload of the same operator that takes a ``Scalar`` in that position
(``aten.add.Scalar``), which ATen defines as exactly that wrapping.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from xdsl.dialects.builtin import NoneType
from xdsl.ir import Attribute

from kiln.dialects.aten import AtenOp, GenericOp, op_class

OpOverload = torch._ops.OpOverload  # pyright: ignore[reportPrivateUsage]

# How torch's JIT types print (``str(argument.type)``) for Tensor, Tensor?, Scalar, Scalar?.
_TENSOR_TYPES = frozenset({"Tensor", "Optional[Tensor]"})
_SCALAR_TYPES = frozenset({"number", "Optional[number]"})
NONE_TYPE = NoneType()


@dataclass(frozen=True)
class Overload:
    """How to build the IR op for one ATen overload."""

    qualified: str
    """``aten::add.Tensor``."""
    op_cls: type[AtenOp] | None
    """The generated op class, or None for ``aten.generic``."""
    arg_names: tuple[str, ...]
    """Schema argument names, in order (FX positional args map onto these)."""
    tensor_args: tuple[str, ...]
    """Arguments typed ``Tensor`` or ``Tensor?`` (where FX may put a Python number)."""
    required_tensor_args: tuple[str, ...] = ()
    """Arguments typed ``Tensor`` (not optional)."""
    masked_results: bool = False
    """Whether an ``output_mask`` argument may switch results off (type ``none``)."""

    def build(self, args: Mapping[str, Any], result_types: Sequence[Attribute]) -> AtenOp:
        if self.op_cls is not None and not self._undefined_tensors(args, result_types):
            return self.op_cls.create_from_args(args, result_types)
        return GenericOp.build_generic(self.qualified, args, result_types)

    def _undefined_tensors(
        self, args: Mapping[str, Any], result_types: Sequence[Attribute]
    ) -> bool:
        """Whether a ``Tensor`` argument or result is None (an undefined tensor, which
        torch allows: the efficient-attention backward's ``attn_bias``, flash attention's
        ``cum_seq_q``). Generated ops require tensors there; ``aten.generic`` does not."""
        if any(args.get(name, ...) is None for name in self.required_tensor_args):
            return True
        return not self.masked_results and any(t == NONE_TYPE for t in result_types)


class OverloadTable:
    """:class:`Overload` per ``OpOverload``, cached for one import."""

    def __init__(self) -> None:
        self._cache: dict[OpOverload, Overload] = {}
        self._variants: dict[tuple[OpOverload, frozenset[str]], Overload | None] = {}

    def get(self, target: OpOverload) -> Overload:
        info = self._cache.get(target)
        if info is None:
            info = _describe(target)
            self._cache[target] = info
        return info

    def scalar_variant(self, target: OpOverload, scalar_args: frozenset[str]) -> Overload | None:
        """The overload taking ``Scalar`` for ``scalar_args`` and otherwise the same
        arguments (``add.Tensor`` -> ``add.Scalar``), or None."""
        key = (target, scalar_args)
        if key not in self._variants:
            self._variants[key] = _find_scalar_variant(target, scalar_args)
        return self._variants[key]


def _describe(target: OpOverload) -> Overload:
    schema = target._schema  # pyright: ignore[reportPrivateUsage]
    namespace, _, name = schema.name.partition("::")
    overload = schema.overload_name or "default"
    qualified = f"{name}.{overload}"
    op_cls = op_class(qualified if namespace == "aten" else f"{namespace}::{qualified}")
    return Overload(
        qualified=f"{namespace}::{qualified}",
        op_cls=op_cls,
        arg_names=tuple(a.name for a in schema.arguments),
        tensor_args=tuple(a.name for a in schema.arguments if str(a.type) in _TENSOR_TYPES),
        required_tensor_args=tuple(a.name for a in schema.arguments if str(a.type) == "Tensor"),
        masked_results=any(a.name == "output_mask" for a in schema.arguments),
    )


def _find_scalar_variant(target: OpOverload, scalar_args: frozenset[str]) -> Overload | None:
    schema = target._schema  # pyright: ignore[reportPrivateUsage]
    wanted = [(a.name, str(a.type)) for a in schema.arguments]
    returns = [str(r.type) for r in schema.returns]
    packet = target.overloadpacket
    for overload_name in packet.overloads():
        candidate: OpOverload = getattr(packet, overload_name)
        if candidate is target or candidate._schema.is_mutable != schema.is_mutable:  # pyright: ignore[reportPrivateUsage]
            continue
        candidate_schema = candidate._schema  # pyright: ignore[reportPrivateUsage]
        arguments = candidate_schema.arguments
        if len(arguments) != len(wanted):
            continue
        if [str(r.type) for r in candidate_schema.returns] != returns:
            continue
        if all(
            a.name == name
            and (str(a.type) in _SCALAR_TYPES if name in scalar_args else str(a.type) == ty)
            for a, (name, ty) in zip(arguments, wanted, strict=True)
        ):
            return _describe(candidate)
    return None
