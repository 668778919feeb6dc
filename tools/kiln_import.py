"""``kiln-import``: capture a PyTorch program and print it as kiln's aten IR.

    kiln-import model.py:MLP --input 8x16xf32
    kiln-import mypkg.models:make_block --input 2x8x32xf32 --mode export --dynamic
    kiln-import model.py:MLP --input 8x16xf32 --mode aot --training -o mlp.mlir

``module:callable``: ``module`` is a dotted module name or a path to a ``.py`` file;
``callable`` is an ``nn.Module`` class (instantiated with no arguments), a module
instance, a factory function without parameters that returns a module, or a function
to trace. Only the inputs' shapes and dtypes matter: every mode traces on fake tensors
(no values), so integer inputs such as token ids are never out of range.
``--input f32`` is a 0-d tensor.

Prints the IR on stdout (or to ``-o``). Any failure is one line on stderr and exit
status 1; ``--debug`` shows the traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import inspect
import io
import logging
import re
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn

PROG = "kiln-import"

_DTYPES = {
    "f16": "float16",
    "bf16": "bfloat16",
    "f32": "float32",
    "f64": "float64",
    "i1": "bool",
    "bool": "bool",
    "i8": "int8",
    "i16": "int16",
    "i32": "int32",
    "i64": "int64",
    "ui8": "uint8",
}
_INPUT = re.compile(r"^(?:(\d+(?:x\d+)*)x)?([a-z0-9]+)$")


class UsageError(Exception):
    """A problem with what the user asked for; printed as one line."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _argument_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("target", help="module:callable (module may be a path to a .py file)")
    parser.add_argument(
        "--input",
        action="append",
        default=[],
        metavar="SHAPExDTYPE",
        help="an input tensor, e.g. 8x16xf32, 16xi64, f32 (repeat for each input)",
    )
    parser.add_argument("--mode", choices=("aot", "make_fx", "export"), default="aot")
    parser.add_argument("--dynamic", action="store_true", help="symbolic input shapes")
    parser.add_argument(
        "--training",
        action="store_true",
        help="with --mode aot: import the forward and backward graphs of a training step",
    )
    parser.add_argument(
        "--params",
        choices=("inputs", "constants"),
        default="inputs",
        help="parameters and buffers as function arguments (default) or aten.constant",
    )
    parser.add_argument("-o", "--output", type=Path, help="write the IR here, not stdout")
    parser.add_argument(
        "--debuginfo", action="store_true", help="print locations (FX node and source line)"
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    return parser


def parse_input(spec: str) -> tuple[list[int], str]:
    """``8x16xf32`` -> ([8, 16], "float32")."""
    match = _INPUT.match(spec.strip())
    if match is None or match[2] not in _DTYPES:
        raise UsageError(
            f"bad --input {spec!r}: expected SHAPExDTYPE like 8x16xf32 "
            f"(dtypes: {', '.join(sorted(_DTYPES))})"
        )
    shape = [int(d) for d in match[1].split("x")] if match[1] else []
    return shape, _DTYPES[match[2]]


def random_input(shape: Sequence[int], dtype_name: str) -> Any:
    import torch

    dtype = getattr(torch, dtype_name)
    if dtype is torch.bool:
        return torch.rand(shape) < 0.5
    if dtype.is_floating_point:
        return torch.randn(shape, dtype=dtype)
    return torch.randint(0, 16, tuple(shape), dtype=dtype)


def _load_module(name: str) -> Any:
    if name.endswith(".py") or "/" in name or "\\" in name:
        path = Path(name)
        if not path.is_file():
            raise UsageError(f"no such file: {name}")
        # A name of our own, so that a file called e.g. torch.py cannot shadow a package.
        module_name = "kiln_import_" + re.sub(r"\W", "_", path.stem)
        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None or spec.loader is None:
            raise UsageError(f"cannot import {name}")
        module = importlib.util.module_from_spec(spec)
        # Registered while it runs: dataclasses and typing look classes' modules up there.
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
        return module
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        raise UsageError(f"cannot import module {name!r}: {e}") from e


def load_target(target: str) -> Callable[..., Any]:
    """The program ``module:callable`` names, as a module or function to capture."""
    return load_program(target)[0]


def load_program(target: str) -> tuple[Callable[..., Any], list[Any] | None]:
    """The program ``module:callable`` names, and its example inputs if it brings them
    (a factory returning ``(module, inputs)``, like ``kiln.examples:gpt_block``)."""
    import torch

    module_name, sep, attr_path = target.rpartition(":")
    if not sep or not module_name or not attr_path:
        raise UsageError(f"target {target!r} is not of the form module:callable")
    value: Any = _load_module(module_name)
    for part in attr_path.split("."):
        if not hasattr(value, part):
            raise UsageError(f"{module_name} has no attribute {attr_path!r}")
        value = getattr(value, part)
    if isinstance(value, type) and issubclass(value, torch.nn.Module):
        try:
            return value(), None
        except TypeError as e:
            raise UsageError(f"cannot instantiate {attr_path} without arguments: {e}") from e
    if isinstance(value, torch.nn.Module):
        return value, None
    if not callable(value):
        raise UsageError(f"{attr_path} is a {type(value).__name__}, not a callable")
    if _takes_no_arguments(value):
        made = value()
        if (
            isinstance(made, tuple)
            and len(made) == 2  # pyright: ignore[reportUnknownArgumentType]
            and callable(made[0])
            and isinstance(made[1], list | tuple)
        ):
            return made[0], list(made[1])  # pyright: ignore[reportUnknownArgumentType]
        if not callable(made):
            raise UsageError(f"factory {attr_path}() returned a {type(made).__name__}")
        return made, None
    return value, None


def _takes_no_arguments(fn: Callable[..., Any]) -> bool:
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return all(
        p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in parameters
    ) and not any(p.kind is p.VAR_POSITIONAL for p in parameters)


def build_module(args: argparse.Namespace) -> Any:
    """Capture and import: the xDSL module to print."""
    from xdsl.dialects.builtin import ModuleOp
    from xdsl.ir import Operation

    from kiln.frontends import capture
    from kiln.frontends.fx import import_graph

    if args.training and args.mode != "aot":
        raise UsageError("--training needs --mode aot")
    program, default_inputs = load_program(args.target)
    inputs = [random_input(*parse_input(spec)) for spec in args.input]
    if not inputs and default_inputs is not None:
        inputs = default_inputs
    if args.mode == "aot":
        # AOTAutograd runs the program once; on fake tensors, so that no value (token
        # ids drawn beyond an embedding's size) can make that run fail. make_fx and
        # torch.export trace on fake tensors themselves.
        inputs = capture.fake_inputs(inputs, dynamic=args.dynamic)
    if args.mode == "aot" and args.training:
        graphs = capture.capture_aot_training(program, *inputs, dynamic=args.dynamic)
        functions: list[Operation] = []
        for name, graph in (("forward", graphs.forward), ("backward", graphs.backward)):
            imported = import_graph(
                graph.gm, func_name=name, params=args.params, constants=_constants(args, graph)
            )
            for function in list(imported.ops):
                function.detach()
                functions.append(function)
        return ModuleOp(functions)
    if args.mode == "aot":
        captured = capture.capture_aot(program, *inputs, dynamic=args.dynamic)
    elif args.mode == "make_fx":
        captured = capture.capture_make_fx(program, *inputs, dynamic=args.dynamic)
    else:
        captured = capture.capture_export(program, *inputs, dynamic=args.dynamic)
    return import_graph(captured.gm, params=args.params, constants=_constants(args, captured))


def _constants(args: argparse.Namespace, captured: Any) -> dict[str, Any] | None:
    """With ``--params constants``, the captured parameters and buffers to embed."""
    from kiln.frontends.capture import state_constants

    return state_constants(captured) if args.params == "constants" else None


def _render(module: Any, debuginfo: bool) -> str:
    from xdsl.printer import Printer

    stream = io.StringIO()
    Printer(stream=stream, print_debuginfo=debuginfo).print_op(module)
    return stream.getvalue() + "\n"


@contextlib.contextmanager
def _quiet_torch(debug: bool) -> Iterator[None]:
    """Without --debug, keep torch's own warnings and error logs (a failing trace logs a
    traceback through ``logging``) off stderr: the one-line diagnostic says it all."""
    if debug:
        yield
        return
    # A filter, not a level: importing torch._dynamo resets torch's logger levels.
    fake_tensor_log = logging.getLogger("torch._subclasses.fake_tensor")
    drop_all = logging.Filter("-")  # matches no logger name, so drops every record
    fake_tensor_log.addFilter(drop_all)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        fake_tensor_log.removeFilter(drop_all)


def main(argv: Sequence[str] | None = None) -> int:
    debug = "--debug" in (sys.argv[1:] if argv is None else argv)
    try:
        args = _argument_parser().parse_args(argv)
        with _quiet_torch(debug):
            module = build_module(args)
        text = _render(module, args.debuginfo)
        if args.output is not None:
            args.output.write_text(text)
        else:
            sys.stdout.write(text)
        return 0
    except SystemExit as e:  # --help
        return e.code if isinstance(e.code, int) else 0
    except KeyboardInterrupt:
        return 130
    except Exception as e:
        if debug:
            raise
        message = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        print(f"{PROG}: error: {message}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
