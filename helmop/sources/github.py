"""``provider: github``: a GitHub App's installation token as the credentials of a GitRepository, as Flux's
source-controller obtains it (fluxcd/pkg auth/githubapp).

The Secret gives ``githubAppID``, ``githubAppPrivateKey`` (PEM RSA), one of ``githubAppInstallationID`` or
``githubAppInstallationOwner`` (an organisation or a user, whose installation is looked up), and optionally
``githubAppBaseURL`` (GitHub Enterprise Server's API, ``https://HOST/api/v3``). A JWT signed with the key (RS256,
issued 30 s in the past, valid 2 minutes, issued by the app ID) asks the API for an installation token, which
git sends as ``x-access-token``. Tokens are reused until 80% of their lifetime (at most an hour), per Secret
content. The API is reached through the address policy (and the repository's proxy), answers are bounded."""

from __future__ import annotations

import base64
import hashlib
import json
import time
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import aiohttp
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from helmop.api.addresses import AddressRefused, Policy
from helmop.api.redaction import safe_url
from helmop.infra import addresses

from .errors import SourceError
from .proxies import Proxy
from .secrets import decoded

API = "https://api.github.com"
USERNAME = "x-access-token"
MAX_ANSWER = 64 << 10
_TIMEOUT = aiohttp.ClientTimeout(total=30, connect=10)
_TOKENS: OrderedDict[str, tuple[str, float]] = OrderedDict()  # key -> (token, reuse until)
_KEEP = 256


@dataclass(frozen=True)
class App:
    app_id: str
    private_key: str
    installation_id: str = ""
    owner: str = ""
    base_url: str = API

    @classmethod
    def of(cls, data: dict[str, str], where: str) -> App:
        app = cls(decoded(data, "githubAppID").strip(), decoded(data, "githubAppPrivateKey"),
                  decoded(data, "githubAppInstallationID").strip(), decoded(data, "githubAppInstallationOwner").strip(),
                  (decoded(data, "githubAppBaseURL").strip() or API).rstrip("/"))
        if not app.app_id.isdigit() or not app.private_key:
            raise SourceError("InvalidProviderConfiguration", f"{where}: a GitHub App needs githubAppID (a number) and "
                                                              "githubAppPrivateKey", transient=False)
        if bool(app.installation_id) == bool(app.owner) or (app.installation_id and not app.installation_id.isdigit()):
            raise SourceError("InvalidProviderConfiguration", f"{where}: give exactly one of githubAppInstallationID "
                                                              "(a number) or githubAppInstallationOwner",
                              transient=False)
        if not app.base_url.startswith(("https://", "http://127.0.0.1", "http://[::1]", "http://localhost")):
            raise SourceError("InvalidProviderConfiguration", f"{where}: githubAppBaseURL must be https://",
                              transient=False)
        return app

    def key(self) -> str:
        """What identifies the app's installation: the mirror it fetches into, the cached token."""
        text = "\0".join((self.app_id, self.installation_id, self.owner, self.base_url, self.private_key))
        return hashlib.sha256(text.encode()).hexdigest()

    def jwt(self, now: float) -> str:
        try:
            key = serialization.load_pem_private_key(self.private_key.encode(), password=None)
        except (ValueError, TypeError):
            raise SourceError("InvalidProviderConfiguration", "githubAppPrivateKey is not a PEM private key",
                              transient=False) from None
        if not isinstance(key, rsa.RSAPrivateKey):
            raise SourceError("InvalidProviderConfiguration", "githubAppPrivateKey must be an RSA key",
                              transient=False)
        issued = int(now) - 30
        header = _b64url(json.dumps({"alg": "RS256", "typ": "JWT"}, separators=(",", ":")).encode())
        claims = _b64url(json.dumps({"iat": issued, "exp": issued + 120, "iss": self.app_id},
                                    separators=(",", ":")).encode())
        signature = key.sign(f"{header}.{claims}".encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{header}.{claims}.{_b64url(signature)}"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


async def installation_token(app: App, policy: Policy, proxy: Proxy | None = None) -> str:
    """A token of the app's installation (reused while fresh)."""
    key = app.key()
    now = time.time()
    cached = _TOKENS.get(key)
    if cached is not None and cached[1] > now:
        return cached[0]
    headers = {"Authorization": f"Bearer {app.jwt(now)}", "Accept": "application/vnd.github+json",
               "X-GitHub-Api-Version": "2022-11-28", "User-Agent": "helmop"}
    try:
        async with addresses.session(policy, timeout=_TIMEOUT, headers=headers) as http:
            installation = app.installation_id or await _installation(http, app, proxy)
            answer = await _call(http, "POST", f"{app.base_url}/app/installations/{installation}/access_tokens", proxy)
    except (aiohttp.ClientError, TimeoutError, OSError, AddressRefused) as exc:
        raise SourceError("AuthenticationFailed", f"the GitHub App's token could not be obtained from "
                                                  f"{safe_url(app.base_url)}: {exc}", transient=True) from None
    token, expires = str(answer.get("token") or ""), _expiry(answer.get("expires_at"), now)
    if not token:
        raise SourceError("AuthenticationFailed", "the GitHub API answered without a token", transient=True)
    _TOKENS[key] = (token, now + min(3600.0, 0.8 * max(0.0, expires - now)))
    while len(_TOKENS) > _KEEP:
        _TOKENS.popitem(last=False)
    return token


async def _installation(http: aiohttp.ClientSession, app: App, proxy: Proxy | None) -> str:
    """The installation of githubAppInstallationOwner: an organisation's, else a user's."""
    failures = []
    for where in ("orgs", "users"):
        try:
            found = await _call(http, "GET", f"{app.base_url}/{where}/{app.owner}/installation", proxy)
        except SourceError as exc:
            failures.append(str(exc))
            continue
        if str(found.get("id") or "").isdigit():
            return str(found["id"])
    raise SourceError("AuthenticationFailed", f"no installation of the GitHub App for {app.owner!r}: "
                                              + "; ".join(failures), transient=False)


async def _call(http: aiohttp.ClientSession, method: str, url: str, proxy: Proxy | None) -> dict[str, Any]:
    auth = aiohttp.BasicAuth(proxy.username, proxy.password) if proxy and proxy.username else None
    async with http.request(method, url, proxy=proxy.address if proxy else None, proxy_auth=auth,
                            allow_redirects=False) as response:
        body = await response.content.read(MAX_ANSWER + 1)
        if len(body) > MAX_ANSWER:
            raise SourceError("AuthenticationFailed", f"the GitHub API's answer to {method} {safe_url(url)} is too "
                                                      "large", transient=True)
        if response.status >= 300:
            raise SourceError("AuthenticationFailed", f"the GitHub API answered {response.status} to {method} "
                                                      f"{safe_url(url)}", transient=response.status >= 500)
    try:
        found = json.loads(body)
    except ValueError:
        found = None
    if not isinstance(found, dict):
        raise SourceError("AuthenticationFailed", f"the GitHub API's answer to {method} {safe_url(url)} is not a "
                                                  "JSON object", transient=True)
    return found


def _expiry(text: Any, now: float) -> float:
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return now + 600  # GitHub's tokens last an hour; without a time, a short reuse
