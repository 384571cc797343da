"""The ``xmpp-queue`` command: run, migrate, check-config, pipeline, demo.

Exit statuses an operator (or systemd) can act on: 0 done; 1 a runtime
failure (the server refused the secret, the database is unreachable); 2 a
problem only the operator can fix by editing or migrating (a bad config key,
an un-migrated database, bad arguments). Every refusal is one line on
standard error that says what to do next.

The ``pipeline`` and ``demo`` sub-commands come from their own packages
(``xmpp_queue.pipeline.cli``, ``xmpp_queue.demo``); when one cannot be
imported (PySpark not installed) the command still exists and says why.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import shlex
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from xmpp_queue import __version__
from xmpp_queue.config import load_config
from xmpp_queue.config_error import ConfigError
from xmpp_queue.settings import LOG_LEVELS, Settings

log = logging.getLogger("xmpp_queue.cli")

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2
DEFAULT_CONFIG = "config.toml"
LOG_FORMAT = "%(asctime)s level=%(levelname)s logger=%(name)s %(message)s"
LOG_DATE_FORMAT = "%Y-%m-%dT%H:%M:%S"
_HANDLER_NAME = "xmpp-queue"

Handler = Callable[[argparse.Namespace], int]


class CommandError(Exception):
    """A refusal: one line for standard error, and the exit status."""

    def __init__(self, message: str, status: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.status = status


# --- logging ---------------------------------------------------------------------------


def configure_logging(level: str, file: Path | None = None, fmt: str = "text") -> None:
    """One handler on the root logger: *file* (appended) or standard error.

    The ``text`` format is ``time level=... logger=... message``; our own messages
    are key=value (``event=... component=...``), one line per decision. ``json``
    writes one JSON object per line with those pairs as fields (``logjson``).
    """
    handler: logging.Handler = (
        logging.FileHandler(file, encoding="utf-8") if file else logging.StreamHandler()
    )
    if fmt == "json":
        from xmpp_queue.logjson import JsonFormatter

        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter(LOG_FORMAT, LOG_DATE_FORMAT))
    handler.set_name(_HANDLER_NAME)
    root = logging.getLogger()
    for previous in [h for h in root.handlers if h.get_name() == _HANDLER_NAME]:
        root.removeHandler(previous)  # ours from an earlier call; others' stay
        previous.close()
    root.addHandler(handler)
    root.setLevel(level)
    # alembic narrates every start-up at INFO (plugins, "Context impl SQLiteImpl");
    # `migrate` prints its own one-line result instead.
    logging.getLogger("alembic").setLevel(level if level == "DEBUG" else "WARNING")


def _settings(args: argparse.Namespace) -> Settings:
    """Load ``-c FILE`` and set up logging (``--log-level`` wins over the file)."""
    try:
        settings = load_config(args.config)
    except ConfigError as exc:
        raise CommandError(f"config error: {exc.one_line()}", EXIT_USAGE) from None
    level = args.log_level or settings.logging.level
    configure_logging(level.upper(), settings.logging.file, settings.logging.format)
    return settings


def _redacted(url: str) -> str:
    from xmpp_queue.storage.engine import redacted_url

    return str(redacted_url(url))


# Failures that only the operator can fix (the database is missing, the role or
# password is wrong): exit 2, so a supervisor does not restart for ever. A server
# that is down or busy stays 1: it may be back in a minute.
_FIX_THE_DATABASE = (
    "does not exist",
    "password authentication failed",
    "authentication failed",
    "no password supplied",
    "role ",
    "permission denied",
)


def _database_failure(url: str, exc: BaseException) -> CommandError:
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if any(marker in detail for marker in _FIX_THE_DATABASE):
        hint = ""
        if "does not exist" in detail and "database" in detail:
            hint = "; create it (e.g. createdb) and run xmpp-queue migrate"
        return CommandError(f"database {_redacted(url)}: {detail}{hint}", EXIT_USAGE)
    return CommandError(f"database {_redacted(url)} unreachable: {detail}")


def sqlite_file(url: str) -> Path | None:
    """The absolute path of a file SQLite URL (None for other databases or memory).

    ``sqlite:///queue.db`` is relative to the working directory of the process,
    which for a service is not where the config file is: say which file is meant."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database).expanduser().resolve()


# --- commands --------------------------------------------------------------------------


def cmd_run(args: argparse.Namespace) -> int:
    """Refuse an un-migrated database, then hand over to the composition root."""
    settings = _settings(args)
    from xmpp_queue.storage import migrations

    url = settings.database.url
    migrate = f"xmpp-queue migrate -c {shlex.quote(args.config)}"
    path = sqlite_file(url)
    where = f" (file {path})" if path is not None else ""
    if path is not None and not path.exists():
        # Opening it would create an empty file: refuse first, and say which file.
        raise CommandError(
            f"the database file {path} does not exist, so it is not at the current schema "
            f"({migrations.head_revision()}; {_redacted(url)} is relative to the working "
            f"directory {Path.cwd()}); run: {migrate}",
            EXIT_USAGE,
        )
    try:
        current = migrations.is_up_to_date(url)
    except Exception as exc:
        raise _database_failure(url, exc) from exc
    if not current:
        raise CommandError(
            f"the database {_redacted(url)}{where} is not at the current schema "
            f"({migrations.head_revision()}); run: {migrate}",
            EXIT_USAGE,
        )
    from xmpp_queue.app import run_service

    return int(asyncio.run(run_service(settings)))


def cmd_migrate(args: argparse.Namespace) -> int:
    """Upgrade the database to the newest alembic revision (idempotent)."""
    settings = _settings(args)
    from xmpp_queue.storage import migrations

    url = settings.database.url
    try:
        migrations.upgrade(url)
    except Exception as exc:
        raise _database_failure(url, exc) from exc
    head = migrations.head_revision()
    log.info("event=migrated database=%s revision=%s", _redacted(url), head)
    print(f"database {_redacted(url)} is at revision {head} (current)")
    return EXIT_OK


def cmd_status(args: argparse.Namespace) -> int:
    """Which process serves the component, since when, and who stands by."""
    settings = _settings(args)
    url = settings.database.url
    from xmpp_queue.storage.engine import is_sqlite

    if is_sqlite(url):
        from xmpp_queue.storage.file_lock import DatabaseInUse, DatabaseLock

        lock = DatabaseLock(url)
        try:
            lock.acquire()
        except DatabaseInUse as exc:
            print(
                f"{settings.component.jid}: active {exc.holder} (SQLite: one process, no standbys)"
            )
            return EXIT_OK
        lock.release()
        print(f"{settings.component.jid}: no process is serving {_redacted(url)}")
        return EXIT_FAILURE
    from xmpp_queue.storage.lease import lease_status

    try:
        status = asyncio.run(lease_status(url, settings.component.jid))
    except Exception as exc:
        raise _database_failure(url, exc) from exc
    print(status_text(status))
    return EXIT_OK if status.holder else EXIT_FAILURE


def status_text(status: Any) -> str:
    """The lease and its members as lines an operator reads (times in UTC)."""

    def ago(when: Any) -> str:
        return f"{(status.now - when).total_seconds():.1f}s ago"

    lines = []
    if status.holder:
        left = (status.expires_at - status.now).total_seconds()
        lines.append(
            f"{status.name}: active {status.holder} since "
            f"{status.acquired_at:%Y-%m-%d %H:%M:%S}Z (term {status.token}, lease {left:.1f}s left)"
        )
    else:
        lines.append(f"{status.name}: no active process (last term {status.token})")
    fresh = [m for m in status.members if (status.now - m.seen_at).total_seconds() < 60]
    standbys = [m for m in fresh if m.role == "standby"]
    lines.append(f"standbys: {len(standbys)}")
    for m in standbys:
        lines.append(
            f"  {m.holder} standing by since {m.since:%Y-%m-%d %H:%M:%S}Z, seen {ago(m.seen_at)}"
        )
    return "\n".join(lines)


def cmd_check_config(args: argparse.Namespace) -> int:
    """Validate the file and print what it means; connect to nothing."""
    settings = _settings(args)
    _check_pipeline(settings)
    print(summary(settings))
    return EXIT_OK


def summary(settings: Settings) -> str:
    """A readable account of the settings; the secret is never shown."""
    c, q, lg, lm = settings.component, settings.queue, settings.logging, settings.limits
    admins = ", ".join(sorted(settings.admins.jids)) or "none (admin commands disabled)"
    deliveries = q.default_max_deliveries or "0 (no limit)"
    rows = [
        ("component", f"{c.jid} via {c.server_host}:{c.server_port} (secret set)"),
        (
            "stanzas",
            f"max_stanza_size={c.max_stanza_size} bytes (items up to "
            f"{c.max_payload_ceiling}) items_page_size={c.items_page_size}",
        ),
        (
            "database",
            f"{_redacted(settings.database.url)} lease={settings.database.lease_seconds}s",
        ),
        ("admins", admins),
        (
            "queue",
            f"lock_timeout={q.default_lock_timeout}s max_deliveries={deliveries} "
            f"retry_delay={q.default_retry_delay}s retry_delay_max={q.default_retry_delay_max}s "
            f"max_payload_size={q.max_payload_size} bytes",
        ),
        ("access", _access_summary(settings)),
        (
            "limits",
            f"max_nodes_per_jid={_limit(lm.max_nodes_per_jid)} "
            f"max_queue_items={_limit(lm.max_queue_items)} "
            f"publish_rate={_limit(lm.publish_rate)}/s burst={lm.publish_burst}",
        ),
        ("logging", f"level={lg.level} format={lg.format} to={lg.file or 'standard error'}"),
        ("http", _http_summary(settings)),
        ("pipeline", ", ".join(sorted(settings.pipeline)) or "not configured"),
    ]
    head = f"config OK: {settings.source}" if settings.source else "config OK"
    return "\n".join([head, *(f"  {name:<10} {value}" for name, value in rows)])


def _http_summary(settings: Settings) -> str:
    http = settings.http
    if http is None:
        return "off (no [http] table)"
    host = f"[{http.host}]" if ":" in http.host else http.host
    token = "admin token set" if http.admin_token else "read-only (no admin_token)"
    return f"http://{host}:{http.port}/ ({token}, max_nodes={http.max_nodes})"


def _limit(value: int) -> str:
    return str(value) if value else "0 (no limit)"


def _access_summary(settings: Settings) -> str:
    """Who may use the service and create nodes, and the access models of new nodes."""
    a = settings.access
    policy = a.policy()
    return (
        f"users={policy.users.describe()}; create={policy.describe_creators()}; "
        f"new queues {a.queue_access_model}, new nodes {a.node_access_model}; "
        f"publishers {'shown on every item' if a.expose_publishers else 'shown per node'}"
    )


def _check_pipeline(settings: Settings) -> None:
    """Let the pipeline validate its own ``[pipeline]`` table, when it is installed."""
    if not settings.pipeline:
        return
    try:
        from xmpp_queue.pipeline.settings import PipelineSettings, PipelineSettingsError
    except ImportError:
        return
    try:
        PipelineSettings.from_dict({"database_url": settings.database.url, **settings.pipeline})
    except PipelineSettingsError as exc:
        source = f"{settings.source}: " if settings.source else ""
        raise CommandError(f"config error: {source}{exc}", EXIT_USAGE) from None


# --- parser ----------------------------------------------------------------------------


def _log_level(value: str) -> str:
    level = value.upper()
    if level not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(f"expected one of {', '.join(LOG_LEVELS)}")
    return level


def _add_config_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-c",
        "--config",
        default=DEFAULT_CONFIG,
        metavar="FILE",
        help=f"configuration file (default: {DEFAULT_CONFIG}; see config.example.toml)",
    )
    parser.add_argument(
        "--log-level",
        type=_log_level,
        default=argparse.SUPPRESS,
        help="override [logging] level",
    )


def _unavailable(name: str, reason: BaseException) -> Handler:
    def handler(args: argparse.Namespace) -> int:
        raise CommandError(
            f"`xmpp-queue {name}` is unavailable here: {reason}"
            + (" (install the extra: pip install -e '.[spark]')" if name == "pipeline" else ""),
            EXIT_USAGE,
        )

    return handler


def _placeholder(subparsers: Any, name: str, help_text: str) -> None:
    """List *name* in ``--help`` without importing its package (see :func:`build_parser`)."""
    stub = subparsers.add_parser(name, help=help_text, add_help=False)
    stub.add_argument("rest", nargs=argparse.REMAINDER)


def _add_pipeline(subparsers: Any) -> None:
    try:
        from xmpp_queue.pipeline.cli import add_pipeline_parser
    except ImportError as exc:
        stub = subparsers.add_parser("pipeline", help="Spark pipeline (unavailable)")
        stub.add_argument("rest", nargs=argparse.REMAINDER)
        stub.set_defaults(_handler=_unavailable("pipeline", exc))
        return
    add_pipeline_parser(subparsers)
    pipeline = subparsers.choices["pipeline"]
    pipeline.set_defaults(_handler=_run_pipeline)
    # The jobs read [pipeline] and [database] from the same file as the service:
    # ``xmpp-queue pipeline report -c config.toml``.
    jobs = [
        job
        for action in pipeline._actions
        if isinstance(action, argparse._SubParsersAction)
        for job in action.choices.values()
    ]
    for job in jobs or [pipeline]:
        job.add_argument(
            "-c",
            "--config",
            default=None,
            metavar="FILE",
            help=f"configuration file with [pipeline] and [database] (default: {DEFAULT_CONFIG} "
            "if present)",
        )


def _run_pipeline(args: argparse.Namespace) -> int:
    """Build the pipeline's settings from the file, then run the job."""
    from xmpp_queue.pipeline.cli import run_pipeline
    from xmpp_queue.pipeline.settings import PipelineSettings, PipelineSettingsError

    if args.config is None and not Path(DEFAULT_CONFIG).is_file():
        configure_logging(args.log_level or "INFO")
        pipeline_settings = PipelineSettings()
    else:
        args.config = args.config or DEFAULT_CONFIG
        settings = _settings(args)
        try:
            pipeline_settings = PipelineSettings.from_dict(
                {"database_url": settings.database.url, **settings.pipeline}
            )
        except PipelineSettingsError as exc:
            raise CommandError(f"config error: {settings.source}: {exc}", EXIT_USAGE) from None
    try:
        return int(run_pipeline(args, pipeline_settings))
    except PipelineSettingsError as exc:  # a missing setting, a node that does not exist
        raise CommandError(str(exc), EXIT_USAGE) from None


def _add_demo(subparsers: Any) -> None:
    try:
        from xmpp_queue.demo import add_demo_parser
    except ImportError as exc:
        stub = subparsers.add_parser("demo", help="the demo (unavailable)")
        stub.add_argument("rest", nargs=argparse.REMAINDER)
        stub.set_defaults(_handler=_unavailable("demo", exc))
        return
    add_demo_parser(subparsers)
    subparsers.choices["demo"].set_defaults(_handler=_run_demo)


def _run_demo(args: argparse.Namespace) -> int:
    from xmpp_queue.demo import run_demo

    configure_logging(args.log_level or "WARNING")
    return int(run_demo(args))


def _add_admin(subparsers: Any) -> None:
    from xmpp_queue import admin_cli

    admin = subparsers.add_parser(
        "admin",
        help="run the service's admin commands over XMPP (list, details, unlock ...)",
        description="Run the service's XEP-0050 admin commands as an admin account. "
        "Add --json for scripts.",
    )
    admin_cli.add_arguments(admin)
    admin.set_defaults(_handler=admin_cli.run_args)


_EXTENSIONS: dict[str, tuple[str, Callable[[Any], None]]] = {
    "admin": ("run the service's admin commands over XMPP (list, details, unlock ...)", _add_admin),
    "pipeline": ("Spark jobs: bulk enqueue, queue-history report, ledger export", _add_pipeline),
    "demo": ("a private Prosody, the component, workers and a publisher, live", _add_demo),
}


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


def _command_of(argv: Sequence[str]) -> str | None:
    """The sub-command named on the command line (the first word that is no option)."""
    words = iter(argv)
    for word in words:
        if word == "--log-level":
            next(words, None)
        elif not word.startswith("-"):
            return word
    return None


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser. ``pipeline`` and ``demo`` bring their own parsers, imported only when
    *argv* names them: ``run`` must not pay for PySpark or the demo's imports at start-up.
    ``argv=None`` builds them all."""
    command = None if argv is None else _command_of(argv)
    parser = argparse.ArgumentParser(
        prog="xmpp-queue",
        description="XEP-0060 publish-subscribe with XEP-0254 queueing, "
        "as an XEP-0114 component of Prosody or ejabberd.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument(
        "--log-level", type=_log_level, default=None, help="override [logging] level"
    )
    subparsers = parser.add_subparsers(metavar="COMMAND", required=True)

    run = subparsers.add_parser("run", help="serve the component (after migrate)")
    _add_config_option(run)
    run.set_defaults(_handler=cmd_run)

    migrate = subparsers.add_parser("migrate", help="create or upgrade the database schema")
    _add_config_option(migrate)
    migrate.set_defaults(_handler=cmd_migrate)

    status = subparsers.add_parser(
        "status", help="which process serves the component, and the standbys"
    )
    _add_config_option(status)
    status.set_defaults(_handler=cmd_status)

    check = subparsers.add_parser("check-config", help="validate the config file, print it")
    _add_config_option(check)
    check.set_defaults(_handler=cmd_check_config)

    probe = subparsers.add_parser(
        "probe", help="ask a running component's /healthz or /readyz (systemd, scripts)"
    )
    _add_config_option(probe)
    probe.add_argument("check", choices=("healthz", "readyz"), help="alive, or ready to serve")
    probe.add_argument("--url", help="http://HOST:PORT of the listener (default: from -c FILE)")
    probe.add_argument(
        "--wait", type=float, default=0.0, metavar="SECONDS", help="retry for this long"
    )
    probe.set_defaults(_handler=cmd_probe)

    for name, (help_text, add) in _EXTENSIONS.items():
        if argv is None or command == name:
            add(subparsers)
        else:
            _placeholder(subparsers, name, help_text)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(argv).parse_args(argv)
    try:
        return int(args._handler(args))
    except CommandError as exc:
        print(f"xmpp-queue: {exc}", file=sys.stderr)
        return exc.status
    except KeyboardInterrupt:
        return 130
