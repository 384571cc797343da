"""A queue bound to a topic, as a publish to the topic needs it: the queue and its
compiled filter (docs/queueing.md, "Topics and subscriptions").

The store keeps one tuple of these per topic (``NodeRepository.bindings``),
rebuilt only when a binding changes, so that a publish costs one lookup and,
per bound queue, one filter call: nothing is parsed, checked or allocated for
a queue that keeps the item out (issue 21's target: filters that drop most
items must leave the publisher's rate where an unbound topic's is).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from xmpp_queue.core.model import Node
from xmpp_queue.core.topic_filter import FilterSyntaxError, compile_filter

Accepts = Callable[[Mapping[str, str]], bool]
"""A compiled filter: whether an item with these attributes gets a copy."""


@dataclass(frozen=True, slots=True)
class Unparsable:
    """A stored filter that no longer parses (filters are checked when set, so only
    a database edited by hand holds one). Evaluating it raises the parse error, as
    evaluating the text did before bindings were compiled ahead: the publish fails
    loudly instead of the queue silently getting every item or none."""

    error: FilterSyntaxError

    def __call__(self, attributes: Mapping[str, str]) -> bool:
        raise self.error


@dataclass(frozen=True, slots=True)
class Binding:
    """One bound queue of a topic.

    ``accepts`` is None when the queue has no filter (it gets every item);
    ``counter`` is the ``Work.filtered`` key of the items it keeps out,
    ``(queue id, topic id)``, built once here rather than per filtered item."""

    queue: Node
    accepts: Accepts | None
    counter: tuple[str, str]


def binding_of(queue: Node) -> Binding:
    """The binding of *queue* (a queue node with ``queue_topic`` set)."""
    text = queue.config.queue_filter
    accepts: Accepts | None = None
    if text:
        try:
            accepts = compile_filter(text)
        except FilterSyntaxError as exc:
            accepts = Unparsable(exc)
    return Binding(queue, accepts, (queue.node_id, queue.config.queue_topic))


def topic_of(queue: Node) -> str:
    """The topic *queue* is bound to, "" when it is not a bound queue."""
    cfg = queue.config
    return cfg.queue_topic if cfg.queue else ""
