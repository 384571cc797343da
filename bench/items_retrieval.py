"""Items retrieval on a long queue: answer time and resident memory (issue 27).

Fills a queue node of the in-memory store with N items (200-byte payloads) through
the service, then answers ``<items/>`` requests the way the component does
(service call, then the stanza text under the size limit) and prints, per request:
the answer time, the items and bytes answered, and the growth of the resident set.

    python bench/items_retrieval.py --items 800000
    python bench/items_retrieval.py --items 800000 --page-size 100000000   # "before":
        # no page limit, no byte budget: the whole backlog in one answer

Requests: the first page (no paging asked), a page from the middle (RSM after), the
last page (RSM before=""), and max_items=10.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import time
import xml.etree.ElementTree as ET
from datetime import UTC, datetime

from slixmpp import Iq

from xmpp_queue.core.model import SYSTEM, NodeConfig, PageRequest
from xmpp_queue.core.service import PubSubService, ServiceSettings
from xmpp_queue.settings import DEFAULT_ITEMS_PAGE_SIZE, DEFAULT_MAX_STANZA_SIZE, STANZA_ENVELOPE
from xmpp_queue.storage.store import StateStore
from xmpp_queue.xmpp.wire_size import items_reply_text


def clock() -> datetime:
    return datetime.now(UTC)


def rss_mib() -> float:
    with open(f"/proc/{os.getpid()}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=200_000)
    parser.add_argument("--page-size", type=int, default=DEFAULT_ITEMS_PAGE_SIZE)
    parser.add_argument("--max-stanza-size", type=int, default=DEFAULT_MAX_STANZA_SIZE)
    args = parser.parse_args()
    unbounded = args.page_size >= args.items
    ceiling = args.max_stanza_size - STANZA_ENVELOPE
    counter = itertools.count()
    service = PubSubService(
        StateStore.in_memory(),
        clock,
        lambda: f"id{next(counter)}",
        ServiceSettings(
            default_config=NodeConfig(),
            items_page_size=args.page_size,
            page_bytes=None if unbounded else ceiling,
        ),
    )
    await service.start()
    await service.create_node(
        SYSTEM, "jobs", {"pubsub#queue": ["1"], "pubsub#max_items": ["1000000"]}
    )
    payload = "<job xmlns='urn:bench'>" + "x" * 170 + "</job>"
    start = time.perf_counter()
    for base in range(0, args.items, 1000):
        batch = [
            (f"i{n}", payload, len(payload)) for n in range(base, min(base + 1000, args.items))
        ]
        await service.publish_items(SYSTEM, "jobs", batch)
    print(
        f"filled {args.items} items in {time.perf_counter() - start:.1f} s, rss {rss_mib():.0f} MiB"
    )
    limit = 1 << 62 if unbounded else args.max_stanza_size
    request = Iq(xml=ET.fromstring("<iq xmlns='jabber:component:accept' type='get' id='b'/>"))
    mid = f"i{args.items // 2}"
    cases = [
        ("no paging asked", {}),
        (f"RSM after={mid}", {"page": PageRequest(max=args.page_size, after=mid)}),
        ("RSM last page", {"page": PageRequest(max=args.page_size, before="")}),
        ("max_items=10", {"max_items": 10}),
    ]
    print(f"page size {args.page_size}{' (unbounded: before)' if unbounded else ''}")
    for name, kwargs in cases:
        before = rss_mib()
        t0 = time.perf_counter()
        page = await service.get_items(SYSTEM, "jobs", **kwargs)  # type: ignore[arg-type]
        text = items_reply_text(request.reply(), "jobs", page, limit)
        elapsed = time.perf_counter() - t0
        print(
            f"  {name:<22} {elapsed * 1000:9.1f} ms  items {len(page.items):>7}  "
            f"answer {len(text.encode()) / 1024:9.1f} KiB  rss +{rss_mib() - before:6.1f} MiB"
        )
        del text, page
    await service.stop()


if __name__ == "__main__":
    asyncio.run(main())
