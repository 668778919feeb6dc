"""Reading a graph's ``kiln.outputs`` structure back into Python values.

The string is written at import (:mod:`kiln.dialects.aten.fx.outputs`, which documents
the format and re-exports this); a compiled graph rebuilds its outputs with
:func:`structure_builder` on every call. This module imports no dialect, so that a graph
from the graph cache (:mod:`kiln.graph_cache`) runs without loading kiln's IR modules.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Callable, Sequence
from functools import cache
from typing import Any

OUTPUTS_ATTR = "kiln.outputs"
"""The function attribute holding the structure (also
:data:`kiln.dialects.aten.function_attrs.OUTPUTS_ATTR`)."""


class OutputStructureError(ValueError):
    """A structure that cannot be written, or a malformed ``kiln.outputs`` string."""


def _resolve_type(node: ast.expr) -> type:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        raise OutputStructureError("a container type must be a dotted name")
    parts.append(node.id)
    dotted = list(reversed(parts))
    for split in range(len(dotted) - 1, 0, -1):
        module = sys.modules.get(".".join(dotted[:split]))
        if module is None:
            continue
        value: object = module
        for attr in dotted[split:]:
            value = getattr(value, attr, None)
        if isinstance(value, type) and issubclass(value, tuple):
            return value
    raise OutputStructureError(f"unknown output container type {'.'.join(dotted)}")


Builder = Callable[[Sequence[Any]], Any]
"""Builds one node of a structure from the returned values."""


def _builder(node: ast.expr) -> Builder:
    """A function building ``node`` from the returned values: the expression is read
    once, here, so that a compiled graph's every call only runs the closures."""
    if isinstance(node, ast.Constant) and node.value is None:
        return lambda values: None
    if isinstance(node, ast.Constant) and type(node.value) is int:
        index = node.value
        return lambda values: values[index]
    if isinstance(node, ast.Tuple):
        items = [_builder(e) for e in node.elts]
        return lambda values: tuple(item(values) for item in items)
    if isinstance(node, ast.List):
        items = [_builder(e) for e in node.elts]
        return lambda values: [item(values) for item in items]
    if isinstance(node, ast.Dict):
        entries: list[tuple[object, Builder]] = []
        for key, value in zip(node.keys, node.values, strict=True):
            if not isinstance(key, ast.Constant):
                raise OutputStructureError("output dict keys must be literals")
            entries.append((key.value, _builder(value)))
        return lambda values: {key: item(values) for key, item in entries}
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "permute":
        value, dims = node.args
        tensor = _builder(value)
        if not isinstance(dims, ast.Tuple) or not all(
            isinstance(d, ast.Constant) for d in dims.elts
        ):
            raise OutputStructureError("permute takes a value and a tuple of dims")
        order = tuple(d.value for d in dims.elts if isinstance(d, ast.Constant))

        def permuted(values: Sequence[Any]) -> Any:
            t = tensor(values)
            return None if t is None else t.permute(order)

        return permuted
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "alias":
        view, arguments, result = _alias_call(node)
        base = _builder(node.args[1])

        def aliased(values: Sequence[Any]) -> Any:
            b = base(values)
            if b is None:
                return None
            return view(b, **arguments) if result is None else view(b, **arguments)[result]

        root = _root_index(node)
        return aliased if root is None else _strided_replay(aliased, root)
    if isinstance(node, ast.Call) and not node.keywords:
        cls = _resolve_type(node.func)
        items = [_builder(a) for a in node.args]
        # namedtuples take their fields positionally, structseqs one sequence.
        if hasattr(cls, "_fields"):
            return lambda values: cls(*(item(values) for item in items))
        return lambda values: cls([item(values) for item in items])
    raise OutputStructureError(f"unexpected {ast.dump(node)} in {OUTPUTS_ATTR}")


def _root_index(node: ast.expr) -> int | None:
    """The returned value a chain of ``alias``/``permute`` nodes views (None: another
    kind of node)."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        if node.func.id not in ("alias", "permute") or len(node.args) < 2:
            return None
        node = node.args[1] if node.func.id == "alias" else node.args[0]
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None


_MAX_GEOMETRIES = 64
"""Root layouts remembered per view (beyond them, the memory starts over)."""
_Geometry = tuple[tuple[int, ...], tuple[int, ...], int]
"""A view's sizes, strides and storage offset relative to its root's."""


def _strided_replay(replay: Builder, root_index: int) -> Builder:
    """``replay`` (a chain of view ops from returned value ``root_index``), done once per
    layout of the root and then as one ``as_strided`` of the root: the same view of the
    same memory. A training forward returns dozens of views of its results as saved
    tensors (GPT-2 small: 45, through chains of up to four view ops at ~2 us an
    operator call: 0.3 ms of a 2.8 ms training step on the CPU)."""
    geometries: dict[tuple[Any, ...], _Geometry | None] = {}

    def replayed(values: Sequence[Any]) -> Any:
        root = values[root_index]
        if root is None:
            return replay(values)
        key = (root.shape, root.stride(), root.dtype, root.device)
        if key in geometries:
            geometry = geometries[key]
            if geometry is not None:
                size, stride, offset = geometry
                return root.as_strided(size, stride, root.storage_offset() + offset)
            return replay(values)
        view = replay(values)
        if len(geometries) >= _MAX_GEOMETRIES:
            geometries.clear()  # a dynamic-shape graph called at ever new sizes
        try:
            same_memory = (
                hasattr(view, "as_strided")
                and view.dtype == root.dtype
                and view.untyped_storage().data_ptr() == root.untyped_storage().data_ptr()
            )
        except (RuntimeError, NotImplementedError):  # no storage to compare (fake, meta)
            same_memory = False
        geometries[key] = (
            (tuple(view.shape), tuple(view.stride()), view.storage_offset() - root.storage_offset())
            if same_memory
            else None
        )
        return view

    return replayed


def _alias_call(node: ast.Call) -> tuple[Callable[..., Any], dict[str, Any], int | None]:
    """The view op, keyword arguments and result index of an ``alias(overload, value,
    args[, result])`` node (``result``: which view of a list-returning op, e.g. split)."""
    if len(node.args) not in (3, 4) or node.keywords:
        raise OutputStructureError(
            "alias takes an overload, a value, its arguments and an optional result index"
        )
    overload, _, arguments = node.args[:3]
    result: int | None = None
    if len(node.args) == 4:
        index = node.args[3]
        if not (isinstance(index, ast.Constant) and type(index.value) is int):
            raise OutputStructureError("alias's result index must be an integer literal")
        result = index.value
    if not (isinstance(overload, ast.Constant) and isinstance(overload.value, str)) or not (
        isinstance(arguments, ast.Constant) and isinstance(arguments.value, str)
    ):
        raise OutputStructureError("alias names its overload and arguments as strings")
    return _view_op(overload.value), _literal_arguments(arguments.value), result


@cache
def _view_op(overload: str) -> Callable[..., Any]:
    from kiln.dialects.aten.call_plan import torch_overload

    try:
        op = torch_overload(overload)
    except Exception as e:  # torch has no such operator
        raise OutputStructureError(f"alias of unknown operator {overload}: {e}") from None
    if not getattr(op, "is_view", False):
        raise OutputStructureError(f"alias of {overload}, which is not a view op")
    return op


@cache
def _literal_dict(text: str) -> tuple[tuple[str, Any], ...]:
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError) as e:
        raise OutputStructureError(f"malformed alias arguments {text!r}: {e}") from None
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):  # pyright: ignore[reportUnknownVariableType]
        raise OutputStructureError(f"alias arguments {text!r} are not a dict of names")
    return tuple(value.items())  # pyright: ignore[reportUnknownArgumentType, reportUnknownVariableType]


def _literal_arguments(text: str) -> dict[str, Any]:
    return dict(_literal_dict(text))


def replay_view(base: Any, overload: str, arguments: str, result: int | None) -> Any:
    """One ``alias(overload, base, arguments[, result])`` applied to the tensor ``base``."""
    view = _view_op(overload)(base, **_literal_arguments(arguments))
    return view if result is None else view[result]


def structure_builder(text: str) -> Callable[[Sequence[Any]], Any]:
    """``build(values)``: the Python value a ``kiln.outputs`` string describes, filled
    with ``values``. The string is parsed here, once (a compiled graph rebuilds its
    outputs on every call)."""
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as e:
        raise OutputStructureError(f"malformed {OUTPUTS_ATTR} {text!r}: {e}") from None
    body = tree.body
    if isinstance(body, ast.Tuple) and all(
        isinstance(e, ast.Constant) and type(e.value) is int for e in body.elts
    ):
        order = [int(e.value) for e in body.elts if isinstance(e, ast.Constant)]  # pyright: ignore[reportArgumentType]
        return lambda values: tuple(values[i] for i in order)  # the common case: a flat tuple
    return _builder(body)  # resolves container types and rejects bad nodes now


def is_flat(text: str) -> bool:
    """Whether a ``kiln.outputs`` string builds a flat tuple of values: returned values,
    ``None`` and views of returned values (``alias``, ``permute``), no container inside
    (what every AOTAutograd graph returns). A CUDA-graph runner can then record the built
    outputs, views included (:class:`~kiln.backends.triton.runtime.TritonOptions`)."""
    try:
        body = ast.parse(text, mode="eval").body
    except SyntaxError:
        return False
    return isinstance(body, ast.Tuple) and all(
        (isinstance(e, ast.Constant) and (e.value is None or type(e.value) is int))
        or _root_index(e) is not None
        for e in body.elts
    )


def rebuild_structure(text: str, values: Sequence[Any]) -> Any:
    """The Python value a ``kiln.outputs`` string describes, filled with ``values``."""
    return structure_builder(text)(values)


__all__ = ["OutputStructureError", "is_flat", "rebuild_structure", "structure_builder"]
