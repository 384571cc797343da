"""Run prepared SQLAlchemy Core statements on a raw sqlite3 cursor.

Why: on SQLite the statement itself is a few microseconds of C, while
SQLAlchemy's per-execution work (execution context, parameter construction,
events, result wrapping) measured several times that on the store's hot path.
The store's statements are built once at import (``sql.py``, ``sql_items.py``),
so their compiled SQL can be kept too: each statement is compiled once per set
of parameter names by SQLAlchemy's own SQLite compiler, and later executions
only bind values in order and convert the one type that needs it
(:class:`~xmpp_queue.storage.schema.UtcDateTime`, stored as SQLAlchemy's
SQLite DATETIME text, so rows written either way compare and read alike).

Anything this cannot prepare (a parameter that is neither given nor has a
value in the statement, as for a column default) returns None, and the caller
runs the statement through SQLAlchemy instead: slower, never wrong.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Executable, Select
from sqlalchemy.engine import Dialect
from sqlalchemy.sql.compiler import SQLCompiler

from xmpp_queue.storage.schema import UtcDateTime

Convert = Callable[[Any], Any]
_NO_VALUE = object()
_CACHE_LIMIT = 512


def bind_datetime(value: datetime | None) -> str | None:
    """UtcDateTime's SQLite form: UTC, no zone, microseconds (SQLAlchemy's DATETIME text)."""
    if value is None:
        return None
    if value.tzinfo is None:
        raise ValueError(f"naive datetime {value!r}: storage needs aware UTC datetimes")
    return value.astimezone(UTC).replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")


def read_datetime(value: str | None) -> datetime | None:
    if value is None:
        return None
    return datetime.fromisoformat(value).replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class _Prepared:
    sql: str
    # per positional parameter: (name, value from the statement or _NO_VALUE, converter)
    binds: tuple[tuple[str, Any, Convert | None], ...]
    # per result column (SELECT or RETURNING): converter or None; None: no rows
    columns: tuple[Convert | None, ...] | None

    def values(self, params: Mapping[str, Any]) -> tuple[Any, ...]:
        out = []
        for name, fixed, convert in self.binds:
            value = params.get(name, fixed)
            if value is _NO_VALUE:
                raise KeyError(name)
            out.append(convert(value) if convert is not None else value)
        return tuple(out)


class FastResult:
    """The part of SQLAlchemy's CursorResult the repositories use."""

    __slots__ = ("_lastrowid", "_rows", "rowcount")

    def __init__(self, rows: list[tuple[Any, ...]], rowcount: int, lastrowid: int | None) -> None:
        self._rows = rows
        self.rowcount = rowcount
        self._lastrowid = lastrowid

    def all(self) -> list[tuple[Any, ...]]:
        return self._rows

    def first(self) -> tuple[Any, ...] | None:
        return self._rows[0] if self._rows else None

    def scalar(self) -> Any:
        return self._rows[0][0] if self._rows else None

    @property
    def inserted_primary_key(self) -> tuple[int | None]:
        return (self._lastrowid,)


class FastStatements:
    """Compiled statements for one dialect, and their execution on a raw cursor."""

    def __init__(self, dialect: Dialect) -> None:
        self._dialect = dialect
        # (statement, parameter names) -> prepared; the statement is kept alive in
        # the value so its id is never reused by another object.
        self._prepared: dict[tuple[int, frozenset[str]], tuple[Executable, _Prepared | None]] = {}
        # SQL of statements that had to go through SQLAlchemy (tests keep it empty).
        self.fallbacks: set[str] = set()

    def _prepare(self, statement: Executable, names: frozenset[str]) -> _Prepared | None:
        compiled = statement.compile(dialect=self._dialect, column_keys=sorted(names))  # type: ignore[attr-defined]
        assert isinstance(compiled, SQLCompiler)
        binds: list[tuple[str, Any, Convert | None]] = []
        for name in compiled.positiontup or ():
            bind = compiled.binds[name]
            fixed = _NO_VALUE if bind.required else bind.effective_value
            if name not in names and fixed is _NO_VALUE:
                return None  # needs a value SQLAlchemy would compute (a column default)
            convert = bind_datetime if isinstance(bind.type, UtcDateTime) else None
            binds.append((name, fixed, convert))
        columns = None
        returned = (
            statement.selected_columns
            if isinstance(statement, Select)
            else compiled.effective_returning
        )
        if returned:
            columns = tuple(
                read_datetime if isinstance(c.type, UtcDateTime) else None for c in returned
            )
        return _Prepared(compiled.string, tuple(binds), columns)

    def lookup(self, statement: Executable, names: frozenset[str]) -> _Prepared | None:
        key = (id(statement), names)
        found = self._prepared.get(key)
        if found is None:
            if len(self._prepared) >= _CACHE_LIMIT:
                self._prepared.clear()
            found = self._prepared[key] = (statement, self._prepare(statement, names))
            if found[1] is None:
                self.fallbacks.add(str(statement))
        return found[1]

    def execute(
        self,
        cursor: sqlite3.Cursor,
        statement: Executable,
        params: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None,
    ) -> FastResult | None:
        """Run *statement*; None when it must go through SQLAlchemy instead."""
        if params is None:
            params = {}
        if isinstance(params, Mapping):
            prepared = self.lookup(statement, frozenset(params))
            if prepared is None:
                return None
            cursor.execute(prepared.sql, prepared.values(params))
        else:
            if not params:
                return FastResult([], 0, None)
            prepared = self.lookup(statement, frozenset(params[0]))
            if prepared is None:
                return None
            cursor.executemany(prepared.sql, [prepared.values(p) for p in params])
        rows: list[tuple[Any, ...]] = []
        if prepared.columns is not None:
            rows = cursor.fetchall()
            converters = [(i, c) for i, c in enumerate(prepared.columns) if c is not None]
            if converters:
                rows = [_converted(row, converters) for row in rows]
        return FastResult(rows, cursor.rowcount, cursor.lastrowid)


def _converted(row: tuple[Any, ...], converters: list[tuple[int, Convert]]) -> tuple[Any, ...]:
    values = list(row)
    for index, convert in converters:
        values[index] = convert(values[index])
    return tuple(values)
