"""kiln installs as one ``kiln.*`` namespace from a wheel, with its console scripts and entry points."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_wheel_contains_every_subpackage_and_entry_point(tmp_path: Path) -> None:
    # Build from a copy: setuptools writes build/ and *.egg-info next to the sources.
    source = tmp_path / "src"
    shutil.copytree(
        ROOT,
        source,
        symlinks=True,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", ".whl", ".site", "build", "__pycache__", "*.egg-info"
        ),
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (wheel,) = tmp_path.glob("kiln-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        entry_points = next(zf.read(n).decode() for n in names if n.endswith("entry_points.txt"))
    for module in (
        "kiln/registry.py",
        "kiln/py.typed",
        "kiln/dialects/aten/ops.py",
        "kiln/dialects/aten/schemas.py",
        "kiln/dialects/loop/ops.py",
        "kiln/passes/decompose.py",
        "kiln/dialects/aten/fx/importer.py",
        "kiln/frontends/fx.py",
        "kiln/tools/kiln_opt.py",
    ):
        assert module in names, module
    assert not any(n.startswith(("tests/", "dialects/", "passes/")) for n in names)
    assert "kiln-opt = kiln.tools.kiln_opt:main" in entry_points
    assert "kiln-import = kiln.tools.kiln_import:main" in entry_points
    assert "[xdsl.universe]" in entry_points
