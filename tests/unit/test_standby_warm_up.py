"""A standby imports what a term needs before its lease is won.

Why: a takeover is measured from the failure to the first answer, and a standby
that imported the term's modules (slixmpp, aiohttp, the admin commands, the
store's PostgreSQL backend) only once the lease was its own spent most of a takeover
importing (0.75 s of 1.1 s on a slow machine). Checked in a fresh interpreter:
after ``warm_up`` every module that ``serve_term`` imports, and the backend the
store opens, is loaded already.
"""

from __future__ import annotations

import ast
import inspect
import json
import subprocess
import sys

from xmpp_queue.app import term


def _modules_serve_term_imports() -> set[str]:
    tree = ast.parse(inspect.getsource(term.serve_term).lstrip())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_a_standby_has_imported_what_a_term_imports_before_it_waits() -> None:
    wanted = _modules_serve_term_imports() | {"xmpp_queue.storage.backend_postgres"}
    assert "xmpp_queue.xmpp.component" in wanted  # the parse found the term's imports
    probe = (
        "import json, sys\n"
        "from xmpp_queue.app.run import warm_up\n"
        "warm_up()\n"
        "print(json.dumps(sorted(set(sys.modules))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    loaded = set(json.loads(out))
    assert wanted <= loaded, sorted(wanted - loaded)


def test_the_run_module_does_not_load_them_by_itself() -> None:
    """Without the warm-up those modules would be first imported inside a term: the
    check above is not passing only because importing the run module loads them."""
    probe = (
        "import json, sys\nimport xmpp_queue.app.run\nprint(json.dumps(sorted(set(sys.modules))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert "xmpp_queue.storage.backend_postgres" not in set(json.loads(out))
