"""A notification receiver on loopback: records every request (method, path, headers, body, when), answers
with a status the test sets, and can go down (its port closed) and come back on the same port."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    headers: dict[str, str]  # names in lowercase
    body: bytes
    at: float  # time.monotonic()

    def json(self) -> Any:
        return json.loads(self.body)


class Receiver:
    def __init__(self) -> None:
        self.received: list[Received] = []
        self.status = 200
        self.answer = b'{"ok": true}'
        self.extra_headers: dict[str, str] = {}
        self._lock = threading.Lock()
        self._server = self._serve(0)
        self.port = self._server.server_address[1]

    def _serve(self, port: int) -> ThreadingHTTPServer:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with receiver._lock:
                    headers = {k.lower(): v for k, v in self.headers.items()}
                    receiver.received.append(Received(self.command, self.path, headers, body, time.monotonic()))
                self.send_response(receiver.status)
                for name, value in receiver.extra_headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(receiver.answer)))
                self.end_headers()
                self.wfile.write(receiver.answer)

            do_GET = do_POST

            def log_message(self, *_: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def at(self, prefix: str) -> list[Received]:
        with self._lock:
            return [r for r in self.received if r.path.startswith(prefix)]

    def down(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def up(self) -> None:
        self._server = self._serve(self.port)

    def close(self) -> None:
        self.down()
