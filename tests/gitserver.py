"""Real git repositories on disk, served over HTTP on 127.0.0.1 by `git http-backend` (smart HTTP),
optionally behind basic auth. Tests push to them with plain git and helmop fetches from them."""

from __future__ import annotations

import base64
import http.server
import os
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any


class _Handler(http.server.BaseHTTPRequestHandler):
    server: GitServer._Http

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _serve(self) -> None:
        cfg = self.server.owner
        if cfg.credentials is not None:
            expected = "Basic " + base64.b64encode(":".join(cfg.credentials).encode()).decode()
            if self.headers.get("Authorization") != expected:
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="git"')
                self.end_headers()
                return
        path, _, query = self.path.partition("?")
        if self.command == "POST" and path.endswith("/git-receive-pack") and cfg.on_receive is not None:
            cfg.on_receive(path)  # before the push lands: a test moves the branch (a race, for certain)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        env = {**os.environ, "GIT_PROJECT_ROOT": str(cfg.root), "GIT_HTTP_EXPORT_ALL": "1",
               "PATH_INFO": path, "QUERY_STRING": query, "REQUEST_METHOD": self.command,
               "CONTENT_TYPE": self.headers.get("Content-Type", ""), "CONTENT_LENGTH": str(len(body)),
               "REMOTE_USER": "tester", "REMOTE_ADDR": "127.0.0.1"}
        if self.headers.get("Content-Encoding"):
            env["HTTP_CONTENT_ENCODING"] = self.headers["Content-Encoding"]
        done = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True)
        head, _, payload = done.stdout.partition(b"\r\n\r\n")
        status = 200
        headers = []
        for line in head.decode().split("\r\n"):
            key, _, value = line.partition(": ")
            if key.lower() == "status":
                status = int(value.split()[0])
            elif key:
                headers.append((key, value))
        self.send_response(status)
        for key, value in headers:
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = _serve
    do_POST = _serve


class GitServer:
    class _Http(http.server.ThreadingHTTPServer):
        owner: GitServer

    def __init__(self, root: Path, credentials: tuple[str, str] | None = None, host: str = "127.0.0.1") -> None:
        self.root = root
        self.credentials = credentials
        self.on_receive: Callable[[str], None] | None = None
        self.http = self._Http((host, 0), _Handler)
        self.http.owner = self
        self.base = f"http://{host}:{self.http.server_address[1]}"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()

    def restart(self) -> None:
        """Up again on the same port after :meth:`close` (a server that was down for a while)."""
        port = self.http.server_address[1]
        self.http = self._Http(("127.0.0.1", port), _Handler)
        self.http.owner = self
        threading.Thread(target=self.http.serve_forever, daemon=True).start()


class Repo:
    """A bare repository under the server's root plus a working clone to commit and push from."""

    def __init__(self, server: GitServer, name: str, work: Path) -> None:
        self.bare = server.root / f"{name}.git"
        self.url = f"{server.base}/{name}.git"
        subprocess.run(["git", "init", "--bare", "-q", "-b", "main", str(self.bare)], check=True)
        subprocess.run(["git", "-C", str(self.bare), "config", "http.receivepack", "true"], check=True)
        self.work = work
        subprocess.run(["git", "init", "-q", "-b", "main", str(work)], check=True)
        self.git("remote", "add", "origin", str(self.bare))

    def git(self, *args: str) -> str:
        env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t",
               "GIT_COMMITTER_EMAIL": "t@x"}
        return subprocess.run(["git", "-C", str(self.work), *args], check=True, capture_output=True, text=True,
                              env=env).stdout.strip()

    def write(self, files: dict[str, str | None]) -> None:
        for rel, text in files.items():
            target = self.work / rel
            if text is None:
                target.unlink(missing_ok=True)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text)

    def commit(self, files: dict[str, str | None], message: str = "change", *, branch: str = "main") -> str:
        self.write(files)
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", message)
        self.git("push", "-q", "--force", "origin", f"HEAD:refs/heads/{branch}")
        return self.git("rev-parse", "HEAD")

    def tag(self, name: str) -> None:
        self.git("tag", "-f", name)
        self.git("push", "-q", "--force", "origin", f"refs/tags/{name}")
