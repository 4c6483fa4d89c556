"""The unit tier's fixtures."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from .loopback_api import Server


@pytest.fixture
async def server() -> AsyncIterator[tuple[Server, str]]:
    srv = Server()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", srv.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    yield srv, f"http://127.0.0.1:{port}"
    await runner.cleanup()
