"""A small HTTP server on loopback that answers what a (troubled) API server would, and records what it
was sent: the client tests' stand-in (the ``server`` fixture in conftest.py)."""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web

Answer = Callable[[web.Request, int], web.Response]


class Server:
    def __init__(self) -> None:
        self.answer: Answer = lambda request, n: web.json_response({"kind": "Status"})
        self.seen: list[tuple[str, str, str]] = []  # method, path, Authorization

    async def handle(self, request: web.Request) -> web.Response:
        self.seen.append((request.method, request.path, request.headers.get("Authorization", "")))
        return self.answer(request, len(self.seen))
