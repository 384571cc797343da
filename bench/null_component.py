"""A do-nothing XEP-0114 component: the ceiling the XMPP server itself allows.

Why: a queue component's throughput through Prosody can only be read against what
Prosody routes when the component costs (almost) nothing. This one is hand-written on a
raw asyncio socket, answers every IQ with an empty result, and in `message` mode also
sends one message per IQ, shaped like a queue's traffic:

- a `<publish>` IQ → result to the publisher + an items notification carrying its item ids
  (one, or a batch's) to the next subscriber (round-robin over the JIDs that sent
  `<subscribe jid=...>`);
- any other IQ (subscribe, retract) → result + a retract-style notification to the sender,
  naming the ids it named.

So the same light workers can ack its "deliveries", and the run has exactly the stanza
flow of the real queue (publish, result, notification, retract, result, notification),
with no storage and no logic. Everything one socket read produces goes out in one write.

`durable` mode (`null_durable.py`) is `message` mode plus one commit per socket read of
the rows that read's publishes and retracts ask for, before anything is written back:
the least a queue that keeps its items must do (`--database`: a SQLite file or a
PostgreSQL URL).

`topic` mode (`null_topic.py`) answers `topics_wire.py`'s set-up and publishes and sends a
topic's copies to its bound queues' workers, batched and acked as the real service does:
the ceiling of issue 21's filter shapes.

Run: `python bench/null_component.py --port P --domain null.localhost --secret S --mode message`
(`--mode iq`, `message`, `durable --database PATH|URL` or `topic`)
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import re
from pathlib import Path

from null_durable import Operations, PgDurable, SqliteDurable
from null_topic import NullTopic
from wire import StanzaSplitter, attr, start_tag

_ITEM_ID = re.compile(rb"<item\b[^>]*?\bid=(?:'([^']*)'|\"([^\"]*)\")")
_NODE = re.compile(rb"\bnode=(?:'([^']*)'|\"([^\"]*)\")")
_SUB_JID = re.compile(rb"<subscribe\b[^>]*?\bjid=(?:'([^']*)'|\"([^\"]*)\")")


def _group(m: re.Match[bytes] | None) -> bytes:
    if m is None:
        return b""
    return m.group(1) if m.group(1) is not None else m.group(2)


class NullComponent:
    """The reply logic, separate from the socket so it can be exercised on bytes."""

    def __init__(self, domain: str, mode: str, topic: NullTopic | None = None) -> None:
        self.domain = domain.encode()
        self.send_messages = mode in ("message", "durable")
        self.topic = topic  # `topic` mode: a topic's fan-out (null_topic)
        self.subscribers: list[bytes] = []
        self._next = 0

    def answer(self, stanza: bytes) -> list[bytes]:
        if not stanza.startswith(b"<iq"):
            return []
        head = start_tag(stanza)
        kind = attr(head, b"type")
        if kind not in (b"get", b"set"):
            return []
        sender = attr(head, b"from") or b""
        me = attr(head, b"to") or self.domain
        iq_id = attr(head, b"id") or b""
        if self.topic is not None:
            return self.topic.answer(stanza, sender, iq_id)
        out = [b"<iq type='result' id='%s' from='%s' to='%s'/>" % (iq_id, me, sender)]
        if not self.send_messages:
            return out
        node = _group(_NODE.search(stanza))
        ids = [_group(m) for m in _ITEM_ID.finditer(stanza)] or [b""]
        if b"<publish" in stanza and self.subscribers:
            target = self.subscribers[self._next % len(self.subscribers)]
            self._next += 1
            items = b"".join(
                b"<item id='%s'><job xmlns='urn:example:bench'/></item>" % i for i in ids
            )
            out.append(
                b"<message from='%s' to='%s'><event xmlns='http://jabber.org/protocol/"
                b"pubsub#event'><items node='%s'>%s</items></event></message>"
                % (me, target, node, items)
            )
            return out
        if b"<subscribe" in stanza:
            jid = _group(_SUB_JID.search(stanza)) or sender
            if jid not in self.subscribers:
                self.subscribers.append(jid)
        retracts = b"".join(b"<retract id='%s'/>" % i for i in ids)
        out.append(
            b"<message from='%s' to='%s'><event xmlns='http://jabber.org/protocol/"
            b"pubsub#event'><items node='%s'>%s</items></event></message>"
            % (me, sender, node, retracts)
        )
        return out


async def serve(
    host: str,
    port: int,
    domain: str,
    secret: str,
    mode: str,
    database: str = "",
    checkpointer: bool = False,
) -> None:
    store: SqliteDurable | PgDurable | None = None
    if mode == "durable":
        if database.startswith("postgresql://"):
            store = await PgDurable.open(database)
        else:
            store = SqliteDurable(Path(database), checkpointer)
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(
        b"<?xml version='1.0'?><stream:stream xmlns='jabber:component:accept' "
        b"xmlns:stream='http://etherx.jabber.org/streams' to='%s'>" % domain.encode()
    )
    splitter = StanzaSplitter()
    topic = None
    if mode == "topic":
        topic = NullTopic(domain.encode(), writer.write, asyncio.get_running_loop().call_later)
    logic = NullComponent(domain, mode, topic)
    authenticated = False
    while True:
        data = await reader.read(65536)
        if not data:
            return
        out: list[bytes] = []
        ops = Operations()
        for stanza in splitter.feed(data):
            if authenticated:
                out.extend(logic.answer(stanza))
                ops.note(stanza)
            elif stanza.startswith(b"<stream:stream"):
                stream_id = (attr(stanza, b"id") or b"").decode()
                digest = hashlib.sha1((stream_id + secret).encode()).hexdigest()
                out.append(f"<handshake>{digest}</handshake>".encode())
            elif stanza.startswith(b"<handshake"):
                authenticated = True
            elif stanza.startswith((b"<stream:error", b"</stream")):
                raise SystemExit(f"component refused: {stanza!r}")
        if store is not None and ops:
            await store.commit(ops)  # durable before anything of this read is sent
        if out:
            writer.write(b"".join(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--domain", required=True)
    parser.add_argument("--secret", required=True)
    parser.add_argument("--mode", choices=("iq", "message", "durable", "topic"), default="iq")
    parser.add_argument("--database", default="", help="durable mode: a SQLite path or PG URL")
    parser.add_argument(
        "--checkpointer", action="store_true", help="SQLite: checkpoint from a thread of its own"
    )
    args = parser.parse_args()
    if args.mode == "durable" and not args.database:
        parser.error("--mode durable needs --database")
    asyncio.run(
        serve(
            *(args.host, args.port, args.domain, args.secret, args.mode),
            database=args.database,
            checkpointer=args.checkpointer,
        )
    )


if __name__ == "__main__":
    main()
