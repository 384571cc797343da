"""Subscription filters over item attributes, in Google Pub/Sub's filter syntax.

A queue bound to a topic (``pubsub#queue_topic``) may carry a filter
(``pubsub#queue_filter``); a topic item whose attributes do not match is not
copied into that queue. The syntax is Pub/Sub's, so users can bring their
filters over unchanged:

- ``attributes.region = "eu"`` and ``attributes.region != "eu"`` (``!=`` is the
  negation of ``=``: an item without the attribute matches it);
- ``hasPrefix(attributes.k, "p")``;
- ``attributes:k`` (the attribute is present, whatever its value);
- ``NOT x``, ``x AND y``, ``x OR y`` and parentheses. As in Pub/Sub, ``AND``
  and ``OR`` may not be mixed without parentheses (``a AND b OR c`` is
  refused), so a filter never depends on a precedence rule a reader may guess
  wrong; keywords are upper case.

Attribute names are the letters, digits, ``_`` and ``-`` Pub/Sub allows, or
any text between backquotes (``attributes.`a b```). Strings are double- or
single-quoted with backslash escapes. A filter is at most
:data:`MAX_FILTER_BYTES` bytes (Pub/Sub's limit).

The grammar is pyparsing's (a well-kept parser library): a refused filter's
message names the position (1-based column) where parsing failed. Filters look
at attributes only, never at payloads. :func:`compile_filter` is cached, so a
publish evaluates an already-parsed filter.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass

import pyparsing as pp

MAX_FILTER_BYTES = 256


class FilterSyntaxError(ValueError):
    """A filter that does not parse; ``position`` is the 1-based column."""

    def __init__(self, reason: str, position: int) -> None:
        super().__init__(f"{reason} at position {position}")
        self.reason = reason
        self.position = position


@dataclass(frozen=True, slots=True)
class Equals:
    key: str
    value: str
    negate: bool = False

    def __call__(self, attributes: Mapping[str, str]) -> bool:
        return (attributes.get(self.key) == self.value) != self.negate


@dataclass(frozen=True, slots=True)
class HasPrefix:
    key: str
    prefix: str

    def __call__(self, attributes: Mapping[str, str]) -> bool:
        value = attributes.get(self.key)
        return value is not None and value.startswith(self.prefix)


@dataclass(frozen=True, slots=True)
class Present:
    key: str

    def __call__(self, attributes: Mapping[str, str]) -> bool:
        return self.key in attributes


@dataclass(frozen=True, slots=True)
class Not:
    inner: Filter

    def __call__(self, attributes: Mapping[str, str]) -> bool:
        return not self.inner(attributes)


@dataclass(frozen=True, slots=True)
class AllOf:
    parts: tuple[Filter, ...]

    def __call__(self, attributes: Mapping[str, str]) -> bool:
        return all(p(attributes) for p in self.parts)


@dataclass(frozen=True, slots=True)
class AnyOf:
    parts: tuple[Filter, ...]

    def __call__(self, attributes: Mapping[str, str]) -> bool:
        return any(p(attributes) for p in self.parts)


Filter = Equals | HasPrefix | Present | Not | AllOf | AnyOf


def _grammar() -> pp.ParserElement:
    """The filter grammar; each rule's parse action builds the node it names."""
    key = pp.Word(pp.alphanums + "_-") | pp.QuotedString("`")
    string = pp.QuotedString('"', esc_char="\\") | pp.QuotedString("'", esc_char="\\")
    string.set_name("a quoted string")
    tight = key.copy().leave_whitespace()  # no space inside attributes.NAME
    attr = pp.Suppress(pp.Keyword("attributes") + pp.Literal(".").leave_whitespace()) + tight
    attr.set_name("attributes.NAME")
    compare = attr + (pp.Literal("!=") | pp.Literal("=")) + string
    compare.set_parse_action(lambda t: Equals(t[0], t[2], t[1] == "!="))
    present = pp.Suppress(pp.Keyword("attributes") + pp.Literal(":").leave_whitespace()) + tight
    present.set_parse_action(lambda t: Present(t[0]))
    prefix = pp.Suppress(pp.Keyword("hasPrefix") + "(") + attr + pp.Suppress(",") + string + ")"
    prefix.set_parse_action(lambda t: HasPrefix(t[0], t[1]))
    expr = pp.Forward()
    term = pp.Forward()
    group = pp.Suppress("(") + expr + pp.Suppress(")")
    negated = pp.Suppress(pp.Keyword("NOT")) + term
    negated.set_parse_action(lambda t: Not(t[0]))
    term <<= negated | group | prefix | compare | present
    term.set_name("a condition")
    ands = term + pp.OneOrMore(pp.Suppress(pp.Keyword("AND")) + term)
    ands.set_parse_action(lambda t: AllOf(tuple(t)))
    ors = term + pp.OneOrMore(pp.Suppress(pp.Keyword("OR")) + term)
    ors.set_parse_action(lambda t: AnyOf(tuple(t)))
    expr <<= ands | ors | term
    return expr


_GRAMMAR = _grammar()


@functools.lru_cache(maxsize=1024)
def compile_filter(text: str) -> Filter:
    """Parse *text*; raises :class:`FilterSyntaxError` naming the position."""
    if len(text.encode()) > MAX_FILTER_BYTES:
        raise FilterSyntaxError(f"longer than {MAX_FILTER_BYTES} bytes", MAX_FILTER_BYTES + 1)
    if not text.strip():
        raise FilterSyntaxError("empty filter", 1)
    try:
        parsed = _GRAMMAR.parse_string(text, parse_all=True)
    except pp.ParseBaseException as exc:
        reason = _reason(text, exc)
        tail = text[exc.loc :]
        at = exc.loc + len(tail) - len(tail.lstrip())  # the token, not the space before it
        raise FilterSyntaxError(reason, at + 1) from None
    result = parsed[0]
    assert isinstance(result, Equals | HasPrefix | Present | Not | AllOf | AnyOf)
    return result


def _reason(text: str, exc: pp.ParseBaseException) -> str:
    rest = text[exc.loc :].lstrip()
    for word, other in (("AND", "OR"), ("OR", "AND")):
        if rest.startswith(word):
            if not rest[len(word) :].strip():
                return f"a condition must follow {word}"
            if re.search(rf"\b{other}\b", text[: exc.loc]):
                return "AND and OR cannot be mixed without parentheses"
    near = rest[:12] or "the end"
    return f"unexpected {near!r}" if rest else "incomplete filter"


def matches(text: str, attributes: Mapping[str, str]) -> bool:
    """Whether an item with *attributes* passes the filter *text* ("" passes all)."""
    if not text:
        return True
    return compile_filter(text)(attributes)
