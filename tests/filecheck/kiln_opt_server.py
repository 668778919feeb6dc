"""A fork server for the FileCheck tests' ``kiln-opt`` (started by test_lit.py).

Every ``// RUN: kiln-opt ...`` line used to start a fresh Python that imported torch,
xDSL, kiln, every pass, and (through the aten verifier's meta-shape check) torch._dynamo:
about 8 s of CPU per line, most of the FileCheck tests' time. The server imports all of
that once; each ``kiln-opt`` of a RUN line is then a small client (this file run as a
script, found first on lit's PATH) that hands the server its arguments, working
directory, environment and its stdin/stdout/stderr (file descriptors over a Unix socket);
the server forks a child that runs :func:`kiln.tools.kiln_opt.main` on exactly those, and
the client exits with the child's status. A child is a copy of a process that has only
imported modules, so it computes what a fresh ``kiln-opt`` computes.

    python kiln_opt_server.py serve SOCKET     # the server (prints "ready" when listening)
    python kiln_opt_server.py SOCKET ARGS...   # a client: kiln-opt ARGS through the server
"""

from __future__ import annotations

import json
import os
import select
import socket
import sys

_HEADER = 8


def _recv_exactly(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise ConnectionError("kiln-opt server: the connection closed early")
        data += chunk
    return data


def client(path: str, args: list[str]) -> int:
    request = json.dumps({"argv": args, "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(path)
        header = len(request).to_bytes(_HEADER, "little")
        socket.send_fds(conn, [header], [0, 1, 2])
        conn.sendall(request)
        return int.from_bytes(_recv_exactly(conn, _HEADER), "little", signed=True)


def _warm_up() -> None:
    """Import what every kiln-opt run imports (kiln, every registered pass, torch._dynamo
    that torch's reference implementations import on their first call)."""
    import torch._dynamo
    import torch._refs  # noqa: F401

    from kiln.registry import default_registry
    from kiln.tools import kiln_opt  # noqa: F401

    registry = default_registry()
    for factories in (registry.dialects, registry.passes, registry.targets):
        for factory in factories.values():
            try:
                factory()
            except Exception:  # left for the child to report, as a fresh kiln-opt would
                pass


def _child(conn: socket.socket, listener: socket.socket) -> None:
    """In the forked child: become the client's kiln-opt; never returns."""
    import io

    code = 1
    try:
        listener.close()
        size = int.from_bytes(_HEADER_BYTES[0], "little")
        request = json.loads(_recv_exactly(conn, size))
        for target, fd in enumerate(_FDS):
            os.dup2(fd, target)
            os.close(fd)
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8")
        sys.stderr = io.TextIOWrapper(
            io.FileIO(2, "w", closefd=False), encoding="utf-8", line_buffering=True
        )
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = ["kiln-opt", *request["argv"]]
        from kiln.tools.kiln_opt import main

        try:
            code = main(request["argv"])
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException:
            import traceback

            traceback.print_exc()
            code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        try:
            conn.sendall(int(code).to_bytes(_HEADER, "little", signed=True))
        finally:
            os._exit(0)


_HEADER_BYTES: list[bytes] = []
_FDS: list[int] = []


def serve(path: str) -> None:
    _warm_up()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(path)
        listener.listen(16)
        print("ready", flush=True)
        children: set[int] = set()
        while True:
            ready, _, _ = select.select([listener], [], [], 0.05)
            while children:  # reap finished children (they answered their clients)
                pid, _status = os.waitpid(-1, os.WNOHANG)
                if pid == 0:
                    break
                children.discard(pid)
            if not ready:
                continue
            conn, _ = listener.accept()
            header, fds, _flags, _addr = socket.recv_fds(conn, _HEADER, 3)
            if len(header) < _HEADER:
                header += _recv_exactly(conn, _HEADER - len(header))
            _HEADER_BYTES[:] = [header]
            _FDS[:] = fds
            pid = os.fork()
            if pid == 0:
                _child(conn, listener)
            children.add(pid)
            conn.close()
            for fd in fds:
                os.close(fd)


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(sys.argv[2])
    else:
        sys.exit(client(sys.argv[1], sys.argv[2:]))
