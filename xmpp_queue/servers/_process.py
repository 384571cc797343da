"""What the private server runners share: free ports, readiness polls, errors.

Why a module of its own: Prosody and ejabberd are started, polled and stopped
the same way (a child process on loopback ports nobody else uses), and the
errors a caller sees should read the same whichever server it asked for.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Self

LOOPBACK = "127.0.0.1"


class ServerError(RuntimeError):
    """A private server could not be started or stopped."""


class ServerNotInstalled(ServerError):
    """The server's package is missing; the message says how to install it.

    ``package`` is the Debian package name, so a caller running as root (the
    demo) may install it itself.
    """

    def __init__(self, package: str, binary: str) -> None:
        super().__init__(
            f"{binary} not found: the private {package} needs Debian's {package} package; "
            f"install it with `apt-get install -y {package}` (as root)"
        )
        self.package = package
        self.binary = binary


def free_port() -> int:
    """A loopback port nobody listens on right now (the kernel picks it).

    The port is only free when asked: another process may take it before the
    server binds it, so the runners check their log for bind failures.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def port_accepts(port: int, host: str = LOOPBACK) -> bool:
    """Whether something accepts TCP connections on *host*:*port*."""
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False


def wait_until(
    ready: Callable[[], bool],
    timeout: float,
    alive: Callable[[], bool] = lambda: True,
    interval: float = 0.05,
) -> bool:
    """Poll *ready* every *interval* s until it holds (True), *alive* fails or time is up."""
    deadline = time.monotonic() + timeout
    while True:
        if ready():
            return True
        if not alive() or time.monotonic() > deadline:
            return False
        time.sleep(interval)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, but someone else's
        return True
    return True


def terminate_pid(pid: int, grace: float = 10.0) -> None:
    """SIGTERM *pid*, wait up to *grace* s, then SIGKILL. Never signals anything else.

    Only for processes that are not our children (a detached Erlang VM); a
    child is stopped through its Popen handle so it is also reaped.
    """
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    if wait_until(lambda: not pid_alive(pid), grace):
        return
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    wait_until(lambda: not pid_alive(pid), 5.0)


def stop_child(process: subprocess.Popen[bytes], grace: float = 10.0) -> None:
    """SIGTERM a child process, wait up to *grace* s, then SIGKILL; always reaped."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def log_tail(path: Path, lines: int = 30) -> str:
    """The last *lines* of a log file, for error messages ("" if there is none)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def lua_string(value: str) -> str:
    """*value* as a double-quoted Lua string literal."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


class ServerLifecycle:
    """``with`` / ``async with`` for a private server: start on entry, stop on exit.

    The async forms run the blocking start and stop in a thread, so a test's event
    loop keeps turning while the server boots.
    """

    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        return await asyncio.to_thread(self.start)

    async def __aexit__(self, *exc_info: object) -> None:
        await asyncio.to_thread(self.stop)
