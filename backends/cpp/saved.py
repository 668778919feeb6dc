"""A compiled CPU program as data, and the program rebuilt from it (warm start).

The driver's graph cache (:mod:`kiln.graph_cache`) stores what :func:`save_program`
returns and, in a later process, calls :func:`load_program` instead of running the
pipeline: the wrapper's Python source is executed again in a namespace rebuilt from
data, and the kernels come from their saved C++ (through the library cache and the
kernel index: a hit is a ``dlopen``; a library pruned since is rebuilt).

The wrapper's namespace holds Python objects: ATen bindings and overloads, the wrapper's
helpers, dtypes, constant tensors, the loaded kernels. They are pickled, with the
objects that have no faithful pickled form written as references instead (kernels by
symbol, modules and kiln's own helpers by name, ``OpOverload`` s by overload name). A
namespace that holds anything else that does not survive a round trip unchanged (an
interpreted launch or extern, which hold IR; an aten call plan's closures) is **not
saved** (:func:`save_program` returns None): the graph then compiles every time, as
before, and never runs from an entry that could differ from what was compiled.
"""

from __future__ import annotations

import ctypes
import importlib
import io
import math
import pickle
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from kiln.backends.cpp import runtime as cpp_runtime
from kiln.backends.cpp.loader import KernelText, load_kernel_texts
from kiln.backends.host import runtime

_C_FUNCTION: type = getattr(ctypes, "_CFuncPtr")  # noqa: B009 - private in the stubs
"""The type of a loaded C function (ctypes' base class of them)."""

SAVED_FORMAT = 1
"""Bumped when :class:`SavedProgram` or the reference kinds change."""


class NotSaveable(ValueError):
    """The program holds an object that cannot be rebuilt faithfully from data."""


@dataclass(frozen=True)
class SavedProgram:
    """Everything :func:`load_program` needs (plain data: picklable without kiln state)."""

    function: str
    """The wrapper's function name (the program's)."""
    python_source: str
    kernels: tuple[KernelText, ...]
    """The kernels' C++ (loaded from the library cache or the kernel index, built if
    neither holds them any more)."""
    namespace: bytes
    """The wrapper's namespace, pickled with references (see the module docstring)."""
    format: int = SAVED_FORMAT


def _named_objects() -> dict[str, Any]:
    """kiln's own wrapper helpers by a stable name (their pickled form would be their
    module path, which is fine too, but some are builtins of torch's C extension). They
    live in the run-time modules, which import no IR: loading a program is light."""
    named: dict[str, Any] = {f"scalars.{k}": v for k, v in runtime.SCALAR_HELPERS.items()}
    named.update(
        {
            "wrapper.empty_strided": cpp_runtime.EMPTY_STRIDED_CPU,
            "wrapper.kernel_failed": cpp_runtime.kernel_failed,
            "wrapper.bad_argument": cpp_runtime.bad_argument,
            "wrapper.profiler_on": cpp_runtime.PROFILER_ON,
            "wrapper.record_kernel": cpp_runtime.record_kernel,
            "externs.reinterpret": runtime.REINTERPRET,
            "externs.reinterpret_fallback": runtime.reinterpret_fallback,
            "externs.as_buffer": runtime.as_buffer,
            "torch.empty": torch.empty,
            "torch.Tensor": torch.Tensor,
        }
    )
    named.update({f"fast.{k}": v for k, v in runtime.FAST_CALLS.items()})
    return named


_NAMED: dict[str, Any] | None = None


def _named() -> dict[str, Any]:
    global _NAMED
    if _NAMED is None:
        _NAMED = _named_objects()
    return _NAMED


class _Pickler(pickle.Pickler):
    def __init__(self, file: io.BytesIO, kernels: dict[int, str]) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.kernels = kernels
        self.by_id = {id(v): k for k, v in _named().items()}

    def persistent_id(self, obj: Any) -> Any:  # pyright: ignore[reportIncompatibleMethodOverride]
        if isinstance(obj, bool | int | float | str | bytes | tuple | list | dict | type(None)):
            return None
        symbol = self.kernels.get(id(obj))
        if symbol is not None:
            return ("kernel", symbol)
        name = self.by_id.get(id(obj))
        if name is not None:
            return ("named", name)
        if isinstance(obj, torch._ops.OpOverload):  # pyright: ignore[reportPrivateUsage]
            return ("overload", obj.name())
        if isinstance(obj, types.ModuleType):
            return ("module", obj.__name__)
        if isinstance(obj, _C_FUNCTION):
            raise NotSaveable("a C function that is not one of the program's kernels")
        module = type(obj).__module__
        if module.startswith(("xdsl.", "kiln.")) and not isinstance(obj, type):
            # IR (interpreted launches and externs hold the module), call plans: rebuilt
            # only by compiling again.
            raise NotSaveable(f"a {type(obj).__qualname__}")
        return None


class _Unpickler(pickle.Unpickler):
    def __init__(self, file: io.BytesIO, kernels: dict[str, Callable[..., int]]) -> None:
        super().__init__(file)
        self.kernels = kernels

    def persistent_load(self, pid: Any) -> Any:  # pyright: ignore[reportIncompatibleMethodOverride]
        kind, name = pid
        if kind == "kernel":
            return self.kernels[name]
        if kind == "named":
            return _named()[name]
        if kind == "overload":
            return runtime.overload_by_name(name)
        if kind == "module":
            return importlib.import_module(name)
        raise pickle.UnpicklingError(f"unknown reference kind {kind!r}")


def _same(original: Any, restored: Any) -> bool:
    """Whether ``restored`` is ``original`` rebuilt without change."""
    if restored is original:
        return True
    if type(restored) is not type(original):
        return False
    if isinstance(original, float):
        return repr(original) == repr(restored) or (math.isnan(original) and math.isnan(restored))
    if isinstance(original, bool | int | str | bytes | type(None)):
        return original == restored
    if isinstance(original, tuple | list):
        return len(original) == len(restored) and all(  # pyright: ignore[reportUnknownArgumentType]
            _same(a, b)
            for a, b in zip(original, restored, strict=True)  # pyright: ignore[reportUnknownArgumentType, reportUnknownVariableType]
        )
    if isinstance(original, torch.dtype | torch.device | torch.memory_format | torch.layout):
        return original == restored
    if isinstance(original, torch.Tensor):
        return _same_tensor(original, restored)
    return False  # an object whose equality kiln cannot vouch for


def _same_tensor(a: torch.Tensor, b: torch.Tensor) -> bool:
    if (
        type(a) is not torch.Tensor
        or a.dtype != b.dtype
        or a.shape != b.shape
        or a.stride() != b.stride()
        or a.device != b.device
        or a.requires_grad != b.requires_grad
        or a.is_quantized
    ):
        return False
    # Bit for bit (NaN payloads and -0.0 included).
    return torch.equal(
        a.detach().reshape(-1).contiguous().view(torch.uint8),
        b.detach().reshape(-1).contiguous().view(torch.uint8),
    )


def save_program(
    function: str,
    python_source: str,
    namespace: dict[str, Any],
    texts: list[KernelText],
    kernels: dict[str, Callable[..., int]],
) -> SavedProgram:
    """The program as data; raises :class:`NotSaveable` when it cannot be rebuilt
    faithfully. ``texts``: the kernels' C++; ``kernels``: the loaded kernels by symbol
    (as the namespace holds them)."""
    by_id = {id(f): symbol for symbol, f in kernels.items()}
    buffer = io.BytesIO()
    try:
        _Pickler(buffer, by_id).dump(namespace)
    except NotSaveable:
        raise
    except Exception as e:  # closures, local classes: no pickled form
        raise NotSaveable(f"the wrapper's namespace does not pickle ({e})") from None
    data = buffer.getvalue()
    try:
        restored = _Unpickler(io.BytesIO(data), kernels).load()
    except Exception as e:
        raise NotSaveable(f"the wrapper's namespace does not load back ({e})") from None
    for name, value in namespace.items():
        if not _same(value, restored.get(name)):
            raise NotSaveable(f"{name} ({type(value).__qualname__}) does not round-trip")
    return SavedProgram(function, python_source, tuple(texts), data)


def load_program(saved: SavedProgram) -> Callable[[list[Any]], tuple[Any, ...]]:
    """The wrapper of a :class:`SavedProgram` (its kernels loaded, built if missing)."""
    if saved.format != SAVED_FORMAT:
        raise ValueError(f"saved program format {saved.format}, expected {SAVED_FORMAT}")
    functions = load_kernel_texts(saved.kernels).functions
    namespace = _Unpickler(io.BytesIO(saved.namespace), functions).load()
    if not isinstance(namespace, dict):
        raise ValueError("saved wrapper namespace is not a dict")
    exec(compile(saved.python_source, f"<kiln wrapper {saved.function}>", "exec"), namespace)
    return namespace[saved.function]


__all__ = ["NotSaveable", "SavedProgram", "load_program", "save_program"]
