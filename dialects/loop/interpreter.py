"""The loop reference interpreter, vectorized over each op's iteration space with torch.

Built on xDSL's interpreter framework. At function level, :class:`LoopFunctions` runs
each loop op as a whole: it builds int64 index tensors for the op's iteration space
(broadcastable ``arange`` views, never a Python loop per element), interprets the body
once with :class:`~kiln.dialects.loop.body_eval.LoopBodyFunctions` (every scalar op on
whole tensors, every ``loop.load`` a gather from the input's flat storage), and
reduces with torch along the reduction axes. ``loop.extern`` bodies run through the
aten interpreter. Buffers are contiguous torch tensors.

```python
module = Parser(make_context(), text).parse_module()
(out,) = run_function(module, [torch.randn(4, 8)])
```
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from xdsl.dialects import memref
from xdsl.dialects.builtin import MemRefType, ModuleOp
from xdsl.interpreter import (
    Interpreter,
    InterpreterFunctions,
    PythonValues,
    ReturnedValues,
    TerminatorValue,
    impl,
    impl_terminator,
    register_impls,
)
from xdsl.utils.exceptions import InterpretationError

from kiln.dialects.aten.arg_layout import flat_storage, program_arg_strides
from kiln.dialects.aten.interpreter import ArgumentError, make_interpreter
from kiln.dialects.loop.attributes import ReductionKind
from kiln.dialects.loop.body_eval import BodyFrame, LoopBodyFunctions, torch_dtype
from kiln.dialects.loop.body_ops import YieldOp
from kiln.dialects.loop.index_eval import compile_expr, evaluate_size
from kiln.dialects.loop.ops import ExternOp, LoopNestOp, PointwiseOp, ReductionOp, ScatterOp


def as_buffer(value: torch.Tensor) -> torch.Tensor:
    """A contiguous tensor that owns its storage from offset 0 (``as_strided`` in extern
    bodies addresses the storage directly)."""
    if value.is_contiguous() and value.storage_offset() == 0:
        return value
    if value.storage_offset() == 0:
        return value.contiguous()
    # clone() would keep a strided slice's dim order (dense strides, not row-major);
    # loads index a buffer's memory (flat_storage), which must be row-major here.
    return value.clone(memory_format=torch.contiguous_format)


def _index_tensors(sizes: Sequence[int], device: torch.device) -> list[torch.Tensor]:
    """``d_k``: ``arange(sizes[k])`` shaped to broadcast over the whole space."""
    rank = len(sizes)
    out: list[torch.Tensor] = []
    for k, n in enumerate(sizes):
        shape = [1] * rank
        shape[k] = n
        out.append(torch.arange(n, dtype=torch.int64, device=device).view(shape))
    return out


@dataclass
class LoopFunctions(InterpreterFunctions):
    """Runs loop ops (and ``memref.dim``) at function level."""

    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    _body: Interpreter | None = None
    _body_functions: LoopBodyFunctions = field(default_factory=LoopBodyFunctions)

    def _body_interpreter(self, interpreter: Interpreter) -> Interpreter:
        if self._body is None:
            self._body = Interpreter(interpreter.module, index_bitwidth=64)
            self._body.register_implementations(self._body_functions)
        return self._body

    def _run_body(
        self,
        interpreter: Interpreter,
        op: LoopNestOp,
        args: PythonValues,
        sizes: list[int],
        reduction_sizes: list[int],
    ) -> torch.Tensor:
        n_in = len(op.inputs)
        storages = [flat_storage(t) for t in args[:n_in]]
        sym_values = args[n_in:]
        space = [*sizes, *reduction_sizes]
        if 0 in space:
            # An empty iteration space: nothing is loaded or computed.
            return torch.empty(space, dtype=torch_dtype(op.yielded_type()), device=self.device)
        index = _index_tensors(space, self.device)
        env: dict[str, Any] = {f"s{k}": int(v) for k, v in enumerate(sym_values)}
        for k in range(len(sizes)):
            env[f"d{k}"] = index[k]
        for k in range(len(reduction_sizes)):
            env[f"r{k}"] = index[len(sizes) + k]
        saved = self._body_functions.frame
        self._body_functions.frame = BodyFrame(env)
        try:
            (value,) = self._body_interpreter(interpreter).run_ssacfg_region(
                op.body, (*index, *storages), op.name
            )
        finally:
            self._body_functions.frame = saved
        if not isinstance(value, torch.Tensor):
            value = torch.tensor(value, dtype=torch_dtype(op.yielded_type()))
        return value.to(self.device).broadcast_to(space)

    @staticmethod
    def _sizes(op: LoopNestOp, args: PythonValues) -> tuple[list[int], list[int]]:
        syms = {f"s{k}": int(v) for k, v in enumerate(args[len(op.inputs) :])}
        sizes = [evaluate_size(s.data, syms) for s in op.sizes.data]
        reduction = [evaluate_size(s.data, syms) for s in op.reduction_sizes_list()]
        return sizes, reduction

    @impl(PointwiseOp)
    def run_pointwise(
        self, interpreter: Interpreter, op: PointwiseOp, args: PythonValues
    ) -> PythonValues:
        sizes, _ = self._sizes(op, args)
        value = self._run_body(interpreter, op, args, sizes, [])
        ty = op.result.type
        assert isinstance(ty, MemRefType)
        out = value.to(torch_dtype(ty.element_type)).contiguous()
        # A loop op computes a buffer of its own; a body that yields a load as it is (a
        # copy) over a 0-d space gives back the input tensor itself, which would make
        # the output an alias of an input (an in-place update of one changing the other).
        ptr = out.untyped_storage().data_ptr()
        if any(
            isinstance(a, torch.Tensor) and a.untyped_storage().data_ptr() == ptr
            for a in args[: len(op.inputs)]
        ):
            out = out.clone()
        return (out,)

    @impl(ReductionOp)
    def run_reduction(
        self, interpreter: Interpreter, op: ReductionOp, args: PythonValues
    ) -> PythonValues:
        sizes, reduction_sizes = self._sizes(op, args)
        value = self._run_body(interpreter, op, args, sizes, reduction_sizes)
        count = _numel(reduction_sizes)
        flat = value.reshape(*sizes, count)
        return tuple(r.contiguous() for r in _reduce(op.kind.data, flat, count))

    @impl(ScatterOp)
    def run_scatter(
        self, interpreter: Interpreter, op: ScatterOp, args: PythonValues
    ) -> PythonValues:
        """A zero buffer of ``into`` sizes, plus every point's value at its position
        (``index_add_``: duplicate positions add up)."""
        sizes, _ = self._sizes(op, args)
        syms = {f"s{k}": int(v) for k, v in enumerate(args[len(op.inputs) :])}
        out_sizes = [evaluate_size(s.data, syms) for s in op.out_sizes.data]
        ty = op.result.type
        assert isinstance(ty, MemRefType)
        dtype = torch_dtype(ty.element_type)
        out = torch.zeros(out_sizes, dtype=dtype, device=self.device)
        if 0 in sizes:
            return (out,)
        n_in = len(op.inputs)
        index = _index_tensors(sizes, self.device)
        env: dict[str, Any] = dict(syms)
        for k in range(len(sizes)):
            env[f"d{k}"] = index[k]
        saved = self._body_functions.frame
        self._body_functions.frame = BodyFrame(dict(env))
        try:
            yielded = self._body_interpreter(interpreter).run_ssacfg_region(
                op.body, (*index, *(flat_storage(t) for t in args[:n_in])), op.name
            )
        finally:
            self._body_functions.frame = saved
        value, *indirect = yielded
        for k, v in enumerate(indirect):
            env[f"i{k}"] = v
        position = compile_expr(op.index.data)(env)
        position = torch.as_tensor(position, dtype=torch.int64, device=self.device)
        value = torch.as_tensor(value, device=self.device).to(dtype)
        flat = out.view(-1)
        position = position.broadcast_to(sizes).reshape(-1)
        if bool(((position < 0) | (position >= flat.numel())).any()):
            raise InterpretationError(f"{op.name}: a position lies outside the buffer")
        flat.index_add_(0, position, value.broadcast_to(sizes).reshape(-1))
        return (out,)

    @impl(ExternOp)
    def run_extern(
        self, interpreter: Interpreter, op: ExternOp, args: PythonValues
    ) -> PythonValues:
        results = interpreter.run_ssacfg_region(op.body, args, op.name)
        return tuple(as_buffer(r) if isinstance(r, torch.Tensor) else r for r in results)

    @impl_terminator(YieldOp)
    def run_yield(
        self, interpreter: Interpreter, op: YieldOp, args: PythonValues
    ) -> tuple[TerminatorValue, PythonValues]:
        return ReturnedValues(args), ()

    @impl(memref.DimOp)
    def run_dim(
        self, interpreter: Interpreter, op: memref.DimOp, args: PythonValues
    ) -> PythonValues:
        return (int(args[0].shape[int(args[1])]),)


def _numel(sizes: Sequence[int]) -> int:
    n = 1
    for s in sizes:
        n *= s
    return n


def _reduce(kind: ReductionKind, flat: torch.Tensor, count: int) -> tuple[torch.Tensor, ...]:
    """Reduce the last axis of ``flat`` (output sizes + the flattened reduction space).

    An empty reduction gives the kind's identity (max: the lowest value, argmax: 0), as an
    accumulator loop would; booleans order false < true.
    """
    if count == 0 and kind in _IDENTITY_KINDS:
        return (_identity(kind, flat),)
    if flat.dtype == torch.bool and kind in _IDENTITY_KINDS:
        flat = flat.to(torch.uint8)
        if kind in (ReductionKind.MAX, ReductionKind.MIN):
            return (_reduce(kind, flat, count)[0].to(torch.bool),)
    if kind is ReductionKind.SUM:
        return (flat.sum(-1, dtype=flat.dtype),)
    if kind is ReductionKind.PROD:
        return (flat.prod(-1, dtype=flat.dtype),)
    if kind is ReductionKind.MAX:
        return (flat.amax(-1),)
    if kind is ReductionKind.MIN:
        return (flat.amin(-1),)
    if kind is ReductionKind.ARGMAX:
        return (flat.argmax(-1),)
    if kind is ReductionKind.ARGMIN:
        return (flat.argmin(-1),)
    if kind is ReductionKind.ANY:
        return (flat.any(-1),)
    if kind is ReductionKind.ALL:
        return (flat.all(-1),)
    var, mean = torch.var_mean(flat, dim=-1, correction=0)
    m2 = var * count
    return (mean, m2.to(flat.dtype), torch.full_like(mean, float(count)))


_IDENTITY_KINDS = frozenset(
    {ReductionKind.MAX, ReductionKind.MIN, ReductionKind.ARGMAX, ReductionKind.ARGMIN}
)


def _identity(kind: ReductionKind, flat: torch.Tensor) -> torch.Tensor:
    shape = flat.shape[:-1]
    if kind in (ReductionKind.ARGMAX, ReductionKind.ARGMIN):
        return torch.zeros(shape, dtype=torch.int64, device=flat.device)
    dtype = flat.dtype
    if dtype == torch.bool:
        value: float | int | bool = kind is ReductionKind.MIN
    elif dtype.is_floating_point:
        value = -math.inf if kind is ReductionKind.MAX else math.inf
    else:
        info = torch.iinfo(dtype)
        value = info.min if kind is ReductionKind.MAX else info.max
    return torch.full(shape, value, dtype=dtype, device=flat.device)


register_impls(LoopFunctions)


def make_loop_interpreter(module: ModuleOp, device: torch.device | None = None) -> Interpreter:
    """An interpreter for loop IR: aten (for extern bodies), func, index arith and loop."""
    device = device or torch.device("cpu")
    interpreter = make_interpreter(module, device)
    interpreter.register_implementations(LoopFunctions(device=device))
    return interpreter


def check_buffer_argument(
    position: int, ty: object, value: object, strides: tuple[int, ...] | None = None
) -> object:
    """``value`` as the buffer for a function argument of type ``ty`` (ints pass through);
    raises ArgumentError naming the argument when it does not fit. ``strides``: the
    layout the IR reads the argument through (``kiln.arg_strides``), which the buffer
    gets, in memory of its own (extern bodies' ``as_strided`` count from offset 0)."""
    if not isinstance(ty, MemRefType):
        return value
    if not isinstance(value, torch.Tensor):
        raise ArgumentError(f"argument #{position} must be {ty}, got {type(value).__name__}")
    shape = tuple(ty.get_shape())
    dtype = torch_dtype(ty.element_type)
    if (
        value.dtype != dtype
        or value.dim() != len(shape)
        or any(want >= 0 and want != got for want, got in zip(shape, value.shape, strict=True))
    ):
        raise ArgumentError(
            f"argument #{position} must be {ty}, got a {value.dtype} tensor of shape "
            f"{list(value.shape)}"
        )
    if strides is not None and len(strides) == value.dim():
        out = torch.empty_strided(
            tuple(value.shape), strides, dtype=value.dtype, device=value.device
        )
        return out.copy_(value)
    return as_buffer(value)


def run_function(
    module: ModuleOp, args: Sequence[object], name: str = "forward"
) -> tuple[object, ...]:
    """Run ``func.func @name`` of a loop-level module on torch tensors / Python ints."""
    from xdsl.dialects.func import FuncOp

    func = next(
        (op for op in module.ops if isinstance(op, FuncOp) and op.sym_name.data == name), None
    )
    if func is None:
        raise ArgumentError(f"the module has no function @{name}")
    inputs = func.function_type.inputs.data
    if len(args) != len(inputs):
        raise ArgumentError(f"@{name} takes {len(inputs)} arguments, got {len(args)}")
    layouts = program_arg_strides(func.arg_attrs, len(inputs))
    checked = [
        check_buffer_argument(i, ty, v, layouts[i])
        for i, (ty, v) in enumerate(zip(inputs, args, strict=True))
    ]
    device = next((v.device for v in checked if isinstance(v, torch.Tensor)), torch.device("cpu"))
    interpreter = make_loop_interpreter(module, device)
    return tuple(interpreter.call_op(func, tuple(checked)))


__all__ = ["LoopFunctions", "make_loop_interpreter", "run_function"]
