"""``helmop ui``: the web UI's server, assembled (access, guard, feed, pages, the assets that ship with helmop)
and run until interrupted."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from pathlib import Path

from aiohttp import web

from helmop.infra.kube import Kube
from helmop.views.requests import whoami

from .access import Access, LocalAccess, TokenAccess
from .feed import Feed
from .guard import Guard
from .kinds import Registry
from .pages import Pages
from .sso import START, OidcAccess, OidcSettings, SignIn

STATIC = Path(__file__).parent / "static"
MAX_BODY = 64 << 10  # a form: a token at most


def application(access: Access, guard: Guard, feed: Feed, pages: Pages) -> web.Application:
    app = web.Application(middlewares=[guard.middleware], client_max_size=MAX_BODY)
    app.on_response_prepare.append(guard.on_prepare)
    app.router.add_static("/static", STATIC, append_version=False)
    if isinstance(access, OidcAccess):  # before the pages': the callback's path would match /{plural}/{name}
        app.router.add_routes(SignIn(access, pages).routes())
        pages.templates.globals["sign_in"] = START  # the login page offers the issuer instead of a token form
    app.router.add_routes(pages.routes())

    async def closing(_: web.Application) -> None:
        await feed.close()
        await access.close()
        await pages.close()

    app.on_cleanup.append(closing)
    return app


async def serve(kube: Kube, *, auth: str | OidcSettings, address: str, port: int, actions: bool, namespace: str,
                operator_namespace: str | None, log_file: str | None, announce: Callable[[str], None]) -> None:
    """Serve until SIGINT or SIGTERM. ``auth``: "kubeconfig", the viewer is the kubeconfig's user and only this
    machine may connect; "token", viewers bring bearer tokens (in a cluster); OIDC settings, viewers sign in with
    that issuer."""
    local = auth == "kubeconfig"
    access: Access = (OidcAccess(kube, auth) if isinstance(auth, OidcSettings)
                      else LocalAccess(kube, await whoami(kube), namespace) if local else TokenAccess(kube))
    guard = Guard(None)
    feed = Feed(kube)
    registry = Registry(kube, feed.follow)  # discovery with the UI's own account: which kinds exist, no more
    pages = Pages(access, guard, feed, registry, actions=actions, operator_namespace=operator_namespace,
                  log_file=log_file)
    runner = web.AppRunner(application(access, guard, feed, pages), access_log=None, shutdown_timeout=2)
    await runner.setup()
    site = web.TCPSite(runner, address, port)
    await site.start()
    bound = runner.addresses[0][1]
    if local:  # answer only to this machine's names for itself (a rebound DNS name is refused)
        guard.hosts = frozenset({f"127.0.0.1:{bound}", f"localhost:{bound}"})
    await registry.kinds()  # the feed follows the kinds found
    announce(f"http://{'127.0.0.1' if address in ('', '0.0.0.0') else address}:{bound}/")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()
