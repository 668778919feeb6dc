"""What an aten op *is*, as traits derived from its schema and torch's tags.

Passes ask the op (:func:`has_aten_trait`) instead of keeping their own tables of
overload names or reading another pass's tables:

| trait | derived from | asked by |
|---|---|---|
| :class:`Pointwise` | ``torch.Tag.pointwise`` | ``channels-last``, ``unfuse-addmm`` |
| :class:`NondeterministicSeeded` | ``torch.Tag.nondeterministic_seeded`` | ``channels-last`` (and ``Pure``) |
| :class:`AliasingView` | the schema: an argument aliased without a write (``Tensor(a) self``), torch's ``OpOverload.is_view`` | ``output-layout`` |
| :class:`ViewLike` | ``AliasingView``, ``torch.Tag.view_copy`` (``permute_copy``), ``_unsafe_view`` | ``channels-last``, ``unfuse-addmm`` |
| :class:`FollowsChannelsLast` | :data:`CHANNELS_LAST_FOLLOWING` (torch has no tag for it) | ``channels-last``, ``lower-aten`` |
| :class:`Collective` | the ``_c10d_functional`` namespace, except ``wait_tensor`` | ``lower-aten``, ``reorder-collectives`` (and not ``Pure``) |
| :class:`CollectiveWait` | ``_c10d_functional::wait_tensor`` | ``lower-aten``, ``reorder-collectives`` (and not ``Pure``) |

Generated op classes carry the traits (``op.has_trait(Pointwise)``); ``aten.generic``
ops get the same answer from :func:`has_aten_trait`, which derives them from torch's
schema and tags of the overload (cached by overload name).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from xdsl.ir import Operation
from xdsl.traits import OpTrait

from kiln.dialects.aten.schema import OpSchema, SchemaParseError, parse_schema


@dataclass(frozen=True)
class Pointwise(OpTrait):
    """Each output element depends only on the same element of each (broadcast) input
    (``torch.Tag.pointwise``)."""


@dataclass(frozen=True)
class NondeterministicSeeded(OpTrait):
    """Draws from the random generator (``torch.Tag.nondeterministic_seeded``)."""


@dataclass(frozen=True)
class AliasingView(OpTrait):
    """The result aliases an input's storage (the schema marks an argument ``Tensor(a)``
    without a write: torch's ``OpOverload.is_view``). Replaying it on a tensor at run time
    gives a view, never a copy."""


@dataclass(frozen=True)
class ViewLike(OpTrait):
    """The result's values are the input's re-indexed (no arithmetic): aliasing views, their
    functional ``_copy`` variants (``torch.Tag.view_copy``) and ``_unsafe_view``. A value
    computed through one takes its layout from its input."""


@dataclass(frozen=True)
class FollowsChannelsLast(OpTrait):
    """ATen returns 4-D results in the memory format of the first input (cuDNN, oneDNN,
    the native pooling and batch-norm kernels): given a channels-last input, the result is
    channels-last."""


@dataclass(frozen=True)
class Collective(OpTrait):
    """Starts a communication between processes (a functional collective): its result is
    not ready, nor its input free to overwrite, until a ``wait_tensor`` of the result.
    Every rank must issue the same collectives in the same order, so it is never removed,
    merged or reordered with another collective."""


@dataclass(frozen=True)
class CollectiveWait(OpTrait):
    """``wait_tensor``: blocks until the collective that made its operand is done, and
    returns that tensor, now complete."""


COLLECTIVE_NAMESPACE = "_c10d_functional"
"""The namespace of torch's traceable (functional) collectives."""


CHANNELS_LAST_FOLLOWING = frozenset(
    {
        "aten::convolution.default",
        "aten::max_pool2d_with_indices.default",
        "aten::avg_pool2d.default",
        "aten::_adaptive_avg_pool2d.default",
        "aten::_native_batch_norm_legit_no_training.default",
        "aten::_native_batch_norm_legit.default",
        "aten::_native_batch_norm_legit.no_stats",
        "aten::_native_batch_norm_legit_functional.default",
        "aten::native_batch_norm.default",
    }
)
"""Overloads with :class:`FollowsChannelsLast`: a property of ATen's kernels that no torch
tag records (batch norm runs as an extern where ``decompose`` leaves it). Were ATen to
return NCHW after all, the permuted result is not contiguous and the backends copy it:
slower, never wrong."""

_FUNCTIONAL_VIEWS = frozenset({"aten::_unsafe_view.default"})
"""View-like overloads that neither alias nor carry the ``view_copy`` tag: ``_unsafe_view``
is ``reshape``'s functional form (its result is a fresh tensor ATen promises nobody
aliases)."""


def _overload_name(schema: OpSchema) -> str:
    return f"{schema.namespace}::{schema.qualified_name}"


def is_aliasing_view(schema: OpSchema) -> bool:
    """torch's ``OpOverload.is_view``: an argument is aliased (``Tensor(a)``), not written."""
    for arg in schema.arguments:
        open_ = arg.type_str.find("(")
        if open_ >= 0 and "!" not in arg.type_str[open_:]:
            return True
    return False


def _is_view_copy(schema: OpSchema, tags: Sequence[str]) -> bool:
    """A view op's functional variant (``permute_copy``). torch also tags the scatter ops
    (``slice_scatter``, the inverse of a view, writing ``src`` into ``self``) ``view_copy``:
    those read a second tensor, so only one-tensor overloads count."""
    tensors = [a for a in schema.arguments if a.kind.is_tensor]
    return "view_copy" in tags and len(tensors) == 1


def derive_traits(schema: OpSchema, tags: Sequence[str]) -> list[OpTrait]:
    """The semantic traits of an overload with ``schema`` and torch ``tags`` (tag names)."""
    traits: list[OpTrait] = []
    if "pointwise" in tags:
        traits.append(Pointwise())
    if "nondeterministic_seeded" in tags:
        traits.append(NondeterministicSeeded())
    aliasing = is_aliasing_view(schema)
    if aliasing:
        traits.append(AliasingView())
    if aliasing or _is_view_copy(schema, tags) or _overload_name(schema) in _FUNCTIONAL_VIEWS:
        traits.append(ViewLike())
    if _overload_name(schema) in CHANNELS_LAST_FOLLOWING:
        traits.append(FollowsChannelsLast())
    if schema.namespace == COLLECTIVE_NAMESPACE:
        traits.append(CollectiveWait() if schema.name == "wait_tensor" else Collective())
    return traits


def is_communication(traits: Sequence[OpTrait]) -> bool:
    """Whether these traits make an op a collective or its wait (never ``Pure``)."""
    return any(isinstance(t, Collective | CollectiveWait) for t in traits)


@cache
def overload_traits(overload: str) -> tuple[OpTrait, ...]:
    """The traits of a torch overload (``aten::add.Tensor``) from torch's own schema and
    tags; none for an operator torch does not know."""
    import torch

    namespace, _, rest = overload.partition("::")
    name, _, overload_name = rest.partition(".")
    try:
        op = getattr(getattr(getattr(torch.ops, namespace), name), overload_name or "default")
    except (AttributeError, RuntimeError):
        return ()
    tags = tuple(t.name for t in getattr(op, "tags", ()))
    try:
        schema = parse_schema(str(op._schema))  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
    except SchemaParseError:
        return ()
    return tuple(derive_traits(schema, tags))


def has_aten_trait(op: Operation, trait: type[OpTrait]) -> bool:
    """Whether ``op`` (a generated aten op or an ``aten.generic``) has ``trait``."""
    from kiln.dialects.aten.ops import AtenOp, GenericOp

    if isinstance(op, GenericOp):
        return any(isinstance(t, trait) for t in overload_traits(op.overload.data))
    return isinstance(op, AtenOp) and op.has_trait(trait)


__all__ = [
    "CHANNELS_LAST_FOLLOWING",
    "COLLECTIVE_NAMESPACE",
    "AliasingView",
    "Collective",
    "CollectiveWait",
    "FollowsChannelsLast",
    "NondeterministicSeeded",
    "Pointwise",
    "ViewLike",
    "derive_traits",
    "has_aten_trait",
    "is_aliasing_view",
    "is_communication",
    "overload_traits",
]
