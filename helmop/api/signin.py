"""Single sign-on for the web UI (OIDC authorization code with PKCE), its pure parts: the ID token checked (signature,
issuer, audience, expiry by :mod:`helmop.api.jwts`; the nonce and ``azp`` here), the user and groups read from its
claims as kube-apiserver's ``--oidc-*`` flags read them, and the values the browser keeps between requests (the
sign-in under way, the session) sealed with an HMAC and an expiry, so that no state is kept on the server and
replicas sharing the key answer alike."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .jwts import TokenRefused, verify

SESSION, FLOW = "session", "flow"  # what a sealed value is for: one is never taken for the other
MAX_SEALED = 3800  # characters: a browser keeps a cookie of up to 4096 bytes, its name and attributes included


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def pkce() -> tuple[str, str]:
    """A PKCE verifier and its S256 challenge (RFC 7636)."""
    verifier = secrets.token_urlsafe(48)
    return verifier, _b64(hashlib.sha256(verifier.encode()).digest())


class Sealer:
    """Values signed with a key (HMAC-SHA256) for one purpose, until an expiry: readable by the browser that keeps
    them, but neither forged nor changed nor kept beyond their time."""

    def __init__(self, key: bytes) -> None:
        self._key = key

    def seal(self, purpose: str, value: Mapping[str, Any], expires: float) -> str:
        body = _b64(json.dumps({"p": purpose, "exp": int(expires), "v": value}, separators=(",", ":")).encode())
        return f"{body}.{self._mac(body)}"

    def open(self, purpose: str, sealed: str, now: float) -> dict[str, Any] | None:
        """The value sealed for ``purpose`` if the seal holds and has not expired; None otherwise."""
        body, _, mac = sealed.partition(".")
        if not body or len(sealed) > MAX_SEALED or not hmac.compare_digest(mac.encode(), self._mac(body).encode()):
            return None
        try:
            opened = json.loads(_unb64(body))
        except (ValueError, binascii.Error, RecursionError):
            return None
        if not isinstance(opened, dict) or opened.get("p") != purpose:
            return None
        if not isinstance(opened.get("exp"), int) or opened["exp"] <= now:
            return None
        value = opened.get("v")
        return value if isinstance(value, dict) else None

    def _mac(self, body: str) -> str:
        return _b64(hmac.new(self._key, body.encode(), hashlib.sha256).digest())


def id_token_claims(token: str, keys: Mapping[str, Any], *, issuer: str, client_id: str, nonce: str,
                    allowed: Sequence[str], now: float) -> dict[str, Any]:
    """The claims of an ID token the issuer signed for this client in answer to this sign-in (OIDC Core 3.1.3.7);
    TokenRefused saying why otherwise."""
    claims = verify(token, keys, issuers=[issuer], audience=client_id, allowed=allowed, now=now)
    audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
    if len(audiences) > 1 and claims.get("azp") != client_id:
        raise TokenRefused("the ID token is meant for several clients and not authorized for this one (azp)")
    sent = claims.get("nonce")
    if not nonce or not isinstance(sent, str) or not hmac.compare_digest(sent.encode(), nonce.encode()):
        raise TokenRefused("the ID token's nonce is not this sign-in's (a token replayed from another sign-in)")
    return claims


@dataclass(frozen=True)
class ClaimMapping:
    """Who a signed-in viewer is, as kube-apiserver's OIDC flags say it: the same claims, the same prefixes, so a
    RoleBinding written for a cluster that signs its users in with this issuer binds them here too."""

    issuer: str
    username_claim: str = "email"
    username_prefix: str | None = None  # None: none for email, "<issuer>#" for any other claim; "-": none
    groups_claim: str = "groups"
    groups_prefix: str = ""

    def identity(self, claims: Mapping[str, Any]) -> tuple[str, tuple[str, ...]]:
        """The user and groups to impersonate; TokenRefused when the claims name no one this UI acts for."""
        value = claims.get(self.username_claim)
        if not isinstance(value, str) or not value:
            raise TokenRefused(f"the ID token has no {self.username_claim!r} claim to name you by")
        if self.username_claim == "email" and claims.get("email_verified", True) is not True:
            raise TokenRefused("the issuer has not verified your email address (email_verified)")
        prefix = self.username_prefix
        if prefix is None:
            prefix = "" if self.username_claim == "email" else f"{self.issuer}#"
        user = (prefix if prefix != "-" else "") + value
        if user.startswith("system:"):  # a name the API server keeps for its own components and accounts
            raise TokenRefused(f"{user!r} is a system name: it is not taken from an issuer")
        found = claims.get(self.groups_claim, [])
        found = [found] if isinstance(found, str) else found
        if not isinstance(found, list) or not all(isinstance(g, str) for g in found):
            raise TokenRefused(f"the ID token's {self.groups_claim!r} claim is not a list of names")
        groups = (self.groups_prefix + g for g in found if g)
        # system: groups (system:masters is everything) are the API server's to give, never an issuer's
        return user, tuple(sorted({g for g in groups if not g.startswith("system:")}))
