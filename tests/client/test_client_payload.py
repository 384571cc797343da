"""XEP-0335 JSON payload helpers: what a publisher sends is what a worker reads."""

from __future__ import annotations

from xml.etree import ElementTree as ET

import pytest

from xmpp_queue.client.payload import JSON_TAG, json_payload, parse_json_payload


@pytest.mark.parametrize(
    "value",
    [
        {"n": 1, "tags": ["a", "b"]},
        "<script>&amp;</script>",
        ["\u00e9t\u00e9", "\u4e2d", "\U0001f600"],
        {"control": "\x00\x01\x1f"},
        None,
        3.5,
    ],
)
def test_json_payload_round_trips_through_a_string_and_an_element(value: object) -> None:
    text = json_payload(value)
    assert parse_json_payload(text) == value
    element = ET.fromstring(text)
    assert element.tag == JSON_TAG
    assert parse_json_payload(element) == value


def test_json_payload_is_one_xep_0335_element_in_plain_ascii() -> None:
    text = json_payload({"k": "<&>\u00e9"})
    assert text.startswith("<json xmlns='urn:xmpp:json:0'>")
    assert text.endswith("</json>")
    assert text.isascii()
    assert "<&" not in text[len("<json xmlns='urn:xmpp:json:0'>") : -len("</json>")]


def test_parse_json_payload_refuses_another_element() -> None:
    with pytest.raises(ValueError, match="not a XEP-0335"):
        parse_json_payload("<example xmlns='urn:xmpp:example'>1</example>")


def test_parse_json_payload_refuses_malformed_xml_and_bad_json() -> None:
    with pytest.raises(ValueError, match="well-formed"):
        parse_json_payload("<json xmlns='urn:xmpp:json:0'>")
    with pytest.raises(ValueError):
        parse_json_payload("<json xmlns='urn:xmpp:json:0'>{nope</json>")
