"""An OIDC issuer on loopback: its discovery document and JWKS served over HTTP (each request recorded), and tokens
signed with a key generated here (RS256), or with a key of the test's own (a forgery). For a relying party's sign-in
it has an authorization endpoint (whoever ``user`` is signs in at once, no form) and a token endpoint that redeems a
code once, for its client (secret by client_secret_basic), redirect URI and PKCE verifier (S256), as Dex does; what
it mints can be made wrong on purpose (``minting``: a wrong audience, nonce, issuer, key, or an expired token)."""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote_plus, urlencode

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm


def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


class Issuer:
    def __init__(self) -> None:
        self.key, self.kid = rsa_key(), "key-1"
        self.paths: list[str] = []  # what was asked of it
        self.clients: dict[str, str] = {}  # client id: its secret
        self.user: dict[str, Any] = {}  # the claims of whoever signs in next (none: the sign-in is denied)
        self.minting: dict[str, Any] = {}  # token()'s options for the ID tokens redeemed ("claims": claims added)
        self.redeemed: list[dict[str, str]] = []  # the token endpoint's forms
        self.minted: list[str] = []  # the ID tokens it gave
        self._codes: dict[str, dict[str, Any]] = {}
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                issuer.paths.append(self.path)
                path, _, query = self.path.partition("?")
                if path == "/auth":
                    self.send_response(302)
                    self.send_header("Location", issuer.authorize(dict(parse_qsl(query))))
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                served = {"/.well-known/openid-configuration": issuer.discovery, "/keys": issuer.jwks}
                answer = served[self.path]() if self.path in served else None
                self.answer(200 if answer else 404, answer)

            def do_POST(self) -> None:
                issuer.paths.append(self.path)
                form = dict(parse_qsl(self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()))
                issuer.redeemed.append(form)
                self.answer(*issuer.redeem(form, self.headers.get("Authorization", "")))

            def answer(self, status: int, answer: Any) -> None:
                data = json.dumps(answer).encode()
                self.send_response(status)
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
        return {"issuer": self.url, "jwks_uri": f"{self.url}/keys", "id_token_signing_alg_values_supported": ["RS256"],
                "authorization_endpoint": f"{self.url}/auth", "token_endpoint": f"{self.url}/token",
                "token_endpoint_auth_methods_supported": ["client_secret_basic"]}

    def authorize(self, asked: dict[str, str]) -> str:
        """Where the authorization endpoint sends the browser back: with a code for ``user``, or an error."""
        back = asked["redirect_uri"]
        if not self.user or asked.get("client_id") not in self.clients or asked.get("response_type") != "code" \
                or asked.get("code_challenge_method") != "S256" or "openid" not in asked.get("scope", "").split():
            return f"{back}?{urlencode({'error': 'access_denied', 'state': asked.get('state', '')})}"
        code = secrets.token_urlsafe(16)
        self._codes[code] = {**asked, "claims": dict(self.user)}
        return f"{back}?{urlencode({'code': code, 'state': asked['state']})}"

    def redeem(self, form: dict[str, str], authorization: str) -> tuple[int, dict[str, Any]]:
        """The token endpoint's answer: an ID token for a code redeemed once, by its client, with its verifier."""
        client, _, secret = base64.b64decode(authorization.removeprefix("Basic ")).decode().partition(":")
        client, secret = unquote_plus(client), unquote_plus(secret)  # each form-encoded (RFC 6749 2.3.1)
        asked = self._codes.pop(form.get("code", ""), None)
        verifier = form.get("code_verifier", "")
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        if self.clients.get(client) != secret or form.get("grant_type") != "authorization_code":
            return 401, {"error": "invalid_client"}
        if asked is None or asked["client_id"] != client or asked["redirect_uri"] != form.get("redirect_uri") \
                or asked["code_challenge"] != challenge:
            return 400, {"error": "invalid_grant", "error_description": "the code, redirect URI or verifier is wrong"}
        options = dict(self.minting)
        claims = {"sub": "user-1", **asked["claims"], "nonce": asked.get("nonce", ""), **options.pop("claims", {})}
        self.minted.append(self.token(claims, **{"audience": client, **options}))
        return 200, {"access_token": "opaque", "token_type": "Bearer", "id_token": self.minted[-1]}

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
