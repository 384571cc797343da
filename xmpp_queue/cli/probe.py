"""``probe``: ask a running component's ``/healthz`` or ``/readyz``.

Why a sub-command: systemd (``ExecStartPost``, a health-check timer) and shell
scripts get an exit status without needing curl.
"""

from __future__ import annotations

import argparse
import sys

from xmpp_queue.cli.outcome import (
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_USAGE,
    CommandError,
)
from xmpp_queue.config import load_config
from xmpp_queue.config_error import ConfigError


def cmd_probe(args: argparse.Namespace) -> int:
    """GET /healthz or /readyz of a running component; 0 if it answers 200.

    For systemd (``ExecStartPost``, a health-check timer) and shell scripts: no
    curl needed. The address is ``--url``, else ``[http] listen`` of ``-c FILE``.
    ``--wait N`` retries for up to N seconds (a service that is still starting).
    """
    import time
    import urllib.error
    import urllib.request

    if args.url:
        base = args.url.rstrip("/")
    else:
        try:
            http = load_config(args.config).http
        except ConfigError as exc:
            raise CommandError(f"config error: {exc.one_line()}", EXIT_USAGE) from None
        if http is None or http.port == 0:
            raise CommandError(
                f"{args.config} has no [http] listen with a fixed port; give --url", EXIT_USAGE
            )
        host = f"[{http.host}]" if ":" in http.host else http.host
        base = f"http://{host}:{http.port}"
    deadline = time.monotonic() + args.wait
    while True:
        try:
            with urllib.request.urlopen(f"{base}/{args.check}", timeout=5) as reply:
                print(reply.read().decode(errors="replace").strip())
                return EXIT_OK
        except urllib.error.HTTPError as exc:
            answer = f"{exc.code} {exc.read().decode(errors='replace').strip()}"
        except (urllib.error.URLError, OSError) as exc:
            answer = f"no answer from {base}: {getattr(exc, 'reason', exc)}"
        if time.monotonic() >= deadline:
            print(f"xmpp-queue: {args.check}: {answer}", file=sys.stderr)
            return EXIT_FAILURE
        time.sleep(1.0)
