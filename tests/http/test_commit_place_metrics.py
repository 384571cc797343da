"""Where SQLite commits ran, on ``/metrics``: the SQLite backend's own counts
(``storage/commit_place.py``), read when the registry is scraped."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from xmpp_queue.http.metrics import QueueMetrics
from xmpp_queue.storage.commit_place import STALL_BUDGET, CommitPlace


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_commit_places_are_counters_read_at_each_scrape() -> None:
    metrics = QueueMetrics(process=False)
    place = CommitPlace()
    metrics.watch_commit_places(place)
    first = _samples(metrics.render([]).decode())
    assert first[("xmpp_queue_sqlite_commits_total", (("place", "loop"),))] == 0
    assert first[("xmpp_queue_sqlite_commits_total", (("place", "thread"),))] == 0
    assert first[("xmpp_queue_sqlite_back_offs_total", (("reason", "slow_commits"),))] == 0

    place.loop_commits += 7
    place.took(STALL_BUDGET * 2, 100.0)  # one commit over the budget: a back-off
    place.thread_commits += 3
    place.lock_taken(200.0)
    later = _samples(metrics.render([]).decode())
    assert later[("xmpp_queue_sqlite_commits_total", (("place", "loop"),))] == 7
    assert later[("xmpp_queue_sqlite_commits_total", (("place", "thread"),))] == 3
    assert later[("xmpp_queue_sqlite_slow_commits_total", ())] == 1
    assert later[("xmpp_queue_sqlite_back_offs_total", (("reason", "slow_commits"),))] == 1
    assert later[("xmpp_queue_sqlite_back_offs_total", (("reason", "write_lock_taken"),))] == 1


def test_no_commit_place_series_without_sqlite() -> None:
    """Memory and PostgreSQL stores have no commit places: no such series at all."""
    text = QueueMetrics(process=False).render([]).decode()
    assert "xmpp_queue_sqlite_" not in text
