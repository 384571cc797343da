"""The docs refer only to files that exist in the repository (issue 13).

README.md and docs/*.md: every relative Markdown link, and every backticked path
under a directory of the repository (``examples/worker.py``, ``docs/client.md``),
must name a file that is there. Design notes kept outside the project are not
referred to at all.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TOP_DIRS = ("docs", "examples", "bench", "xmpp_queue", "tests", "migrations", ".ci")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
PATH = re.compile(r"`((?:" + "|".join(re.escape(d) for d in TOP_DIRS) + r")/[\w./-]+)`")


def _references(doc: Path) -> set[str]:
    text = doc.read_text(encoding="utf-8")
    links = {m for m in LINK.findall(text) if "://" not in m and not m.startswith("mailto:")}
    paths = set(PATH.findall(text))
    return {str((doc.parent / link).resolve().relative_to(ROOT)) for link in links} | paths


def test_every_referenced_file_exists() -> None:
    missing = [
        f"{doc.relative_to(ROOT)} -> {ref}"
        for doc in DOCS
        for ref in sorted(_references(doc))
        if not (ROOT / ref.rstrip("/")).exists()
    ]
    assert not missing, missing


# Names of notes that live outside this repository, built from parts so that this
# guard does not itself contain what it looks for.
FOREIGN = ("DESIGN" + ".md", ".." + "/shared", "anchors" + ".md")


def test_no_reference_to_design_notes_outside_the_repository() -> None:
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        assert not any(mark in text for mark in (*FOREIGN, "research/")), doc


def test_no_source_file_points_outside_the_repository() -> None:
    """Comments and docstrings say the project's choices in its own docs, too."""
    sources = [
        p
        for folder in ("xmpp_queue", "tests", "bench", "examples", "migrations")
        for p in (ROOT / folder).rglob("*.py")
        if p.name != "test_docs.py"
    ]
    offenders = [
        str(p.relative_to(ROOT))
        for p in sources
        if any(mark in p.read_text(encoding="utf-8") for mark in (*FOREIGN, "DESIGN"))
    ]
    assert not offenders, offenders


def test_the_client_guide_covers_its_topics() -> None:
    guide = (ROOT / "docs" / "client.md").read_text(encoding="utf-8")
    for heading in ("## Accounts and access", "## A worker", "## A publisher", "## Errors"):
        assert heading in guide
