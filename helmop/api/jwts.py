"""Tokens an OIDC issuer signed (a generic-oidc Receiver's callers; Google's, for a gcr Receiver), verified as
go-oidc verifies an ID token, which Flux's notification-controller uses: a key of the issuer's JWKS (the one the
header's ``kid`` names, else any), one of the asymmetric algorithms the issuer says it signs with (RS256 when it
says none; never ``none`` nor a shared-secret HMAC), the issuer and the audience, an expiry in the future and a
``nbf`` at most a minute ahead. Pure: the issuer's keys are given (:mod:`helmop.infra.oidc` fetches them).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping, Sequence
from typing import Any

import jwt

ASYMMETRIC = ("RS256", "RS384", "RS512", "ES256", "ES384", "ES512", "PS256", "PS384", "PS512", "EdDSA")
NOT_BEFORE_LEEWAY = 60.0  # go-oidc's
MAX_TOKEN = 16 << 10  # a JWT from an OIDC provider is a few kilobytes


class TokenRefused(Exception):
    """The token is not one to take: the message says why (never the token)."""


class UnknownKey(TokenRefused):
    """No key of the issuer's set is the one the token names: the set may have been rotated since it was read."""


def bearer(authorization: str) -> str:
    """The token of an ``Authorization: Bearer <token>`` header (Flux's spelling, case and all)."""
    if not authorization.startswith("Bearer "):
        raise TokenRefused("the Authorization header is missing or is not a Bearer token")
    token = authorization[len("Bearer "):].strip()
    if not token or len(token) > MAX_TOKEN:
        raise TokenRefused("the Authorization header carries no token, or one over 16 KiB")
    return token


def unverified_issuer(token: str) -> str:
    """The ``iss`` claim of ``token``, read without checking anything: which issuer's keys to check it with."""
    parts = token.split(".")
    if len(parts) != 3:
        raise TokenRefused("the token is not a JWT")
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, binascii.Error, RecursionError):
        raise TokenRefused("the token's claims are not JSON") from None
    issuer = claims.get("iss") if isinstance(claims, dict) else None
    if not isinstance(issuer, str) or not issuer:
        raise TokenRefused("the token has no iss claim")
    return issuer


def algorithms(advertised: Any) -> tuple[str, ...]:
    """The algorithms an issuer's discovery document advertises (``id_token_signing_alg_values_supported``) that
    are taken; RS256 when it advertises none (go-oidc's default)."""
    taken = tuple(a for a in advertised if a in ASYMMETRIC) if isinstance(advertised, list) else ()
    return taken or ("RS256",)


def verify(token: str, keys: Mapping[str, Any], *, issuers: Sequence[str], audience: str,
           allowed: Sequence[str], now: float) -> dict[str, Any]:
    """The claims of ``token`` once it is verified with ``keys`` (a JWKS) as signed by one of ``issuers`` for
    ``audience``; TokenRefused (UnknownKey: no key the token names) otherwise."""
    try:
        header = jwt.get_unverified_header(token)
    except (jwt.PyJWTError, RecursionError):
        raise TokenRefused("the token's header is not a JWT header") from None
    algorithm = header.get("alg")
    if algorithm not in allowed:
        raise TokenRefused(f"the token is signed with {str(algorithm)[:20]!r}, not one of {', '.join(allowed)}")
    candidates = _keys(keys, header.get("kid"), str(algorithm))
    if not candidates:
        raise UnknownKey("no key of the issuer's set is the one the token names")
    for key in candidates:
        try:
            claims: dict[str, Any] = jwt.decode(
                token, key=key, algorithms=[str(algorithm)], audience=audience,
                options={"require": ["exp", "aud", "iss"], "verify_iss": False, "verify_exp": False,
                         "verify_nbf": False, "verify_iat": False})
        except jwt.InvalidSignatureError:
            continue
        except jwt.PyJWTError as exc:
            raise TokenRefused(f"the token is refused: {exc}") from None
        _check_claims(claims, issuers, now)
        return claims
    raise TokenRefused("the token's signature does not verify with the issuer's keys")


def _keys(keys: Mapping[str, Any], kid: Any, algorithm: str) -> list[jwt.PyJWK]:
    """The keys of the set that may have signed a token naming ``kid`` (any, when it names none) with
    ``algorithm``; encryption keys and keys of another type are passed over."""
    found = []
    for entry in keys.get("keys") or []:
        if not isinstance(entry, dict) or entry.get("use", "sig") != "sig":
            continue
        if (kid is not None and entry.get("kid") != kid) or entry.get("alg", algorithm) != algorithm:
            continue
        try:
            found.append(jwt.PyJWK(entry, algorithm=algorithm))
        except (jwt.PyJWTError, ValueError, TypeError, KeyError):
            continue
    return found


def _check_claims(claims: Mapping[str, Any], issuers: Sequence[str], now: float) -> None:
    if claims.get("iss") not in issuers:
        raise TokenRefused(f"the token's issuer is not {' or '.join(issuers)}")
    expiry = claims.get("exp")
    if not isinstance(expiry, int | float) or expiry < now:
        raise TokenRefused("the token has expired")
    not_before = claims.get("nbf")
    if isinstance(not_before, int | float) and now + NOT_BEFORE_LEEWAY < not_before:
        raise TokenRefused("the token is not valid yet (nbf)")
