"""A GitHub API of the tests on 127.0.0.1: it answers a GitHub App's installation lookup and token requests as
GitHub does, once the JWT verifies with the app's public key (RS256) and names the app as its issuer."""

from __future__ import annotations

import base64
import datetime
import http.server
import json
import threading
from typing import Any

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

APP_ID, INSTALLATION, OWNER = "4242", "99", "acme"


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class _Handler(http.server.BaseHTTPRequestHandler):
    server: GitHubAPI._Http

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _answer(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _app_verified(self) -> bool:
        token = self.headers.get("Authorization", "").removeprefix("Bearer ")
        try:
            header, claims, signature = token.split(".")
            self.server.owner.key.public_key().verify(_unb64(signature), f"{header}.{claims}".encode(),
                                                      padding.PKCS1v15(), hashes.SHA256())
            said = json.loads(_unb64(claims))
        except Exception:  # any bad token is a 401, as GitHub answers
            return False
        return said.get("iss") == APP_ID and said["exp"] - said["iat"] <= 600

    def do_GET(self) -> None:
        self.server.owner.calls.append(f"GET {self.path}")
        if not self._app_verified():
            self._answer(401, {"message": "A JSON web token could not be decoded"})
        elif self.path == f"/orgs/{OWNER}/installation":
            self._answer(200, {"id": int(INSTALLATION)})
        else:
            self._answer(404, {"message": "Not Found"})

    def do_POST(self) -> None:
        self.server.owner.calls.append(f"POST {self.path}")
        if not self._app_verified():
            self._answer(401, {"message": "A JSON web token could not be decoded"})
        elif self.path == f"/app/installations/{INSTALLATION}/access_tokens":
            expires = datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1)
            self._answer(201, {"token": self.server.owner.token, "expires_at": expires.strftime("%Y-%m-%dT%H:%M:%SZ")})
        else:
            self._answer(404, {"message": "Not Found"})


class GitHubAPI:
    class _Http(http.server.ThreadingHTTPServer):
        owner: GitHubAPI

    def __init__(self, token: str = "ghs_installation_token_1") -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.token = token
        self.calls: list[str] = []
        self.http = self._Http(("127.0.0.1", 0), _Handler)
        self.http.owner = self
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def private_pem(self) -> str:
        return self.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption()).decode()

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()
