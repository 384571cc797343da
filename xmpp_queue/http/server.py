"""The operations listener: routes and lifecycle (aiohttp, on the component's loop).

Routes:

- ``GET /metrics``: Prometheus text (``metrics.py``).
- ``GET /healthz``: 200 while the process and its event loop answer.
- ``GET /readyz``: 200 when connected to the XMPP server, the database answers
  and writes go through (the store's write health), else 503; the body names
  each check (``health.py``).
- ``GET /``, ``GET /queue?node=N``: the dashboard (static files that poll the
  JSON below).
- ``GET /api/queues``, ``GET /api/queue?node=N``: the figures as JSON.
- ``GET /api/deployment``: on a shard of a sharded deployment, every queue of
  every shard from the shared database (``deployment.py``); 404 otherwise.
- ``POST /api/actions/{unlock|purge|redrive|affiliation|delete-item|move-item|
  push-add|push-remove}``: admin actions, behind the token (``actions.py``,
  ``push_actions.py``); ``POST /api/token`` tells the page whether a token is right.

Every request must name this listener in its Host header, and a POST from a
browser must come from such an origin (``guard.py``: DNS rebinding).

Why aiohttp on the same loop: the figures are service reads, which must run on
the loop that owns the service; a thread or a second process would need its
own copy of the state. The access log is off: a scraper every few seconds
would drown the decisions the log is for.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from importlib import resources
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from xmpp_queue.core.errors import ItemNotFound, NodeNotFound, NotAQueue, PubSubError
from xmpp_queue.core.service import PubSubService
from xmpp_queue.http.actions import DashboardActions, Refused, check_token
from xmpp_queue.http.deployment import DeploymentView
from xmpp_queue.http.guard import HostGuard
from xmpp_queue.http.health import HealthChecks
from xmpp_queue.http.metrics import QueueMetrics
from xmpp_queue.http.overview_page import BadQuery, overview_page
from xmpp_queue.http.queues import OverviewCache, queue_page, summary_json
from xmpp_queue.http.rates import RateHistory

log = logging.getLogger("xmpp_queue.http")

PushViews = Callable[[str], Awaitable[Sequence[Mapping[str, str]]]]
"""queue node -> its push subscriptions as shown (push/registry.py's masked views)."""

STATIC = resources.files("xmpp_queue.http") / "static"
PAGES = {"/": "index.html", "/queue": "queue.html"}
STATIC_FILES = {
    "app.js": "text/javascript",
    "style.css": "text/css",
}
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
MAX_BODY = 16 * 1024


class OpsServer:
    """The listener of one component (see the module docstring)."""

    def __init__(
        self,
        host: str,
        port: int,
        service: PubSubService,
        metrics: QueueMetrics,
        health: HealthChecks,
        actions: DashboardActions,
        admin_token: str | None = None,
        jid: str = "",
        allowed_hosts: Sequence[str] = (),
        push_views: PushViews | None = None,
        deployment: DeploymentView | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.service = service
        self._push_views = push_views
        self.deployment = deployment  # a shard's view of every shard (None: unsharded)
        self.metrics = metrics
        self.health = health
        self.actions = actions
        self.jid = jid
        self._token = admin_token
        self.guard = HostGuard(host, allowed_hosts)
        self.overview = OverviewCache(service)
        self.rates = RateHistory(metrics)
        self._runner: web.AppRunner | None = None
        self.app = self._build()

    def _build(self) -> web.Application:
        middlewares = [_headers, self.guard.middleware]  # the first is the outermost
        app = web.Application(client_max_size=MAX_BODY, middlewares=middlewares)
        r = app.router
        r.add_get("/metrics", self.get_metrics)
        r.add_get("/healthz", self.get_healthz)
        r.add_get("/readyz", self.get_readyz)
        for path in PAGES:
            r.add_get(path, self.get_page)
        r.add_get("/static/{name}", self.get_static)
        r.add_get("/api/queues", self.get_queues)
        r.add_get("/api/queue", self.get_queue)
        r.add_get("/api/deployment", self.get_deployment)
        r.add_post("/api/token", self.post_token)
        r.add_post("/api/actions/{action}", self.post_action)
        return app

    # --- lifecycle -----------------------------------------------------------------------
    async def start(self) -> tuple[str, int]:
        """Listen; returns the address (the real port when 0 was asked)."""
        self._runner = web.AppRunner(self.app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, reuse_address=True)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self.rates.start()
        shown = f"[{host}]" if ":" in host else host
        log.info(
            "event=http_listening address=%s:%d url=http://%s:%d/ admin_actions=%s",
            host,
            port,
            shown,
            port,
            "on" if self._token else "off",
        )
        return host, port

    async def stop(self) -> None:
        await self.rates.stop()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # --- probes and metrics --------------------------------------------------------------
    async def get_healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "alive"})

    async def get_readyz(self, request: web.Request) -> web.Response:
        result = await self.health.readiness()
        body = {"status": "ready" if result.ready else "not ready", "checks": result.checks}
        return web.json_response(body, status=200 if result.ready else 503)

    async def get_metrics(self, request: web.Request) -> web.Response:
        rows = await self.overview.rows(stale=METRICS_STALE)
        return web.Response(
            body=self.metrics.render(rows), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )

    # --- the dashboard ---------------------------------------------------------------------
    async def get_page(self, request: web.Request) -> web.Response:
        text = (STATIC / PAGES[request.path]).read_text(encoding="utf-8")
        return web.Response(text=text, content_type="text/html")

    async def get_static(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in STATIC_FILES:
            raise web.HTTPNotFound()
        text = (STATIC / name).read_text(encoding="utf-8")
        return web.Response(text=text, content_type=STATIC_FILES[name])

    async def get_queues(self, request: web.Request) -> web.Response:
        """The queues, or one page of them (``overview_page.py``: q, sort, desc, offset,
        limit), with totals so the page can say "51-100 of 200"."""
        rows = await self.overview.rows()
        try:
            page = overview_page(rows, request.query)
        except BadQuery as exc:
            return _error(400, str(exc))
        queues = [{**summary_json(r), "rates": self.rates.rates(r.node)} for r in page.rows]
        return web.json_response(
            {
                "service": self.jid,
                "connected": self.metrics.is_connected,
                "admin_actions": self._token is not None,
                "sharded": self.deployment is not None,  # /api/deployment answers
                "interval": self.rates.interval,
                "total": page.total,
                "matched": page.matched,
                "offset": page.offset,
                "waiting": sum(r.backlog for r in rows),
                "in_flight": sum(r.in_flight for r in rows),
                "queues": queues,
            }
        )

    async def get_queue(self, request: web.Request) -> web.Response:
        node = request.query.get("node", "")
        if not node:
            return _error(400, "give ?node=NODE")
        try:
            page = await queue_page(self.service, node, self.metrics.activity)
        except (NodeNotFound, NotAQueue) as exc:
            shard = None if self.deployment is None else await self.deployment.elsewhere(node)
            if shard is not None:  # a queue of another shard: its page is on that dashboard
                return _error(404, f"'{node}' is served by {shard}: open that shard's dashboard")
            return _error(404, str(exc) or f"no queue '{node}'")
        row = next((r for r in await self.overview.rows() if r.node == node), None)
        page["summary"] = summary_json(row) if row is not None else None
        page["rates"] = self.rates.rates(node)
        page["interval"] = self.rates.interval
        page["admin_actions"] = self._token is not None
        # Push subscriptions, masked by the registry (secrets and the URL's query).
        page["push"] = list(await self._push_views(node)) if self._push_views else []
        return web.json_response(page)

    async def get_deployment(self, request: web.Request) -> web.Response:
        if self.deployment is None:
            return _error(404, "not a shard of a sharded deployment")
        try:
            body = await self.deployment.as_json(self.jid)
        except Exception as exc:  # the shared database is away: say so, once per poll
            log.warning("event=deployment_read_failed error=%s", type(exc).__name__)
            return _error(503, "the shared database did not answer; try again")
        return web.json_response(body)

    # --- admin -----------------------------------------------------------------------------
    async def post_token(self, request: web.Request) -> web.Response:
        try:
            check_token(self._token, request.headers.get("Authorization"))
        except Refused as exc:
            return _error(exc.status, exc.reason)
        return web.json_response({"admin": True})

    async def post_action(self, request: web.Request) -> web.Response:
        action = request.match_info["action"]
        try:
            check_token(self._token, request.headers.get("Authorization"))
        except Refused as exc:
            log.info(
                "event=dashboard_refused action=%s status=%d remote=%s",
                action,
                exc.status,
                request.remote,
            )
            return _error(exc.status, exc.reason)
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return _error(400, "the body must be a JSON object")
        if not isinstance(body, dict):
            return _error(400, "the body must be a JSON object")
        try:
            result = await self.actions.run(action, body)
        except Refused as exc:
            return _error(exc.status, exc.reason)
        except (NodeNotFound, ItemNotFound, NotAQueue) as exc:
            return _error(404, _describe(exc))
        except PubSubError as exc:
            return _error(409, _describe(exc))
        self.overview = OverviewCache(self.service)  # the next read shows the change
        return web.json_response(
            {
                "action": result.action,
                "node": result.node,
                "count": result.count,
                "message": result.message,
            }
        )


METRICS_STALE = 60.0
"""Seconds a scrape may be answered from the last queue overview while a fresh one
is read in the background: above the usual scrape intervals (15-30 s), so a scrape
under load never waits for the overview; the queue gauges lag one scrape."""


def _describe(exc: PubSubError) -> str:
    return str(exc) or type(exc).__name__


def _error(status: int, reason: str) -> web.Response:
    return web.json_response({"error": reason}, status=status)


@web.middleware
async def _headers(request: web.Request, handler: Any) -> web.StreamResponse:
    response: web.StreamResponse = await handler(request)
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
    return response
