"""The store's topic index against a recomputation from its nodes (``storage/topic_index``).

The index is a cache kept in step with every change of a binding; these helpers
say what it must hold at any moment, derived from nothing but the nodes' current
configs, so a test can compare the two after any step (an undone one included).
"""

from __future__ import annotations

from xmpp_queue.core.topic_filter import compile_filter
from xmpp_queue.storage.state import MemoryState


def recomputed(state: MemoryState) -> dict[str, list[tuple[str, str]]]:
    """Topic -> [(queue id, filter text)], ordered by queue id, from the nodes alone."""
    found: dict[str, list[tuple[str, str]]] = {}
    for node_id in sorted(state.nodes):
        cfg = state.nodes[node_id].node.config
        if cfg.queue and cfg.queue_topic:
            found.setdefault(cfg.queue_topic, []).append((node_id, cfg.queue_filter))
    return found


def indexed(state: MemoryState) -> dict[str, list[tuple[str, str]]]:
    """The same, as the index holds it, after checking each binding is the live one:
    the queue's current :class:`Node` value, its filter compiled from its current
    text (None when it has none) and its counter key."""
    found: dict[str, list[tuple[str, str]]] = {}
    for topic in state.topics.topics():
        for binding in state.bindings(topic):
            queue = binding.queue
            live = state.nodes.get(queue.node_id)
            assert live is not None, ("a removed queue is still bound", topic, queue.node_id)
            assert binding.queue is live.node, ("a stale node value", topic, queue.node_id)
            text = queue.config.queue_filter
            expected = compile_filter(text) if text else None
            assert binding.accepts == expected, ("a stale filter", topic, queue.node_id)
            assert binding.counter == (queue.node_id, topic), binding.counter
            found.setdefault(topic, []).append((queue.node_id, text))
    return found


def assert_index_exact(state: MemoryState) -> None:
    """The topic index holds exactly what the nodes' configs say, nothing stale."""
    assert indexed(state) == recomputed(state)
