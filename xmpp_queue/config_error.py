"""The one error a bad configuration raises, naming the key at fault.

Why its own module: the loader (``config.py``), every per-key check
(``config_schema.py``) and the CLI that prints it all need it, and none of them
should import the others for it.
"""

from __future__ import annotations

from pathlib import Path


class ConfigError(ValueError):
    """A bad configuration. ``key`` is the dotted key at fault ("" for the file itself),
    ``source`` the file (set by :func:`load_config`); ``str()`` is "key: problem"."""

    def __init__(self, key: str, problem: str, source: Path | None = None) -> None:
        super().__init__(f"{key}: {problem}" if key else problem)
        self.key = key
        self.problem = problem
        self.source = source

    def one_line(self) -> str:
        """The line the CLI prints: ``FILE: key: problem``."""
        return f"{self.source}: {self}" if self.source is not None else str(self)
