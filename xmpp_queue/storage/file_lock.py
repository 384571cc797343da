"""One process per SQLite database: an exclusive lock on a file beside it.

SQLite serves one component process (the store believes its memory, and there
is no lease without a server to hold it). A second ``xmpp-queue run`` on the
same file must not start and silently serve a stale copy: it finds the lock
held and says which process holds it. The operating system drops the lock when
the holder exits, however it exits, so a crash never leaves it stuck.
"""

from __future__ import annotations

import fcntl
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from sqlalchemy.engine import make_url

from xmpp_queue.storage.lease import this_process


class DatabaseInUse(Exception):
    """Another process serves this SQLite database."""

    def __init__(self, path: Path, holder: str) -> None:
        super().__init__(f"{path} is in use by process {holder}")
        self.path = path
        self.holder = holder


def lock_path(url: str) -> Path:
    database = make_url(url).database or ""
    return Path(os.path.abspath(database + ".lock"))


class DatabaseLock:
    """Held from :meth:`acquire` until :meth:`release` or the process's end."""

    def __init__(self, url: str) -> None:
        self.path = lock_path(url)
        self._file: IO[str] | None = None

    def acquire(self) -> None:
        handle = open(
            self.path, "a+", encoding="utf-8"
        )  # held open: the lock lives as long as the file
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            handle.close()
            raise DatabaseInUse(self.path.with_suffix(""), holder) from None
        handle.seek(0)
        handle.truncate()
        since = datetime.now(UTC).isoformat(timespec="seconds")
        handle.write(f"{this_process()} since {since}\n")
        handle.flush()
        self._file = handle

    def release(self) -> None:
        if self._file is not None:
            self._file.close()  # closing drops the lock
            self._file = None
