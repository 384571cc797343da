"""The composition root: the one place that builds and wires the running service.

Clock, id factory, store, :class:`PubSubService`, the outbox, the deadline timer,
presence tracking, :class:`QueueComponent` and the admin commands are created
here, in :func:`run_service`, and nowhere else:
no module-level singletons, no engine at import time, so tests and the demo
can build as many independent services as they like.

Lifecycle of one term, in order: open the store, start the service (its
commit batcher), start the operations listener when ``[http]`` is configured
(metrics, health checks, dashboard: ``xmpp_queue/http``), connect the
component and serve until SIGINT/SIGTERM, the component ends, or the lease is
lost; then stop the component (no new stanzas), the listener, the service
(finish the operations in flight) and close the store. A wrong secret is one
log line (written by the component) and exit status 1: retrying cannot fix
it, and hammering the server helps nobody.

Who serves: on PostgreSQL any number of processes may run with one config;
each stands by until it holds the leader lease (``storage/lease.py``), serves
one term, and stands by again if it loses the lease. A standby answers
``/healthz`` (alive) but not ``/readyz`` (it serves nothing). On SQLite one
process serves, guarded by a lock on the database file; a second one exits
with status 2 and one line naming the holder.

The modules, in the order a run goes through them: ``run`` (signals, the SQLite
lock or the PostgreSQL lease, standing by), ``term`` (one term: everything
built, wired, started and stopped), ``ending`` (how the component's run ended,
as an exit status), ``core_inputs`` (the clock, ids and the core's settings).
"""
