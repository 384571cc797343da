"""Stanza classes slixmpp lacks: XEP-0254 unlock, our lock extension, and RSM in pubsub.

slixmpp's ``xep_0060`` ships the XEP-0060 element classes (used here for parsing
and rendering); queueing was never added to it, so the elements live here and
are registered onto slixmpp's classes the same way its own plugins do, so that
``iq['pubsub']['unlock']['node']`` and ``msg['pubsub_event']['items']`` work for
the service and for worker clients alike.

Namespaces: XEP-0254's protocol namespace is ``urn:xmpp:pubsub:queueing:0``; its
unlock-notification example says ``urn:xmpp:queueing:0``, a slip (docs/queueing.md), so
both the request and the event use the protocol namespace. Lock extension is not
in any XEP: it is ours, in the project namespace ``urn:xmpp-queue:0``.
"""

from __future__ import annotations

from datetime import UTC, datetime

from slixmpp.plugins.xep_0059.stanza import Set as RsmSet
from slixmpp.plugins.xep_0060.stanza.pubsub import Pubsub
from slixmpp.plugins.xep_0060.stanza.pubsub_event import EventItems
from slixmpp.xmlstream import ElementBase, register_stanza_plugin

PUBSUB = "http://jabber.org/protocol/pubsub"
PUBSUB_OWNER = "http://jabber.org/protocol/pubsub#owner"
PUBSUB_EVENT = "http://jabber.org/protocol/pubsub#event"
PUBSUB_ERRORS = "http://jabber.org/protocol/pubsub#errors"
QUEUEING = "urn:xmpp:pubsub:queueing:0"
QUEUE_EXT = "urn:xmpp-queue:0"
RSM = "http://jabber.org/protocol/rsm"
DATA_FORMS = "jabber:x:data"
SHIM = "http://jabber.org/protocol/shim"
STANZAS = "urn:ietf:params:xml:ns:xmpp-stanzas"


def pubsub_feature(name: str) -> str:
    """A XEP-0060 disco feature: ``http://jabber.org/protocol/pubsub#<name>``."""
    return f"{PUBSUB}#{name}"


def format_instant(moment: datetime) -> str:
    """XEP-0082 DateTime in UTC with a Z, to the second (rounded down, so a
    worker never believes it holds a lock longer than it does)."""
    return moment.astimezone(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


class LockItem(ElementBase):
    """``<item id=''/>`` inside unlock/extend; ``expires`` only in an extend result."""

    namespace = QUEUEING
    name = "item"
    plugin_attrib = "item"
    interfaces = {"id"}


class Unlock(ElementBase):
    """XEP-0254 §2.4 request: ``<unlock xmlns='urn:xmpp:pubsub:queueing:0' node=''>``."""

    namespace = QUEUEING
    name = "unlock"
    plugin_attrib = "unlock"
    interfaces = {"node"}


class ExtendItem(ElementBase):
    namespace = QUEUE_EXT
    name = "item"
    plugin_attrib = "item"
    interfaces = {"id", "expires"}


class Extend(ElementBase):
    """Our lock extension: ``<extend xmlns='urn:xmpp-queue:0' node='' seconds='N'>``.

    A worker on a long job pushes its deadline instead of racing the timeout
    (long work is extended, not guessed). ``seconds`` is optional (the
    node's lock timeout); the result echoes the element with ``expires`` set.
    """

    namespace = QUEUE_EXT
    name = "extend"
    plugin_attrib = "extend"
    interfaces = {"node", "seconds"}


class EventUnlock(ElementBase):
    """XEP-0254 §2.4 notification: ``<unlock xmlns='urn:xmpp:pubsub:queueing:0' id=''/>``
    inside ``<event><items node=''>``."""

    namespace = QUEUEING
    name = "unlock"
    plugin_attrib = "unlock"
    plugin_multi_attrib = "unlocks"
    interfaces = {"id"}


def register() -> None:
    """Attach the classes to slixmpp's pubsub stanzas (idempotent)."""
    register_stanza_plugin(Pubsub, Unlock)
    register_stanza_plugin(Unlock, LockItem)
    register_stanza_plugin(Pubsub, Extend)
    register_stanza_plugin(Extend, ExtendItem)
    register_stanza_plugin(EventItems, EventUnlock, iterable=True)
    # XEP-0060 §6.5.4: RSM <set/> sits beside <items/> in <pubsub/>.
    register_stanza_plugin(Pubsub, RsmSet)


register()
