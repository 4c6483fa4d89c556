"""``helmop ui --auth oidc``'s flags (named as kube-apiserver's ``--oidc-*`` flags, so the mapping of claims to
users and groups is the one a cluster's administrator knows) and the settings they make. A secret is never a flag:
the client's secret and the session key are read from files (a mounted Secret)."""

from __future__ import annotations

import argparse
import ipaddress
import secrets
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from helmop.api.durations import parse_duration
from helmop.api.signin import ClaimMapping
from helmop.infra.signin import Client

from .argtree import Arg, arg
from .errors import Failed

if TYPE_CHECKING:
    from helmop.ui.sso import OidcSettings

MIN_KEY = 32  # bytes of a session key file
TAKEN = {"/", "/login", "/logout", "/feed", "/graph", "/fleet", "/login/sso"}  # the UI's own paths

FLAGS: tuple[Arg, ...] = (
    arg("--oidc-issuer", metavar="URL", help="with --auth oidc: the issuer (https; its discovery document is read)"),
    arg("--oidc-client-id", metavar="ID", help="the UI's client at the issuer (the ID token's audience)"),
    arg("--oidc-client-secret-file", metavar="PATH", help="a file holding the client's secret (none: a public client, "
                                                         "PKCE alone)"),
    arg("--oidc-redirect-url", metavar="URL", help="where the issuer sends the browser back: this UI's address and a "
                                                   "path of its own, e.g. https://helmop.example.com/oauth2/callback"),
    arg("--oidc-scopes", default="openid,email,profile", metavar="LIST",
        help="the scopes asked for, comma-separated (default %(default)s; Dex gives groups with groups)"),
    arg("--oidc-username-claim", default="email", metavar="CLAIM",
        help="the claim that names the user (default %(default)s), as kube-apiserver's flag"),
    arg("--oidc-username-prefix", metavar="PREFIX",
        help="put before the user's name (default: none for email, the issuer and # for any other claim; -: none)"),
    arg("--oidc-groups-claim", default="groups", metavar="CLAIM",
        help="the claim that lists the user's groups (default %(default)s)"),
    arg("--oidc-groups-prefix", default="", metavar="PREFIX", help="put before each group's name (default: none)"),
    arg("--session-key-file", metavar="PATH", help=f"with --auth oidc: a file of at least {MIN_KEY} bytes that "
                                                   "signs sessions (replicas share it; default: a key made at start, "
                                                   "so a restart signs everyone out)"),
    arg("--session-duration", default="8h", metavar="DURATION",
        help="how long a sign-in lasts (default %(default)s)"),
)


def _read(path: str, what: str) -> bytes:
    try:
        return Path(path).read_bytes().strip()
    except OSError as exc:
        raise Failed(f"{what} {path} cannot be read: {exc.strerror}") from None


def _checked_url(url: str | None, flag: str) -> str:
    if not url:
        raise Failed(f"--auth oidc needs {flag}")
    parsed = urlsplit(url)
    try:
        loopback = ipaddress.ip_address(parsed.hostname or "").is_loopback
    except ValueError:
        loopback = parsed.hostname == "localhost"
    if not parsed.hostname or not (parsed.scheme == "https" or (parsed.scheme == "http" and loopback)):
        raise Failed(f"{flag} {url} is not an https URL (http is taken on loopback only)")
    return url


def oidc_settings(args: argparse.Namespace) -> OidcSettings:
    """The settings ``--auth oidc`` serves with (Failed saying which flag is missing or wrong)."""
    from helmop.ui.sso import OidcSettings  # the UI's modules: for this verb only

    issuer = _checked_url(args.oidc_issuer, "--oidc-issuer")
    redirect = _checked_url(args.oidc_redirect_url, "--oidc-redirect-url")
    callback = urlsplit(redirect).path
    if callback in TAKEN or callback.startswith("/static/") or not callback.startswith("/"):
        raise Failed(f"--oidc-redirect-url's path {callback or '(none)'} is one of the UI's pages: give a path of "
                     "its own, such as /oauth2/callback")
    if not args.oidc_client_id:
        raise Failed("--auth oidc needs --oidc-client-id")
    secret = _read(args.oidc_client_secret_file, "--oidc-client-secret-file") if args.oidc_client_secret_file else b""
    key = _read(args.session_key_file, "--session-key-file") if args.session_key_file else secrets.token_bytes(MIN_KEY)
    if len(key) < MIN_KEY:
        raise Failed(f"--session-key-file holds {len(key)} bytes: a session key needs at least {MIN_KEY}")
    try:
        lifetime = parse_duration(args.session_duration)
    except ValueError as exc:
        raise Failed(f"--session-duration: {exc}") from None
    scopes = tuple(dict.fromkeys(["openid", *(s.strip() for s in args.oidc_scopes.split(",") if s.strip())]))
    client = Client(issuer, args.oidc_client_id, secret.decode(), redirect, scopes)
    mapping = ClaimMapping(issuer, args.oidc_username_claim, args.oidc_username_prefix, args.oidc_groups_claim,
                           args.oidc_groups_prefix)
    return OidcSettings(client, mapping, key, lifetime)


def refuse_stray(args: argparse.Namespace) -> None:
    """OIDC flags without ``--auth oidc`` would be ignored: say so instead."""
    given = [f"--{name.replace('_', '-')}" for name in ("oidc_issuer", "oidc_client_id", "oidc_client_secret_file",
                                                        "oidc_redirect_url", "session_key_file")
             if getattr(args, name)]
    if given and args.auth != "oidc":
        raise Failed(f"{', '.join(given)} take effect with --auth oidc only")
