"""``check-config``: validate the file and print what it means, connecting to nothing.

Why its own module: the summary is the operator's reading of every table
(the secret never shown, the database URL without its password), and the
pipeline validates its own ``[pipeline]`` table here when it is installed.
"""

from __future__ import annotations

import argparse

from xmpp_queue.cli.outcome import (
    EXIT_OK,
    EXIT_USAGE,
    CommandError,
    redacted,
)
from xmpp_queue.cli.startup import load_settings
from xmpp_queue.settings import Settings


def cmd_check_config(args: argparse.Namespace) -> int:
    """Validate the file and print what it means; connect to nothing."""
    settings = load_settings(args)
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
            f"{redacted(settings.database.url)} lease={settings.database.lease_seconds}s",
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
    if settings.shards is not None:
        shards = settings.shards
        rows.insert(
            1,
            (
                "shards",
                f"{', '.join(shards.domains)} (per process: {shards.per_process}; "
                f"{c.jid} is the directory)",
            ),
        )
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
