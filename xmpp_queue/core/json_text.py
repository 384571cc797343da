"""String-to-string maps as compact JSON, byte for byte what ``json.dumps`` writes.

Why not ``json.dumps``: with any keyword besides the defaults it builds a new
encoder per call (4-5 µs for a one-attribute map), and every stored item with
attributes is encoded this way: its headers column, and on a queue its
``published`` ledger row, again for every copy a topic makes of it. Quoting each
key and value with the ``json`` module's own C quoting functions and joining
them costs well under a microsecond and gives the same text. A key or value
that is not a string (a caller's mistake the types should have caught) makes
the quoting raise ``TypeError``; the map then goes to ``json.dumps`` as before,
so the output never differs (``tests/unit/test_json_text.py`` compares both).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from json.encoder import encode_basestring, encode_basestring_ascii


def ascii_map(values: Mapping[str, str]) -> str:
    """``json.dumps(dict(values), separators=(",", ":"))``: in the map's order, ASCII."""
    quote = encode_basestring_ascii
    try:
        return "{" + ",".join([quote(k) + ":" + quote(v) for k, v in values.items()]) + "}"
    except TypeError:
        return json.dumps(dict(values), separators=(",", ":"))


def sorted_map(values: Mapping[str, str]) -> str:
    """``json.dumps(dict(values), ensure_ascii=False, separators=(",", ":"),
    sort_keys=True)``: keys sorted, non-ASCII text kept as it is."""
    quote = encode_basestring
    try:
        pairs = sorted(values.items())
        return "{" + ",".join([quote(k) + ":" + quote(v) for k, v in pairs]) + "}"
    except TypeError:
        return json.dumps(dict(values), ensure_ascii=False, separators=(",", ":"), sort_keys=True)
