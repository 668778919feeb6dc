"""``decompose``'s decomposition tables: PyTorch's, and the wrappers that make a few of
them compute what eager computes (or refuse where they would not).

``base_table`` names the tables (``kiln``, ``core``, ``inductor``; see
:mod:`kiln.passes.decompose`); ``table_key`` / ``with_prims`` give the pass a table by
content and the prims' ATen implementations ``make_fx`` needs beside it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cache, lru_cache
from typing import TYPE_CHECKING, Any

from kiln.dialects.aten.norm_statistics import (
    NORMALIZATIONS,
    bind_arguments,
    eager_statistics_dtype,
)

if TYPE_CHECKING:
    import torch

Decompositions = Mapping["torch._ops.OpOverload", Callable[..., Any]]

# Composite ops that core ATen keeps but kiln's lowering wants as simpler ops
# (Inductor decomposes the same ones before lowering).
_KILN_EXTRA = (
    "_softmax.default",
    "_log_softmax.default",
    "native_layer_norm.default",
    "native_group_norm.default",
    "_native_batch_norm_legit_functional.default",
    "_native_batch_norm_legit_no_training.default",
    # What eval / functionalized batch norm is captured as on some devices (CUDA): the
    # same decompositions, so that it fuses instead of running through ATen.
    "_batch_norm_no_update.default",
    "_batch_norm_with_update_functional.default",
    "native_dropout.default",
    "var_mean.correction",
    "addcmul.default",
    "addcdiv.default",
    "_softmax_backward_data.default",
    "_log_softmax_backward_data.default",
    "native_layer_norm_backward.default",
    "gelu_backward.default",
    "silu_backward.default",
    "threshold_backward.default",
    "hardswish.default",
    "hardsigmoid.default",
    "mish.default",
    "elu.default",
    "leaky_relu.default",
    "logit.default",
)


# CPU flash attention (what ``scaled_dot_product_attention`` dispatches to for CPU
# tensors, so it never appears in a CUDA graph) is a fused, blocked kernel that never
# materialises the L x L scores; its core-ATen decomposition (bmm, softmax, bmm) does, and
# loses to it from 64 x 64 scores per head on (2x at 512 x 512), while it wins or ties on
# shorter sequences, where the softmax fuses and the call overhead counts (figures:
# docs/benchmarks/cpu-profile.md). Inductor always keeps it as a fallback.
_FLASH_CPU_MIN_SCORES = 64 * 64


class SizeDependent:
    """A decomposition that applies at some sizes only, judged by the sizes the graph was
    traced at (``accepts``: per tensor operand, its sizes, -1 where unknown). ``decompose`` asks before tracing at
    sizes of its own choosing (the primes of :func:`_lifted_body`), where the wrapper
    could not read the graph's."""

    def __init__(
        self,
        decomposition: Callable[..., Any],
        accepts: Callable[[list[list[int]]], bool],
    ) -> None:
        self.decomposition = decomposition
        self.accepts = accepts

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        import torch

        sizes = [
            [-1 if (h := size_hint(d)) is None else h for d in a.shape]
            for a in (*args, *kwargs.values())
            if isinstance(a, torch.Tensor)
        ]
        if not self.accepts(sizes):
            raise NotImplementedError("not at these sizes")
        return self.decomposition(*args, **kwargs)


def _only_short_attention(decomposition: Callable[..., Any]) -> SizeDependent:
    """The flash-attention decomposition, refused (the op stays one ATen call) for long
    sequences. A symbolic sequence length is judged by the size the graph was traced at
    (its hint, see :class:`SymbolicDims`): both programs are right at every length, the
    hint only chooses the faster one for the sizes the model was first called with."""

    def short(sizes: list[list[int]]) -> bool:
        lq, lk = sizes[0][-2], sizes[1][-2]  # -1: unknown
        return lq >= 0 and lk >= 0 and lq * lk < _FLASH_CPU_MIN_SCORES

    return SizeDependent(decomposition, short)


def size_hint(size: Any) -> int | None:
    """A static size, or a SymInt's example value (read without a guard)."""
    if isinstance(size, int):
        return size
    hint = size.node.hint
    return hint if isinstance(hint, int) else None


def _when_not_training(decomposition: Callable[..., Any]) -> Callable[..., Any]:
    """A batch-norm decomposition that refuses ``training=True`` (which updates the
    running statistics in place: functionalized graphs use the ``_functional`` overload)."""

    def decompose(*args: Any, **kwargs: Any) -> Any:
        training = kwargs["training"] if "training" in kwargs else args[5]
        if training:
            raise NotImplementedError("batch norm with training=True mutates its running stats")
        return decomposition(*args, **kwargs)

    return decompose


def _running_stats_in_float(decomposition: Callable[..., Any]) -> Callable[..., Any]:
    """A training batch-norm decomposition that updates the running statistics in the
    computation dtype (float32 for bf16/fp16), as eager's kernels do.

    PyTorch's decomposition computes ``(1 - momentum) * running_mean`` in the running
    stat's own dtype: a bf16 rounding eager never makes, up to an ulp (2.0 for a running
    variance near 300) off after one step. The new statistics are float32 either way
    (the op's result types), so only that rounding goes."""
    from torch._prims_common import get_computation_dtype

    def decompose(
        input: torch.Tensor,
        weight: torch.Tensor | None,
        bias: torch.Tensor | None,
        running_mean: torch.Tensor,
        running_var: torch.Tensor,
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        dtype = get_computation_dtype(input.dtype)

        def upcast(t: torch.Tensor) -> torch.Tensor:
            return t.to(dtype) if t.is_floating_point() and t.dtype != dtype else t

        return decomposition(
            input, weight, bias, upcast(running_mean), upcast(running_var), *args, **kwargs
        )

    return decompose


def _statistics_as_eager(overload: Any, decomposition: Callable[..., Any]) -> Callable[..., Any]:
    """A normalization's decomposition that returns the saved statistics in the dtype
    eager's kernels give them (float32 for a bfloat16 input with float32 parameters on
    the CPU, where PyTorch's decomposition rounds them to the input's dtype; see
    ``kiln.dialects.aten.norm_statistics``, which the frontend declares them by).

    The decomposition computes in float32 either way: run on the input upcast, its
    output is the same float32 values, rounded to the input's dtype once, here."""
    name = str(overload)

    def decompose(*args: Any, **kwargs: Any) -> Any:
        arguments = bind_arguments(overload._schema, args, kwargs)
        dtype = eager_statistics_dtype(name, arguments)
        if dtype is None:
            return decomposition(*args, **kwargs)
        input = arguments["input"]
        if args:
            args = (input.to(dtype), *args[1:])
        else:
            kwargs = {**kwargs, "input": input.to(dtype)}
        output, *rest = decomposition(*args, **kwargs)
        return (output.to(input.dtype), *rest)

    return decompose


def _empty_softmax_is_empty(decomposition: Callable[..., Any]) -> Callable[..., Any]:
    """A (log-)softmax decomposition that returns an empty tensor for an empty input.

    PyTorch's pads an empty reduced dim with a ``-inf`` (``new_full``) before ``amax``;
    an integer tensor cannot hold it (``value cannot be converted to type int without
    overflow``), while eager returns an empty tensor of the input's dtype (float32 with
    ``half_to_float``)."""
    import torch
    from torch.fx.experimental.symbolic_shapes import statically_known_true

    def decompose(x: torch.Tensor, dim: int, half_to_float: bool) -> Any:
        if statically_known_true(x.numel() == 0):
            dtype = torch.float32 if half_to_float else x.dtype
            return x.new_empty(x.shape, dtype=dtype)
        return decomposition(x, dim, half_to_float)

    return decompose


def _materialised_zeros(
    size: Any, *, dtype: Any = None, layout: Any = None, device: Any = None, pin_memory: Any = None
) -> Any:
    """``_efficientzerotensor`` (autograd's zero gradients, e.g. of ``sgn``) as a
    materialised zero tensor: the same values, with storage, which kiln's buffers need
    (a ZeroTensor has none). Inductor keeps it an ATen call."""
    import torch

    return torch.zeros(size, dtype=dtype, device=device)


@cache
def base_table(name: str) -> dict[Any, Callable[..., Any]]:
    """The named decomposition table (see module docstring)."""
    import torch
    from torch._decomp import core_aten_decompositions, get_decompositions

    if name == "core":
        return dict(core_aten_decompositions())
    if name == "inductor":
        import torch._inductor.lowering  # Inductor's decompositions consult it
        from torch._inductor.decomposition import select_decomp_table

        return dict(select_decomp_table())
    if name == "kiln":
        extra: list[Any] = []
        for qual in _KILN_EXTRA:
            op_name, _, overload = qual.partition(".")
            packet = getattr(torch.ops.aten, op_name, None)
            if packet is not None and overload in packet.overloads():
                extra.append(getattr(packet, overload))
        table = dict(core_aten_decompositions())
        table.update(get_decompositions(extra))
        flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default
        if flash in table:
            table[flash] = _only_short_attention(table[flash])
        for overload in (
            torch.ops.aten._native_batch_norm_legit_functional.default,
            torch.ops.aten._batch_norm_with_update_functional.default,
        ):
            if overload in table:
                table[overload] = _running_stats_in_float(table[overload])
        # ``_native_batch_norm_legit_no_training`` decomposes into the mutating overload
        # with ``training=False``; only that case is pure, so only it is decomposed.
        for overload in (
            torch.ops.aten._native_batch_norm_legit.default,
            torch.ops.aten.native_batch_norm.default,
        ):
            table[overload] = _when_not_training(get_decompositions([overload])[overload])
        for overload, decomposition in list(table.items()):
            if str(overload) in NORMALIZATIONS:
                table[overload] = _statistics_as_eager(overload, decomposition)
        for overload in (torch.ops.aten._softmax.default, torch.ops.aten._log_softmax.default):
            table[overload] = _empty_softmax_is_empty(table[overload])
        table[torch.ops.aten._efficientzerotensor.default] = _materialised_zeros
        return table
    raise ValueError(f"unknown decomposition table {name!r} (kiln, core, inductor)")


@cache
def _prims_to_aten() -> dict[Any, Callable[..., Any]]:
    """Each prim's own ATen implementation: PyTorch's reference decompositions
    (``torch._refs``) emit prims, which kiln's aten dialect expresses through these."""
    import torch

    table: dict[Any, Callable[..., Any]] = {}
    for name in dir(torch.ops.prims):
        try:
            packet = getattr(torch.ops.prims, name)
            overloads = packet.overloads()
        except (AttributeError, RuntimeError):
            continue
        for overload in overloads:
            op = getattr(packet, overload)
            impl = getattr(op, "impl_aten", None)
            if impl is not None:
                table[op] = impl
    return table


TableKey = frozenset[tuple[Any, Callable[..., Any]]]
"""A decomposition table by content: its (overload, function) pairs. It holds the functions
themselves, so an equal key always means the same decompositions (an ``id()`` could be
reused by another table once the first is freed)."""


def table_key(table: Decompositions) -> TableKey:
    return frozenset(table.items())


@lru_cache(maxsize=8)
def with_prims(key: TableKey) -> dict[Any, Callable[..., Any]]:
    """The table in ``key`` plus each prim's ATen implementation (for ``make_fx``)."""
    merged = dict(_prims_to_aten())
    merged.update(dict(key))
    return merged
