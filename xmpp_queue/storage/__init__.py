"""Storage: implementations of :mod:`xmpp_queue.core.ports`.

``memory`` (dicts, for unit tests and the demo) imports only the core; ``sql``
(SQLAlchemy 2 async over SQLite or PostgreSQL), ``schema``, ``engine`` and
``migrations`` import SQLAlchemy/alembic. Nothing is imported here, so
``import xmpp_queue.storage.memory`` never pulls in SQLAlchemy.
"""
