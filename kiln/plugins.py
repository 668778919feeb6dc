"""Plugins: passes, dialects and targets that live in other packages.

A plugin is a Python module with a ``register`` function::

    from kiln.registry import Registry

    def register(registry: Registry) -> None:
        registry.add_pass_class(MyPass)                  # a ModulePass subclass
        registry.add_dialect("mine", lambda: MyDialect)  # optional
        registry.add_target("my-target", lambda: MyTarget)  # optional

``register`` may only add to the registry it is given; a name that is already taken is
an error. It reaches kiln by three routes:

1. ``kiln-opt --load-plugin path/to/plugin.py`` (or a dotted module name,
   ``--load-plugin my_pkg.kiln_plugin``), for one invocation;
2. the entry-point group ``kiln.plugins`` in the plugin package's metadata, whose value
   is a module with ``register`` or the function itself
   (``my_plugin = "my_pkg.kiln_plugin:register"``): ``kiln-opt`` and every tool that
   calls :func:`load_entry_point_plugins` (or :func:`plugin_registry`) picks it up;
3. the stock ``xdsl-opt``, through xDSL's own ``xdsl.universe`` entry point, with
   ``UNIVERSE = plugin_universe(register)`` in the plugin module.

See ``docs/writing-a-pass.md``.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from types import ModuleType
from typing import cast

from xdsl.universe import Universe

from kiln.registry import Registry, default_registry

PLUGIN_ENTRY_POINT_GROUP = "kiln.plugins"
"""The entry-point group kiln loads plugins from."""

RegisterFunction = Callable[[Registry], None]


@dataclass
class PluginError(Exception):
    """A plugin could not be loaded; names the plugin and, when known, the failing line."""

    plugin: str
    message: str
    file: str | None = None
    line: int | None = None

    def __str__(self) -> str:
        return f"plugin '{self.plugin}' failed to load: {self.message}"


def load_plugin(registry: Registry, spec: str) -> None:
    """Load the plugin at ``spec`` (a ``.py`` path or a dotted module name) into ``registry``."""
    path = Path(spec)
    if spec.endswith(".py") or path.is_file():
        module = _import_file(path, spec)
        source = str(path)
    else:
        module = _import_module(spec)
        source = module.__file__
    register = getattr(module, "register", None)
    if not callable(register):
        raise PluginError(spec, "the module has no function 'register(registry)'", source)
    run_register(registry, spec, cast(RegisterFunction, register))


def load_entry_point_plugins(registry: Registry) -> list[str]:
    """Load every plugin of the ``kiln.plugins`` entry-point group; returns their names."""
    names: list[str] = []
    for entry_point in entry_points(group=PLUGIN_ENTRY_POINT_GROUP):
        register = _entry_point_register(entry_point)
        run_register(registry, entry_point.name, register)
        names.append(entry_point.name)
    return names


def plugin_registry() -> Registry:
    """kiln's registry plus every installed ``kiln.plugins`` plugin."""
    registry = default_registry()
    load_entry_point_plugins(registry)
    return registry


def plugin_universe(register: RegisterFunction) -> Universe:
    """An xDSL ``Universe`` holding what ``register`` adds, for ``xdsl-opt``.

    Declare it as an ``xdsl.universe`` entry point. xDSL loads every universe each time
    ``xdsl-opt`` starts, so ``register`` should add lazy factories (or cheap classes).
    """
    registry = Registry()
    register(registry)
    return Universe(
        all_dialects=dict(registry.dialects),
        all_passes=dict(registry.passes),
        all_targets=dict(registry.targets),
    )


def run_register(registry: Registry, plugin: str, register: RegisterFunction) -> None:
    """Call a plugin's ``register``; on failure ``registry`` is left as it was."""
    saved = (dict(registry.dialects), dict(registry.passes), dict(registry.targets))
    try:
        register(registry)
    except Exception as e:
        registry.dialects, registry.passes, registry.targets = saved
        raise _plugin_error(plugin, e, _source_file(register)) from e


def _import_file(path: Path, spec: str) -> ModuleType:
    if not path.is_file():
        raise PluginError(spec, f"no such file: {path}")
    resolved = path.resolve()
    # A name unique per file, so that two plugins called plugin.py do not collide.
    digest = hashlib.sha1(str(resolved).encode()).hexdigest()[:8]
    name = f"kiln_plugin_{resolved.stem}_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    module_spec = importlib.util.spec_from_file_location(name, resolved)
    if module_spec is None or module_spec.loader is None:
        raise PluginError(spec, "cannot import it as a Python module", str(path))
    module = importlib.util.module_from_spec(module_spec)
    # Registered before running, as a normal import does (dataclasses look it up).
    sys.modules[name] = module
    try:
        module_spec.loader.exec_module(module)
    except Exception as e:
        del sys.modules[name]
        raise _plugin_error(spec, e, str(resolved)) from e
    return module


def _import_module(spec: str) -> ModuleType:
    try:
        return importlib.import_module(spec)
    except ModuleNotFoundError as e:
        if e.name is not None and spec.startswith(e.name):
            raise PluginError(spec, f"no module named '{e.name}'") from e
        raise _plugin_error(spec, e, None) from e
    except Exception as e:
        raise _plugin_error(spec, e, None) from e


def _entry_point_register(entry_point: EntryPoint) -> RegisterFunction:
    label = f"{entry_point.name} = {entry_point.value}"
    try:
        loaded = entry_point.load()
    except Exception as e:
        raise _plugin_error(label, e, None) from e
    if isinstance(loaded, ModuleType):
        loaded = getattr(loaded, "register", None)
    if not callable(loaded):
        raise PluginError(
            label, "the entry point is neither a register function nor a module with one"
        )
    return cast(RegisterFunction, loaded)


def _source_file(function: Callable[..., object]) -> str | None:
    code = getattr(function, "__code__", None)
    return None if code is None else code.co_filename


def _plugin_error(plugin: str, error: Exception, source: str | None) -> PluginError:
    """Describe ``error`` at the plugin's own line that raised it (or the innermost one)."""
    message = f"{type(error).__name__}: {error}"
    if isinstance(error, SyntaxError) and error.filename is not None:
        return PluginError(plugin, f"SyntaxError: {error.msg}", error.filename, error.lineno)
    frames = traceback.extract_tb(error.__traceback__)
    in_plugin = [f for f in frames if source is not None and f.filename == source]
    frame = (in_plugin or frames or [None])[-1]
    if frame is None:
        return PluginError(plugin, message, source)
    return PluginError(plugin, message, frame.filename, frame.lineno)
