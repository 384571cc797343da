"""JSON log lines (``[logging] format = "json"``), for log shippers.

Why parse our own messages: every decision the service logs is already one line
of ``key=value`` pairs (``event=lock_expired node=jobs item=42``). A shipper
(journald to Loki, Vector, Fluent Bit ...) indexes fields, not prose, so each
pair becomes a field of the JSON object, next to ``time``, ``level``,
``logger`` and the original ``message``. A message that is not key=value (a
library's) keeps only ``message``. A traceback goes in ``exception``, so one
record stays one line.
"""

from __future__ import annotations

import json
import logging
import re
from datetime import UTC, datetime
from typing import Any

_PAIR = re.compile(r"""(?:^|\s)([A-Za-z_][\w.]*)=("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|\S*)""")
_RESERVED = frozenset({"time", "level", "logger", "message", "exception"})


def fields_of(message: str) -> dict[str, str]:
    """The ``key=value`` pairs of a message (quotes removed), in order."""
    pairs: dict[str, str] = {}
    for key, raw in _PAIR.findall(message):
        if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "\"'":
            raw = raw[1:-1]
        pairs[key if key not in _RESERVED else f"field_{key}"] = raw
    return pairs


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        out: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": message,
        }
        out.update(fields_of(message))
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            out["exception"] = record.exc_text
        return json.dumps(out, ensure_ascii=False, default=str)
