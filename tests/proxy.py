"""A forward HTTP proxy on 127.0.0.1 for the tests: it takes requests in absolute form (``GET http://host/path``),
asks for basic proxy credentials when given some, forwards them to loopback origins only, and records what it
forwarded (so a test sees that a fetch went through it)."""

from __future__ import annotations

import base64
import http.client
import http.server
import threading
from typing import Any
from urllib.parse import urlsplit


class _Handler(http.server.BaseHTTPRequestHandler):
    server: Proxy._Http

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _forward(self) -> None:
        owner = self.server.owner
        if owner.credentials is not None:
            expected = "Basic " + base64.b64encode(":".join(owner.credentials).encode()).decode()
            if self.headers.get("Proxy-Authorization") != expected:
                self.send_response(407)
                self.send_header("Proxy-Authenticate", 'Basic realm="proxy"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
        target = urlsplit(self.path)
        if target.hostname != "127.0.0.1" or target.scheme != "http":
            self.send_response(403)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        owner.seen.append(f"{self.command} {self.path}")
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("proxy-authorization", "host",
                                                                             "proxy-connection", "connection")}
        upstream = http.client.HTTPConnection(target.hostname, target.port or 80, timeout=30)
        upstream.request(self.command, target.path + (f"?{target.query}" if target.query else ""), body, headers)
        answer = upstream.getresponse()
        payload = answer.read()
        self.send_response(answer.status)
        for key, value in answer.getheaders():
            if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)
        upstream.close()

    do_GET = _forward
    do_POST = _forward


class Proxy:
    class _Http(http.server.ThreadingHTTPServer):
        owner: Proxy

    def __init__(self, credentials: tuple[str, str] | None = None) -> None:
        self.credentials = credentials
        self.seen: list[str] = []
        self.http = self._Http(("127.0.0.1", 0), _Handler)
        self.http.owner = self
        self.address = f"http://127.0.0.1:{self.http.server_address[1]}"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()
