"""What a worker needs from its process: a default name, and SIGINT/SIGTERM.

Kept apart from :mod:`.worker` (the protocol's order of things) because it is
about the operating system, not the queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import socket
from collections.abc import Callable, Iterator


@contextlib.contextmanager
def stop_signals(on_signal: Callable[[signal.Signals], None], enabled: bool) -> Iterator[None]:
    """SIGINT and SIGTERM call *on_signal* while inside (when *enabled* and the
    platform and thread allow it); the handlers are removed on the way out."""
    loop = asyncio.get_running_loop()
    installed: list[signal.Signals] = []
    if enabled:
        for signum in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(signum, on_signal, signum)
                installed.append(signum)
            except (NotImplementedError, RuntimeError, ValueError):
                pass  # not the main thread, or no signals on this platform
    try:
        yield
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)


def default_resource() -> str:
    """A worker name when none is given: host, process, and a few random bits
    (two unnamed workers in one process must not share a resource)."""
    host = socket.gethostname().split(".")[0] or "host"
    return f"{host}-{os.getpid()}-{secrets.token_hex(2)}"
