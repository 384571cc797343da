"""What runs beside the core and outside any transport: the outbox, the timer, presence.

The core returns effects after commit; these parts decide where they go and when
time-driven work runs. Nothing here knows XML, sockets, HTTP or SQL (import-linter):
the XMPP component and, later, an HTTP pusher plug in as sinks of the outbox.
"""
