"""Item payloads: the one piece of client XML the service stores and sends on.

They are checked and serialised here, with lxml and a hardened parser (no DTD,
no entities, no network, no huge trees): exactly one element, no DOCTYPE, no
processing instructions, then Canonical XML, so equal payloads are equal text
and ``payload_size`` is the stored byte count that pubsub#max_payload_size is
judged on. Payloads arriving inside the XMPP stream were already parsed by the
stream parser; those arriving as text (admin commands, bulk loads) get the same
treatment through :func:`canonical_payload_text`. XEP-0131 headers beside a
payload become the item's attributes (:func:`item_content`).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from lxml import etree
from slixmpp.xmlstream.tostring import tostring

from xmpp_queue.core.errors import (
    InvalidPayload,
    PayloadTooBig,
)
from xmpp_queue.slixmpp_seam import install_fast_escape
from xmpp_queue.xmpp.stanzas import SHIM

install_fast_escape()  # a payload is serialised once per publish (slixmpp_seam)

SHIM_HEADERS = f"{{{SHIM}}}headers"


SHIM_HEADER = f"{{{SHIM}}}header"


MAX_PAYLOAD_BYTES = 1024 * 1024
"""Hard cap before any parsing; pubsub#max_payload_size (the node's own limit) is
judged by the core on the canonical size."""


_PARSER = etree.XMLParser(
    resolve_entities=False,
    no_network=True,
    huge_tree=False,
    load_dtd=False,
    dtd_validation=False,
    remove_blank_text=False,
)


def canonical_payload_text(data: str | bytes) -> tuple[str, int]:
    """Check and canonicalise one XML element given as text; (C14N text, byte size).

    Rejects anything but a single element: DOCTYPE (and with it entity
    expansion), processing instructions, text outside the element, non-XML.
    """
    raw = data.encode("utf-8") if isinstance(data, str) else data
    if len(raw) > MAX_PAYLOAD_BYTES:
        raise PayloadTooBig(len(raw), MAX_PAYLOAD_BYTES)
    try:
        root = etree.fromstring(raw, _PARSER)
    except etree.XMLSyntaxError as exc:
        raise InvalidPayload(f"payload is not well-formed XML: {exc.msg}") from None
    tree = root.getroottree()
    if tree.docinfo.doctype or tree.docinfo.internalDTD is not None:
        raise InvalidPayload("payloads must not carry a DOCTYPE")
    if any(True for _ in root.itersiblings(preceding=True)) or any(
        True for _ in root.itersiblings()
    ):
        raise InvalidPayload("payloads must be exactly one element")
    for node in root.iter(etree.ProcessingInstruction, etree.Entity):
        raise InvalidPayload(f"payloads must not carry {type(node).__name__} nodes")
    canonical = etree.tostring(root, method="c14n", with_comments=False)
    return canonical.decode("utf-8"), len(canonical)


def canonical_payload(element: ET.Element) -> tuple[str, int]:
    """The stored form of a payload element received in a stanza."""
    return canonical_payload_text(tostring(element))


def item_payload(item: ET.Element) -> tuple[str | None, int]:
    """The payload of an ``<item/>``: None when empty, else exactly one element."""
    payload, size, _ = item_content(item)
    return payload, size


def item_content(item: ET.Element) -> tuple[str | None, int, dict[str, str]]:
    """An ``<item/>``'s payload (None, or exactly one element) and its attributes:
    at most one XEP-0131 ``<headers/>`` beside the payload, in either order."""
    children = list(item)
    stray_text = (item.text or "").strip() or any((c.tail or "").strip() for c in children)
    if stray_text:
        raise InvalidPayload("an item holds one XML element, not text")
    headers = [c for c in children if c.tag == SHIM_HEADERS]
    if len(headers) > 1:
        raise InvalidPayload("an item holds at most one SHIM <headers/> element")
    attributes = shim_attributes(headers[0]) if headers else {}
    payloads = [c for c in children if c.tag != SHIM_HEADERS]
    if not payloads:
        return None, 0, attributes
    if len(payloads) > 1:
        raise InvalidPayload("an item holds exactly one payload element (and optional headers)")
    return (*canonical_payload(payloads[0]), attributes)


def shim_attributes(headers: ET.Element) -> dict[str, str]:
    """``<header name='k'>v</header>`` children as a dict; a repeated name or
    anything but headers is refused (an attribute has one value)."""
    found: dict[str, str] = {}
    for child in headers:
        if child.tag != SHIM_HEADER:
            raise InvalidPayload("SHIM <headers/> holds only <header/> elements")
        if len(child):
            raise InvalidPayload("a SHIM <header/> holds text only")
        name = child.get("name")
        if name is None:
            raise InvalidPayload("a SHIM <header/> needs a name")
        if name in found:
            raise InvalidPayload(f"header {name!r} appears twice")
        found[name] = child.text or ""
    return found
