"""The web UI's single sign-on, its parts without a browser: claims mapped to a user and groups as kube-apiserver's
``--oidc-*`` flags map them, sealed values (the sign-in under way, the session), and ``helmop ui --auth oidc``'s
flags checked before anything is served."""

from __future__ import annotations

import base64
import hashlib
import time
from pathlib import Path
from typing import Any

import pytest

from helmop.api.jwts import TokenRefused
from helmop.api.signin import FLOW, SESSION, ClaimMapping, Sealer, pkce
from helmop.cli import uiauth
from helmop.cli.errors import Failed
from helmop.cli.main import parser

ISSUER = "https://issuer.example"


@pytest.mark.parametrize(("mapping", "claims", "user", "groups"), [
    # email: no prefix (kube-apiserver's default for that claim)
    (ClaimMapping(ISSUER), {"email": "a@example.com", "groups": ["dev", "ops"]}, "a@example.com", ("dev", "ops")),
    # another claim: the issuer and # before it, unless a prefix is given ("-": none)
    (ClaimMapping(ISSUER, "sub"), {"sub": "42"}, f"{ISSUER}#42", ()),
    (ClaimMapping(ISSUER, "sub", "oidc:"), {"sub": "42"}, "oidc:42", ()),
    (ClaimMapping(ISSUER, "sub", "-"), {"sub": "42"}, "42", ()),
    # groups: a claim of its own name, a single string taken as one group, each prefixed
    (ClaimMapping(ISSUER, groups_claim="roles", groups_prefix="kc:"), {"email": "a@x", "roles": "admin"}, "a@x",
     ("kc:admin",)),
    # the API server's own groups are never an issuer's to give
    (ClaimMapping(ISSUER), {"email": "a@x", "groups": ["system:masters", "dev"]}, "a@x", ("dev",)),
])
def test_claims_map_to_a_user_and_groups_as_kube_apiserver_maps_them(
        mapping: ClaimMapping, claims: dict[str, Any], user: str, groups: tuple[str, ...]) -> None:
    assert mapping.identity(claims) == (user, groups)


@pytest.mark.parametrize(("mapping", "claims", "said"), [
    (ClaimMapping(ISSUER), {"sub": "42"}, "no 'email' claim"),
    (ClaimMapping(ISSUER), {"email": "a@x", "email_verified": False}, "not verified"),
    (ClaimMapping(ISSUER, "sub", "-"), {"sub": "system:admin"}, "is a system name"),
    (ClaimMapping(ISSUER), {"email": "a@x", "groups": {"dev": True}}, "not a list of names"),
])
def test_claims_that_name_no_one_are_refused(mapping: ClaimMapping, claims: dict[str, Any], said: str) -> None:
    with pytest.raises(TokenRefused, match=said):
        mapping.identity(claims)


def test_a_sealed_value_opens_for_its_purpose_until_it_expires_and_never_changed() -> None:
    sealer, now = Sealer(b"k" * 32), time.time()
    sealed = sealer.seal(SESSION, {"u": "alice"}, now + 60)
    assert sealer.open(SESSION, sealed, now) == {"u": "alice"}
    assert sealer.open(SESSION, sealed, now + 61) is None  # expired
    assert sealer.open(FLOW, sealed, now) is None  # a session is no sign-in under way
    assert Sealer(b"x" * 32).open(SESSION, sealed, now) is None  # another key
    body, mac = sealed.split(".")
    assert sealer.open(SESSION, f"{body}x.{mac}", now) is None
    assert sealer.open(SESSION, "", now) is None and sealer.open(SESSION, "not.sealed", now) is None


def test_pkce_challenge_is_the_verifiers_s256() -> None:
    verifier, challenge = pkce()
    assert 43 <= len(verifier) <= 128 and len(challenge) == 43 and pkce()[0] != verifier
    assert base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode() == challenge


def _settings(*flags: str) -> Any:
    return uiauth.oidc_settings(parser().parse_args(["ui", "--auth", "oidc", *flags]))


def test_oidc_flags_make_settings_and_wrong_ones_are_refused(tmp_path: Path) -> None:
    secret, key, short = tmp_path / "secret", tmp_path / "key", tmp_path / "short"
    secret.write_text("s3cret\n")
    key.write_bytes(b"k" * 40)
    short.write_text("too short")
    base = ("--oidc-issuer", ISSUER, "--oidc-client-id", "ui", "--oidc-redirect-url", "https://ui.example/cb")
    made = _settings(*base, "--oidc-client-secret-file", str(secret), "--session-key-file", str(key),
                     "--oidc-scopes", "email,groups", "--session-duration", "1h")
    assert (made.client.client_secret, made.client.scopes, made.session_key, made.session_lifetime, made.callback) == (
        "s3cret", ("openid", "email", "groups"), b"k" * 40, 3600.0, "/cb")
    assert len(_settings(*base).session_key) == 32  # none given: one made at start
    for flags, said in ((("--oidc-client-id", "ui", "--oidc-redirect-url", "https://ui.example/cb"),
                         "needs --oidc-issuer"),
                        ((*base[:4], "--oidc-redirect-url", "http://ui.example/cb"), "not an https URL"),
                        ((*base[:4], "--oidc-redirect-url", "https://ui.example/login"), "one of the UI's pages"),
                        ((*base, "--session-key-file", str(short)), "a session key needs at least 32"),
                        ((*base, "--oidc-client-secret-file", str(tmp_path / "none")), "cannot be read")):
        with pytest.raises(Failed, match=said):
            _settings(*flags)
    with pytest.raises(Failed, match="take effect with --auth oidc only"):
        uiauth.refuse_stray(parser().parse_args(["ui", "--oidc-issuer", ISSUER]))
