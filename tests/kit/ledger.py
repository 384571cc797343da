"""The pipeline suite's helpers: the Spark check, ledger rows written and read as the
storage layer does. Fixtures: tests/pipeline/conftest.py.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import shutil
from collections.abc import Sequence

from tests.kit.env import missing
from tests.pipeline.ledger_factory import Row


def _spark_missing() -> str | None:
    if importlib.util.find_spec("pyspark") is None:
        return "pyspark is not installed (pip install '.[spark]')"
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "no Java runtime (Debian: default-jre-headless)"
    return None


def needs_spark() -> None:
    """Call at the top of a test module that imports PySpark: skips the module with
    the reason on a machine without PySpark or Java, fails under CI."""
    reason = _spark_missing()
    if reason:
        missing(reason, module=True)


def insert_rows(url: str, rows: Sequence[Row]) -> None:
    """Insert ledger rows as the storage layer writes them (its table, its types)."""
    from xmpp_queue.storage.engine import make_engine
    from xmpp_queue.storage.schema import ledger

    async def insert() -> None:
        engine = make_engine(url)
        try:
            async with engine.begin() as conn:
                if rows:
                    await conn.execute(ledger.insert(), [r.as_dict() for r in rows])
        finally:
            await engine.dispose()

    asyncio.run(insert())


def ledger_ids(url: str) -> list[int]:
    from sqlalchemy import select

    from xmpp_queue.storage.engine import make_engine
    from xmpp_queue.storage.schema import ledger

    async def read() -> list[int]:
        engine = make_engine(url)
        try:
            async with engine.connect() as conn:
                result = await conn.execute(select(ledger.c.id).order_by(ledger.c.id))
                return [int(i) for i in result.scalars()]
        finally:
            await engine.dispose()

    return asyncio.run(read())


def _clear_ledger(url: str) -> None:
    from sqlalchemy import delete

    from xmpp_queue.storage.engine import make_engine
    from xmpp_queue.storage.schema import ledger

    async def clear() -> None:
        engine = make_engine(url)
        try:
            async with engine.begin() as conn:
                await conn.execute(delete(ledger))
        finally:
            await engine.dispose()

    asyncio.run(clear())
