"""Charts from Helm repositories: HTTP(S) repositories (index.yaml) and OCI registries.

Resolution (constraint -> exact version) is cheap: one conditional GET of the index, or one tags
list; the chart archive of an exact version is immutable, so it is downloaded once into the cache
(``<cache>/charts/<repository hash>/<name>-<version>.tgz``) and verified against the index digest.
OCI charts are pulled over the registry HTTP API directly (manifest, then the chart layer), so no
helm process runs and no credentials reach a command line.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit, urlunsplit

import aiohttp
import yaml

from .errors import SourceError
from .secrets import decoded
from .semver import Version, highest

HELM_CHART_LAYER = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
_MANIFEST_TYPES = "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json"
_TIMEOUT = aiohttp.ClientTimeout(total=60, connect=10)


@dataclass(frozen=True)
class Credentials:
    """From the chart's ``secretRef``: basic auth and/or a CA bundle. Never logged or shown."""

    username: str = ""
    password: str = ""
    ca_pem: str = ""

    @classmethod
    def from_secret_data(cls, data: dict[str, str]) -> Credentials:
        return cls(*(decoded(data, key) for key in ("username", "password", "ca.crt")))

    def secrets(self) -> list[str]:
        """Values to scrub from any message that might echo them."""
        return [v for v in (self.username, self.password) if len(v) >= 3]


@dataclass(frozen=True)
class ResolvedChart:
    repository: str  # the repository URL without credentials
    name: str
    version: str
    urls: tuple[str, ...] = ()
    digest: str = ""  # sha256 hex from the index, when given


def safe_url(url: str) -> str:
    """The URL without user:password, for messages and status."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = (parts.hostname or "") + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


def _wants_exact(version: str) -> bool:
    return Version.parse(version) is not None and not re.search(r"[xX*]", version)


@dataclass
class _Index:
    etag: str
    charts: dict[str, list[dict[str, Any]]]


@dataclass
class Repositories:
    cache_dir: Path
    _indexes: dict[str, _Index] = field(default_factory=dict)
    _locks: dict[str, asyncio.Lock] = field(default_factory=dict)
    hits: int = 0
    misses: int = 0

    def _session(self, creds: Credentials, insecure: bool = False, *, basic: bool = True) -> aiohttp.ClientSession:
        """``basic``: send the credentials as basic auth on every request (HTTP repositories; OCI
        registries get them only at their token endpoint)."""
        ctx: ssl.SSLContext | bool
        if insecure:
            ctx = False
        else:
            ctx = ssl.create_default_context(cadata=creds.ca_pem or None)
            if not creds.ca_pem:
                ctx.load_default_certs()
        auth = aiohttp.BasicAuth(creds.username, creds.password) if creds.username and basic else None
        return aiohttp.ClientSession(timeout=_TIMEOUT, auth=auth, connector=aiohttp.TCPConnector(ssl=ctx),
                                     trust_env=False)

    async def resolve(self, url: str, name: str, version: str, creds: Credentials,
                      insecure: bool = False) -> ResolvedChart:
        if url.startswith("oci://"):
            return await self._resolve_oci(url, name, version, creds, insecure)
        index = await self._index(url, creds)
        entries = index.charts.get(name)
        if not entries:
            raise SourceError("ChartNotFound", f"chart {name!r} not found in repository {safe_url(url)}",
                              transient=False)
        try:
            chosen = highest([str(e.get("version", "")) for e in entries], version)
        except ValueError as exc:
            raise SourceError("InvalidSpec", f"spec.chart.repository.version: {exc}", transient=False) from None
        if chosen is None:
            available = ", ".join(sorted({str(e.get("version")) for e in entries}, reverse=True)[:10])
            raise SourceError("VersionNotFound", f"no version of chart {name!r} matches {version or 'any'!r} in "
                                                 f"{safe_url(url)} (available: {available})", transient=False)
        entry = next(e for e in entries if str(e.get("version")) == chosen)
        return ResolvedChart(safe_url(url), name, chosen,
                             tuple(urljoin(url + "/", u) for u in entry.get("urls") or []),
                             str(entry.get("digest", "")))

    async def _index(self, url: str, creds: Credentials) -> _Index:
        cached = self._indexes.get(url)
        headers = {"If-None-Match": cached.etag} if cached and cached.etag else {}
        try:
            async with self._session(creds) as http, http.get(url + "/index.yaml", headers=headers) as r:
                if r.status == 304 and cached is not None:
                    return cached
                self._raise_for(r.status, f"repository index {safe_url(url)}/index.yaml")
                body = await r.read()
                etag = r.headers.get("ETag", "")
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise SourceError("RepositoryUnreachable",
                              f"repository {safe_url(url)} is unreachable: {_describe(exc)}", transient=True) from None
        try:
            loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
            raw = yaml.load(body, Loader=loader)
            entries = raw["entries"] if isinstance(raw, dict) else None
            if not isinstance(entries, dict):
                raise ValueError("no entries")
        except (yaml.YAMLError, ValueError, KeyError, TypeError):
            raise SourceError("RepositoryIndexInvalid", f"{safe_url(url)}/index.yaml is not a Helm repository "
                                                        "index", transient=False) from None
        # Keep only what resolution needs: indexes of big repositories are large.
        charts = {name: [{k: e.get(k) for k in ("version", "appVersion", "urls", "digest")} for e in versions or []
                         if isinstance(e, dict)] for name, versions in entries.items()}
        index = self._indexes[url] = _Index(etag, charts)
        return index

    @staticmethod
    def _raise_for(status: int, what: str) -> None:
        if status in (401, 403):
            raise SourceError("RepositoryAuthFailed", f"{what}: access denied (HTTP {status}); check the "
                                                      "credentials in spec.chart.repository.secretRef",
                              transient=False)
        if status == 404:
            raise SourceError("RepositoryNotFound", f"{what}: not found (HTTP 404)", transient=False)
        if status >= 400:
            raise SourceError("RepositoryUnreachable", f"{what}: HTTP {status}", transient=status >= 500)

    def cached_path(self, chart: ResolvedChart) -> Path:
        key = hashlib.sha256(chart.repository.encode()).hexdigest()[:16]
        return self.cache_dir / "charts" / key / f"{chart.name}-{chart.version}.tgz"

    async def fetch(self, chart: ResolvedChart, url: str, creds: Credentials, insecure: bool = False) -> Path:
        """The chart archive in the cache, downloaded on first use of this exact version."""
        path = self.cached_path(chart)
        if path.exists():
            self.hits += 1
            return path
        lock = self._locks.setdefault(str(path), asyncio.Lock())
        async with lock:
            if path.exists():
                self.hits += 1
                return path
            self.misses += 1
            if url.startswith("oci://"):
                data = await self._pull_oci(url, chart, creds, insecure)
            else:
                data = await self._download(chart, creds)
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_suffix(f".{os.getpid()}.part")
            partial.write_bytes(data)
            partial.replace(path)
        return path

    async def _download(self, chart: ResolvedChart, creds: Credentials) -> bytes:
        if not chart.urls:
            raise SourceError("ChartNotFound", f"the index of {chart.repository} lists no URL for "
                                               f"{chart.name} {chart.version}", transient=False)
        try:
            async with self._session(creds) as http, http.get(chart.urls[0]) as r:
                self._raise_for(r.status, f"chart {chart.name} {chart.version}")
                data = await r.read()
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise SourceError("RepositoryUnreachable", f"downloading chart {chart.name} {chart.version} "
                                                       f"failed: {_describe(exc)}", transient=True) from None
        if chart.digest and hashlib.sha256(data).hexdigest() != chart.digest:
            raise SourceError("ChartDigestMismatch", f"chart {chart.name} {chart.version} does not match the "
                                                     "digest in the repository index", transient=False)
        return data

    # --- OCI -------------------------------------------------------------------------------------

    @staticmethod
    def _oci_base(url: str, insecure: bool) -> tuple[str, str]:
        """(https://host or http://host, repository path) of an oci:// reference."""
        rest = url[len("oci://"):]
        host, _, path = rest.partition("/")
        return (f"{'http' if insecure else 'https'}://{host}", path)

    async def _oci_get(self, http: aiohttp.ClientSession, base: str, path: str, creds: Credentials,
                       accept: str = "") -> tuple[int, bytes, dict[str, str]]:
        headers = {"Accept": accept} if accept else {}
        for _attempt in range(2):
            async with http.get(base + path, headers=headers) as r:
                if r.status != 401:
                    return r.status, await r.read(), dict(r.headers)
                challenge = r.headers.get("WWW-Authenticate", "")
            token = await self._oci_token(http, challenge, creds)
            if token is None:
                return 401, b"", {}
            headers["Authorization"] = f"Bearer {token}"
        return 401, b"", {}

    @staticmethod
    async def _oci_token(http: aiohttp.ClientSession, challenge: str, creds: Credentials) -> str | None:
        if not challenge.lower().startswith("bearer "):
            return None
        fields = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
        realm = fields.pop("realm", "")
        if not realm:
            return None
        auth = aiohttp.BasicAuth(creds.username, creds.password) if creds.username else None
        async with http.get(realm, params=fields, auth=auth) as r:
            if r.status != 200:
                return None
            body = await r.json(content_type=None)
        token = body.get("token") or body.get("access_token")
        return str(token) if token else None

    async def _resolve_oci(self, url: str, name: str, version: str, creds: Credentials,
                           insecure: bool) -> ResolvedChart:
        if _wants_exact(version):
            return ResolvedChart(url, name, version.lstrip("v") if version.startswith("v") else version)
        base, path = self._oci_base(url, insecure)
        try:
            async with self._session(creds, insecure, basic=False) as http:
                status, body, _ = await self._oci_get(http, base, f"/v2/{path}/tags/list", creds)
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise SourceError("RepositoryUnreachable", f"registry of {url} is unreachable: {_describe(exc)}",
                              transient=True) from None
        self._raise_for(status, f"tags of {url}")
        tags = [t.replace("_", "+") for t in json.loads(body).get("tags") or []]
        chosen = highest(tags, version)
        if chosen is None:
            raise SourceError("VersionNotFound", f"no tag of {url} matches {version or 'any'!r}", transient=False)
        return ResolvedChart(url, name, chosen)

    async def _pull_oci(self, url: str, chart: ResolvedChart, creds: Credentials, insecure: bool) -> bytes:
        base, path = self._oci_base(url, insecure)
        tag = chart.version.replace("+", "_")
        try:
            async with self._session(creds, insecure, basic=False) as http:
                status, body, _ = await self._oci_get(http, base, f"/v2/{path}/manifests/{tag}", creds,
                                                      _MANIFEST_TYPES)
                if status == 404:
                    raise SourceError("VersionNotFound", f"{url}:{tag} not found in the registry", transient=False)
                self._raise_for(status, f"manifest of {url}:{tag}")
                layers = [x for x in json.loads(body).get("layers") or [] if x.get("mediaType") == HELM_CHART_LAYER]
                if not layers:
                    raise SourceError("ChartNotFound", f"{url}:{tag} is not a Helm chart (no chart layer)",
                                      transient=False)
                digest = layers[0]["digest"]
                status, data, _ = await self._oci_get(http, base, f"/v2/{path}/blobs/{digest}", creds)
                self._raise_for(status, f"chart layer of {url}:{tag}")
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise SourceError("RepositoryUnreachable", f"registry of {url} is unreachable: {_describe(exc)}",
                              transient=True) from None
        if digest.startswith("sha256:") and hashlib.sha256(data).hexdigest() != digest[7:]:
            raise SourceError("ChartDigestMismatch", f"{url}:{tag} layer digest mismatch", transient=False)
        return data


def _describe(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text.split(" [")[0]  # aiohttp appends OS error details in brackets; the first part says it
