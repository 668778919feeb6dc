"""Lazy registries of dialects and passes.

A :class:`Registry` maps names to factories that import on first use, so that
``kiln-opt`` starts fast and plugins can add to it. There is no global registry that
code mutates from afar: each tool builds one with :func:`default_registry` and passes it
on explicitly (plugins: :mod:`kiln.plugins`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.ir import Dialect
from xdsl.passes import ModulePass
from xdsl.utils.target import Target

DialectFactory = Callable[[], Dialect]
PassFactory = Callable[[], type[ModulePass]]
TargetFactory = Callable[[], type[Target]]

# kiln's own dialects: name -> (module, Dialect object).
KILN_DIALECTS: dict[str, tuple[str, str]] = {
    "aten": ("kiln.dialects.aten", "Aten"),
    "loop": ("kiln.dialects.loop", "Loop"),
    "kernel": ("kiln.dialects.kernel", "Kernel"),
    "cpp": ("kiln.dialects.cpp", "Cpp"),
    "triton": ("kiln.dialects.triton", "Triton"),
}

# kiln's own passes: name -> (module, class). One pass per file under passes/.
KILN_PASSES: dict[str, tuple[str, str]] = {
    "cse": ("kiln.passes.cse", "CSEPass"),
    "dce": ("kiln.passes.dce", "DCEPass"),
    "channels-last": ("kiln.passes.channels_last", "ChannelsLastPass"),
    "prepack-weights": ("kiln.passes.prepack_weights", "PrepackWeightsPass"),
    "conv1x1-to-mm": ("kiln.passes.conv1x1_to_mm", "Conv1x1ToMmPass"),
    "conv-epilogue": ("kiln.passes.conv_epilogue", "ConvEpiloguePass"),
    "patch-conv-to-mm": ("kiln.passes.patch_conv_to_mm", "PatchConvToMmPass"),
    "merge-products": ("kiln.passes.merge_products", "MergeProductsPass"),
    "canonicalize": ("kiln.passes.canonicalize", "CanonicalizePass"),
    "decompose": ("kiln.passes.decompose", "DecomposePass"),
    "unfuse-addmm": ("kiln.passes.unfuse_addmm", "UnfuseAddmmPass"),
    "scale-after-bmm": ("kiln.passes.scale_after_bmm", "ScaleAfterBmmPass"),
    "unfuse-conv-bias": ("kiln.passes.unfuse_conv_bias", "UnfuseConvBiasPass"),
    "pad-mm": ("kiln.passes.pad_mm", "PadMmPass"),
    "dot-kernels": ("kiln.passes.dot_kernels", "DotKernelsPass"),
    "output-layout": ("kiln.passes.output_layout", "OutputLayoutPass"),
    "lower-aten": ("kiln.passes.lower_aten", "LowerAtenPass"),
    "inline-producers": ("kiln.passes.inline_producers", "InlineProducersPass"),
    "fuse": ("kiln.passes.fuse", "FusePass"),
    "elide-extern-copies": ("kiln.passes.elide_extern_copies", "ElideExternCopiesPass"),
    "tile": ("kiln.passes.tile", "TilePass"),
    "reorder-collectives": ("kiln.passes.reorder_collectives", "ReorderCollectivesPass"),
    "buffer-reuse": ("kiln.passes.buffer_reuse", "BufferReusePass"),
    "dedup-kernels": ("kiln.passes.dedup_kernels", "DedupKernelsPass"),
    "lower-to-cpp": ("kiln.passes.lower_to_cpp", "LowerToCppPass"),
    "cpp-drop-proven-checks": ("kiln.passes.cpp_drop_proven_checks", "CppDropProvenChecksPass"),
    "cpp-hoist-invariants": ("kiln.passes.cpp_hoist_invariants", "CppHoistInvariantsPass"),
    "cpp-reciprocals": ("kiln.passes.cpp_reciprocals", "CppReciprocalsPass"),
    "cpp-uniform-masks": ("kiln.passes.cpp_uniform_masks", "CppUniformMasksPass"),
    "lower-to-triton": ("kiln.passes.lower_to_triton", "LowerToTritonPass"),
}

# kiln's own output targets (``kiln-opt -t name``): name -> (module, Target class).
KILN_TARGETS: dict[str, tuple[str, str]] = {
    "cpp": ("kiln.targets", "CppTarget"),
    "triton": ("kiln.targets", "TritonTarget"),
}

# The xDSL dialects kiln's IR uses.
UPSTREAM_DIALECTS: tuple[str, ...] = (
    "builtin",
    "func",
    "arith",
    "math",
    "scf",
    "memref",
    "test",
    "complex",  # #complex.number: complex Scalar arguments of aten ops (mul.Scalar(x, 1j))
)


def _dialect(module: str, attr: str) -> DialectFactory:
    def load() -> Dialect:
        return getattr(importlib.import_module(module), attr)

    return load


def _pass(module: str, cls: str) -> PassFactory:
    def load() -> type[ModulePass]:
        return getattr(importlib.import_module(module), cls)

    return load


def _target(module: str, cls: str) -> TargetFactory:
    def load() -> type[Target]:
        return getattr(importlib.import_module(module), cls)

    return load


def kiln_dialect_factories() -> dict[str, DialectFactory]:
    """Lazy factories for kiln's own dialects (not the xDSL ones it reuses)."""
    return {name: _dialect(module, attr) for name, (module, attr) in KILN_DIALECTS.items()}


def kiln_pass_factories() -> dict[str, PassFactory]:
    """Lazy factories for kiln's own passes."""
    return {name: _pass(module, cls) for name, (module, cls) in KILN_PASSES.items()}


def kiln_target_factories() -> dict[str, TargetFactory]:
    """Lazy factories for kiln's own output targets."""
    return {name: _target(module, cls) for name, (module, cls) in KILN_TARGETS.items()}


def _upstream_dialect_factories() -> dict[str, DialectFactory]:
    from xdsl.dialects import get_all_dialects

    upstream = get_all_dialects()
    return {name: upstream[name] for name in UPSTREAM_DIALECTS if name in upstream}


@dataclass
class Registry:
    """Dialects and passes available to one tool invocation or compilation.

    Plugins add to it (see :mod:`kiln.plugins`)::

        def register(registry: Registry) -> None:
            registry.add_pass_class(MyPass)
            registry.add_dialect("mine", lambda: MyDialect)
            registry.add_target("my-target", lambda: MyTarget)
    """

    dialects: dict[str, DialectFactory] = field(default_factory=dict[str, DialectFactory])
    passes: dict[str, PassFactory] = field(default_factory=dict[str, PassFactory])
    targets: dict[str, TargetFactory] = field(default_factory=dict[str, TargetFactory])

    def add_dialect(self, name: str, factory: DialectFactory) -> None:
        if name in self.dialects:
            raise ValueError(f"dialect '{name}' is already registered")
        self.dialects[name] = factory

    def add_pass(self, name: str, factory: PassFactory) -> None:
        if name in self.passes:
            raise ValueError(f"pass '{name}' is already registered")
        self.passes[name] = factory

    def add_pass_class(self, pass_class: type[ModulePass]) -> None:
        """Register an already imported pass under its ``name``."""
        self.add_pass(pass_class.name, lambda: pass_class)

    def add_target(self, name: str, factory: TargetFactory) -> None:
        if name in self.targets:
            raise ValueError(f"target '{name}' is already registered")
        self.targets[name] = factory

    def get_pass(self, name: str) -> type[ModulePass]:
        factory = self.passes.get(name)
        if factory is None:
            raise KeyError(f"unknown pass '{name}'")
        return factory()

    def make_context(self, *, allow_unregistered: bool = False) -> Context:
        """A Context with every registered dialect, each loaded on first use."""
        ctx = Context(allow_unregistered=allow_unregistered)
        for name, factory in self.dialects.items():
            ctx.register_dialect(name, factory)
        return ctx


def default_registry() -> Registry:
    """kiln's dialects and passes (plugins are loaded separately, see kiln.plugins)."""
    registry = Registry()
    for name, factory in _upstream_dialect_factories().items():
        registry.add_dialect(name, factory)
    for name, factory in kiln_dialect_factories().items():
        registry.add_dialect(name, factory)
    for name, factory in kiln_pass_factories().items():
        registry.add_pass(name, factory)
    for name, factory in kiln_target_factories().items():
        registry.add_target(name, factory)
    return registry


def make_context(*, allow_unregistered: bool = False) -> Context:
    """Shortcut: a Context with kiln's default dialects."""
    return default_registry().make_context(allow_unregistered=allow_unregistered)


def normalize_pipeline(spec: str) -> str:
    """``spec`` with the whitespace around pass names and commas removed.

    mlir-opt accepts ``-p 'decompose, lower-aten'``; xDSL's spec parser does not. Spaces
    inside ``{...}`` separate pass options and are kept.
    """
    out: list[str] = []
    depth = 0
    for ch in spec:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth = max(depth - 1, 0)
        if depth == 0 and ch.isspace():
            continue
        out.append(ch)
    return "".join(out)
