"""Item payloads as XEP-0335 JSON containers.

A pubsub item carries exactly one XML element. For the common case of a JSON
job description, XEP-0335 wraps the JSON text in ``<json xmlns='urn:xmpp:json:0'>``;
these helpers build that element as a string (what :class:`Publisher` sends) and
read it back from a string or a parsed element (what a :class:`Job` carries).
"""

from __future__ import annotations

import json
from typing import Any
from xml.etree import ElementTree as ET

JSON_NS = "urn:xmpp:json:0"
JSON_TAG = f"{{{JSON_NS}}}json"

_OPEN = f"<json xmlns='{JSON_NS}'>"
_CLOSE = "</json>"


def escape_text(text: str) -> str:
    """XML character data: only ``&``, ``<`` and ``>`` need escaping."""
    if "&" in text:
        text = text.replace("&", "&amp;")
    if "<" in text:
        text = text.replace("<", "&lt;")
    if ">" in text:
        text = text.replace(">", "&gt;")
    return text


def json_payload(obj: Any) -> str:
    """*obj* as a XEP-0335 ``<json/>`` element string.

    ``ensure_ascii`` (the json default) keeps every character XML 1.0 allows:
    JSON escapes control characters, and non-ASCII becomes ``\\uXXXX``.
    """
    return _OPEN + escape_text(json.dumps(obj, separators=(",", ":"))) + _CLOSE


def parse_json_payload(payload: str | ET.Element) -> Any:
    """The JSON value inside a ``<json xmlns='urn:xmpp:json:0'>`` element.

    Raises :class:`ValueError` when the payload is not such an element or its
    text is not JSON.
    """
    if isinstance(payload, str):
        try:
            element = ET.fromstring(payload)
        except ET.ParseError as exc:
            raise ValueError(f"payload is not well-formed XML: {exc}") from None
    else:
        element = payload
    if element.tag != JSON_TAG:
        raise ValueError(f"not a XEP-0335 json payload: {element.tag}")
    return json.loads(element.text or "")
