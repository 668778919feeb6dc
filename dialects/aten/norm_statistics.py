"""The dtype of a normalization's saved statistics: what eager's kernels return, where
torch's meta functions say otherwise.

Batch, layer and group norm return their mean and inverse standard deviation beside the
output, for the backward. With a bfloat16 or float16 input and float32 parameters (the
mix of autocast training: low-precision activations, float32 norm weights), ATen's CPU
kernels compute and return the statistics in float32 (``is_mixed_type`` /
``param_scalar_type`` in ``aten/src/ATen/native``), but torch's meta functions and
decompositions, which Dynamo and AOTAutograd trace with, declare them in the input's
dtype. Taken as declared, the statistics are rounded to bfloat16 between the forward
and the backward, a rounding eager never makes, and the gradients amplify it:
``BatchNorm1d(10)`` on a ``[4, 10]`` bfloat16 input, weight gradient 0.0175 from the
float64 result against eager's 0.0037 (session 46's ModuleInfo sweep).

kiln declares them as eager computes them (:func:`eager_statistics_dtype`): the frontend
corrects the traced graphs' metadata (``kiln.frontends.eager_statistics``), the
verifier accepts that reading beside torch's meta's, and ``decompose`` computes them so.
Only where verified against eager (``tests/dialects/test_norm_statistics.py`` runs both
on every op here): on the CPU. On CUDA, batch and layer norm's meta already say float32.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

NORMALIZATIONS: frozenset[str] = frozenset(
    {
        "aten._native_batch_norm_legit.default",
        "aten._native_batch_norm_legit.no_stats",
        "aten._native_batch_norm_legit_functional.default",
        "aten._native_batch_norm_legit_no_training.default",
        "aten.native_batch_norm.default",
        "aten.native_group_norm.default",
        "aten.native_layer_norm.default",
    }
)
"""The overloads whose results #1 and #2 are the saved mean and inverse deviation."""

STATISTICS = (1, 2)
"""The result indices of the saved statistics."""

_PARAMETERS = ("weight", "bias", "running_mean", "running_var")


def eager_statistics_dtype(overload: str, arguments: Mapping[str, Any]) -> Any:
    """The dtype (a ``torch.dtype``) eager returns the statistics of ``overload`` in,
    where it is not the one torch's meta functions declare; None where the two agree.

    ``arguments``: the call's tensor arguments by schema name (``input``, ``weight``,
    ``bias``, ``running_mean``, ``running_var``; anything with ``dtype`` and ``device``
    attributes, such as FakeTensors or meta tensors standing for CPU tensors), None for
    an absent optional one. ATen's rule: a reduced-precision floating input with float32
    parameters (all that are given) is a mixed-type call, computed and saved in float32.
    """
    import torch

    if overload not in NORMALIZATIONS:
        return None
    input = arguments.get("input")
    if input is None or input.dtype not in (torch.bfloat16, torch.float16):
        return None
    if input.device.type not in ("cpu", "meta"):
        return None
    parameters = [p for p in (arguments.get(n) for n in _PARAMETERS) if p is not None]
    if parameters and all(p.dtype == torch.float32 for p in parameters):
        return torch.float32
    return None


def bind_arguments(schema: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """``args`` and ``kwargs`` of a call by their ``schema``'s argument names."""
    names = [a.name for a in schema.arguments]
    return {**dict(zip(names, args, strict=False)), **kwargs}


__all__ = ["NORMALIZATIONS", "STATISTICS", "bind_arguments", "eager_statistics_dtype"]
