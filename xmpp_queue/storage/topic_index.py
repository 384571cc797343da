"""Each topic's bound queues with their compiled filters, exact after every change.

A publish to a topic asks for its bindings (``NodeRepository.bindings``) and
fan-out calls each one's compiled filter. Before this index, each publish
looked them up anew (the queue ids ever filed under the topic, each node's
current config checked, a list built, each filter text found in
``compile_filter``'s cache): about a third of fan-out's cost. Here a publish
costs one dict lookup returning a tuple built once per change of a binding.

The index is **exact**, not a superset checked at read, so it must follow
every change of a node's config or of the set of nodes. The store makes those
changes in three places, and each keeps the index in step:

- ``NodesRepo.add``/``update_config``/``remove`` file or forget the node in
  the operation itself (``MemoryState.note_binding``/``drop_node``): binding
  and unbinding through ``pubsub#queue_topic``/``pubsub#queue_filter``, a
  topic's deletion (which unbinds its queues), a queue's deletion or expiry;
- an undo that puts whole nodes back (a refused operation's savepoint, a
  rolled-back or failed commit) ends with ``MemoryState.recount``, which
  rebuilds the index from the nodes as they are after the undo;
- a load (start, restart, reload after an uncertain commit or a shard move)
  builds a new state whose loader files each node.

A binding holds the queue's :class:`Node` value itself (fan-out publishes the
copy with that node's config), so a reconfiguration that keeps the binding
still files the node again. Tuples are ordered by queue id: the fan-out order
does not depend on the history of the index.
"""

from __future__ import annotations

from collections.abc import Iterable

from xmpp_queue.core.model import Node
from xmpp_queue.core.topic_bindings import Binding, binding_of, topic_of


class TopicIndex:
    """Topic id -> its bindings (see the module docstring)."""

    __slots__ = ("_by_topic", "_topic_of", "_tuples")

    def __init__(self) -> None:
        self._by_topic: dict[str, dict[str, Binding]] = {}  # topic -> queue id -> binding
        self._topic_of: dict[str, str] = {}  # queue id -> the topic it is filed under
        self._tuples: dict[str, tuple[Binding, ...]] = {}  # built on demand, per topic

    def of(self, topic: str) -> tuple[Binding, ...]:
        """The bindings of *topic*, ordered by queue id (an empty tuple if none)."""
        found = self._tuples.get(topic)
        if found is None:
            queues = self._by_topic.get(topic)
            if not queues:
                return ()
            found = self._tuples[topic] = tuple(queues[q] for q in sorted(queues))
        return found

    def topics(self) -> list[str]:
        """The topics with at least one binding (tests compare the index with its nodes)."""
        return sorted(self._by_topic)

    def file(self, node: Node) -> None:
        """*node* was added or reconfigured: file it under its topic, or nowhere."""
        node_id = node.node_id
        topic = topic_of(node)
        was = self._topic_of.get(node_id)
        if was is not None and was != topic:
            self._drop(was, node_id)
        if not topic:
            return
        queues = self._by_topic.setdefault(topic, {})
        held = queues.get(node_id)
        if held is not None and held.queue is node:
            return  # the same value filed again (a rebuild): nothing changed
        queues[node_id] = binding_of(node)
        self._topic_of[node_id] = topic
        self._tuples.pop(topic, None)

    def forget(self, node_id: str) -> None:
        """*node_id* was removed from the store."""
        was = self._topic_of.get(node_id)
        if was is not None:
            self._drop(was, node_id)

    def rebuild(self, nodes: Iterable[Node]) -> None:
        """File exactly *nodes* (all of the store's), after whole nodes came back.

        A binding whose node value is unchanged is kept as it is, so a rebuild
        after undoing an unrelated node change costs no filter compilation."""
        kept = self._by_topic
        self._by_topic, self._topic_of, self._tuples = {}, {}, {}
        for node in nodes:
            topic = topic_of(node)
            if not topic:
                continue
            held = kept.get(topic, {}).get(node.node_id)
            binding = held if held is not None and held.queue is node else binding_of(node)
            self._by_topic.setdefault(topic, {})[node.node_id] = binding
            self._topic_of[node.node_id] = topic

    def _drop(self, topic: str, node_id: str) -> None:
        del self._topic_of[node_id]
        queues = self._by_topic[topic]
        del queues[node_id]
        if not queues:
            del self._by_topic[topic]
        self._tuples.pop(topic, None)
