"""The layering of kiln's packages, enforced on every import (docs/architecture.md).

dialects <- passes <- driver (kiln/: compiler, targets, tools) -> backends. Backends
compile, load and launch IR of their own level: they run no passes and import no other
backend (what both share is in ``kiln.backends.host`` and ``kiln.backends.cache``);
passes never reach into frontends or backends; dialects import neither passes nor
backends. Every import counts, including those inside functions and under
``TYPE_CHECKING``: a lazy import is still an edge.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("backends", "passes", "dialects", "frontends")
DRIVER = frozenset({"kiln.compiler", "kiln.targets", "kiln.registry", "kiln.main_job"})

ALLOWED: frozenset[tuple[str, str]] = frozenset()
"""Known edges, each with the work that removes it (none left: keep it that way)."""


def _imports(path: Path, root: Path = ROOT) -> list[str]:
    """Absolute names of the kiln modules ``path`` (under ``root``) imports."""
    package = "kiln." + ".".join(path.relative_to(root).with_suffix("").parts[:-1])
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                found.append(f"{base}.{node.module}" if node.module else base)
            elif node.module:
                found.append(node.module)
    return [name for name in found if name == "kiln" or name.startswith("kiln.")]


def _forbidden(source: str, target: str) -> str | None:
    """Why ``source`` (a path under the root) may not import module ``target``."""
    layer, _, rest = source.partition("/")
    parts = target.split(".")
    if any(target == d or target.startswith(d + ".") for d in DRIVER) and layer != "frontends":
        return "the driver is above the passes, dialects and backends"
    top = parts[1] if len(parts) > 1 else ""
    if layer == "backends":
        if top == "passes":
            return "backends run no passes: the driver lowers (kiln.targets)"
        if top == "backends" and len(parts) > 2:
            mine = rest.split("/")[0]
            theirs = parts[2]
            if mine in ("cpp", "triton") and theirs in ("cpp", "triton") and mine != theirs:
                return "a backend imports no other backend (shared code: kiln.backends.host)"
            if mine in ("host", "cache.py") and theirs in ("cpp", "triton"):
                return "the shared host layer imports no backend"
    if layer == "passes" and top in ("frontends", "backends"):
        return f"passes do not import {top}"
    if layer == "dialects" and top in ("passes", "backends", "frontends"):
        return f"dialects do not import {top}"
    return None


def layering_violations(root: Path = ROOT) -> list[str]:
    problems: list[str] = []
    for layer in LAYERS:
        for path in sorted((root / layer).rglob("*.py")):
            source = path.relative_to(root).as_posix()
            for target in _imports(path, root):
                why = _forbidden(source, target)
                if why is not None and (source, target) not in ALLOWED:
                    problems.append(f"{source} imports {target}: {why}")
    return problems


def test_no_import_crosses_a_layer() -> None:
    assert layering_violations() == []


def test_allowed_edges_still_exist() -> None:
    """An allow-list entry whose import is gone must be dropped, so the list only shrinks."""
    stale = [
        f"{source} -> {target}"
        for source, target in sorted(ALLOWED)
        if target not in _imports(ROOT / source)
    ]
    assert stale == []


def test_the_checker_sees_each_kind_of_edge(tmp_path: Path) -> None:
    """Each forbidden kind is reported, also as a lazy or relative import."""
    files = {
        "backends/cpp/a.py": "def f():\n    from kiln.passes.lower_to_cpp import X\n",
        "backends/triton/b.py": "from kiln.backends.cpp import externs\n",
        "backends/host/c.py": "from ..triton import runtime\n",
        "passes/d.py": "import kiln.backends.cpp.emit\n",
        "dialects/e.py": "from kiln.passes import fuse\n",
        "passes/f.py": "from kiln.compiler import compile_graph\n",
        "backends/cpp/ok.py": "from kiln.backends.host import walker\nfrom kiln.dialects import aten\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    found = layering_violations(tmp_path)
    assert [p.split(" imports ")[0] for p in found] == [
        "backends/cpp/a.py",
        "backends/host/c.py",
        "backends/triton/b.py",
        "passes/d.py",
        "passes/f.py",
        "dialects/e.py",
    ]


def test_no_test_imports_a_conftest() -> None:
    """``from conftest import X`` finds whichever conftest.py pytest imported first when it
    is given several test directories: shared test code lives in helper modules with
    names of their own (tests/frontends/fx_model_cases.py, tests/dynamic_cases.py)."""
    found = [
        path.relative_to(ROOT).as_posix()
        for path in sorted((ROOT / "tests").rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if (isinstance(node, ast.ImportFrom) and node.module == "conftest")
        or (isinstance(node, ast.Import) and any(a.name == "conftest" for a in node.names))
    ]
    assert found == []
