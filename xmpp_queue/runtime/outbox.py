"""Outbox: the one way effects leave the core, routed to a sink by subscriber.

Every committed outcome's effects (answers to requests, the timer's unlocks, a
worker's departure, admin and dashboard levers) go through :meth:`Outbox.send`.
Each effect names the JID it is for (``to``); the outbox hands it to the sink that
serves that subscriber: the one routed for it (an HTTP push endpoint, once there is
one) or else the default sink, the XMPP component.

Why one place: the rules "commit first, then send" and "in the order committed"
then hold for every transport by construction, and no part of the service needs a
hand-made closure over the component to notify anyone.

Order: :meth:`send` is synchronous and hands effects to the sinks in the order
given (a run of consecutive effects for one sink goes as one call), so an answer a
sink wrote before ``send`` precedes the notifications, and what one caller sends
never interleaves with another's. A sink must not block (it writes or queues); a
sink that raises is logged and the others still get theirs: a committed change
cannot be undone by a failed send.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from xmpp_queue.core.effects import Effect

log = logging.getLogger("xmpp_queue.runtime.outbox")


class EffectSink(Protocol):
    """A transport that delivers effects to the subscribers it serves."""

    def deliver(self, effects: Sequence[Effect]) -> None:
        """Write or queue *effects*, in order, without blocking."""


class NoSink:
    """The default sink before a transport is attached: effects are logged, dropped."""

    def deliver(self, effects: Sequence[Effect]) -> None:
        log.warning("event=effects_dropped reason=no_sink count=%d", len(effects))


class Outbox:
    """Routes each effect to its subscriber's sink (see the module docstring)."""

    def __init__(self, default: EffectSink | None = None) -> None:
        self._default: EffectSink = default if default is not None else NoSink()
        self._routes: dict[str, EffectSink] = {}

    def set_default(self, sink: EffectSink) -> None:
        """The sink of every subscriber without a route of its own (the component)."""
        self._default = sink

    def route(self, subscriber: str, sink: EffectSink) -> None:
        """Effects for *subscriber* (a JID as effects name it) go to *sink* from now on."""
        self._routes[subscriber] = sink

    def unroute(self, subscriber: str) -> None:
        self._routes.pop(subscriber, None)

    def has_route(self, subscriber: str) -> bool:
        """Whether *subscriber* has a sink of its own (not the default one)."""
        return subscriber in self._routes

    def sink_for(self, subscriber: str) -> EffectSink:
        return self._routes.get(subscriber, self._default)

    def send(self, effects: Sequence[Effect]) -> None:
        """Hand *effects* to their sinks, in order. The hot path (no routes: every
        subscriber is on the default sink) is one call."""
        if not effects:
            return
        routes = self._routes
        if not routes:
            self._deliver(self._default, effects)
            return
        default = self._default
        run: list[Effect] = []
        current: EffectSink | None = None
        for effect in effects:
            sink = routes.get(effect.to, default)
            if sink is not current:
                if current is not None:
                    self._deliver(current, run)
                current, run = sink, []
            run.append(effect)
        if current is not None:
            self._deliver(current, run)

    async def send_effects(self, effects: Sequence[Effect]) -> None:
        """:meth:`send` for callers that await their sender (admin commands, dashboard)."""
        self.send(effects)

    @staticmethod
    def _deliver(sink: EffectSink, effects: Sequence[Effect]) -> None:
        try:
            sink.deliver(effects)
        except Exception:
            log.exception("event=send_failed sink=%s effects=%d", type(sink).__name__, len(effects))
