"""The report page's detail sections: attributes of published items, failure reasons.

Plain rows in (collected from the ``attribute_keys``, ``attribute_values`` and
``reasons`` tables of ``details.py``), HTML out, so the page is tested without
Spark; charts are the inline SVG of ``charts.py``. Also the short text the
printed summary shows per node (:func:`summary_cells`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from xmpp_queue.pipeline.charts import PALETTE, horizontal_bar_chart

Row = Mapping[str, Any]

CATEGORY_TITLES = {
    "failure": "failure reasons (unlocks and lock timeouts)",
    "dead_letter": "dead-letter reasons",
    "dropped": "drop reasons",
}


def _by_node(rows: Sequence[Row]) -> dict[str, list[Row]]:
    grouped: dict[str, list[Row]] = defaultdict(list)
    for row in sorted(rows, key=lambda r: (str(r["node"]), r.get("rank") or 0)):
        grouped[str(row["node"])].append(row)
    return grouped


def _pair(row: Row) -> str:
    return f"{row['key']}={row['value']}"


def attributes_section(keys: Sequence[Row], values: Sequence[Row]) -> str:
    """Per node: its most common attribute keys (with their top values) and a chart
    of its most common key=value pairs."""
    if not keys:
        return "<p class='empty'>No published item carried attributes in this range.</p>"
    values_by_node = _by_node(values)
    out = []
    for node, node_keys in _by_node(keys).items():
        pairs = values_by_node.get(node, [])
        body = "".join(
            f"<tr><td>{escape(str(k['key']))}</td><td>{int(k['items']):,}</td><td>"
            + escape(
                ", ".join(
                    f"{v['value']} ({int(v['items']):,})" for v in pairs if v["key"] == k["key"]
                )
            )
            + "</td></tr>"
            for k in node_keys
        )
        table = (
            "<table><thead><tr><th>attribute</th><th>items</th><th>most common values</th>"
            f"</tr></thead><tbody>{body}</tbody></table>"
        )
        chart = ""
        if pairs:
            chart = horizontal_bar_chart(
                f"{node}: most common attributes",
                [_pair(v) for v in pairs],
                [float(v["items"]) for v in pairs],
                color=PALETTE[5],
            )
        out.append(f"<h3>{escape(node)}</h3><div class='row'>{table}{chart}</div>")
    return "\n".join(out)


def reasons_section(rows: Sequence[Row]) -> str:
    """Per node: one chart per reason category that has any."""
    if not rows:
        return "<p class='empty'>No failure, dead-letter or drop reasons in this range.</p>"
    out = []
    for node, node_rows in _by_node(rows).items():
        charts = []
        for color, (category, title) in zip(PALETTE[2:], CATEGORY_TITLES.items(), strict=False):
            picked = [r for r in node_rows if r["category"] == category]
            if picked:
                charts.append(
                    horizontal_bar_chart(
                        f"{node}: {title}",
                        [str(r["reason"]) for r in picked],
                        [float(r["n"]) for r in picked],
                        color=color,
                    )
                )
        out.append(f"<h3>{escape(node)}</h3><div class='row'>{''.join(charts)}</div>")
    return "\n".join(out)


def summary_cells(
    values: Sequence[Row], reasons: Sequence[Row], per_cell: int = 3
) -> dict[str, dict[str, str]]:
    """{node: {"attributes": ..., "failure": ..., "dead_letter": ..., "dropped": ...}}:
    the first *per_cell* entries of each, as ``text (n)`` joined by commas."""
    cells: dict[str, dict[str, str]] = defaultdict(dict)
    for node, rows in _by_node(values).items():
        cells[node]["attributes"] = ", ".join(
            f"{_pair(r)} ({int(r['items']):,})" for r in rows[:per_cell]
        )
    for node, rows in _by_node(reasons).items():
        for category in CATEGORY_TITLES:
            picked = [r for r in rows if r["category"] == category][:per_cell]
            if picked:
                text = ", ".join(f"{r['reason']} ({int(r['n']):,})" for r in picked)
                cells[node][category] = text
    return dict(cells)
