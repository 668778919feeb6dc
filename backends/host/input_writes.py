"""Writing a compiled graph's trailing outputs into its inputs after each run.

A graph that updates its inputs in place (batch norm's running statistics in a training
step, a counter) is compiled without the writes: the new values are its last outputs
(:mod:`kiln.frontends.input_mutations`), and whoever runs the program writes them into
the inputs and hands over the outputs before them. The C++ and Triton wrappers do it
after the program (:class:`InputWrites`); a CUDA graph records the writes into buffers
that stay put inside the graph itself
(:class:`~kiln.backends.triton.cudagraphs.CudaGraphRunner`), so that a replay does no
host work for them.

Pairs of one device and dtype, the same shape and contiguous go together into one
``torch._foreach_copy_`` (a single launch on CUDA: multi-tensor apply); any other pair
(a broadcast, a cast, a strided target) by its own ``copy_``, as AOTAutograd would.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

Grouping = tuple[list[list[int]], list[int]]
"""Pair positions written by one ``torch._foreach_copy_`` each group, and those copied
alone."""


def grouping(targets: Sequence[torch.Tensor], values: Sequence[Any]) -> Grouping:
    """How :func:`write_back` writes ``values`` into ``targets`` (see the module doc); a
    pair whose value is its target is left out (nothing to write)."""
    groups: dict[tuple[torch.device, torch.dtype], list[int]] = {}
    singles: list[int] = []
    for k, (target, value) in enumerate(zip(targets, values, strict=True)):
        if isinstance(value, torch.Tensor) and value.data_ptr() == target.data_ptr():
            if value.shape == target.shape and value.stride() == target.stride():
                continue
        if (
            isinstance(value, torch.Tensor)
            and value.device == target.device
            and value.dtype == target.dtype
            and value.shape == target.shape
            and target.is_contiguous()
            and value.is_contiguous()
            and value.data_ptr() != target.data_ptr()
        ):
            groups.setdefault((target.device, target.dtype), []).append(k)
        else:
            singles.append(k)
    return list(groups.values()), singles


def write_grouped(targets: Sequence[torch.Tensor], values: Sequence[Any], how: Grouping) -> None:
    """``target.copy_(value)`` for each pair, grouped as ``how`` says."""
    groups, singles = how
    with torch.no_grad():
        for k in singles:
            targets[k].copy_(values[k])
        for positions in groups:
            torch._foreach_copy_(  # pyright: ignore[reportPrivateUsage, reportPrivateImportUsage]
                [targets[k] for k in positions], [values[k] for k in positions]
            )


def write_back(targets: Sequence[torch.Tensor], values: Sequence[Any]) -> None:
    """``target.copy_(value)`` for each pair, grouped (see the module doc)."""
    write_grouped(targets, values, grouping(targets, values))


@dataclass(frozen=True)
class InputWrites:
    """The inputs a compiled graph's last ``len(positions)`` outputs are written into, by
    argument position, each at most once (AOTAutograd writes each input once; a repeat
    in one grouped launch would race)."""

    positions: tuple[int, ...]

    def __post_init__(self) -> None:
        if len(set(self.positions)) != len(self.positions):
            raise ValueError(f"kiln: an input written twice by one graph: {self.positions}")

    def capture(self, args: Sequence[Any]) -> list[torch.Tensor]:
        """The inputs to write, taken before the program consumes (clears) ``args``."""
        return [args[k] for k in self.positions]

    def apply(self, outputs: Sequence[Any], targets: list[torch.Tensor]) -> tuple[Any, ...]:
        """Write the trailing values of ``outputs`` into ``targets``; the outputs before."""
        count = len(outputs) - len(self.positions)
        if count < 0:
            raise RuntimeError(
                f"kiln: the compiled graph returned {len(outputs)} values for "
                f"{len(self.positions)} input writes"
            )
        write_back(targets, outputs[count:])
        return tuple(outputs[:count])

    def wrap(self, run: Any) -> Any:
        """``run`` (a boxed runner: it may clear its argument list) followed by the writes."""

        def written(args: list[Any]) -> tuple[Any, ...]:
            targets = self.capture(args)
            return self.apply(run(args), targets)

        return written


__all__ = ["Grouping", "InputWrites", "grouping", "write_back", "write_grouped"]
