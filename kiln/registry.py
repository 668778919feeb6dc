"""Lazy registries of dialects and passes.

A :class:`Registry` maps names to factories that import on first use, so that
``kiln-opt`` starts fast and plugins can add to it. There is no global registry that
code mutates from afar: each tool builds one with :func:`default_registry` and passes it
on explicitly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.ir import Dialect
from xdsl.passes import ModulePass

DialectFactory = Callable[[], Dialect]
PassFactory = Callable[[], type[ModulePass]]


def _aten() -> Dialect:
    from kiln.dialects.aten import Aten

    return Aten


def _builtin_dialects() -> dict[str, DialectFactory]:
    from xdsl.dialects import get_all_dialects

    upstream = get_all_dialects()
    wanted = ("builtin", "func", "arith", "math", "scf", "memref", "test")
    dialects: dict[str, DialectFactory] = {name: upstream[name] for name in wanted if name in upstream}
    dialects["aten"] = _aten
    return dialects


def _pass(module: str, cls: str) -> PassFactory:
    def load() -> type[ModulePass]:
        import importlib

        return getattr(importlib.import_module(module), cls)

    return load


# kiln's own passes: name -> (module, class). One pass per file under passes/.
KILN_PASSES: dict[str, tuple[str, str]] = {
    "cse": ("kiln.passes.cse", "CSEPass"),
    "dce": ("kiln.passes.dce", "DCEPass"),
    "canonicalize": ("kiln.passes.canonicalize", "CanonicalizePass"),
    "decompose": ("kiln.passes.decompose", "DecomposePass"),
}


@dataclass
class Registry:
    """Dialects and passes available to one tool invocation or compilation."""

    dialects: dict[str, DialectFactory] = field(default_factory=dict[str, DialectFactory])
    passes: dict[str, PassFactory] = field(default_factory=dict[str, PassFactory])

    def add_dialect(self, name: str, factory: DialectFactory) -> None:
        if name in self.dialects:
            raise ValueError(f"dialect '{name}' is already registered")
        self.dialects[name] = factory

    def add_pass(self, name: str, factory: PassFactory) -> None:
        if name in self.passes:
            raise ValueError(f"pass '{name}' is already registered")
        self.passes[name] = factory

    def get_pass(self, name: str) -> type[ModulePass]:
        try:
            return self.passes[name]()
        except KeyError:
            raise KeyError(f"unknown pass '{name}'") from None

    def make_context(self, *, allow_unregistered: bool = False) -> Context:
        """A Context with every registered dialect, each loaded on first use."""
        ctx = Context(allow_unregistered=allow_unregistered)
        for name, factory in self.dialects.items():
            ctx.register_dialect(name, factory)
        return ctx


def default_registry() -> Registry:
    """kiln's dialects and passes (plugins are loaded separately, see kiln.plugins)."""
    registry = Registry()
    for name, factory in _builtin_dialects().items():
        registry.add_dialect(name, factory)
    for name, (module, cls) in KILN_PASSES.items():
        registry.add_pass(name, _pass(module, cls))
    return registry


def make_context(*, allow_unregistered: bool = False) -> Context:
    """Shortcut: a Context with kiln's default dialects."""
    return default_registry().make_context(allow_unregistered=allow_unregistered)
