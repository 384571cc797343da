"""Every module of the package stays small enough to read in one sitting.

Why a test: a module past a few hundred lines has usually grown a second job; the
limit makes the split happen when that job arrives, not in a later clean-up.
"""

from __future__ import annotations

from pathlib import Path

import xmpp_queue

MAX_LINES = 400
PACKAGE = Path(xmpp_queue.__file__).parent


def test_no_module_of_the_package_is_over_400_lines() -> None:
    sizes = {
        str(path.relative_to(PACKAGE)): len(path.read_text(encoding="utf-8").splitlines())
        for path in sorted(PACKAGE.rglob("*.py"))
    }
    assert len(sizes) > 100  # the walk found the package
    too_big = {name: lines for name, lines in sizes.items() if lines > MAX_LINES}
    assert not too_big, f"modules over {MAX_LINES} lines (split them by job): {too_big}"
