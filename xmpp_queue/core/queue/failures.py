"""Why an item's deliveries failed: the reasons kept with the item, as headers.

A worker's nack may say why (``<unlock reason='...'>``); a lock that times out
or whose holder leaves fails too. Without the reason, a dead letter could only
say ``max-deliveries`` and the operator had to search worker logs. Celery and
RQ keep the error with the job; here the item carries it, in two headers the
service writes itself (reserved in :mod:`xmpp_queue.core.attributes`, so a
publisher cannot forge them):

- ``last-error``: the newest reason, at most :data:`MAX_REASON` characters;
- ``error-history``: the last :data:`HISTORY` failures, oldest first, as a
  JSON array of ``{"delivery", "at", "by", "reason"}`` objects (typed for
  scripts; the admin details and the dashboard show it as a list).

Both are bounded (:data:`MAX_HISTORY_BYTES` at most), travel with the item to
the next worker (beside ``delivery-attempt``) and into the dead-letter node
(a dead letter copies the item's headers), and stay on a redriven item, so the
worker of its next life can see why the previous one failed.

Pure functions: no XML, no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime

LAST_ERROR = "last-error"
ERROR_HISTORY = "error-history"
MAX_REASON = 200  # characters of one reason, as the dead-letter reason
HISTORY = 5  # failures kept per item
MAX_HISTORY_BYTES = HISTORY * (MAX_REASON * 4 + 3072 // HISTORY)  # UTF-8 worst case + fields

LOCK_TIMEOUT = "lock timeout"
HOLDER_GONE = "holder gone"


def clean_reason(reason: str) -> str:
    """One line of at most :data:`MAX_REASON` characters (control characters become
    spaces: a reason is shown in logs, tables and headers)."""
    return "".join(c if c >= " " and c != "\x7f" else " " for c in reason).strip()[:MAX_REASON]


def history(headers: Mapping[str, str]) -> list[dict[str, object]]:
    """The failures recorded in *headers*, oldest first ([] when none or unreadable)."""
    raw = headers.get(ERROR_HISTORY)
    if not raw:
        return []
    try:
        entries = json.loads(raw)
    except ValueError:
        return []
    if not isinstance(entries, list):
        return []
    return [e for e in entries if isinstance(e, dict)]


def with_failure(
    headers: Mapping[str, str], reason: str, delivery: int, holder: str | None, at: datetime
) -> dict[str, str]:
    """*headers* with one more failure: ``last-error`` replaced, the history
    appended to and cut to its newest :data:`HISTORY` entries."""
    text = clean_reason(reason)
    entries = history(headers)
    entries.append(
        {
            "delivery": delivery,
            "at": at.isoformat().replace("+00:00", "Z"),
            "by": (holder or "")[:MAX_REASON],
            "reason": text,
        }
    )
    encoded = json.dumps(entries[-HISTORY:], ensure_ascii=False, separators=(",", ":"))
    while len(encoded.encode()) > MAX_HISTORY_BYTES and len(entries) > 1:
        entries.pop(0)  # unreachable with the caps above; kept as the bound's guard
        encoded = json.dumps(entries[-HISTORY:], ensure_ascii=False, separators=(",", ":"))
    return {**headers, LAST_ERROR: text, ERROR_HISTORY: encoded}
