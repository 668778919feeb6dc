"""The ``torch.compile`` backend: ``torch.compile(model, backend="kiln")``.

Registered through the ``torch_dynamo_backends`` entry point, so no ``import kiln`` is
needed. Dynamo hands each captured graph to :func:`kiln_backend`, which runs
AOTAutograd with kiln's decomposition-free setup (kiln's ``decompose`` pass chooses the
decompositions, at the aten level) and compiles the forward and, for training, the
backward graph with :func:`kiln.compiler.compile_graph`.

Training memory follows Inductor's choices: AOTAutograd splits the joint graph with the
min-cut partitioner (option ``partitioner``), which saves for the backward the values
cheapest to keep and recomputes cheap forward ops (views of parameters above all) there;
an output that is a view of an input (a saved ``t(weight)`` under the default
partitioner) is not computed into a buffer but returned as the input itself and rebuilt
as eager's view (:class:`~kiln.frontends.input_aliases.InputAliases`); and the compiled
graphs take their argument lists over (the boxed convention), so that the program drops
each saved activation after its last use.

Saved activations are returned in the layout kiln computes them in (channels-last after
convolutions, as Inductor's layout optimization does): the forward's compile is told
which outputs are saved for the backward only, the strides it returns them with are
reported to AOTAutograd, which re-strides the backward's example inputs, and the
backward is compiled for those (:mod:`kiln.frontends.saved_layout`).

Writes to inputs (batch norm's running statistics) stay in AOTAutograd's graphs; kiln
does them after the program, a ``torch._foreach_copy_`` per dtype instead of a copy per
buffer (:mod:`kiln.frontends.input_mutations`).

```python
model = torch.compile(model, backend="kiln", options={"debug_dir": "/tmp/kiln"})
y = model(x)                       # prints: kiln: forward_0: 53 FX nodes -> 9 kernels, ...
```
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from kiln.compiler import CompileOptions, compile_graph
from kiln.frontends.activation_rewrites import rewrite_activations
from kiln.frontends.eager_statistics import with_eager_statistics
from kiln.frontends.input_aliases import InputAliases
from kiln.frontends.input_mutations import InputMutations
from kiln.frontends.saved_layout import (
    report_output_strides,
    restride_placeholders,
    saved_for_backward,
)
from kiln.gc_pause import frozen_heap

_GRAPH_IDS = itertools.count()


def kiln_backend(
    gm: torch.fx.GraphModule,
    example_inputs: Sequence[Any],
    options: Mapping[str, Any] | None = None,
    **_: Any,
) -> Callable[..., Any]:
    """Dynamo backend entry point (``backend="kiln"``)."""
    from functorch.compile import default_partition, min_cut_rematerialization_partition
    from torch._dynamo.backends.common import aot_autograd

    opts = CompileOptions.from_mapping(options)
    partition = with_eager_statistics(
        min_cut_rematerialization_partition if opts.partitioner == "min-cut" else default_partition
    )
    graph_id = next(_GRAPH_IDS)
    # When kiln last had control: AOTAutograd's tracing (and partitioning, before the
    # backward graph) is the time from there to the next compile_fn (the profile's "aot").
    handed_over = [time.perf_counter()]

    def compiler(kind: str) -> Callable[[torch.fx.GraphModule, Sequence[Any]], Callable[..., Any]]:
        def compile_fn(fx_graph: torch.fx.GraphModule, inputs: Sequence[Any]) -> Callable[..., Any]:
            from torch._subclasses.fake_tensor import unset_fake_temporarily

            # AOTAutograd calls its compilers with its FakeTensorMode active; kiln
            # compiles real programs, whose constants (``_tensor_constant0``) it reads
            # and builds at compile time.
            aot_seconds = time.perf_counter() - handed_over[0]
            if kind == "backward":
                restride_placeholders(fx_graph, inputs)
            saved = saved_for_backward(fx_graph) if kind == "forward" else ()
            mutations = InputMutations(fx_graph)
            graph, count = mutations.written_back(fx_graph)
            # The written values are the compiled graph's to write: it returns the first
            # ``count`` outputs, of which alone the aliases of inputs are rebuilt.
            aliases = InputAliases(graph, count)
            with unset_fake_temporarily():
                compiled = compile_graph(
                    aliases.forwarding_inputs(graph),
                    inputs,
                    opts,
                    name=f"{kind}_{graph_id}",
                    aot_seconds=aot_seconds,
                    inference=kind == "inference",
                    free_layout_outputs=saved,
                    guarded=True,  # Dynamo's guards (and the forward, for a backward)
                    input_writes=mutations.positions,
                )
            if saved:
                views = [alias.output for alias in aliases.aliases]
                strides = compiled.output_strides
                strides = strides[:count] if strides is not None else None
                report_output_strides(fx_graph, saved, strides, views)
            handed_over[0] = time.perf_counter()

            def run(args: list[Any]) -> Any:
                # Boxed: AOTAutograd hands over its argument list and keeps no other
                # reference, so the program frees each input (a saved activation, in
                # a backward graph) after its last use, as Inductor's wrappers do.
                captured = aliases.capture(args)
                outputs = compiled.run(args)
                return outputs if captured is None else aliases.apply(outputs, captured)

            run._boxed_call = True  # pyright: ignore[reportFunctionMemberAccess]
            return run

        return compile_fn

    backend = aot_autograd(
        fw_compiler=compiler("forward"),
        bw_compiler=compiler("backward"),
        inference_compiler=compiler("inference"),
        partition_fn=partition,
        # Writes to inputs stay in the graph, for kiln to do (InputMutations).
        keep_inference_input_mutations=True,
    )
    # AOTAutograd traces a backward where grad is on and an input requires it.
    needs_autograd = torch.is_grad_enabled() and any(
        isinstance(x, torch.Tensor) and x.requires_grad for x in example_inputs
    )
    rewrite_activations(gm, needs_autograd)
    # AOTAutograd's tracing builds as much as kiln's compile (FakeTensors, FX nodes, a
    # graph per pass over the model): full collections during it traverse Dynamo's and
    # torch's heap too (3-5 s of the 48-layer GPT-2 cold compile, session 12). The
    # compile_graph inside reuses this freeze (nested: one unfreeze, at the end).
    with frozen_heap():
        return backend(gm, list(example_inputs))
