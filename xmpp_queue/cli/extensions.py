"""The sub-commands other packages bring: ``admin``, ``pipeline``, ``demo``.

Why apart: each is imported only when the command line names it (``run`` must
not pay for PySpark or the demo's imports at start-up), and when one cannot be
imported (PySpark not installed) the command still exists and says why.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from xmpp_queue.cli.outcome import (
    EXIT_USAGE,
    CommandError,
    Handler,
)
from xmpp_queue.cli.startup import DEFAULT_CONFIG, configure_logging, load_settings


def _unavailable(name: str, reason: BaseException) -> Handler:
    def handler(args: argparse.Namespace) -> int:
        raise CommandError(
            f"`xmpp-queue {name}` is unavailable here: {reason}"
            + (" (install the extra: pip install -e '.[spark]')" if name == "pipeline" else ""),
            EXIT_USAGE,
        )

    return handler


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
        settings = load_settings(args)
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


EXTENSIONS: dict[str, tuple[str, Callable[[Any], None]]] = {
    "admin": ("run the service's admin commands over XMPP (list, details, unlock ...)", _add_admin),
    "pipeline": ("Spark jobs: bulk enqueue, queue-history report, ledger export", _add_pipeline),
    "demo": ("a private Prosody, the component, workers and a publisher, live", _add_demo),
}
