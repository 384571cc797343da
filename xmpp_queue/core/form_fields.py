"""XEP-0004 field rows and value parsers shared by the configuration forms.

A :class:`ConfigField` row says how one form field reads and renders; the
node configuration table (``node_config``) and the message-model fields
(``message_config``) are built from these rows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_TRUE = {"1", "true"}
_FALSE = {"0", "false"}


def parse_bool(raw: str) -> bool:
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError("expected a boolean (0, 1, false, true)")


def int_parser(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    def parse(raw: str) -> int:
        try:
            value = int(raw.strip())
        except ValueError:
            raise ValueError("expected an integer") from None
        if value < minimum:
            raise ValueError(f"must be at least {minimum}")
        if maximum is not None and value > maximum:
            raise ValueError(f"must be at most {maximum}")
        return value

    return parse


def parse_max_items(raw: str) -> int | None:
    """``pubsub:integer-or-max``: a non-negative integer, or "max" for no limit."""
    if raw.strip().lower() == "max":
        return None
    return int_parser(0)(raw)


def enum_parser(enum_type: Any) -> Callable[[str], Any]:
    def parse(raw: str) -> Any:
        try:
            return enum_type(raw.strip())
        except ValueError:
            allowed = ", ".join(m.value for m in enum_type)
            raise ValueError(f"expected one of {allowed}") from None

    return parse


def choice_parser(options: tuple[str, ...]) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        value = raw.strip()
        if value not in options:
            raise ValueError(f"expected one of {', '.join(options)}")
        return value

    return parse


def parse_text(raw: str) -> str:
    return raw


def render_value(value: object) -> str:
    """A typed value as its XEP-0004 string."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if value is None:
        return "max"
    return str(value)


@dataclass(frozen=True, slots=True)
class ConfigField:
    """One form field: its var, form type, label, options, and how to parse it."""

    var: str
    attr: str
    kind: str  # XEP-0004 field type: boolean, text-single, list-single
    label: str
    parse: Callable[[str], Any]
    options: tuple[str, ...] = ()
    datatype: str = ""  # XEP-0122 datatype, if any
    queue_only: bool = False
