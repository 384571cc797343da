"""The listener of a standby process: alive, not ready, nothing else.

A standby (high availability on PostgreSQL: waiting for the leader lease) serves
no queue, so it has no dashboard and no queue figures. It still answers on the
configured address, so supervisors and balancers can tell it apart from a dead
process: ``/healthz`` 200 (restart nothing), ``/readyz`` 503 with
``"role": "standby"`` (route nothing here), ``/metrics`` one gauge,
``xmpp_queue_active 0``. It gives the address back when the process takes the
lease and starts its full listener (``server.OpsServer``).
"""

from __future__ import annotations

from aiohttp import web

STANDBY_METRICS = (
    "# HELP xmpp_queue_active 1 when this process serves the component, 0 on standby.\n"
    "# TYPE xmpp_queue_active gauge\n"
    "xmpp_queue_active 0\n"
)


class StandbyServer:
    def __init__(self, host: str, port: int, jid: str, holder: str) -> None:
        self.host, self.port, self.jid, self.holder = host, port, jid, holder
        self.bound_port = port  # the port actually bound (port 0: any free one)
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._metrics)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.host, self.port, reuse_address=True).start()
        self.bound_port = self._runner.addresses[0][1]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "alive", "role": "standby"})

    async def _readyz(self, request: web.Request) -> web.Response:
        body = {
            "status": "not ready",
            "role": "standby",
            "checks": {"lease": f"standing by for {self.jid} ({self.holder})"},
        }
        return web.json_response(body, status=503)

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(text=STANDBY_METRICS, content_type="text/plain")
