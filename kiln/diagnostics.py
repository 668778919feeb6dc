"""Compiler diagnostics: ``file:line:col: error: message`` with the source line, like MLIR.

xDSL reports a parse error at its span, but a verifier error only as a whole-module dump
and a failing pass as a Python traceback. This module turns each into a
:class:`Diagnostic` that names the input file, the line and column, and the op:

```text
in.mlir:3:8: error: 'func.return' op expected 1 return value(s), got 0
  func.return : ()
  ^~~~~~~~~~~
```

Op positions come from :class:`LocatingParser`, which records where each op was parsed
(xDSL does not). An op a pass created has no position; it is reported at its closest
ancestor that has one, or at its ``loc(...)`` attribute. A pass author can point at an
op by raising :class:`OpError`.
"""

from __future__ import annotations

import re
import traceback
from collections.abc import Iterable
from dataclasses import dataclass, field
from io import StringIO
from types import TracebackType
from typing import Literal

from xdsl.context import Context
from xdsl.dialects.builtin import FileLineColLoc, ModuleOp
from xdsl.ir import Operation
from xdsl.parser import Parser
from xdsl.parser.generic_parser import ParserState
from xdsl.printer import Printer
from xdsl.utils.exceptions import (
    ArgSpecParseError,
    DiagnosticException,
    MultipleSpansParseError,
    ParseError,
)
from xdsl.utils.lexer import Input, Position, Span, Token
from xdsl.utils.mlir_lexer import MLIRLexer, MLIRToken, MLIRTokenKind, StringLiteral

Severity = Literal["error", "warning", "note"]


@dataclass(frozen=True)
class SourceLocation:
    """A position in a source file; ``col`` is None when only the line is known."""

    file: str
    line: int
    col: int | None = None

    def __str__(self) -> str:
        return f"{self.file}:{self.line}" + ("" if self.col is None else f":{self.col}")


@dataclass(frozen=True)
class Diagnostic:
    """One message, optionally at a location, with the source line and notes."""

    message: str
    severity: Severity = "error"
    location: SourceLocation | None = None
    source_line: str | None = None
    """The text of the location's line, shown under the message with a caret."""
    length: int = 1
    """How many characters the caret underlines."""
    notes: tuple[Diagnostic, ...] = ()

    def format(self, program: str = "kiln-opt") -> str:
        if self.location is not None:
            lines = [f"{self.location}: {self.severity}: {self.message}"]
        elif self.severity == "note":
            lines = [f"note: {self.message}"]
        else:
            lines = [f"{program}: {self.severity}: {self.message}"]
        if self.source_line is not None and self.location is not None:
            col = self.location.col or 1
            lines.append(self.source_line)
            lines.append(" " * (col - 1) + "^" + "~" * max(0, self.length - 1))
        lines.extend(note.format(program) for note in self.notes)
        return "\n".join(lines)


class DiagnosticError(DiagnosticException):
    """An error already described as diagnostics; ``str()`` is their formatted text."""

    def __init__(self, *diagnostics: Diagnostic) -> None:
        super().__init__(*diagnostics)
        self.diagnostics = diagnostics

    def __str__(self) -> str:
        return "\n".join(d.format() for d in self.diagnostics)


class OpError(DiagnosticException):
    """Raise from a pass to report an error at an op: ``raise OpError(op, "cannot lower")``."""

    def __init__(self, op: Operation, message: str) -> None:
        super().__init__(message)
        self.op = op
        self.message = message


# --- op positions ---------------------------------------------------------------------

# The result list before an op name: `%a, %b:2 = `.
_RESULTS = re.compile(r"(?:%[\w$.\-]+(?::\d+)?\s*,\s*)*(?:%[\w$.\-]+(?::\d+)?\s*=\s*)?")


@dataclass
class SourceMap:
    """Where each parsed op's name starts in one input."""

    input: Input[str]
    line_offset: int = 0
    """Lines before this input in its file (``--split-input-file`` chunks)."""
    positions: dict[Operation, int] = field(default_factory=dict[Operation, int])

    def record(self, op: Operation, start: int) -> None:
        match = _RESULTS.match(self.input.content, start)
        self.positions[op] = match.end() if match is not None else start

    def at(self, offset: int, length: int = 1) -> tuple[SourceLocation, str, int]:
        """The location of ``offset``, its line's text and the caret length on it."""
        span = Span(offset, offset + length, self.input, self.line_offset)
        loc = span.get_location()
        line_start = self.input.get_start_of_line(offset)
        line_end = self.input.get_end_of_line(offset)
        text = self.input.content[line_start:line_end].rstrip("\r")
        return (
            SourceLocation(loc.file, loc.line, loc.col),
            text,
            min(length, len(text) - (offset - line_start)),
        )

    def locate(self, op: Operation) -> tuple[SourceLocation, str, int] | None:
        """Where ``op`` was parsed, or None if it was not (created by a pass)."""
        offset = self.positions.get(op)
        if offset is None:
            return None
        return self.at(offset, len(op.name))


class LinearMLIRLexer(MLIRLexer):
    """xDSL 0.74's lexer with a string-literal pattern that cannot backtrack.

    xDSL's ``"(?:[^"\\...]+|\\...)*"`` nests two quantifiers over the same characters: on
    an unterminated string the regex engine tries every split of the rest of the line,
    exponentially (a stray ``"`` kept kiln-opt busy for minutes; found by the kiln-opt
    fuzzer). One character per repetition matches the same strings in linear time.
    """

    _unescaped_characters_regex = re.compile(r'"(?:[^"\\\n\v\f]|\\(?:["nt\\]|[0-9A-Fa-f]{2}))*"')

    def _lex_string_literal(self, start_pos: Position) -> MLIRToken:
        # xDSL prints a non-ASCII character of a string as ``\XX`` UTF-8 escapes but
        # lexes escaped non-ASCII bytes as a bytes literal, so its own output did not
        # parse back (``"\C2\80..."`` then failed ``StringAttr``'s verifier; found by
        # the kiln-opt fuzzer). Escapes that decode as UTF-8 are a string, as MLIR's are.
        token = super()._lex_string_literal(start_pos)
        if token.kind is MLIRTokenKind.BYTES_LIT:
            try:
                StringLiteral.from_span(token.span).bytes_contents.decode("utf-8")
            except UnicodeDecodeError:
                return token
            return Token(MLIRTokenKind.STRING_LIT, token.span)
        return token


class LocatingParser(Parser):
    """xDSL's parser, also recording where each op starts (in :attr:`source_map`), and
    lexing with :class:`LinearMLIRLexer`."""

    def __init__(
        self, ctx: Context, input: str | bytes, name: str = "<unknown>", line_offset: int = 0
    ) -> None:
        super().__init__(ctx, "", name)  # never lex the text with xDSL's own lexer
        text = input.decode("utf-8") if isinstance(input, bytes) else input
        self._parser_state = ParserState(LinearMLIRLexer(Input(text, name)))
        self.source_map = SourceMap(self.lexer.input, line_offset)

    def parse_operation(self) -> Operation:
        start = self.pos
        op = super().parse_operation()
        self.source_map.record(op, start)
        return op


# --- building diagnostics ---------------------------------------------------------------


def _one_line(message: str) -> str:
    return " ".join(part.strip() for part in message.strip().splitlines() if part.strip())


def _op_message(op: Operation, message: str) -> str:
    message = _one_line(message).removeprefix("Operation does not verify: ")
    message = message.removeprefix(f"{op.name}: ")
    return f"'{op.name}' op {message}"


def _attr_location(op: Operation) -> SourceLocation | None:
    loc = op.location
    if isinstance(loc, FileLineColLoc):
        return SourceLocation(loc.filename.data, loc.line.data, loc.column.data)
    return None


def _print_op(op: Operation) -> str:
    out = StringIO()
    try:
        Printer(stream=out).print_op(op)
    except Exception:  # a pass may leave an op too broken to print
        return f"'{op.name}' ({len(op.operands)} operands, {len(op.results)} results)"
    text = out.getvalue()
    first = text.splitlines()[0] if text else op.name
    return first if len(first) <= 200 else first[:197] + "..."


def _enclosing_position(
    op: Operation, source_map: SourceMap
) -> tuple[Operation, tuple[SourceLocation, str, int]] | None:
    ancestor = op.parent_op()
    while ancestor is not None:
        if (here := source_map.locate(ancestor)) is not None:
            return ancestor, here
        ancestor = ancestor.parent_op()
    return None


def op_diagnostic(
    op: Operation, message: str, source_map: SourceMap | None, notes: Iterable[Diagnostic] = ()
) -> Diagnostic:
    """An error about ``op``: at its source position, else its ``loc(...)``, else its parent's."""
    text = _op_message(op, message)
    attr_loc = _attr_location(op)
    here = source_map.locate(op) if source_map is not None else None
    if here is not None:
        location, line, length = here
        extra = (
            ()
            if attr_loc is None
            else (Diagnostic("the op's location attribute", "note", attr_loc),)
        )
        return Diagnostic(
            text, location=location, source_line=line, length=length, notes=(*extra, *notes)
        )
    op_note = Diagnostic(f"the op is: {_print_op(op)}", "note")
    if attr_loc is not None:
        return Diagnostic(text, location=attr_loc, notes=(op_note, *notes))
    enclosing = None if source_map is None else _enclosing_position(op, source_map)
    if enclosing is not None:
        ancestor, (location, line, length) = enclosing
        created = Diagnostic(
            f"'{op.name}' was created by a pass; shown at its enclosing '{ancestor.name}'", "note"
        )
        return Diagnostic(
            text,
            location=location,
            source_line=line,
            length=length,
            notes=(created, op_note, *notes),
        )
    where = None if source_map is None else SourceLocation(source_map.input.name, 1)
    return Diagnostic(text, location=where, notes=(op_note, *notes))


class FormattedParseError(ParseError):
    """A ParseError whose text is kiln's diagnostic (xDSL prints it for --parsing-diagnostics)."""

    def __str__(self) -> str:
        return "\n".join(d.format() for d in parse_error(self).diagnostics)


_UNREGISTERED = re.compile(r"Operation (\S+) is not registered")


def parse_error(error: ParseError) -> DiagnosticError:
    """A parse error (malformed IR, unknown op, operand type mismatch) at its span."""
    span = error.span
    if (unknown := _UNREGISTERED.fullmatch(error.msg)) is not None:
        span = _op_name_span(span, unknown.group(1))
    diagnostic = _span_diagnostic(span, error.msg, "error")
    if isinstance(error, MultipleSpansParseError):
        notes = [
            _span_diagnostic(span, msg or error.ref_text or "", "note") for span, msg in error.refs
        ]
        diagnostic = Diagnostic(
            diagnostic.message,
            location=diagnostic.location,
            source_line=diagnostic.source_line,
            length=diagnostic.length,
            notes=tuple(notes),
        )
    return DiagnosticError(diagnostic)


def _op_name_span(span: Span[str] | Span[bytes], name: str) -> Span[str] | Span[bytes]:
    """xDSL reports an unknown op just after its name; point at the name instead."""
    content = span.input.content
    needle: str | bytes = name.encode() if isinstance(content, bytes) else name
    start = content.rfind(needle, 0, span.start)  # pyright: ignore[reportArgumentType]
    if start < 0 or content.count(b"\n" if isinstance(content, bytes) else "\n", start, span.start):  # pyright: ignore[reportArgumentType]
        return span
    return Span(start, start + len(name), span.input, span.line_offset)  # pyright: ignore[reportArgumentType]


def _span_diagnostic(span: Span[str] | Span[bytes], message: str, severity: Severity) -> Diagnostic:
    loc = span.get_location()
    content = span.input.content
    text = content.decode("utf-8", "replace") if isinstance(content, bytes) else content
    line_start = text.rfind("\n", 0, span.start) + 1
    line_end = text.find("\n", span.start)
    line = text[line_start : len(text) if line_end < 0 else line_end].rstrip("\r")
    length = max(1, min(span.end, line_start + len(line)) - span.start)
    return Diagnostic(
        _one_line(message),
        severity,
        SourceLocation(loc.file, loc.line, loc.col),
        source_line=line,
        length=length,
    )


def verification_failures(module: Operation) -> list[tuple[Operation, Exception]]:
    """Every op whose own verifier fails (nested ops are checked one by one)."""
    failures: list[tuple[Operation, Exception]] = []
    for op in module.walk():
        try:
            op.verify(verify_nested_ops=False)
        except Exception as e:
            failures.append((op, e))
    return failures


def verify_error(
    module: ModuleOp, error: Exception, source_map: SourceMap | None, after_pass: str | None
) -> DiagnosticError:
    """Diagnostics for a module whose ``verify()`` raised ``error``."""
    notes = (
        ()
        if after_pass is None
        else (Diagnostic(f"the IR does not verify after pass '{after_pass}'", "note"),)
    )
    failures = verification_failures(module)
    if not failures:
        where = None if source_map is None else SourceLocation(source_map.input.name, 1)
        return DiagnosticError(Diagnostic(_one_line(str(error)), location=where, notes=notes))
    return DiagnosticError(*(op_diagnostic(op, str(e), source_map, notes) for op, e in failures))


def pass_error(
    pass_name: str | None, error: Exception, source_map: SourceMap | None, module: ModuleOp
) -> DiagnosticError:
    """Diagnostics for a pass that raised: the op it was working on, and the raising line."""
    if isinstance(error, DiagnosticError):
        return error
    label = "a pass" if pass_name is None else f"pass '{pass_name}'"
    notes: list[Diagnostic] = []
    if (raised_at := _raising_frame(error.__traceback__)) is not None:
        notes.append(Diagnostic(f"raised at {raised_at}", "note"))
    notes.append(Diagnostic("run with --debug for the Python traceback", "note"))
    if isinstance(error, OpError):
        return DiagnosticError(
            op_diagnostic(error.op, f"{label} failed: {error.message}", source_map, notes)
        )
    message = f"{label} failed: {type(error).__name__}: {_one_line(str(error))}"
    op = _op_being_processed(error.__traceback__, module)
    if op is not None:
        return DiagnosticError(op_diagnostic(op, message, source_map, notes))
    where = None if source_map is None else SourceLocation(source_map.input.name, 1)
    return DiagnosticError(Diagnostic(message, location=where, notes=tuple(notes)))


def _raising_frame(tb: TracebackType | None) -> str | None:
    frames = traceback.extract_tb(tb)
    if not frames:
        return None
    frame = frames[-1]
    return f"{frame.filename}:{frame.lineno} in {frame.name}"


def _op_being_processed(tb: TracebackType | None, module: ModuleOp) -> Operation | None:
    """The innermost ``op`` local of the failing frames that is an op of ``module``.

    Passes and rewrite patterns name the op they work on ``op`` (xDSL's convention), so
    this points at the op being rewritten when a pattern raised.
    """
    found: Operation | None = None
    while tb is not None:
        candidate = tb.tb_frame.f_locals.get("op")
        if (
            isinstance(candidate, Operation)
            and not isinstance(candidate, ModuleOp)
            and candidate.get_toplevel_object() is module
        ):
            found = candidate
        tb = tb.tb_next
    return found


def plugin_diagnostic(message: str, file: str | None, line: int | None) -> Diagnostic:
    location = None if file is None else SourceLocation(file, line or 1, None)
    return Diagnostic(message, location=location)


def render(error: BaseException, program: str = "kiln-opt") -> str:
    """The diagnostic text for any error a tool run can end with."""
    from kiln.plugins import PluginError

    if isinstance(error, DiagnosticError):
        return "\n".join(d.format(program) for d in error.diagnostics)
    if isinstance(error, ParseError):
        return render(parse_error(error), program)
    if isinstance(error, PluginError):
        return plugin_diagnostic(str(error), error.file, error.line).format(program)
    if isinstance(error, ArgSpecParseError):
        return f"{program}: error: {error}"
    if isinstance(error, OSError) and error.filename is not None:
        return f"{program}: error: cannot open '{error.filename}': {error.strerror}"
    message = _one_line(str(error))
    if (
        not isinstance(error, ValueError | DiagnosticException)
        and type(error).__name__ not in message
    ):
        message = f"{type(error).__name__}: {message}"
    return f"{program}: error: {message}"
