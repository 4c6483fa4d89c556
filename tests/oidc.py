"""An OIDC issuer on loopback: its discovery document and JWKS served over HTTP (each request recorded), and tokens
signed with a key generated here (RS256), or with a key of the test's own (a forgery)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm


def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


class Issuer:
    def __init__(self) -> None:
        self.key, self.kid = rsa_key(), "key-1"
        self.paths: list[str] = []  # what was asked of it
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                issuer.paths.append(self.path)
                served = {"/.well-known/openid-configuration": issuer.discovery, "/keys": issuer.jwks}
                answer = served[self.path]() if self.path in served else None
                data = json.dumps(answer).encode()
                self.send_response(200 if answer else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *_: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def discovery(self) -> dict[str, Any]:
        return {"issuer": self.url, "jwks_uri": f"{self.url}/keys", "id_token_signing_alg_values_supported": ["RS256"]}

    def jwks(self) -> dict[str, Any]:
        return {"keys": [{**json.loads(RSAAlgorithm.to_jwk(self.key.public_key())), "kid": self.kid, "use": "sig",
                          "alg": "RS256"}]}

    def token(self, claims: dict[str, Any], *, audience: str = "notification-controller", lifetime: float = 300,
              key: rsa.RSAPrivateKey | None = None, issuer: str = "", kid: str = "") -> str:
        """A token of this issuer (or ``issuer``) for ``audience``, valid ``lifetime`` seconds from now (negative:
        expired), signed with its key (or ``key``)."""
        now = time.time()
        body = {"iss": issuer or self.url, "aud": audience, "iat": int(now), "exp": int(now + lifetime), **claims}
        return jwt.encode(body, key or self.key, algorithm="RS256", headers={"kid": kid or self.kid})

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
