"""xmpp-queue: an XEP-0114 pubsub component with XEP-0254 queueing."""

__version__ = "0.1.0"
