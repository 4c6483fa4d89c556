"""The sandbox as something to start: in a thread of its own, with a kubeconfig for clients.

The server runs its own event loop in a background thread, so callers may block (run helm or
kubectl with ``subprocess.run``) without stalling it, and it can serve several clients at once.
"""

from __future__ import annotations

import asyncio
import base64
import os
import secrets
import tempfile
import threading
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml
from aiohttp import web

from .apiserver import ApiServer
from .controllers import Controllers
from .faults import Faults
from .server import HttpApi
from .state import StateDir
from .store import HISTORY
from .tls import make_serving_cert


class Sandbox:
    """An embedded Kubernetes API server on 127.0.0.1.

    Use as ``with Sandbox() as sb:`` or ``async with Sandbox() as sb:``; ``sb.kubeconfig`` is a
    kubeconfig file (HTTPS with a throwaway CA, token auth) for kubectl, helm, kopf and the Python
    client.
    """

    def __init__(self, *, port: int = 0, kubeconfig: str | os.PathLike[str] | None = None,
                 ready_delay: float = 0.2, token: str | None = None, history: int = HISTORY,
                 state_dir: str | os.PathLike[str] | None = None, faults: str | None = None,
                 cluster_network: bool = True) -> None:
        """``history``: watch events kept per resource; resuming from an older version gets 410.
        ``state_dir``: objects, versions, CA, tokens and port kept there across restarts (:mod:`.state`).
        ``faults``: a fault-injection spec (:mod:`.faults`).
        ``cluster_network``: False makes every webhook named by a Service unreachable, instead of answered for
        the workloads the sandbox reports Ready (:mod:`.network`)."""
        self.state = StateDir(state_dir) if state_dir is not None else None
        self.port = self.state.port(port) if self.state else port
        self.ready_delay = ready_delay
        self.history = history
        self.faults = Faults.parse(faults) if faults else None
        self.cluster_network = cluster_network
        self.token = token or (self.state.token() if self.state else secrets.token_hex(16))
        self._kubeconfig_arg = Path(kubeconfig) if kubeconfig else None
        self._tmpdir = tempfile.TemporaryDirectory(prefix="helmop-sandbox-")
        self.workdir = Path(self._tmpdir.name)
        self._cert = self.state.serving_cert() if self.state else make_serving_cert()
        self.ca_file = self.workdir / "ca.crt"
        self.ca_file.write_bytes(self._cert.ca_pem)
        self.kubeconfig = Path()
        self.api: ApiServer | None = None
        self.controllers: Controllers | None = None  # the built-in controllers (tests may move their clock)
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._http: HttpApi | None = None
        self._ready = threading.Event()
        self._failure: BaseException | None = None

    @property
    def audit(self) -> list[tuple[str, Any]]:
        """(user, request attributes) of the resource requests served so far."""
        return list(self._http.audit) if self._http is not None else []

    @property
    def requests_served(self) -> int:
        """Resource requests served so far (every client's: what the benchmarks divide by their work)."""
        return self._http.served if self._http is not None else 0

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def start(self) -> Sandbox:
        self._thread = threading.Thread(target=self._run, name="helmop-sandbox", daemon=True)
        self._thread.start()
        self._ready.wait(60)
        if self._failure is not None:
            raise RuntimeError(f"the sandbox failed to start: {self._failure}") from self._failure
        if not self._ready.is_set():
            raise RuntimeError("the sandbox did not start within 60 s")
        self._write_kubeconfig()
        return self

    def _run(self) -> None:
        loop = self._loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        runner: web.AppRunner | None = None
        try:
            self.api = ApiServer(self.history, self.state)
            self._http = HttpApi(self.api, self.token, faults=self.faults,
                                 signing_key=self.state.signing_key() if self.state else None,
                                 cluster_network=self.cluster_network)
            self.controllers = Controllers(self.api, loop, self.ready_delay, self._cert.ca_pem)
            self.controllers.start()
            runner = web.AppRunner(self._http.app(), access_log=None, shutdown_timeout=1)
            loop.run_until_complete(runner.setup())
            tls = self._cert.context(self.workdir)
            site = web.TCPSite(runner, "127.0.0.1", self.port, ssl_context=tls)
            loop.run_until_complete(site.start())
            self.port = runner.addresses[0][1]  # the port picked when asked for port 0
            if self.state is not None:
                self.state.remember_port(self.port)
            self._http.address = f"127.0.0.1:{self.port}"
        except BaseException as exc:  # reported to start()
            self._failure = exc
            self._ready.set()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            self._http.stopping.set()
            self.api.store.close_watchers()
            loop.run_until_complete(runner.cleanup())
            loop.close()
            if self.state is not None:
                self.state.close()

    def _write_kubeconfig(self) -> None:
        if self._kubeconfig_arg is None:
            self.kubeconfig = self.workdir / "kubeconfig"
        else:
            self.kubeconfig = self._kubeconfig_arg
            self.kubeconfig.parent.mkdir(parents=True, exist_ok=True)
        config = {
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "helmop-sandbox", "cluster": {
                "server": self.url,
                "certificate-authority-data": base64.b64encode(self._cert.ca_pem).decode()}}],
            "users": [{"name": "sandbox-admin", "user": {"token": self.token}}],
            "contexts": [{"name": "helmop-sandbox", "context": {"cluster": "helmop-sandbox",
                                                                "user": "sandbox-admin",
                                                                "namespace": "default"}}],
            "current-context": "helmop-sandbox",
        }
        self.kubeconfig.write_text(yaml.safe_dump(config))
        self.kubeconfig.chmod(0o600)

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
        self._tmpdir.cleanup()

    def __enter__(self) -> Sandbox:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> Sandbox:
        return await asyncio.to_thread(self.start)

    async def __aexit__(self, _exc_type: type[BaseException] | None, _exc: BaseException | None,
                        _tb: TracebackType | None) -> None:
        await asyncio.to_thread(self.stop)
