"""Runs every FileCheck test under tests/filecheck through lit, one pytest item per file.

Each ``.mlir`` file holds ``// RUN:`` lines (``kiln-opt %s --cse | filecheck %s``); see
lit.cfg.py for the substitutions. Run one alone with ``lit -v tests/filecheck/passes/cse.mlir``.

``kiln-opt`` runs through a fork server (kiln_opt_server.py) that imports torch, xDSL and
kiln once for the session instead of once per RUN line (about 8 s of CPU each);
``KILN_LIT_FORK_SERVER=0`` runs a fresh ``kiln-opt`` process per line instead.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).parent
TESTS = sorted(HERE.rglob("*.mlir"))
SERVER = HERE / "kiln_opt_server.py"


@pytest.fixture(scope="module")
def lit_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """lit's environment: with the fork server's ``kiln-opt`` client first on the PATH
    (when the server starts; otherwise the installed ``kiln-opt``)."""
    env = dict(os.environ)
    if os.environ.get("KILN_LIT_FORK_SERVER", "1") == "0":
        yield env
        return
    folder = tmp_path_factory.mktemp("kiln-opt-server")
    socket_path, log = folder / "socket", folder / "server.log"
    server_env = dict(os.environ)
    # As lit.cfg.py runs kiln-opt: DeprecationWarnings are errors, this checkout first.
    server_env["PYTHONWARNINGS"] = "error::DeprecationWarning"
    root = str(HERE.parent.parent)
    server_env["PYTHONPATH"] = os.pathsep.join(
        p for p in [root, os.environ.get("PYTHONPATH", "")] if p
    )
    with log.open("w") as out:
        server = subprocess.Popen(
            [sys.executable, str(SERVER), "serve", str(socket_path)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=server_env,
        )
    try:
        deadline = time.monotonic() + 300
        while "ready" not in log.read_text() and server.poll() is None:
            if time.monotonic() > deadline:
                break
            time.sleep(0.1)
        if "ready" in log.read_text():
            shim = folder / "bin" / "kiln-opt"
            shim.parent.mkdir()
            shim.write_text(
                f'#!/bin/sh\nexec "{sys.executable}" -I "{SERVER}" "{socket_path}" "$@"\n'
            )
            shim.chmod(0o755)
            env["KILN_LIT_BIN"] = str(shim.parent)
        yield env
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.mark.parametrize("test", TESTS, ids=[str(t.relative_to(HERE)) for t in TESTS])
def test_lit(test: Path, lit_env: dict[str, str]) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from lit.main import main; sys.exit(main())",
            "-v",
            str(test),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=lit_env,
    )
    assert result.returncode == 0, result.stdout + result.stderr
