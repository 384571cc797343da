"""Turn py-spy's collapsed stacks (`--format raw`) into a short list of hot spots.

Why: a flame graph is for a human at a browser; the lead wants the top functions as text
(share of the component's CPU samples, by own time and by inclusive time).

Run: `python bench/profile_summary.py profile.txt [--top 25]`
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

_LINE = re.compile(r"^(.*) (\d+)$")
_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^()]*?)(?::\d+)?\)$")


def _short(frame: str) -> str:
    """`handle (slixmpp/xmlstream/xmlstream.py:123)` → `handle (slixmpp/xmlstream/xmlstream.py)`."""
    m = _FRAME.match(frame)
    if m is None:
        return frame
    path = m.group("file")
    for marker in ("site-packages/", "lib/python3.11/", "/work/main/"):
        if marker in path:
            path = path.split(marker, 1)[1]
    return f"{m.group('func')} ({path})"


def summarize(text: str) -> tuple[int, Counter[str], Counter[str], Counter[str]]:
    """Total samples, own samples per function, inclusive per function, inclusive per file."""
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    per_module: Counter[str] = Counter()
    total = 0
    for line in text.splitlines():
        m = _LINE.match(line.strip())
        if m is None:
            continue
        frames = [_short(f) for f in m.group(1).split(";") if f]
        count = int(m.group(2))
        total += count
        if frames:
            own[frames[-1]] += count
        for frame in set(frames):
            inclusive[frame] += count
        modules = {f[f.rfind("(") + 1 : -1] for f in frames if "(" in f}
        for module in modules:
            per_module[module] += count
    return total, own, inclusive, per_module


def report(path: Path, top: int = 25) -> str:
    total, own, inclusive, per_module = summarize(path.read_text(errors="replace"))
    if total == 0:
        return f"{path}: no samples"
    lines = [f"{path}: {total} samples"]
    for title, counter in (
        ("own time", own),
        ("inclusive", inclusive),
        ("inclusive by file", per_module),
    ):
        lines.append(f"-- top {top} by {title}")
        for name, count in counter.most_common(top):
            lines.append(f"{100 * count / total:5.1f}%  {name}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    print(report(args.path, args.top))


if __name__ == "__main__":
    main()
