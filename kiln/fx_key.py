"""The FX graph as text for the graph cache's key, without importing it to aten IR.

A warm start (:mod:`kiln.graph_cache`) used to import the graph to aten IR and print it
to find its entry: at 48 GPT-2 layers that was most of a hit's time, and importing
loads kiln's dialects (the largest part of a fresh process's module loading). The import
is a function of the FX graph and of kiln's source and torch's version (both in the
key), so a text that determines everything the importer reads from the graph keys the
same program. :func:`describe_graph` writes, per node in graph order: its kind, name,
target, arguments (other nodes by name; Python numbers with their type and ``repr``,
so ``-0.0``, ``nan`` and ``1`` vs ``1.0`` differ; dtypes, devices, layouts, memory
formats) and ``meta['val']`` (a tensor's class, dtype, shape, strides, storage offset,
device, layout, ``requires_grad``, conjugate and negative bits, and which storage it
shares with earlier values: aliasing decides storage-dependent imports); the content of
every ``get_attr`` tensor (small ones are embedded in the IR); and the output pytree
spec. It does not write ``meta['stack_trace']`` (locations, not in the printed IR
either).

Anything it cannot describe exactly makes it return None and the caller keys on the
imported IR's text as before: symbolic sizes (dynamic shapes: their ranges and guards
live in the shape environment), callables other than ATen overloads and named
functions of ``operator``/``math``/``builtins``/torch, ``call_module`` and
higher-order ops (their subgraphs), non-tensor or fake ``get_attr`` values, quantized or
non-strided tensors, and argument types it does not know.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import torch
import torch.fx

_NAMED_MODULES = ("_operator", "operator", "math", "builtins")


class _Opaque(Exception):
    """Something the description cannot pin down: key on the imported IR instead."""


class _Describer:
    def __init__(self, gm: torch.fx.GraphModule) -> None:
        self.gm = gm
        self.storages: dict[Any, int] = {}

    def storage(self, t: torch.Tensor) -> int:
        from torch.multiprocessing.reductions import StorageWeakRef

        ref = StorageWeakRef(t.untyped_storage())
        return self.storages.setdefault(ref, len(self.storages))

    def ints(self, values: Any) -> str:
        out: list[str] = []
        for v in values:
            if type(v) is not int:
                raise _Opaque  # a SymInt: dynamic shapes
            out.append(str(v))
        return ",".join(out)

    def tensor(self, t: torch.Tensor) -> str:
        if t.layout != torch.strided or t.is_quantized or t.is_nested:
            raise _Opaque
        return (
            f"T[{type(t).__qualname__} {t.dtype} ({self.ints(t.shape)}) ({self.ints(t.stride())})"
            f" +{self.ints((t.storage_offset(),))} {t.device} grad={t.requires_grad}"
            f" conj={t.is_conj()} neg={t.is_neg()} s{self.storage(t)}]"
        )

    def value(self, v: Any) -> str:
        """A ``meta['val']``."""
        if v is None or type(v) in (bool, int, float):
            return f"{type(v).__name__}:{v!r}"
        if isinstance(v, torch.Tensor):
            return self.tensor(v)
        if type(v) in (list, tuple):
            inner = ";".join(self.value(x) for x in v)
            return f"{type(v).__name__}({inner})"
        raise _Opaque  # SymInt/SymFloat/SymBool, opaque objects

    def arg(self, a: Any) -> str:
        """A node's argument."""
        if isinstance(a, torch.fx.Node):
            return f"%{a.name}"
        if a is None or a is Ellipsis or type(a) in (bool, int, float, complex, str):
            return f"{type(a).__name__}:{a!r}"
        if isinstance(a, torch.dtype | torch.device | torch.layout | torch.memory_format):
            return f"{type(a).__name__}:{a!r}"
        if isinstance(a, list | tuple):  # FX's immutable_list is a list
            kind = "tuple" if isinstance(a, tuple) else "list"
            return f"{kind}({';'.join(self.arg(x) for x in a)})"  # pyright: ignore[reportUnknownVariableType]
        if isinstance(a, slice):
            return f"slice({self.arg(a.start)};{self.arg(a.stop)};{self.arg(a.step)})"
        if isinstance(a, dict):
            items = ";".join(f"{k!r}={self.arg(v)}" for k, v in a.items())  # pyright: ignore[reportUnknownVariableType]
            return f"dict({items})"
        raise _Opaque  # SymInts, tensors, other objects

    def target(self, node: torch.fx.Node) -> str:
        target = node.target
        if node.op in ("placeholder", "output", "get_attr", "call_method"):
            return str(target)
        if node.op != "call_function":
            raise _Opaque  # call_module
        if isinstance(target, torch._ops.OpOverload):  # pyright: ignore[reportPrivateUsage]
            return f"overload {target.name()}"
        module = getattr(target, "__module__", None) or ""
        name = getattr(target, "__qualname__", None) or ""
        if (module in _NAMED_MODULES or module.split(".")[0] == "torch") and name.isidentifier():
            # A named function: the same name is the same function (torch's version is
            # in the key). Lambdas, local functions and higher-order ops are not.
            if not isinstance(target, torch._ops.OperatorBase):  # pyright: ignore[reportPrivateUsage]
                return f"function {module}.{name}"
        raise _Opaque

    def get_attr(self, node: torch.fx.Node) -> str:
        from torch._subclasses.fake_tensor import FakeTensor, unset_fake_temporarily

        value: Any = self.gm
        for part in str(node.target).split("."):
            if not hasattr(value, part):
                raise _Opaque
            value = getattr(value, part)
        if not isinstance(value, torch.Tensor) or isinstance(value, FakeTensor):
            raise _Opaque
        with unset_fake_temporarily():
            data = value.detach().contiguous().reshape(-1).view(torch.uint8)
            digest = hashlib.sha256(data.cpu().numpy().tobytes()).hexdigest()
        return f"{self.tensor(value)} sha256 {digest}"

    def graph(self) -> str:
        lines: list[str] = []
        for node in self.gm.graph.nodes:
            line = f"{node.op} {node.name} {self.target(node)}"
            line += f" ({';'.join(self.arg(a) for a in node.args)})"
            if node.kwargs:
                line += f" {{{self.arg(dict(node.kwargs))}}}"
            line += " -> " + (self.value(node.meta["val"]) if "val" in node.meta else "-")
            if node.op == "get_attr":
                line += " = " + self.get_attr(node)
            lines.append(line)
        codegen = self.gm.graph._codegen  # pyright: ignore[reportPrivateUsage]
        lines.append(f"codegen {type(codegen).__qualname__}")
        pytree_info = getattr(codegen, "pytree_info", None)
        if pytree_info is not None:
            lines.append(f"out_spec {pytree_info.out_spec!r}")
        return "\n".join(lines)


def describe_graph(gm: torch.fx.GraphModule) -> str | None:
    """The text that keys ``gm``'s import, or None when it cannot be described exactly
    (then key on the imported IR)."""
    try:
        return _Describer(gm).graph()
    except _Opaque:
        return None
    except Exception:  # an object that does not answer as expected: the IR key is safe
        return None


def fetch_constants(gm: torch.fx.GraphModule, targets: Sequence[str]) -> list[torch.Tensor]:
    """The traced constants a graph from the graph cache passes after its placeholders
    (the ``get_attr`` targets its entry lists; :func:`describe_graph` hashed their data,
    so these are the tensors it was compiled with)."""
    tensors: list[torch.Tensor] = []
    for target in targets:
        value: Any = gm
        for part in target.split("."):
            value = getattr(value, part)
        assert isinstance(value, torch.Tensor), target
        tensors.append(value.detach())
    return tensors


__all__ = ["describe_graph", "fetch_constants"]
