"""What every sub-command does first: read ``-c FILE`` and set up logging.

Why apart from the commands: ``run``, ``migrate``, ``status``, ``check-config``
and the pipeline's jobs all load the same file the same way, and a
``--log-level`` on the command line wins over the file's ``[logging]`` for each.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from xmpp_queue.cli.outcome import EXIT_USAGE, CommandError
from xmpp_queue.config import load_config
from xmpp_queue.config_error import ConfigError
from xmpp_queue.settings import Settings

DEFAULT_CONFIG = "config.toml"
LOG_FORMAT = "%(asctime)s level=%(levelname)s logger=%(name)s %(message)s"
LOG_DATE_FORMAT = "%Y-%m-%dT%H:%M:%S"
_HANDLER_NAME = "xmpp-queue"


# --- logging ---------------------------------------------------------------------------


def configure_logging(level: str, file: Path | None = None, fmt: str = "text") -> None:
    """One handler on the root logger: *file* (appended) or standard error.

    The ``text`` format is ``time level=... logger=... message``; our own messages
    are key=value (``event=... component=...``), one line per decision. ``json``
    writes one JSON object per line with those pairs as fields (``logjson``).
    """
    handler: logging.Handler = (
        logging.FileHandler(file, encoding="utf-8") if file else logging.StreamHandler()
    )
    if fmt == "json":
        from xmpp_queue.logjson import JsonFormatter

        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter(LOG_FORMAT, LOG_DATE_FORMAT))
    handler.set_name(_HANDLER_NAME)
    root = logging.getLogger()
    for previous in [h for h in root.handlers if h.get_name() == _HANDLER_NAME]:
        root.removeHandler(previous)  # ours from an earlier call; others' stay
        previous.close()
    root.addHandler(handler)
    root.setLevel(level)
    # alembic narrates every start-up at INFO (plugins, "Context impl SQLiteImpl");
    # `migrate` prints its own one-line result instead.
    logging.getLogger("alembic").setLevel(level if level == "DEBUG" else "WARNING")


def load_settings(args: argparse.Namespace) -> Settings:
    """Load ``-c FILE`` and set up logging (``--log-level`` wins over the file)."""
    try:
        settings = load_config(args.config)
    except ConfigError as exc:
        raise CommandError(f"config error: {exc.one_line()}", EXIT_USAGE) from None
    level = args.log_level or settings.logging.level
    configure_logging(level.upper(), settings.logging.file, settings.logging.format)
    return settings
