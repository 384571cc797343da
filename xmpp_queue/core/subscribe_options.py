"""Subscription options: the ``pubsub#subscribe_options`` form's field table.

A queue worker's window (``pubsub#queue_requests``), how many items one
notification may carry and how long the service may hold a short batch to fill
it; the forms, the validation and the dispatch all read these rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from xmpp_queue.core.errors import InvalidOptions
from xmpp_queue.core.form_fields import ConfigField, int_parser, parse_bool, render_value

SUBSCRIBE_OPTIONS_FORM = "http://jabber.org/protocol/pubsub#subscribe_options"

QUEUE_REQUESTS = "pubsub#queue_requests"
QUEUE_MAX_BATCH = "pubsub#queue_max_batch"
QUEUE_BATCH_WAIT = "pubsub#queue_batch_wait"
DELIVER = "pubsub#deliver"
MAX_QUEUE_REQUESTS = 10_000
MAX_BATCH_ITEMS = 1_000
"""The most items one notification carries (``pubsub#queue_max_batch``) and one
retract, unlock or publish request may name: a bound on the work one stanza asks for."""
MAX_BATCH_WAIT_MS = 10_000
"""The longest a short batch may be held (``pubsub#queue_batch_wait``, milliseconds): a
subscriber may trade latency for fewer stanzas, not park a queue's items."""


@dataclass(frozen=True, slots=True)
class SubscribeOptions:
    """Parsed subscribe_options: the queue window, whether to deliver at all, and
    how many items one notification may carry (``max_batch``, default 1: a plain
    XEP-0254 client sees exactly one item per message), and how long the service may
    hold fewer ready items than that to fill one (``batch_wait_ms``, default 0)."""

    queue_requests: int | None
    deliver: bool
    raw: Mapping[str, tuple[str, ...]]
    max_batch: int = 1
    batch_wait_ms: int = 0


SUBSCRIBE_OPTION_FIELDS: tuple[ConfigField, ...] = (
    ConfigField(DELIVER, "deliver", "boolean", "Enable delivery?", parse_bool),
    ConfigField(
        QUEUE_REQUESTS,
        "queue_requests",
        "text-single",
        "Number of items processed in parallel (XEP-0254)",
        int_parser(1, MAX_QUEUE_REQUESTS),
        datatype="xs:integer",
        queue_only=True,
    ),
    ConfigField(
        QUEUE_MAX_BATCH,
        "max_batch",
        "text-single",
        "Most items sent in one notification (this service's extension; default 1)",
        int_parser(1, MAX_BATCH_ITEMS),
        datatype="xs:integer",
        queue_only=True,
    ),
    ConfigField(
        QUEUE_BATCH_WAIT,
        "batch_wait_ms",
        "text-single",
        "Most milliseconds to hold ready items to fill a notification "
        "(this service's extension; default 0: send at once)",
        int_parser(0, MAX_BATCH_WAIT_MS),
        datatype="xs:integer",
        queue_only=True,
    ),
)
_SUB_BY_VAR = {f.var: f for f in SUBSCRIBE_OPTION_FIELDS}

SERVICE_OPTION_PREFIX = "xmpp-queue#"
"""Subscription options under this prefix are the service's own, kept opaque (a push
subscription's endpoint, ``push/``): only the system actor may set them (the service
checks), no subscriber sees them (the options form shows the ``pubsub#`` fields)."""


def service_options(values: Mapping[str, Sequence[str]]) -> list[str]:
    """The service's own option names among *values* (see SERVICE_OPTION_PREFIX)."""
    return [var for var in values if var.startswith(SERVICE_OPTION_PREFIX)]


def parse_subscribe_options(
    values: Mapping[str, Sequence[str]], current: SubscribeOptions | None = None
) -> SubscribeOptions:
    """Parse a submitted subscribe_options form onto *current* (or the defaults).

    ``pubsub#queue_requests`` must be a positive integer (docs/queueing.md: anything else is
    invalid-options). Unknown ``pubsub#`` fields are rejected, as for node config.
    """
    queue_requests = current.queue_requests if current else None
    deliver = current.deliver if current else True
    max_batch = current.max_batch if current else 1
    batch_wait_ms = current.batch_wait_ms if current else 0
    raw: dict[str, tuple[str, ...]] = dict(current.raw) if current else {}
    for var, raw_values in values.items():
        if var == "FORM_TYPE":
            continue
        spec = _SUB_BY_VAR.get(var)
        if var.startswith(SERVICE_OPTION_PREFIX):
            raw[var] = tuple(raw_values)
            continue
        if spec is None:
            if var.startswith("pubsub#"):
                raise InvalidOptions(var, "unknown or unsupported subscription option")
            continue
        if len(raw_values) != 1:
            raise InvalidOptions(var, "expected exactly one value")
        try:
            parsed = spec.parse(raw_values[0])
        except ValueError as exc:
            raise InvalidOptions(var, str(exc)) from None
        if spec.attr == "queue_requests":
            queue_requests = parsed
        elif spec.attr == "max_batch":
            max_batch = parsed
        elif spec.attr == "batch_wait_ms":
            batch_wait_ms = parsed
        else:
            deliver = parsed
        raw[var] = (render_value(parsed),)
    return SubscribeOptions(
        queue_requests=queue_requests,
        deliver=deliver,
        raw=raw,
        max_batch=max_batch,
        batch_wait_ms=batch_wait_ms,
    )


def max_batch_of(options: Mapping[str, Sequence[str]]) -> int:
    """A stored subscription's ``pubsub#queue_max_batch`` (1 when never set)."""
    raw = options.get(QUEUE_MAX_BATCH)
    return int(raw[0]) if raw else 1


def batch_wait_of(options: Mapping[str, Sequence[str]]) -> int:
    """A stored subscription's ``pubsub#queue_batch_wait`` in milliseconds (0 when never
    set: every dispatch sends what is ready at once)."""
    raw = options.get(QUEUE_BATCH_WAIT)
    return int(raw[0]) if raw else 0


def subscribe_option_values(options: SubscribeOptions, echo: bool = False) -> dict[str, str]:
    """The options as form values. In XEP-0254 §2.1's *echo*, the batch size and
    wait only when the subscriber chose them: a plain client gets back what it sent."""
    values = {DELIVER: render_value(options.deliver)}
    if options.queue_requests is not None:
        values[QUEUE_REQUESTS] = str(options.queue_requests)
        if not echo or QUEUE_MAX_BATCH in options.raw:
            values[QUEUE_MAX_BATCH] = str(options.max_batch)
        if not echo or QUEUE_BATCH_WAIT in options.raw:
            values[QUEUE_BATCH_WAIT] = str(options.batch_wait_ms)
    return values
