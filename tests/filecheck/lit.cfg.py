"""lit configuration for kiln's FileCheck tests (run by tests/filecheck/test_lit.py).

``kiln-opt``, ``xdsl-opt`` and ``filecheck`` are taken from the bin directory of the
Python that runs lit, so the tests use the installed (editable) kiln; under
test_lit.py, ``kiln-opt`` is the client of its fork server (``$KILN_LIT_BIN``).
Substitutions: ``%plugins`` is the folder of the test plugins (tests/plugins).
"""

# ruff: noqa: F821 - lit injects `config` and `lit_config`
import os
import sys
import tempfile

import lit.formats

config.name = "kiln"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir"]
config.test_source_root = os.path.dirname(os.path.abspath(__file__))
# lit writes an Output/ folder per test directory: keep it out of the source tree.
config.test_exec_root = os.environ.get(
    "KILN_LIT_OUTPUT", os.path.join(tempfile.gettempdir(), f"kiln-lit-{os.getuid()}")
)

_bin = os.path.dirname(sys.executable)
# test_lit.py's fork server: its kiln-opt client comes first (see kiln_opt_server.py).
_served = os.environ.get("KILN_LIT_BIN", "")
config.environment["PATH"] = os.pathsep.join(
    p for p in [_served, _bin, os.environ.get("PATH", "")] if p
)
config.environment["PYTHONWARNINGS"] = "error::DeprecationWarning"
# The checkout these tests belong to comes first: an editable install may point at
# another worktree (lit passes no PYTHONPATH of its own).
_root = os.path.dirname(os.path.dirname(config.test_source_root))
config.environment["PYTHONPATH"] = os.pathsep.join(
    p for p in [_root, os.environ.get("PYTHONPATH", "")] if p
)
config.substitutions.append(
    ("%plugins", os.path.join(os.path.dirname(config.test_source_root), "plugins"))
)
