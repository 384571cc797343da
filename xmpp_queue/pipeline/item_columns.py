"""Columns that become item attributes, a delay, an expiry or a priority.

``pipeline enqueue`` maps chosen input columns onto what the client library's
publish keywords mean (:mod:`xmpp_queue.client.attributes`): each
``--attribute-columns`` column becomes an attribute of the same name (its
value as text; an empty cell leaves it out), ``--delay-column`` (seconds) or
``--deliver-at-column`` (a timestamp; text without a zone is UTC, a number is
Unix seconds) the item's ``Start``, ``--ttl-column`` (whole seconds) its
``TTL``, ``--priority-column`` (high, medium, low) its ``Urgency`` and
``--ordering-key-column`` its ordering key (see ``ordered_send.py``). The
columns stay in the JSON payload too: the row is the job.

Two halves: :func:`headers_column` is a Spark expression (the chosen cells as
one JSON text per row, so the executors get them whatever the input types);
:func:`row_headers` runs on the executors at publish time (a delay counts
from the moment the row is sent) and turns that text into SHIM headers with
the client's own checks. A cell the client refuses (``ttl`` 1.5, priority
``urgent``) rejects its row as a ``bad row``, like a malformed line.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from xmpp_queue.client.attributes import SCHEDULE_NAMES, SERVICE_NAMES, item_headers
from xmpp_queue.core.attributes import ORDERING_KEY
from xmpp_queue.pipeline.settings import PipelineSettingsError

ITEM_HEADERS = "item_headers"
"""The prepared column holding a row's chosen cells as JSON (null: none chosen)."""


@dataclass(frozen=True, slots=True)
class ItemColumns:
    """Which input columns feed the item's attributes and schedule."""

    attributes: tuple[str, ...] = ()
    delay: str | None = None
    deliver_at: str | None = None
    ttl: str | None = None
    priority: str | None = None
    ordering_key: str | None = None

    @property
    def any(self) -> bool:
        return bool(self.attributes) or any(self._roles())

    def _roles(self) -> tuple[str | None, ...]:
        return (self.delay, self.deliver_at, self.ttl, self.priority, self.ordering_key)

    def check(self) -> None:
        """Refuse a contradictory choice before Spark starts (one line, exit 2)."""
        if self.delay and self.deliver_at:
            raise PipelineSettingsError("give --delay-column or --deliver-at-column, not both")
        roles = [
            ("--delay-column", self.delay),
            ("--deliver-at-column", self.deliver_at),
            ("--ttl-column", self.ttl),
            ("--priority-column", self.priority),
            ("--ordering-key-column", self.ordering_key),
        ]
        used = [name for _, name in roles if name]
        if len(used) != len(set(used)):
            raise PipelineSettingsError("one column cannot fill two of the item's roles")
        if len(self.attributes) != len(set(self.attributes)):
            raise PipelineSettingsError("--attribute-columns names a column twice")
        for name in self.attributes:
            if not name or name.strip() != name:
                raise PipelineSettingsError(f"--attribute-columns: bad column name {name!r}")
            if name in SERVICE_NAMES:
                raise PipelineSettingsError(
                    f"--attribute-columns: {name!r} is a header the service sets itself"
                )
            if name in SCHEDULE_NAMES:
                raise PipelineSettingsError(
                    f"--attribute-columns: {name!r} is read by the service; use "
                    "--delay-column, --deliver-at-column, --ttl-column, --priority-column "
                    "or --ordering-key-column"
                )

    def check_input(self, columns: Sequence[str]) -> None:
        """Every chosen column must be a column of the input."""
        present = set(columns)
        chosen = [("--attribute-columns", c) for c in self.attributes] + [
            (role, c)
            for role, c in (
                ("--delay-column", self.delay),
                ("--deliver-at-column", self.deliver_at),
                ("--ttl-column", self.ttl),
                ("--priority-column", self.priority),
                ("--ordering-key-column", self.ordering_key),
            )
            if c
        ]
        for role, name in chosen:
            if name not in present:
                raise PipelineSettingsError(
                    f"{role} {name!r} is not a column of the input ({sorted(present)})"
                )


def parse_column_list(text: str) -> tuple[str, ...]:
    """``a,b, c`` → ("a", "b", "c")."""
    return tuple(part.strip() for part in text.split(",") if part.strip())


def headers_column(frame: Any, columns: ItemColumns) -> Any:
    """A Spark column: the chosen cells of each row as JSON text, or null."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import TimestampType

    if not columns.any:
        return F.lit(None).cast("string")
    columns.check_input(frame.columns)

    def text(name: str) -> Any:
        return F.col(f"`{name}`").cast("string")

    parts = []
    if columns.attributes:
        attrs = F.struct(*[text(c).alias(c) for c in columns.attributes])
        parts.append(attrs.alias("attributes"))
    if columns.delay:
        parts.append(text(columns.delay).alias("delay"))
    if columns.deliver_at:
        column = F.col(f"`{columns.deliver_at}`")
        if isinstance(frame.schema[columns.deliver_at].dataType, TimestampType):
            # a Spark timestamp is an instant: write it with the session's offset
            column = F.date_format(column, "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX")
        parts.append(column.cast("string").alias("deliver_at"))
    if columns.ttl:
        parts.append(text(columns.ttl).alias("ttl"))
    if columns.priority:
        parts.append(text(columns.priority).alias("priority"))
    if columns.ordering_key:
        parts.append(text(columns.ordering_key).alias("ordering_key"))
    return F.to_json(F.struct(*parts))


def row_headers(spec: str | None, now: datetime | None = None) -> dict[str, str]:
    """The SHIM headers of one row from its :data:`ITEM_HEADERS` text.

    Raises ``ValueError`` naming the cell the client refuses."""
    if spec is None:
        return {}
    cells: Mapping[str, Any] = json.loads(spec)
    attributes = {k: str(v) for k, v in (cells.get("attributes") or {}).items() if v != ""}
    delay = _number(cells.get("delay"), "delay")
    ttl = _number(cells.get("ttl"), "ttl")
    priority = (cells.get("priority") or "").strip() or None
    key = cells.get("ordering_key")
    return item_headers(
        attributes,
        delay=delay,
        deliver_at=_moment(cells.get("deliver_at")),
        ttl=ttl,
        priority=priority,
        ordering_key=key if key else None,  # an empty cell: the row has no key
        now=now,
    )


def _number(cell: str | None, role: str) -> float | None:
    if cell is None or not cell.strip():
        return None
    try:
        return float(cell)
    except ValueError:
        raise ValueError(f"{role} {cell!r} is not a number of seconds") from None


def _moment(cell: str | None) -> datetime | None:
    """A time cell: ISO 8601 (no zone = UTC) or Unix seconds."""
    if cell is None or not cell.strip():
        return None
    text = cell.strip()
    try:
        return datetime.fromtimestamp(float(text), UTC)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text.replace(" ", "T", 1))
    except ValueError:
        raise ValueError(f"deliver_at {cell!r} is not a time (ISO 8601 or Unix seconds)") from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


class Outgoing:
    """A prepared row with the SHIM headers its chosen columns gave (read like the
    row itself, so batching and outcome reporting need not tell them apart)."""

    __slots__ = ("headers", "row")

    def __init__(self, row: Any, headers: dict[str, str]) -> None:
        self.row = row
        self.headers = headers

    def __getitem__(self, name: str) -> Any:
        return self.row[name]


def cell(row: Any, name: str) -> Any:
    """*row*'s value of column *name*, None when the row has no such column."""
    try:
        return row[name]
    except (KeyError, ValueError, IndexError):
        return None


def headers_of(row: Any) -> dict[str, str]:
    return row.headers if isinstance(row, Outgoing) else {}


def key_of(row: Any) -> str | None:
    """The row's ordering key (None: it has none)."""
    return headers_of(row).get(ORDERING_KEY)
