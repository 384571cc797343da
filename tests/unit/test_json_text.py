"""The hand-written JSON of string maps is json.dumps's text, byte for byte.

The headers column and the ``published`` ledger rows were written by ``json.dumps``;
stored rows and the pipeline's readers must not see a different text now that they
are written without it (``xmpp_queue/core/json_text.py``)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from xmpp_queue.core.json_text import ascii_map, sorted_map
from xmpp_queue.core.ledger import publisher_attributes
from xmpp_queue.storage.codec import decode_headers, encode_headers

TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=12) | st.text(max_size=12)
MAPS = st.dictionaries(TEXT, TEXT, max_size=6)


def dumps_ascii(values: Any) -> str:
    return json.dumps(dict(values), separators=(",", ":"))


def dumps_sorted(values: Any) -> str:
    return json.dumps(dict(values), ensure_ascii=False, separators=(",", ":"), sort_keys=True)


@given(MAPS)
def test_ascii_map_is_json_dumps(values: dict[str, str]) -> None:
    assert ascii_map(values) == dumps_ascii(values)


@given(MAPS)
def test_sorted_map_is_json_dumps_sorted(values: dict[str, str]) -> None:
    assert sorted_map(values) == dumps_sorted(values)


def test_awkward_strings() -> None:
    values = {
        'quote"back\\slash': "tab\tnew\nline\x00nul\x7f",
        "é ü ß": "日本語 \U0001f600",
        "\ud800": "lone surrogate \udfff",
        "": "",
        "</script>": "\u2028\u2029",
    }
    assert ascii_map(values) == dumps_ascii(values)
    assert sorted_map(values) == dumps_sorted(values)
    assert decode_headers(encode_headers(values)) == values


def test_not_a_string_falls_back_to_json_dumps() -> None:
    """A value or key of another type (the types forbid it) is json.dumps's business."""
    odd: Any = {"n": 1, "f": 1.5, "b": True, "none": None, 2: "int key"}
    assert ascii_map(odd) == dumps_ascii(odd)
    assert sorted_map({"b": 1, "a": None}) == dumps_sorted({"b": 1, "a": None})


def test_the_stored_forms_are_unchanged() -> None:
    assert encode_headers({}) is None
    assert encode_headers({"region": "eu", "Priority": "5"}) == '{"region":"eu","Priority":"5"}'
    assert publisher_attributes({"z": "1", "a": "é"}) == '{"a":"é","z":"1"}'
