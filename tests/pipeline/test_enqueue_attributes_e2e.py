"""``pipeline enqueue`` with attribute, delay, TTL and priority columns into a real
queue through Prosody: the example of docs/pipeline.md, run as written (issue 19).
The stored items are read back over XMPP with the client's items retrieval."""

from __future__ import annotations

import asyncio
import io
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.kit.ledger import needs_spark

needs_spark()

from tests.kit.integration import PASSWORD, ComponentFactory  # noqa: E402
from xmpp_queue.pipeline.settings import PipelineSettings  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.integration]

SERVICE = "queue.localhost"


def docs_example() -> tuple[str, list[str]]:
    """The CSV and the command line of docs/pipeline.md's attributes example."""
    from tests.kit.integration import REPO_ROOT

    text = (REPO_ROOT / "docs" / "pipeline.md").read_text(encoding="utf-8")
    section = text.split("### Attributes, delays, expiry and priority from columns", 1)[1]
    csv = section.split("```\n", 1)[1].split("```", 1)[0]
    command = section.split("```sh\n", 1)[1].split("```", 1)[0].replace("\\\n", " ")
    return csv, command.split()


async def test_the_docs_example_stores_attributes_delay_ttl_and_priority(
    spark: Any,
    prosody: Any,
    component: ComponentFactory,
    tmp_path: Path,
) -> None:
    from tests.pipeline.test_settings_cli import parse
    from xmpp_queue.client import Publisher
    from xmpp_queue.pipeline.cli import run_pipeline

    service = await component(database_url=f"sqlite:///{tmp_path / 'queue.sqlite'}")
    csv, command = docs_example()
    (tmp_path / "mail.csv").write_text(csv, encoding="utf-8")
    assert command[:3] == ["xmpp-queue", "pipeline", "enqueue"]
    argv = command[1:]
    at = argv.index("-c")
    del argv[at : at + 2]  # the settings come from here, not from a file
    argv[argv.index("mail.csv")] = str(tmp_path / "mail.csv")
    settings = PipelineSettings(
        database_url=service.database_url,
        publisher_jid="pub@localhost",
        publisher_password=PASSWORD,
        service_jid=SERVICE,
        xmpp_host=prosody.host,
        xmpp_port=prosody.c2s_port,
        allow_plain=True,
    )
    async with Publisher(
        "pub@localhost",
        PASSWORD,
        SERVICE,
        host=prosody.host,
        port=prosody.c2s_port,
        allow_plain=True,
    ) as pub:
        await pub.create_queue("emails", lock_timeout=60)
        sent_at = datetime.now(UTC)
        printed = io.StringIO()
        code = await asyncio.to_thread(run_pipeline, parse(argv), settings, printed)
        assert code == 0, printed.getvalue()
        assert re.search(r"published\W+3\b", printed.getvalue())
        items = {item.item_id: item for item in await pub.items("emails")}
    assert items["m1"].attributes == {"tenant": "acme", "TTL": "600", "Urgency": "high"}
    assert items["m3"].attributes == {"tenant": "beta", "Urgency": "low"}
    m2 = items["m2"]
    assert set(m2.attributes) == {"tenant", "Start"} and m2.priority == "medium"
    assert m2.deliver_at is not None
    assert 25 <= (m2.deliver_at - sent_at).total_seconds() <= 60
