"""What a request handler takes and gives: the request IQ, and its Answer.

Why apart from the table and the handlers: every verb family's handlers share
these two types, and the router builds one and sends the other.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from slixmpp import Iq

from xmpp_queue.core.effects import Effect
from xmpp_queue.core.model import Actor
from xmpp_queue.core.service import PubSubService
from xmpp_queue.settings import DEFAULT_MAX_STANZA_SIZE


@dataclass(frozen=True, slots=True)
class Answer:
    """What a handler produced: the IQ reply, then the notifications to send.

    The per-item answers (publish, retract, unlock) come as text, like the queue
    notices (``text_render.notice_text``): they are sent for every work item.
    """

    reply: Iq | str
    effects: tuple[Effect, ...] = ()


class IqRequest:
    """A request IQ: its element, and slixmpp's stanza object only when asked for.

    The per-item requests (publish, retract, unlock) are read and answered from the
    element alone: building slixmpp's ``Iq`` for them (plugin objects, language
    lookups, dictionary-style field access) cost more CPU than handling the
    request. Handlers that render with slixmpp take :attr:`stanza`, built once.
    """

    __slots__ = ("_build", "_stanza", "max_bytes", "xml")

    def __init__(
        self,
        xml: ET.Element,
        build: Callable[[ET.Element], Iq],
        stanza: Iq | None = None,
        max_bytes: int = DEFAULT_MAX_STANZA_SIZE,
    ) -> None:
        self.xml = xml
        self._build = build
        self._stanza = stanza
        self.max_bytes = max_bytes  # the largest answer the stream takes (wire_size)

    @property
    def stanza(self) -> Iq:
        if self._stanza is None:
            self._stanza = self._build(self.xml)
        return self._stanza


Handler = Callable[[PubSubService, IqRequest, Actor, ET.Element, ET.Element], Awaitable[Answer]]
