"""``kiln-opt``: read ``.mlir``, run passes, print the result (xDSL's ``xdsl-opt``, plus kiln).

```console
$ kiln-opt model.mlir --decompose --canonicalize --cse       # flags run in the order given
$ kiln-opt model.mlir -p 'decompose,fuse{max-nodes=64}' --cse # -p first, then the flags
$ kiln-opt model.mlir --cse --print-ir-after-all --time-passes -o out.mlir
$ kiln-opt model.mlir --load-plugin my_passes.py --my-pass
```

Everything ``xdsl-opt`` offers works (``-p``, ``-t``, ``--split-input-file``,
``--verify-diagnostics``, ``--print-op-generic``, ...), with xDSL's dialects, passes and
targets, kiln's, and those of plugins (``--load-plugin`` and the ``kiln.plugins`` entry
points, see :mod:`kiln.plugins`). On top of that:

* ``--<pass-name>``: one flag per kiln and plugin pass; the passes named by flags run
  after the ``-p`` pipeline, in command-line order (options only through ``-p``);
* ``--print-ir-after-all``: the IR after each pass, on stderr, under MLIR's
  ``// -----// IR Dump After <pass> //----- //`` header;
* ``--time-passes``: a timing report on stderr (xDSL prints to stdout);
* the IR is verified before the first pass and after each one (``--disable-verify``
  turns it off);
* errors are reported as ``file:line:col: error: ...`` (see :mod:`kiln.diagnostics`)
  with exit code 1 and no Python traceback, unless ``--debug`` is given.

:class:`KilnOptMain` is an ``xDSLOptMain`` that overrides only its hooks (the
``register_*`` methods, plus the pipeline set-up, parsing and pass application hooks for
verification, diagnostics and IR dumps) and keeps xDSL's ``__init__`` and ``run``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from typing import IO, NoReturn, TextIO

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Attribute
from xdsl.passes import ModulePass, PassPipeline
from xdsl.printer import Printer
from xdsl.utils.exceptions import ParseError
from xdsl.xdsl_opt_main import xDSLOptMain

from kiln import __version__, diagnostics
from kiln.diagnostics import DiagnosticError, LocatingParser, SourceMap
from kiln.plugins import PluginError, load_entry_point_plugins, load_plugin
from kiln.registry import Registry, default_registry, normalize_pipeline

PROGRAM = "kiln-opt"


class PassTimer:
    """Wall time per pass and for verification, reported like ``mlir-opt --mlir-timing``."""

    def __init__(self) -> None:
        self.times: dict[str, float] = {}
        self._start = time.perf_counter()

    def start(self) -> None:
        self._start = time.perf_counter()

    def stop(self, name: str) -> None:
        self.times[name] = self.times.get(name, 0.0) + time.perf_counter() - self._start

    def report(self, stream: TextIO) -> None:
        total = sum(self.times.values())
        rule = "===" + "-" * 73 + "==="
        print(rule, file=stream)
        print("Pass execution timing report".center(len(rule)).rstrip(), file=stream)
        print(rule, file=stream)
        print(f"  Total Execution Time: {total:.4f} seconds\n", file=stream)
        print("  ----Wall Time----  ----Name----", file=stream)
        for name, seconds in [*self.times.items(), ("Total", total)]:
            share = 100.0 * seconds / total if total > 0 else 0.0
            print(f"  {seconds:9.4f} ({share:5.1f}%)  {name}", file=stream)


class KilnOptMain(xDSLOptMain):
    """``xdsl-opt`` with kiln's registry (kiln and plugin dialects, passes, targets)."""

    version_format = f"{PROGRAM} {__version__} (xDSL {{xdsl_version}})"

    def __init__(
        self,
        registry: Registry,
        description: str = "kiln modular optimizer driver",
        args: Sequence[str] | None = None,
    ) -> None:
        self.registry = registry
        self.source_map: SourceMap | None = None
        self._line_offset = 0
        self._current_pass: ModulePass | None = None
        self._timer = PassTimer()
        super().__init__(description, args)

    # -- registration hooks ---------------------------------------------------------

    def register_all_dialects(self) -> None:
        super().register_all_dialects()
        registered = set(self.ctx.registered_dialect_names)
        for name, factory in self.registry.dialects.items():
            if name not in registered:  # kiln's own already come in via kiln.universe
                self.ctx.register_dialect(name, factory)

    def register_all_passes(self) -> None:
        super().register_all_passes()
        # kiln's and plugins' passes win over same-named xDSL ones (cse, dce, canonicalize).
        for name, factory in self.registry.passes.items():
            self.register_pass(name, factory)

    def register_all_targets(self) -> None:
        super().register_all_targets()
        self.available_targets.update(self.registry.targets)

    def register_all_frontends(self) -> None:
        super().register_all_frontends()

        def parse_mlir(io: IO[bytes]) -> ModuleOp:
            raw = io.read()
            text = raw if isinstance(raw, str) else _decode(raw, self.get_input_name())
            if not text.strip():  # as mlir-opt: an empty input is an empty module
                return ModuleOp([])
            parser = LocatingParser(self.ctx, text, self.get_input_name(), self._line_offset)
            self.source_map = parser.source_map
            return parser.parse_module(not self.args.no_implicit_module)

        self.available_frontends["mlir"] = parse_mlir

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        # xDSL builds a plain ArgumentParser; ours reports a usage error in two lines.
        arg_parser.__class__ = _ShortUsageParser
        arg_parser.prog = PROGRAM
        super().register_all_arguments(arg_parser)
        arg_parser.add_argument(
            "--print-ir-after-all",
            action="store_true",
            help="print the IR after each pass to stderr",
        )
        arg_parser.add_argument(
            "--load-plugin",
            action="append",
            default=[],
            metavar="PLUGIN",
            help="load a plugin: a .py file or a module name with register(registry)",
        )
        arg_parser.add_argument(
            "--debug", action="store_true", help="show Python tracebacks for errors"
        )
        passes = arg_parser.add_argument_group(
            "passes", "run after the -p pipeline, in the order the flags are given"
        )
        taken = {opt for action in arg_parser._actions for opt in action.option_strings}  # pyright: ignore[reportPrivateUsage]
        for name in self.registry.passes:
            if f"--{name}" in taken:
                continue  # the pass stays reachable through -p
            passes.add_argument(
                f"--{name}",
                dest="pass_flags",
                action="append_const",
                const=name,
                help=f"run the '{name}' pass",
            )
        for name in self.registry.targets:
            if f"--emit-{name}" in taken or name in self.registry.passes:
                continue
            arg_parser.add_argument(
                f"--emit-{name}",
                dest="target",
                action=_OneTarget,
                nargs=0,
                const=name,
                help=f"print the result with the '{name}' target (same as -t {name})",
            )

    # -- pipeline, parsing and pass application hooks -------------------------------------

    def setup_pipeline(self) -> None:
        specs = [
            s for s in (self.args.passes, *(getattr(self.args, "pass_flags", None) or [])) if s
        ]
        self.pipeline = PassPipeline.parse_spec(
            self.available_passes, normalize_pipeline(",".join(specs)), self._between_passes
        )

    def parse_chunk(
        self, chunk: IO[bytes], file_extension: str, start_offset: int = 0
    ) -> ModuleOp | None:
        self._line_offset = start_offset
        self.source_map = None
        self._timer.start()
        try:
            module = super().parse_chunk(chunk, file_extension, start_offset)
        except ParseError as e:
            raise diagnostics.FormattedParseError(e.span, e.msg) from e
        self._timer.stop("(parse)")
        return module

    def apply_passes(self, prog: ModuleOp) -> None:
        self._current_pass = None
        try:
            super().apply_passes(prog)
        except DiagnosticError:
            raise
        except Exception as e:
            if self.args.debug:
                raise
            name = None if self._current_pass is None else self._current_pass.name
            raise diagnostics.pass_error(name, e, self.source_map, prog) from e

    def _between_passes(
        self, previous: ModulePass | None, module: ModuleOp, next_pass: ModulePass | None
    ) -> None:
        """Runs before the first pass, between passes and after the last one."""
        if previous is not None:
            self._timer.stop(previous.name)
            if self.args.print_ir_after_all:
                self._dump(previous, module)
        if not self.args.disable_verify:
            self._timer.start()
            self._verify(module, previous)
            self._timer.stop("(verify)")
        if previous is not None and next_pass is not None and self.args.print_between_passes:
            print(f"IR after {previous.name}:")
            Printer(stream=sys.stdout).print_op(module)
            print("\n\n\n")
        if next_pass is None and self.args.time_passes:
            self._timer.report(sys.stderr)
            self._timer = PassTimer()  # --split-input-file: one report per chunk
        self._current_pass = next_pass
        self._timer.start()

    def _verify(self, module: ModuleOp, previous: ModulePass | None) -> None:
        try:
            module.verify()
        except Exception as e:
            if self.args.debug:
                raise
            after = None if previous is None else previous.name
            raise diagnostics.verify_error(module, e, self.source_map, after) from e

    def _dump(self, previous: ModulePass, module: ModuleOp) -> None:
        print(
            f"// -----// IR Dump After {previous.pipeline_pass_spec()} //----- //", file=sys.stderr
        )
        Printer(stream=sys.stderr).print_op(module)
        print("\n", file=sys.stderr)


class _OneTarget(argparse.Action):
    """``--emit-<target>``: a second, different target is an error, not a silent override."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        chosen = getattr(namespace, "_emit_flag", None)
        if chosen is not None and chosen != option_string:
            parser.error(f"{chosen} and {option_string} both choose the output: give one")
        namespace._emit_flag = option_string  # pyright: ignore[reportAttributeAccessIssue]
        namespace.target = self.const


def _decode(raw: bytes, name: str) -> str:
    """The input as text; a byte that is not UTF-8 is reported at its line and column."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        column = e.start - (raw.rfind(b"\n", 0, e.start) + 1) + 1
        text = raw.splitlines()[line - 1].decode("utf-8", "replace") if raw else ""
        location = diagnostics.SourceLocation(name, line, column)
        message = f"byte 0x{raw[e.start]:02x} is not valid UTF-8"
        raise DiagnosticError(
            diagnostics.Diagnostic(message, location=location, source_line=text)
        ) from None


class _ShortUsageParser(argparse.ArgumentParser):
    """A usage error in two lines, not argparse's whole usage block."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n(see {self.prog} --help)\n")


def _plugin_specs(argv: Sequence[str]) -> list[str]:
    """The ``--load-plugin`` values, needed before argparse runs (they add flags)."""
    specs: list[str] = []
    for i, arg in enumerate(argv):
        if arg == "--load-plugin" and i + 1 < len(argv):
            specs.append(argv[i + 1])
        elif arg.startswith("--load-plugin="):
            specs.append(arg.removeprefix("--load-plugin="))
    return specs


def build_registry(plugin_specs: Sequence[str]) -> Registry:
    """kiln's registry with the installed entry-point plugins and the given ones."""
    registry = default_registry()
    load_entry_point_plugins(registry)
    for spec in plugin_specs:
        load_plugin(registry, spec)
    return registry


def main(argv: Sequence[str] | None = None, tool: type[KilnOptMain] = KilnOptMain) -> int:
    """Entry point of the ``kiln-opt`` console script; returns the exit code. ``tool``:
    a subclass to run instead (the kiln-opt fuzzer's caches its seed IR's parse)."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    # xDSL's --disable-verify patches Attribute.__post_init__ for good; undo it on return
    # so that calling main() leaves the process as it found it.
    post_init = Attribute.__post_init__
    try:
        specs = _plugin_specs(args)
        opt = tool(build_registry(specs), args=args)
        if opt.args.load_plugin != specs:
            raise PluginError(
                " ".join(opt.args.load_plugin), "write the option in full as --load-plugin"
            )
        opt.run()
    except SystemExit as e:  # argparse (--help, usage errors) and --shrink
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BrokenPipeError:
        # The reader went away (`kiln-opt ... | head`): stop quietly, as Unix tools do, and
        # point stdout at devnull so that the flush at exit does not fail again (the
        # recipe in the Python docs' note on SIGPIPE).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except (Exception, diagnostics.ArgSpecParseError) as e:
        if debug:
            raise
        sys.stdout.flush()
        print(diagnostics.render(e, PROGRAM), file=sys.stderr)
        return 1
    finally:
        if Attribute.__post_init__ is not post_init:
            Attribute.__post_init__ = post_init
    return 0


if __name__ == "__main__":
    sys.exit(main())
