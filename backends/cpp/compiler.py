"""The system C++ compiler: flags, invocation and readable errors.

Kernels are built as a shared library with ``-O3 -march=native -fopenmp`` plus:

* ``-mprefer-vector-width=512``: on AVX-512 machines GCC otherwise vectorizes with 256-bit
  registers; 512 makes ``#pragma omp simd`` loops as fast as hand-written vector-extension
  code (measured: docs/benchmarks/design-notes.md);
* ``-ffp-contract=off``: no fused multiply-adds the source does not ask for, so results
  round like eager PyTorch's;
* ``-fno-math-errno -fno-trapping-math``: lets ``sqrtf`` & co. vectorize (kiln never
  reads ``errno`` or floating-point exception flags; NaN and inf semantics are kept);
* ``-lmvec`` (glibc's vector math library, when present) and ``-Wl,--no-undefined``
  (a missing symbol fails the build, not the first call).

The compiler is ``$KILN_CXX`` or the first of ``g++``, ``c++``, ``clang++`` found. A
failure raises :class:`CppCompileError` naming the kernel the first error is in, with
the compiler's message and the path of the kept source.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
from functools import cache
from pathlib import Path

from kiln.backends.cpp.prelude import libmvec_path

BASE_FLAGS = (
    "-O3",
    "-march=native",
    "-mprefer-vector-width=512",
    "-fopenmp",
    "-ffp-contract=off",
    "-fno-math-errno",
    "-fno-trapping-math",
    "-fPIC",
    "-shared",
    "-std=c++17",
    "-w",
)


class CppCompileError(RuntimeError):
    """The C++ compiler rejected generated code."""

    def __init__(self, message: str, kernel: str | None, source_path: Path | None) -> None:
        super().__init__(message)
        self.kernel = kernel
        self.source_path = source_path


class CompileTimeout(CppCompileError):
    """The C++ compiler ran longer than :func:`compile_timeout` allows (it was killed);
    ``functions`` names the kernels of the translation unit."""

    def __init__(self, message: str, functions: tuple[str, ...]) -> None:
        super().__init__(message, None, None)
        self.functions = functions


DEFAULT_COMPILE_TIMEOUT = 300.0
"""Seconds one translation unit may take to compile (``KILN_CXX_TIMEOUT``): one generated
kernel under dynamic shapes once kept g++ busy for more than 15 minutes."""
DEFAULT_MAX_KERNEL_LINES = 50_000
"""Lines of C++ one kernel may have (``KILN_MAX_KERNEL_LINES``)."""


def _positive_env(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r}: expected a positive number") from None
    if not value > 0:
        raise ValueError(f"{name}={raw!r}: expected a positive number")
    return value


def compile_timeout() -> float:
    """Seconds a C++ compile may take before its kernels fall back (``KILN_CXX_TIMEOUT``)."""
    return _positive_env("KILN_CXX_TIMEOUT", DEFAULT_COMPILE_TIMEOUT)


def max_kernel_lines() -> int:
    """Lines of C++ a kernel may have before it falls back (``KILN_MAX_KERNEL_LINES``)."""
    return int(_positive_env("KILN_MAX_KERNEL_LINES", DEFAULT_MAX_KERNEL_LINES))


class CompilerNotFound(RuntimeError):
    """No C++ compiler on this machine."""


class CompilerUnusable(CompilerNotFound):
    """The C++ compiler cannot build even a trivial library here (a broken ``$KILN_CXX``,
    an unwritable ``$TMPDIR``, ...): the environment's fault, not the generated code's."""


@cache
def find_compiler() -> str:
    candidates = (
        [os.environ["KILN_CXX"]] if os.environ.get("KILN_CXX") else ["g++", "c++", "clang++"]
    )
    for name in candidates:
        path = shutil.which(name)
        if path is not None:
            return path
    raise CompilerNotFound(
        f"the C++ backend needs a C++ compiler; none of {', '.join(candidates)} is on PATH "
        "(set KILN_CXX to choose one)"
    )


@cache
def compiler_identity() -> str:
    """What a cached library depends on besides its source: the compiler's version, the
    flags and the CPU (``-march=native`` code may not run on another one)."""
    compiler = find_compiler()
    version = subprocess.run(
        [compiler, "--version"], capture_output=True, text=True, check=False
    ).stdout.splitlines()[:1]
    return "\n".join([compiler, *version, *link_flags(), *BASE_FLAGS, cpu_identity()])


def cpu_identity() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        import platform

        return platform.machine() + platform.processor()
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key in ("model name", "flags") and key not in fields:
            fields[key] = value.strip()
        if len(fields) == 2:
            break
    return f"{fields.get('model name', '')}|{fields.get('flags', '')}"


def link_flags() -> list[str]:
    flags = ["-Wl,--no-undefined", "-lm"]
    if libmvec_path() is not None:
        flags.append("-lmvec")
    return flags


_FUNCTION = re.compile(r'^extern "C" int ([A-Za-z_][A-Za-z0-9_]*)\(')
_DIAGNOSTIC = re.compile(r"^[^:\s]+\.cpp:(\d+):(\d+): (?:fatal )?error: (.*)$")


def kernel_at_line(source: str, line: int) -> str | None:
    """The function whose body holds ``line`` (1-based) of ``source``."""
    found = None
    for number, text in enumerate(source.splitlines(), start=1):
        if number > line:
            break
        if match := _FUNCTION.match(text):
            found = match.group(1)
    return found


def _run_compiler(
    source_path: Path, output_path: Path
) -> tuple[list[str], subprocess.CompletedProcess[str]]:
    command = [
        find_compiler(),
        *BASE_FLAGS,
        str(source_path),
        "-o",
        str(output_path),
        *link_flags(),
    ]
    timeout = compile_timeout()
    try:
        # A session of its own: on a timeout the whole group (the driver and cc1plus)
        # is killed, not only the driver.
        process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
    except OSError as e:  # not executable, ...
        result = subprocess.CompletedProcess(command, 126, "", f"cannot run {command[0]}: {e}")
        return command, result
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(process)
        raise CompileTimeout(
            f"the C++ compiler took longer than {timeout:g} s (KILN_CXX_TIMEOUT) "
            f"on {source_path.name}",
            _functions_in(source_path),
        ) from None
    except BaseException:  # KeyboardInterrupt: leave no compiler behind
        _kill_group(process)
        raise
    return command, subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def _kill_group(process: subprocess.Popen[str]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except OSError:
        process.kill()
    process.communicate()


def _functions_in(source_path: Path) -> tuple[str, ...]:
    try:
        text = source_path.read_text()
    except OSError:
        return ()
    return tuple(m.group(1) for line in text.splitlines() if (m := _FUNCTION.match(line)))


def _built(output_path: Path) -> bool:
    try:
        return output_path.stat().st_size > 0
    except OSError:
        return False


@cache
def toolchain_problem() -> str | None:
    """Why the compiler cannot build a trivial library here, or None when it can."""
    with tempfile.TemporaryDirectory(prefix="kiln-cxx-check-") as tmp:
        source = Path(tmp) / "check.cpp"
        output = Path(tmp) / "check.so"
        source.write_text('extern "C" int kiln_check(void) { return 0; }\n')
        command, result = _run_compiler(source, output)
        if result.returncode == 0 and _built(output):
            return None
        detail = result.stderr.strip() or f"exit status {result.returncode}, no output file"
        return f"`{' '.join(command)}` fails on a trivial library: {detail}"


def _unusable(problem: str) -> CompilerUnusable:
    return CompilerUnusable(
        f"the C++ compiler {find_compiler()} cannot build libraries here "
        f"(check KILN_CXX, TMPDIR and disk space): {problem}"
    )


def compile_library(source: str, source_path: Path, output_path: Path) -> None:
    """Compile ``source`` (written to ``source_path``) into ``output_path``.

    A failure is blamed on the generated code only when the compiler still builds a
    trivial library; otherwise it raises :class:`CompilerUnusable`.
    """
    source_path.write_text(source)
    command, result = _run_compiler(source_path, output_path)
    if result.returncode == 0 and _built(output_path):
        return
    messages = result.stderr.strip().splitlines()
    kernel = None
    first = None
    for text in messages:
        if match := _DIAGNOSTIC.match(text):
            kernel = kernel_at_line(source, int(match.group(1)))
            first = text
            break
    if first is None and (problem := toolchain_problem()) is not None:
        raise _unusable(problem)
    where = f"kernel '{kernel}'" if kernel else "the generated C++"
    detail = "\n".join(messages[:40])
    summary = first or (messages[-1] if messages else "no library was written")
    raise CppCompileError(
        f"the C++ compiler rejected {where}: {summary}\n"
        f"source kept at {source_path}\ncommand: {' '.join(command)}\n{detail}",
        kernel,
        source_path,
    )


__all__ = [
    "BASE_FLAGS",
    "DEFAULT_COMPILE_TIMEOUT",
    "DEFAULT_MAX_KERNEL_LINES",
    "CompileTimeout",
    "CompilerNotFound",
    "CompilerUnusable",
    "CppCompileError",
    "compile_library",
    "compile_timeout",
    "compiler_identity",
    "cpu_identity",
    "find_compiler",
    "kernel_at_line",
    "link_flags",
    "max_kernel_lines",
    "toolchain_problem",
]
