"""Capture a Python callable or ``nn.Module`` as an ATen-level FX graph.

Each helper returns a :class:`Capture`: the ``GraphModule`` (FakeTensor metadata in
``node.meta["val"]``) and the real example inputs in placeholder order, so that
``capture.gm(*capture.example_inputs)`` runs the program eagerly:

```python
gm, inputs = capture_make_fx(model, x)              # make_fx, params lifted to inputs
gm, inputs = capture_aot(model, x, dynamic=True)    # AOTAutograd inference graph
graphs = capture_aot_training(model, x)             # AOTAutograd forward + backward
gm, inputs = capture_export(model, x)               # torch.export, run_decompositions({})
module = import_graph(gm)                            # kiln.frontends.fx
```

For an ``nn.Module`` the parameters and buffers come first, then the user inputs
(AOTAutograd's and make_fx's order here; torch.export orders them by its graph
signature). ``dynamic=True`` makes every dim of the user's tensor inputs symbolic
(sizes of 0 and 1 are specialised, as torch does); parameters keep static shapes.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
import torch.fx
import torch.utils._pytree as pytree
from torch import nn

Decompositions = dict[Any, Callable[..., Any]]


class Capture(NamedTuple):
    """One captured graph and real inputs for it, in placeholder order."""

    gm: torch.fx.GraphModule
    example_inputs: list[Any]


@dataclass(frozen=True)
class AotTrainingCapture:
    """AOTAutograd's forward and backward graphs of one training step.

    ``backward.example_inputs`` are the real saved activations and (random) tangents
    the backward graph received when the step ran.
    """

    forward: Capture
    backward: Capture


STATE_INPUTS = "kiln.state_inputs"
"""``gm.meta`` key: how many leading placeholders are parameters, buffers or lifted
constants (the rest are the program's own inputs)."""


def state_constants(capture: Capture) -> dict[str, torch.Tensor]:
    """Placeholder name -> real tensor for the parameters, buffers and lifted constants
    of a capture: pass as ``import_graph(..., constants=...)`` to embed them."""
    count = capture.gm.meta.get(STATE_INPUTS, 0)
    placeholders = capture.gm.graph.find_nodes(op="placeholder")[:count]
    return {
        node.name: value
        for node, value in zip(placeholders, capture.example_inputs, strict=False)
        if isinstance(value, torch.Tensor)
    }


class CaptureError(RuntimeError):
    """The program could not be captured (the message says which tracer and why)."""


# -- shared helpers ------------------------------------------------------------------


def _state(module: nn.Module) -> tuple[list[str], list[torch.Tensor]]:
    """Names and tensors of the module's parameters, then buffers."""
    names: list[str] = []
    tensors: list[torch.Tensor] = []
    for name, param in module.named_parameters():
        names.append(name)
        tensors.append(param)
    for name, buffer in module.named_buffers():
        names.append(name)
        tensors.append(buffer)
    return names, tensors


def _snapshot(values: Sequence[Any]) -> list[Any]:
    """Copies of real inputs, taken before a graph that may mutate them runs."""
    return [v.detach().clone() if isinstance(v, torch.Tensor) else v for v in values]


_NOT_IDENT = re.compile(r"\W")


def _input_names(fn: Callable[..., Any], count: int) -> list[str]:
    """The names of the first ``count`` positional parameters of ``fn`` (or ``forward``)."""
    target = fn.forward if isinstance(fn, nn.Module) else fn
    names: list[str] = []
    try:
        parameters = inspect.signature(target).parameters.values()
    except (TypeError, ValueError):
        parameters = []
    for p in parameters:
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) or len(names) == count:
            break
        names.append(p.name)
    return names + [f"input{i}" for i in range(len(names), count)]


def _rename_placeholders(gm: torch.fx.GraphModule, names: Sequence[str]) -> None:
    """Name placeholders after parameters (``layer.weight`` -> ``layer_weight``) and the
    program's own argument names, instead of make_fx's ``arg7_1``."""
    placeholders = gm.graph.find_nodes(op="placeholder")
    for node, name in zip(placeholders, names, strict=False):
        node._rename(_NOT_IDENT.sub("_", name))  # pyright: ignore[reportPrivateUsage]
        node.target = node.name
    gm.recompile()


def _fake_inputs(mode: Any, state: Sequence[torch.Tensor], inputs: Sequence[Any]) -> list[Any]:
    """Fake tensors of one FakeTensorMode: static parameters, symbolic user inputs."""
    fakes: list[Any] = [mode.from_tensor(t.detach(), static_shapes=True) for t in state]
    for value in inputs:
        fakes.append(mode.from_tensor(value) if isinstance(value, torch.Tensor) else value)
    return fakes


def fake_inputs(inputs: Sequence[Any], dynamic: bool = False) -> list[Any]:
    """Fake tensors (shapes and dtypes, no data) for ``inputs``, for tracing without
    running the program on values: :func:`capture_aot` and :func:`capture_aot_training`
    accept them (the module's real parameters mix in), and the captured example inputs
    are then fake too. ``dynamic``: symbolic sizes, one shape environment for all."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    mode = FakeTensorMode(allow_non_fake_inputs=True, shape_env=ShapeEnv() if dynamic else None)
    return [
        mode.from_tensor(v, static_shapes=not dynamic) if isinstance(v, torch.Tensor) else v
        for v in inputs
    ]


# -- make_fx -------------------------------------------------------------------------


def _functional(module: nn.Module, names: Sequence[str]) -> Callable[..., Any]:
    """``module`` as a function of (its parameters and buffers, then its inputs)."""
    count = len(names)

    def program(*flat: Any) -> Any:
        tensors = dict(zip(names, flat[:count], strict=True))
        return torch.func.functional_call(module, tensors, tuple(flat[count:]))

    return program


def capture_make_fx(
    fn: Callable[..., Any],
    *inputs: Any,
    decompositions: Decompositions | None = None,
    dynamic: bool = False,
) -> Capture:
    """Trace with ``make_fx`` (``tracing_mode="fake"``, or symbolic shapes if ``dynamic``).

    An ``nn.Module``'s parameters and buffers become the first placeholders, named after
    them (``l_weight``), through ``torch.func.functional_call``. The graph is what
    make_fx records: ATen overloads as dispatched, without functionalization.
    """
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    names: list[str] = []
    state: list[torch.Tensor] = []
    program = fn
    if isinstance(fn, nn.Module):
        names, state = _state(fn)
        program = _functional(fn, names)

    # Detached inputs: the graph is the computation, not autograd's bookkeeping.
    real = _snapshot([*state, *inputs])
    try:
        if dynamic:
            mode = FakeTensorMode(shape_env=ShapeEnv())
            gm = make_fx(
                program,
                decomposition_table=decompositions,
                tracing_mode="symbolic",
                record_stack_traces=True,
            )(*_fake_inputs(mode, state, inputs))
        else:
            gm = make_fx(
                program,
                decomposition_table=decompositions,
                tracing_mode="fake",
                record_stack_traces=True,
            )(*real)
    except Exception as e:
        raise CaptureError(f"make_fx could not trace the program: {type(e).__name__}: {e}") from e
    flat_inputs = all(isinstance(v, torch.Tensor | int | float | bool) for v in inputs)
    # With container inputs make_fx flattens them, so placeholders and names misalign.
    user_names = _input_names(fn, len(inputs)) if flat_inputs else []
    _rename_placeholders(gm, [*names, *user_names])
    gm.meta[STATE_INPUTS] = len(state)
    return Capture(gm, real)


# -- AOTAutograd -----------------------------------------------------------------------


class _Recorder:
    """An AOTAutograd compiler that keeps the graph and the real inputs of its first call."""

    def __init__(self) -> None:
        self.gm: torch.fx.GraphModule | None = None
        self.inputs: list[Any] | None = None

    def __call__(
        self, gm: torch.fx.GraphModule, example_inputs: Sequence[Any]
    ) -> Callable[..., Any]:
        self.gm = gm

        def run(args: list[Any]) -> Any:
            if self.inputs is None:
                self.inputs = _snapshot(args)
            return gm(*args)

        run._boxed_call = True  # pyright: ignore[reportFunctionMemberAccess]
        return run

    def capture(self, what: str) -> Capture:
        if self.gm is None or self.inputs is None:
            raise CaptureError(f"AOTAutograd produced no {what} graph")
        return Capture(self.gm, self.inputs)


def _aot_run(
    fn: Callable[..., Any],
    inputs: Sequence[Any],
    forward: _Recorder,
    backward: _Recorder,
    dynamic: bool,
    decompositions: Decompositions | None,
) -> Any:
    """Run ``fn(*inputs)`` once through AOTAutograd with recording compilers.

    A module runs as a function of its parameters and buffers (each tensor once, so
    tied weights are one input), then its inputs; the parameters keep static shapes.
    """
    from functorch.compile import aot_function, default_partition

    from kiln.frontends.eager_statistics import with_eager_statistics

    program, state = fn, []
    if isinstance(fn, nn.Module):
        names, state = _state(fn)
        program = _functional(fn, names)
    compiled = aot_function(
        program,
        fw_compiler=forward,
        bw_compiler=backward,
        partition_fn=with_eager_statistics(default_partition),
        decompositions=decompositions,
        num_params_buffers=len(state),
        dynamic=dynamic,
    )
    return compiled(*state, *inputs)


def _annotate_aot_forward(fn: Callable[..., Any], inputs: Sequence[Any], graph: Capture) -> None:
    """Record the parameter count and name a forward graph's placeholders after the
    parameters and arguments (AOTAutograd calls them ``primals_3`` / ``arg2_1``), when
    they are exactly those."""
    names = _state(fn)[0] if isinstance(fn, nn.Module) else []
    graph.gm.meta[STATE_INPUTS] = len(names)
    names += _input_names(fn, len(inputs))
    if len(graph.gm.graph.find_nodes(op="placeholder")) == len(names):
        _rename_placeholders(graph.gm, names)


def capture_aot(
    fn: Callable[..., Any],
    *inputs: Any,
    dynamic: bool = False,
    decompositions: Decompositions | None = None,
) -> Capture:
    """AOTAutograd's inference graph (functional ATen; traced under ``no_grad``).

    Its inputs are the module's parameters and buffers, then the user inputs; buffers
    the program mutates come back as extra leading outputs.
    """
    forward, backward = _Recorder(), _Recorder()
    try:
        with torch.no_grad():
            _aot_run(fn, inputs, forward, backward, dynamic, decompositions)
    except Exception as e:
        raise CaptureError(
            f"AOTAutograd could not trace the program: {type(e).__name__}: {e}"
        ) from e
    graph = forward.capture("forward")
    _annotate_aot_forward(fn, inputs, graph)
    return graph


def _loss(outputs: Any) -> torch.Tensor | None:
    """A scalar whose gradient reaches every differentiable output (random weights)."""
    total: torch.Tensor | None = None
    for out in pytree.tree_leaves(outputs):  # pyright: ignore[reportPrivateUsage]
        if isinstance(out, torch.Tensor) and out.requires_grad:
            term = (out * torch.randn_like(out)).sum()
            total = term if total is None else total + term
    return total


def capture_aot_training(
    fn: Callable[..., Any],
    *inputs: Any,
    dynamic: bool = False,
    decompositions: Decompositions | None = None,
) -> AotTrainingCapture:
    """AOTAutograd's forward and backward graphs for one training step.

    For a plain function, floating-point tensor inputs are made to require grad (a
    module's parameters already do). The step runs once: forward, then backward with
    random output gradients, recording the real inputs each graph received.
    """
    if not isinstance(fn, nn.Module):
        inputs = tuple(
            v.detach().requires_grad_(True)
            if isinstance(v, torch.Tensor) and v.is_floating_point()
            else v
            for v in inputs
        )
    forward, backward = _Recorder(), _Recorder()
    try:
        with torch.enable_grad():
            loss = _loss(_aot_run(fn, inputs, forward, backward, dynamic, decompositions))
            if loss is None:
                raise CaptureError("no output requires grad, so there is no backward graph")
            loss.backward()
    except CaptureError:
        raise
    except Exception as e:
        raise CaptureError(
            f"AOTAutograd could not trace the program: {type(e).__name__}: {e}"
        ) from e
    graphs = AotTrainingCapture(forward.capture("forward"), backward.capture("backward"))
    _annotate_aot_forward(fn, inputs, graphs.forward)
    return graphs


# -- torch.export ------------------------------------------------------------------------


class _CallFunction(nn.Module):
    """Lets torch.export, which takes modules, export a plain function.

    ``forward`` is the function itself (an instance attribute), so placeholders are
    named after the function's parameters.
    """

    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.forward = fn


def capture_export(
    module: Callable[..., Any],
    *inputs: Any,
    dynamic: bool = False,
    decompositions: Decompositions | None = None,
) -> Capture:
    """``torch.export.export(...).run_decompositions(decompositions or {})``.

    Parameters, buffers and lifted constants are placeholders (``p_l_weight``,
    ``b_bn_running_mean``, ``c_lifted_tensor_0``) ordered by the graph signature; the
    example inputs follow that order. Mutated buffers are extra leading outputs.
    """
    from torch.export import Dim, export
    from torch.export.graph_signature import InputKind

    root = module if isinstance(module, nn.Module) else _CallFunction(module)
    dynamic_shapes = None
    if dynamic:
        dynamic_shapes = tuple(
            dict.fromkeys(range(v.dim()), Dim.AUTO) if isinstance(v, torch.Tensor) else None
            for v in inputs
        )
    try:
        program = export(root, tuple(inputs), dynamic_shapes=dynamic_shapes)
        program = program.run_decompositions(dict(decompositions or {}))
    except Exception as e:
        raise CaptureError(f"torch.export failed: {type(e).__name__}: {e}") from e

    user_inputs = iter(pytree.tree_leaves(tuple(inputs)))  # pyright: ignore[reportPrivateUsage]
    example: list[Any] = []
    for spec in program.graph_signature.input_specs:
        if spec.kind is InputKind.USER_INPUT:
            example.append(next(user_inputs))
        elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
            assert spec.target is not None
            source = program.state_dict if spec.target in program.state_dict else program.constants
            example.append(source[spec.target])
        else:
            raise CaptureError(f"torch.export input kind {spec.kind.name} is not supported")
    gm = program.graph_module
    gm.meta[STATE_INPUTS] = sum(
        spec.kind is not InputKind.USER_INPUT for spec in program.graph_signature.input_specs
    )
    return Capture(gm, _snapshot(example))
