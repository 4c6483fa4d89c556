"""Serving the operator's HTTP endpoints (metrics and probes, the push webhook) on the event loop."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from aiohttp import web

log = logging.getLogger(__name__)


@dataclass
class Server:
    runner: web.AppRunner

    @property
    def port(self) -> int:
        """The port actually bound (the one asked for may be 0: any free port)."""
        return int(self.runner.addresses[0][1])

    async def stop(self) -> None:
        await self.runner.cleanup()


async def serve(app: web.Application, address: str, port: int) -> Server:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, address, port).start()
    server = Server(runner)
    log.info("serving %s on %s:%s", ", ".join(sorted({r.canonical for r in app.router.resources()})), address,
             server.port)
    return server
