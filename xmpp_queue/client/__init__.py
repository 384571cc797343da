"""Client library for xmpp-queue: workers and publishers over plain XMPP.

A :class:`Worker` subscribes to a XEP-0254 queue node and runs an async handler
per item (ack on success, unlock on exception, graceful drain on SIGINT /
SIGTERM). A :class:`Publisher` puts items on a node with a window of
outstanding publishes. Both log in with an :class:`Account` (who, where, which
service). Both speak to any XEP-0060 service; the queue semantics
come from the xmpp-queue component (or any XEP-0254 implementation).
"""

from xmpp_queue.client.account import Account, AccountError
from xmpp_queue.client.attributes import PublishItem
from xmpp_queue.client.errors import (
    AuthenticationFailed,
    ClientError,
    ConnectionLost,
    LockLost,
    LoginFailed,
    PublishError,
    StanzaError,
)
from xmpp_queue.client.jobs import Handler, Job, WorkerStats, in_thread
from xmpp_queue.client.payload import json_payload, parse_json_payload
from xmpp_queue.client.publisher import Publisher
from xmpp_queue.client.publisher_nodes import queue_config
from xmpp_queue.client.session import ReconnectPolicy
from xmpp_queue.client.window import RetryPolicy
from xmpp_queue.client.wire import ItemEvent
from xmpp_queue.client.worker import Worker

__all__ = [
    "Account",
    "AccountError",
    "AuthenticationFailed",
    "ClientError",
    "ConnectionLost",
    "Handler",
    "ItemEvent",
    "Job",
    "LockLost",
    "LoginFailed",
    "PublishError",
    "PublishItem",
    "Publisher",
    "ReconnectPolicy",
    "RetryPolicy",
    "StanzaError",
    "Worker",
    "WorkerStats",
    "in_thread",
    "json_payload",
    "parse_json_payload",
    "queue_config",
]
