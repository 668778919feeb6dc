"""Kernels called as Python built-in functions (``METH_FASTCALL``), not through ``ctypes``.

A ``ctypes`` call converts every argument through its ``argtypes`` object and builds a
call frame for libffi: about 0.8 us for a kernel of seven arguments on the 2-vCPU AMD VM,
against 0.35 us for a built-in function that reads the same Python ints itself (what
Inductor's ``cpp_pybinding`` kernels are). A small model launches 20-40 kernels a call,
so the launch path is a few percent of a 1-ms call.

Every translation unit therefore ends with one *entry* per kernel::

    extern "C" kiln_py_object* kiln_py_kernel0(kiln_py_object* self,
                                               kiln_py_object* const* args, ptrdiff_t nargs) {
      if (nargs != 3) return kiln_py_wrong_count("kernel0", nargs, 3);
      void* a0 = kiln_py.as_pointer(args[0]);
      int64_t a1 = kiln_py.as_int64(args[1]);
      void* a2 = kiln_py.as_pointer(args[2]);
      if (kiln_py.error_occurred()) return nullptr;
      void* state = kiln_py.save_thread();
      int rc = kernel0(kiln_py_pointer{a0}, a1, kiln_py_pointer{a2});
      kiln_py.restore_thread(state);
      return kiln_py.from_int(rc);
    }

The entries call CPython through a table of function pointers (``kiln_py``) that the
loader fills once per loaded library (:func:`bind`) with the running interpreter's own
functions, so a unit needs neither ``Python.h`` (its include costs compile time) nor
undefined symbols (units link with ``-Wl,--no-undefined``). The GIL is released while
the kernel runs, as ``ctypes`` does. :func:`entry` makes the built-in function with
``PyCFunction_NewEx``; a library without entries (or without the table) gets the
``ctypes`` call instead.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from typing import Any

METH_FASTCALL = 0x0080
"""``ml_flags`` of a function taking ``(self, args, nargs)`` (CPython's stable ABI)."""

SUPPORT = r"""
// Python entry points (kiln.backends.cpp.python_entry): CPython through a table the
// loader fills, so that the unit needs neither Python.h nor undefined symbols.
#include <cstddef>
#include <cstdio>
struct kiln_py_object;
struct kiln_py_api {
  void* (*as_pointer)(kiln_py_object*);
  long long (*as_int64)(kiln_py_object*);
  kiln_py_object* (*error_occurred)(void);
  kiln_py_object* (*from_int)(long);
  void* (*save_thread)(void);
  void (*restore_thread)(void*);
  void (*set_error)(kiln_py_object*, const char*);
  kiln_py_object* type_error;
};
static kiln_py_api kiln_py = {};
extern "C" void kiln_py_bind(const kiln_py_api* api) { kiln_py = *api; }
// A pointer argument converts to whatever pointer the kernel's parameter is.
struct kiln_py_pointer {
  void* p;
  template <class T> operator T*() const { return static_cast<T*>(p); }
};
static kiln_py_object* kiln_py_wrong_count(const char* name, ptrdiff_t got, ptrdiff_t want) {
  char message[160];
  std::snprintf(message, sizeof message, "kiln kernel %s takes %td arguments (%td given)",
                name, want, got);
  kiln_py.set_error(kiln_py.type_error, message);
  return nullptr;
}
"""
"""The table and helpers every unit holds (before its entries)."""


def entry_source(name: str, kinds: str) -> str:
    """The C++ entry of kernel ``name`` with argument ``kinds`` (``i``: ``int64_t``,
    ``p``: a pointer; :func:`~kiln.backends.cpp.loader.argument_kinds`)."""
    lines = [
        f'extern "C" kiln_py_object* kiln_py_{name}(kiln_py_object* self, '
        "kiln_py_object* const* args, ptrdiff_t nargs) {",
        "  (void)self;",
        f'  if (nargs != {len(kinds)}) return kiln_py_wrong_count("{name}", nargs, {len(kinds)});',
    ]
    call: list[str] = []
    for k, kind in enumerate(kinds):
        if kind == "i":
            lines.append(f"  int64_t a{k} = (int64_t)kiln_py.as_int64(args[{k}]);")
            call.append(f"a{k}")
        else:
            lines.append(f"  void* a{k} = kiln_py.as_pointer(args[{k}]);")
            call.append(f"kiln_py_pointer{{a{k}}}")
    lines += [
        "  if (kiln_py.error_occurred()) return nullptr;",
        "  void* state = kiln_py.save_thread();",
        f"  int rc = {name}({', '.join(call)});",
        "  kiln_py.restore_thread(state);",
        "  return kiln_py.from_int(rc);",
        "}",
    ]
    return "\n".join(lines) + "\n"


def entries_source(kernels: Sequence[tuple[str, str]]) -> str:
    """The support code and one entry per ``(name, kinds)``: a unit's tail."""
    return SUPPORT + "".join(entry_source(name, kinds) for name, kinds in kernels)


class _Api(ctypes.Structure):
    _fields_ = [  # pyright: ignore[reportUnannotatedClassAttribute]
        (field, ctypes.c_void_p)
        for field in (
            "as_pointer",
            "as_int64",
            "error_occurred",
            "from_int",
            "save_thread",
            "restore_thread",
            "set_error",
            "type_error",
        )
    ]


class _MethodDef(ctypes.Structure):
    _fields_ = [  # pyright: ignore[reportUnannotatedClassAttribute]
        ("ml_name", ctypes.c_char_p),
        ("ml_meth", ctypes.c_void_p),
        ("ml_flags", ctypes.c_int),
        ("ml_doc", ctypes.c_char_p),
    ]


def _address(function: Any) -> int:
    return ctypes.cast(function, ctypes.c_void_p).value or 0


def _api() -> _Api:
    python = ctypes.pythonapi
    return _Api(
        _address(python.PyLong_AsVoidPtr),
        _address(python.PyLong_AsLongLong),
        _address(python.PyErr_Occurred),
        _address(python.PyLong_FromLong),
        _address(python.PyEval_SaveThread),
        _address(python.PyEval_RestoreThread),
        _address(python.PyErr_SetString),
        id(TypeError),  # the object's address (CPython); immortal, a built-in type
    )


_API = _api()

_new_function = ctypes.pythonapi.PyCFunction_NewEx
_new_function.argtypes = [ctypes.POINTER(_MethodDef), ctypes.py_object, ctypes.c_void_p]
_new_function.restype = ctypes.py_object


def bind(library: ctypes.CDLL) -> bool:
    """Give ``library``'s entries this interpreter's functions; False if it has none."""
    try:
        setter = library.kiln_py_bind
    except AttributeError:
        return False
    setter.argtypes = [ctypes.POINTER(_Api)]
    setter.restype = None
    setter(ctypes.byref(_API))
    return True


def entry(library: ctypes.CDLL, symbol: str) -> Callable[..., int] | None:
    """Kernel ``symbol`` of a bound library as a built-in function (the function keeps
    its method definition and the library alive), or None if the library has no entry
    for it."""
    try:
        address = _address(getattr(library, f"kiln_py_{symbol}"))
    except AttributeError:
        return None
    definition = _MethodDef(symbol.encode(), address, METH_FASTCALL, None)
    return _new_function(ctypes.byref(definition), (definition, library), None)


__all__ = ["METH_FASTCALL", "SUPPORT", "bind", "entries_source", "entry", "entry_source"]
