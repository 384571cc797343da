"""The admin client, as a script: the same as ``xmpp-queue admin ...``.

It logs in as an admin (a JID listed in ``[admins]`` of config.toml) and runs the
service's XEP-0050 admin commands, every one of them (list, details, unlock,
redrive, kick, configure, create-node, purge, delete-node, status), printing text
or, with ``--json``, one JSON object for scripts. The code lives in
``xmpp_queue/admin_cli.py``; see its docstring for every option.

    python examples/admin.py --connection xmpp-queue-demo/connection.json list
    python examples/admin.py -j admin@example.org details jobs
    python examples/admin.py -j admin@example.org --json unlock jobs --item 42
"""

from __future__ import annotations

import sys

from xmpp_queue.admin_cli import main

if __name__ == "__main__":
    sys.exit(main(prog="examples/admin.py"))
