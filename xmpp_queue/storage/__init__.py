"""Storage: the one implementation of :mod:`xmpp_queue.core.ports`.

``store`` (:class:`~xmpp_queue.storage.store.StateStore`) holds the whole state
in memory (``state``), records what each transaction and each operation changed
(``changes``) and hands the net change of every commit to a backend: none
(``backend_memory``, tests and ``demo --memory``) or SQL (``backend_sql``
opens ``backend_sqlite`` or ``backend_postgres``, loaded at start by ``load``).
``schema``, ``engine`` and ``migrations`` are the SQL side (SQLAlchemy,
alembic). Nothing is imported here, so importing the package never pulls in
SQLAlchemy.
"""
