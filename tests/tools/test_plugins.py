"""Plugins reach kiln by three routes: --load-plugin, the kiln.plugins entry points, and
xdsl-opt through the xdsl.universe entry point; kiln itself appears in xdsl-opt.

Entry points are installed nowhere: each test writes a ``*.dist-info`` folder with an
``entry_points.txt`` into a temporary directory and puts it on ``PYTHONPATH`` (or
``sys.path``), which is where importlib.metadata looks for them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from xdsl.universe import Universe

from kiln.plugins import (
    PluginError,
    load_entry_point_plugins,
    load_plugin,
    plugin_registry,
    plugin_universe,
)
from kiln.registry import Registry, default_registry
from kiln.tools.kiln_opt import main

PLUGINS = Path(__file__).parents[1] / "plugins"
PLUGIN_FILE = PLUGINS / "kiln_test_plugin.py"
BIN = Path(sys.executable).parent

IR = """\
func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = aten.neg.default(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = aten.neg.default(%0) : (tensor<4xf32>) -> tensor<4xf32>
  func.return %1 : tensor<4xf32>
}
"""


@pytest.fixture
def ir_file(tmp_path: Path) -> Path:
    path = tmp_path / "in.mlir"
    path.write_text(IR)
    return path


def make_dist_info(site: Path, entry_points: str) -> Path:
    """A fake installed distribution whose only content is its entry points."""
    dist = site / "kiln_test_plugin-0.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: kiln-test-plugin\nVersion: 0.0\n")
    (dist / "entry_points.txt").write_text(entry_points)
    return site


def run_tool(tool: str, args: list[str], site: Path | None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    paths = [str(site)] if site is not None else []
    env["PYTHONPATH"] = os.pathsep.join([*paths, str(PLUGINS), env.get("PYTHONPATH", "")])
    return subprocess.run(
        [str(BIN / tool), *args], capture_output=True, text=True, env=env, check=False, timeout=120
    )


# --- route 1: --load-plugin ---------------------------------------------------------------


def test_load_plugin_from_file(capsys: pytest.CaptureFixture[str], ir_file: Path) -> None:
    assert main([str(ir_file), "--load-plugin", str(PLUGIN_FILE), "--test-count-ops"]) == 0
    assert "kiln_test.op_count = 4 : i64" in capsys.readouterr().out


def test_load_plugin_by_module_name(
    capsys: pytest.CaptureFixture[str], ir_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(PLUGINS))
    assert main([str(ir_file), "--load-plugin=kiln_test_plugin", "--test-count-ops"]) == 0
    assert "kiln_test.op_count = 4 : i64" in capsys.readouterr().out


def test_load_plugin_into_a_registry() -> None:
    registry = default_registry()
    load_plugin(registry, str(PLUGIN_FILE))
    assert registry.get_pass("test-count-ops").name == "test-count-ops"


# --- route 2: the kiln.plugins entry point -------------------------------------------------


@pytest.mark.parametrize("value", ["kiln_test_plugin", "kiln_test_plugin:register"])
def test_entry_point_plugin_in_kiln_opt(tmp_path: Path, ir_file: Path, value: str) -> None:
    site = make_dist_info(tmp_path / "site", f"[kiln.plugins]\nkiln_test = {value}\n")
    result = run_tool("kiln-opt", [str(ir_file), "--test-count-ops"], site)
    assert result.returncode == 0, result.stderr
    assert "kiln_test.op_count = 4 : i64" in result.stdout


def test_entry_point_plugins_in_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = make_dist_info(tmp_path / "site", "[kiln.plugins]\nkiln_test = kiln_test_plugin\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.syspath_prepend(str(PLUGINS))
    registry = default_registry()
    assert load_entry_point_plugins(registry) == ["kiln_test"]
    assert "test-raise" in registry.passes
    assert "test-count-ops" in plugin_registry().passes


def test_broken_entry_point_is_reported(tmp_path: Path, ir_file: Path) -> None:
    site = make_dist_info(tmp_path / "site", "[kiln.plugins]\nbroken = no_such_module_here\n")
    result = run_tool("kiln-opt", [str(ir_file)], site)
    assert result.returncode == 1
    assert "plugin 'broken = no_such_module_here' failed to load" in result.stderr
    assert "Traceback" not in result.stderr


# --- route 3: xdsl-opt --------------------------------------------------------------------


def test_kiln_appears_in_xdsl_opt(ir_file: Path) -> None:
    result = run_tool("xdsl-opt", [str(ir_file), "-p", "canonicalize,cse"], None)
    assert result.returncode == 0, result.stderr
    assert "aten.neg.default" in result.stdout


def test_kiln_universe_is_discovered() -> None:
    multiverse = Universe.get_multiverse()
    assert "aten" in multiverse.all_dialects
    assert "decompose" in multiverse.all_passes


def test_plugin_in_xdsl_opt(tmp_path: Path, ir_file: Path) -> None:
    site = make_dist_info(
        tmp_path / "site", "[xdsl.universe]\nkiln_test = kiln_test_plugin:UNIVERSE\n"
    )
    result = run_tool("xdsl-opt", [str(ir_file), "-p", "test-count-ops"], site)
    assert result.returncode == 0, result.stderr
    assert "kiln_test.op_count = 4 : i64" in result.stdout


def test_plugin_with_both_entry_points_in_kiln_opt(tmp_path: Path, ir_file: Path) -> None:
    site = make_dist_info(
        tmp_path / "site",
        "[kiln.plugins]\nkiln_test = kiln_test_plugin\n\n"
        "[xdsl.universe]\nkiln_test = kiln_test_plugin:UNIVERSE\n",
    )
    result = run_tool("kiln-opt", [str(ir_file), "--test-count-ops"], site)
    assert result.returncode == 0, result.stderr
    assert "kiln_test.op_count = 4 : i64" in result.stdout


def test_plugin_universe_is_lazy() -> None:
    def register(registry: Registry) -> None:
        registry.add_pass("lazy-pass", lambda: pytest.fail("loaded too early"))

    universe = plugin_universe(register)
    assert set(universe.all_passes) == {"lazy-pass"}


# --- plugins that fail ----------------------------------------------------------------------


def plugin_error(capsys: pytest.CaptureFixture[str], ir_file: Path, plugin: str) -> str:
    assert main([str(ir_file), "--load-plugin", plugin]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


def test_plugin_that_raises_on_import(
    capsys: pytest.CaptureFixture[str], ir_file: Path, tmp_path: Path
) -> None:
    plugin = tmp_path / "raising.py"
    plugin.write_text("X = 1\nraise ImportError('needs a GPU')\n")
    err = plugin_error(capsys, ir_file, str(plugin))
    assert err.startswith(
        f"{plugin.resolve()}:2: error: plugin '{plugin}' failed to load: ImportError: needs a GPU"
    )


def test_plugin_with_a_syntax_error(
    capsys: pytest.CaptureFixture[str], ir_file: Path, tmp_path: Path
) -> None:
    plugin = tmp_path / "syntax.py"
    plugin.write_text("def register(registry):\n    return )\n")
    err = plugin_error(capsys, ir_file, str(plugin))
    assert f"syntax.py:2: error: plugin '{plugin}' failed to load: SyntaxError" in err


def test_plugin_whose_register_raises(
    capsys: pytest.CaptureFixture[str], ir_file: Path, tmp_path: Path
) -> None:
    plugin = tmp_path / "clash.py"
    plugin.write_text(
        "from kiln.passes.cse import CSEPass\n\n"
        "def register(registry):\n"
        "    registry.add_pass_class(CSEPass)\n"
    )
    err = plugin_error(capsys, ir_file, str(plugin))
    assert (
        f"clash.py:4: error: plugin '{plugin}' failed to load: ValueError: pass 'cse' is already registered"
        in err
    )


def test_plugin_without_register(
    capsys: pytest.CaptureFixture[str], ir_file: Path, tmp_path: Path
) -> None:
    plugin = tmp_path / "empty.py"
    plugin.write_text("X = 1\n")
    err = plugin_error(capsys, ir_file, str(plugin))
    assert "has no function 'register(registry)'" in err


def test_missing_plugin(capsys: pytest.CaptureFixture[str], ir_file: Path, tmp_path: Path) -> None:
    err = plugin_error(capsys, ir_file, str(tmp_path / "nowhere.py"))
    assert "failed to load: no such file" in err
    err = plugin_error(capsys, ir_file, "no_such_plugin_module")
    assert "failed to load: no module named 'no_such_plugin_module'" in err


def test_failed_register_leaves_the_registry_unchanged(tmp_path: Path) -> None:
    plugin = tmp_path / "half.py"
    plugin.write_text(
        "def register(registry):\n"
        "    registry.add_pass('half-pass', lambda: None)\n"
        "    raise RuntimeError('second half failed')\n"
    )
    registry = default_registry()
    with pytest.raises(PluginError, match="second half failed"):
        load_plugin(registry, str(plugin))
    assert "half-pass" not in registry.passes
