"""Keep the component's handshake digest out of the log, whatever the level.

Why: XEP-0114's handshake is SHA-1(stream id + shared secret), and the stream id
is in the server's stream header. slixmpp's xmlstream logs every stanza it
sends and receives at DEBUG ("SEND: ...", "RECV: ..."), so a DEBUG log held both
halves: enough for an offline guess of a weak secret by anyone who reads the log
(a support ticket, a log shipper). This filter, on the one slixmpp logger that
writes stanzas, replaces the digest in ``<handshake>`` with ``[redacted]`` and
keeps the rest of the line (that a handshake was sent is worth seeing).

Installed once, on import of the component (:func:`install`); idempotent.
"""

from __future__ import annotations

import logging
import re

STANZA_LOGGER = "slixmpp.xmlstream.xmlstream"
_DIGEST = re.compile(r"(<handshake\b[^>]*>)([^<]+)(</handshake>)")
REDACTED = "[redacted]"


def redact(text: str) -> str:
    return _DIGEST.sub(rf"\g<1>{REDACTED}\g<3>", text)


class HandshakeRedaction(logging.Filter):
    """Rewrites a record whose message or arguments hold a handshake digest."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str) and "handshake" in record.msg:
            record.msg = redact(record.msg)
        args = record.args
        if isinstance(args, tuple) and any(_holds_handshake(a) for a in args):
            record.args = tuple(_redacted_arg(a) for a in args)
        return True


def _holds_handshake(value: object) -> bool:
    if isinstance(value, bytes):
        return b"handshake" in value
    return isinstance(value, str) and "handshake" in value


def _redacted_arg(value: object) -> object:
    if isinstance(value, bytes):
        return redact(value.decode("utf-8", "replace"))
    if isinstance(value, str):
        return redact(value)
    return value


def install() -> None:
    logger = logging.getLogger(STANZA_LOGGER)
    if not any(isinstance(f, HandshakeRedaction) for f in logger.filters):
        logger.addFilter(HandshakeRedaction())
