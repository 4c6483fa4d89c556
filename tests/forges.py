"""The comment APIs of GitHub, GitLab and Gitea on 127.0.0.1, each as its documentation says: the token's own
user, a change request's comments (one page, oldest first), a comment created and a comment edited; the open change
requests (``pulls``, set by a test) and commit statuses set. It keeps the comments (each with its author) and the
statuses, records every call, and answers 401 to a request without the host's token."""

from __future__ import annotations

import http.server
import json
import re
import threading
from dataclasses import dataclass
from typing import Any

# per host: how the token is sent, the API's root, the user's name key, a comment's author key, the edit's method
HOSTS = {
    "github": ("authorization", "Bearer {}", "/api/v3", "login", "user", "PATCH"),
    "gitlab": ("private-token", "{}", "/api/v4", "username", "author", "PUT"),
    "gitea": ("authorization", "token {}", "/api/v1", "login", "user", "PATCH"),
}
_THREAD = {  # a change request's comments, and one comment, under the API's root
    "github": (r"/repos/[^/]+/[^/]+/issues/(\d+)/comments", r"/repos/[^/]+/[^/]+/issues/comments/(\d+)"),
    "gitlab": (r"/projects/[^/]+/merge_requests/(\d+)/notes", r"/projects/[^/]+/merge_requests/\d+/notes/(\d+)"),
    "gitea": (r"/repos/[^/]+/[^/]+/issues/(\d+)/comments", r"/repos/[^/]+/[^/]+/issues/comments/(\d+)"),
}
_CHANGES = {  # the open change requests, and a commit's statuses, under the API's root
    "github": (r"/repos/[^/]+/[^/]+/pulls", r"/repos/[^/]+/[^/]+/statuses/([0-9a-f]{40})"),
    "gitlab": (r"/projects/[^/]+/merge_requests", r"/projects/[^/]+/statuses/([0-9a-f]{40})"),
    "gitea": (r"/repos/[^/]+/[^/]+/pulls", r"/repos/[^/]+/[^/]+/statuses/([0-9a-f]{40})"),
}


@dataclass(frozen=True)
class Call:
    method: str
    path: str  # with its query
    headers: dict[str, str]  # names in lowercase
    body: Any  # parsed JSON, or None


class Forge:
    def __init__(self, host: str, token: str, login: str = "helmop-bot") -> None:
        self.host, self.token, self.login = host, token, login
        self.comments: list[dict[str, Any]] = []  # {"id", "number", "author", "body"}
        self.pulls: list[dict[str, Any]] = []  # open change requests: {"number", "head" (sha), "base" (branch)}
        self.statuses: list[tuple[str, dict[str, Any]]] = []  # (commit, what was posted)
        self.calls: list[Call] = []
        self._lock = threading.Lock()
        forge = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *_: Any) -> None:
                pass

            def _handle(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                headers = {k.lower(): v for k, v in self.headers.items()}
                with forge._lock:
                    forge.calls.append(Call(self.command, self.path, headers, json.loads(raw) if raw else None))
                    status, answer = forge._answer(self.command, self.path.partition("?")[0], headers,
                                                   json.loads(raw) if raw else {})
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PATCH = do_PUT = _handle

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _comment(self, comment: dict[str, Any]) -> dict[str, Any]:
        _, _, _, name, author, _ = HOSTS[self.host]
        return {"id": comment["id"], "body": comment["body"], author: {name: comment["author"]}}

    def _pull(self, pull: dict[str, Any]) -> dict[str, Any]:
        if self.host == "gitlab":
            return {"iid": pull["number"], "sha": pull["head"], "target_branch": pull["base"], "state": "opened"}
        return {"number": pull["number"], "state": "open", "head": {"sha": pull["head"]}, "base": {"ref": pull["base"]}}

    def _answer(self, method: str, path: str, headers: dict[str, str], body: Any) -> tuple[int, Any]:
        header, form, root, name, _, edit = HOSTS[self.host]
        if headers.get(header) != form.format(self.token):
            return 401, {"message": "Bad credentials"}
        if not path.startswith(root):
            return 404, {"message": "Not Found"}
        path = path.removeprefix(root)
        listing, one = _THREAD[self.host]
        if method == "GET" and path == "/user":
            return 200, {name: self.login, "id": 1}
        if (found := re.fullmatch(listing, path)) and method in ("GET", "POST"):
            number = int(found.group(1))
            if method == "GET":
                return 200, [self._comment(c) for c in self.comments if c["number"] == number][:100]
            comment = {"id": 1000 + len(self.comments), "number": number, "author": self.login, "body": body["body"]}
            self.comments.append(comment)
            return 201, self._comment(comment)
        changes, statuses = _CHANGES[self.host]
        if re.fullmatch(changes, path) and method == "GET":
            return 200, [self._pull(p) for p in self.pulls]
        if (found := re.fullmatch(statuses, path)) and method == "POST":
            self.statuses.append((found.group(1), body))
            return 201, {"id": len(self.statuses), **body}
        if (found := re.fullmatch(one, path)) and method == edit:
            mine = [c for c in self.comments if c["id"] == int(found.group(1)) and c["author"] == self.login]
            if not mine:
                return 403, {"message": "Forbidden"}
            mine[0]["body"] = body["body"]
            return 200, self._comment(mine[0])
        return 404, {"message": "Not Found"}

    def writes(self) -> list[Call]:
        with self._lock:
            return [c for c in self.calls if c.method != "GET"]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
