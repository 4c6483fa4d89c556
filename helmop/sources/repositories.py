"""Charts from Helm repositories: HTTP(S) repositories (index.yaml) and OCI registries.

Resolution (constraint -> exact version) is cheap: one conditional GET of the index, or one tags
list; the chart archive of an exact version is immutable, so it is downloaded once into the cache
(``<cache>/charts/<repository hash>/<name>-<version>.tgz``) and verified against the index digest.
OCI charts are pulled over the registry HTTP API directly (manifest, then the chart layer), so no
helm process runs and no credentials reach a command line.
"""

from __future__ import annotations

import asyncio
import base64
import email.utils
import functools
import gzip
import hashlib
import io
import json
import os
import re
import ssl
import tarfile
import tempfile
import time
import zlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any
from urllib.parse import urljoin, urlsplit

import aiohttp

from helmop.api import bounded
from helmop.api.addresses import Policy
from helmop.api.errors import some
from helmop.api.redaction import safe_url
from helmop.api.repositories import HELM_CHART_MEDIA_TYPE
from helmop.api.semver import Version, highest
from helmop.infra import addresses

from . import index
from .errors import SourceError, unreachable
from .index import Entry, IndexInvalid
from .mirrors import mirrored
from .proxies import Proxy
from .secrets import decoded

MANIFEST_TYPES = "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json"
_TIMEOUT = aiohttp.ClientTimeout(total=60, connect=10)
_SMALL_BODY = 4 << 20  # tags lists, manifests, tokens: JSON documents of a few kilobytes


# helm's own limits on what a chart archive may expand to (pkg/chart/loader: MaxDecompressedChartSize,
# MaxDecompressedFileSize), and a ratio no real chart comes near (they compress five- to twentyfold).
MAX_CHART_EXPANDED = 100 << 20
MAX_CHART_FILE = 5 << 20
MAX_CHART_RATIO = 200
MAX_CHART_ENTRIES = 20_000  # empty files cost nothing by size, but each is a header to read


def _check_archive(data: bytes, what: str) -> None:
    """A chart archive is a gzipped tar of regular files and folders under one top folder that has a
    Chart.yaml; anything else is named here (and never cached) rather than left for helm: entries that
    would land outside the chart (absolute, ``..``, backslashes, control characters), links and devices,
    and archives that expand beyond helm's limits. The tar is streamed (headers are checked before any
    content is inflated), so a bomb costs neither memory nor much time."""
    limit = min(MAX_CHART_EXPANDED, max(bounded.RATIO_FLOOR, MAX_CHART_RATIO * len(data)))
    total, tops, has_chart, entries = 0, set(), False, 0
    try:
        # gzip.GzipFile rather than tarfile's "r|gz": tarfile's stream reader misreads the gzip extra field
        # helm writes into the archives it packages.
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as inflated, tarfile.open(fileobj=inflated, mode="r|") as archive:
            for member in archive:
                entries += 1
                if entries > MAX_CHART_ENTRIES:
                    raise SourceError("ChartTooLarge", f"{what} has more than {MAX_CHART_ENTRIES} entries",
                                      transient=False)
                name = member.name
                parts = name.split("/")
                if name.startswith("/") or ".." in parts or "\\" in name or any(ord(c) < 32 for c in name):
                    raise SourceError("InvalidPath", f"InvalidPath: {what} has an entry {name!r} outside the chart; "
                                                     "refused", transient=False)
                if not (member.isfile() or member.isdir()):
                    raise SourceError("InvalidPath", f"InvalidPath: {what} has an entry {name!r} that is a link or "
                                                     "a device, not a file; refused", transient=False)
                if member.size > MAX_CHART_FILE:
                    raise SourceError("ChartTooLarge", f"{what}: {name} is larger than "
                                                       f"{bounded.describe_size(MAX_CHART_FILE)}", transient=False)
                total += member.size
                if total > limit:
                    raise SourceError("ChartTooLarge", f"{what} expands to more than {bounded.describe_size(limit)} "
                                                       f"(from {bounded.describe_size(len(data))}); refused",
                                      transient=False)
                tops.add(parts[0])
                has_chart = has_chart or (len(parts) == 2 and parts[1] == "Chart.yaml")
    except (tarfile.TarError, OSError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise SourceError("ChartInvalid", f"{what} is not a chart archive (a gzipped tar): {exc}",
                          transient=False) from None
    if not has_chart or len(tops) != 1:
        raise SourceError("ChartInvalid", f"{what} has no <chart>/Chart.yaml", transient=False)


@dataclass(frozen=True)
class Credentials:
    """From the chart's ``secretRef``: basic auth and/or a CA bundle. Never logged or shown."""

    username: str = ""
    password: str = ""
    ca_pem: str = ""
    scope: str = ""  # the Secret's "namespace/name" ("" without a Secret)
    proxy: Proxy | None = None  # spec.proxySecretRef: how the registry is reached, not what may be read

    @classmethod
    def from_secret_data(cls, data: dict[str, str], scope: str = "") -> Credentials:
        return cls(decoded(data, "username"), decoded(data, "password"), decoded(data, "ca.crt"), scope)

    @property
    def proxy_url(self) -> str | None:
        return self.proxy.address if self.proxy is not None else None

    def proxy_auth(self) -> aiohttp.BasicAuth | None:
        return aiohttp.BasicAuth(self.proxy.username, self.proxy.password) if self.proxy and self.proxy.username \
            else None

    def key(self) -> str:
        """What was fetched with these credentials may be served to: "anonymous", or the Secret and a digest
        of its content. Bytes fetched with one tenant's credentials never answer another's request, or
        one without credentials (an exact OCI version included: that request goes to the registry)."""
        if not (self.scope or self.username or self.password or self.ca_pem):
            return "anonymous"
        secret = "\0".join((self.username, self.password, self.ca_pem))
        return f"{self.scope}#{hashlib.sha256(secret.encode()).hexdigest()}"

    def basic_auth(self) -> dict[str, str]:
        """The Authorization header of HTTP basic auth (RFC 7617, UTF-8), or none without a username."""
        if not self.username:
            return {}
        return {"Authorization": "Basic " + base64.b64encode(f"{self.username}:{self.password}".encode()).decode()}

    def secrets(self) -> list[str]:
        """Values to scrub from any message that might echo them."""
        return [v for v in (self.username, self.password) if len(v) >= 3] + (
            self.proxy.secrets() if self.proxy else [])


@dataclass(frozen=True)
class ResolvedChart:
    repository: str  # the repository URL without credentials
    name: str
    version: str
    urls: tuple[str, ...] = ()
    digest: str = ""  # sha256 hex from the index, when given
    manifest: str = ""  # an OCI chart's manifest digest, when it was verified: pulled by it, nothing else


def _wants_exact(version: str) -> bool:
    return Version.parse(version) is not None and not re.search(r"[xX*]", version)


@dataclass
class _Index:
    charts: dict[str, list[Entry]]
    validators: dict[str, str]  # If-None-Match / If-Modified-Since for the next conditional GET
    fetched: float  # wall-clock time of the last answer from the server (compared with request stamps)
    digest: str = ""  # sha256 hex of the index as served: a HelmRepository's revision
    # (chart, constraint) -> the version chosen: a thousand releases of one chart choose once per index
    chosen: dict[tuple[str, str], str | None] = field(default_factory=dict)


@functools.lru_cache(maxsize=32)
def _tls(ca_pem: str) -> ssl.SSLContext:
    """A TLS context trusting ``ca_pem`` (or the system's CAs), made once per CA: loading the system's
    CAs costs milliseconds of CPU, and every request would otherwise pay it."""
    return ssl.create_default_context(cadata=ca_pem or None)  # without cadata: the system's CAs


def system_trust() -> None:
    """Load the system's CAs for the repositories' requests now (in a thread at start): ~50 ms of CPU that the
    first request to an HTTPS or plain HTTP repository would otherwise take on the event loop."""
    _tls("")


def _validators(headers: Mapping[str, str]) -> dict[str, str]:
    """The request headers that revalidate this answer. A Last-Modified within a second of the answer's
    Date is weak (RFC 9110 8.8.2.2): the file may change again within that second, and a server
    comparing whole seconds would then answer 304 for a changed index. Such an answer is revalidated
    by ETag only, or fetched whole."""
    out = {"If-None-Match": headers["ETag"]} if headers.get("ETag") else {}
    try:
        modified, date = (email.utils.parsedate_to_datetime(headers.get(h, "")) for h in ("Last-Modified", "Date"))
        if (date - modified).total_seconds() >= 1:
            out["If-Modified-Since"] = headers["Last-Modified"]
    except (TypeError, ValueError):  # absent or not a date: nothing to revalidate with
        pass
    return out


def _same_origin(a: str, b: str) -> bool:
    first, second = urlsplit(a), urlsplit(b)
    return (first.scheme, first.hostname, first.port) == (second.scheme, second.hostname, second.port)


def credential_key(url: str, creds: Credentials) -> str:
    """Indexes and archives are cached per repository URL *and* credentials (:meth:`Credentials.key`)."""
    return hashlib.sha256(f"{url}\0{creds.key()}".encode()).hexdigest()


@dataclass
class Repositories:
    """Chart repositories, shared by every HelmRelease of the operator.

    An index is fetched at most once per ``index_ttl`` seconds per repository (and credentials), by
    one request however many HelmReleases ask at once; after the TTL (or the asking release's own
    interval, if shorter) a conditional GET revalidates it (ETag / Last-Modified). A version the
    cached index does not have revalidates at once, and an explicit reconcile request gets an index
    fetched after the request. Bodies are read up to a size cap, never into memory whole.
    """

    cache_dir: Path
    index_ttl: float = 900.0
    index_max_size: int = 64 << 20
    chart_max_size: int = 64 << 20
    # --chart-mirror FROM=TO: a chart URL (HTTP or OCI) that starts with FROM is fetched from TO instead, so a
    # repository written for the public internet runs unchanged behind a mirror; what status says is unchanged
    mirrors: tuple[tuple[str, str], ...] = ()
    policy: Policy = field(default_factory=Policy.sources)  # the addresses a repository may be at
    _indexes: dict[str, _Index] = field(default_factory=dict)
    _tags: dict[str, tuple[list[str], float]] = field(default_factory=dict)  # an OCI repository's, and when listed
    _locks: dict[str, asyncio.Lock] = field(default_factory=dict)
    # archives written by this process: path -> ((inode, size, mtime), sha256); others are fetched again
    _written: dict[Path, tuple[tuple[int, int, int], str]] = field(default_factory=dict)
    hits: int = 0
    misses: int = 0
    index_fetches: int = 0

    def session(self, creds: Credentials, insecure: bool = False, *, basic: bool = True) -> aiohttp.ClientSession:
        """``basic``: send the credentials as basic auth on every request (HTTP repositories; OCI
        registries get them only at their token endpoint)."""
        ctx = False if insecure else _tls(creds.ca_pem)
        # A default header rather than aiohttp's (deprecated) BasicAuth: aiohttp drops it, as it drops auth,
        # on a redirect to another origin.
        headers = creds.basic_auth() if basic else {}
        return addresses.session(self.policy, timeout=_TIMEOUT, headers=headers, ssl=ctx)

    def mirrored(self, url: str) -> str:
        """``url`` fetched from its mirror (--chart-mirror)."""
        return mirrored(url, self.mirrors)

    async def resolve(self, url: str, name: str, version: str, creds: Credentials, insecure: bool = False, *,
                      max_age: float | None = None, asked_at: float = 0.0, shared: bool = False) -> ResolvedChart:
        """The exact chart version a constraint names, from an index no older than ``max_age`` seconds
        (and the TTL) and fetched no earlier than ``asked_at`` (a wall-clock time); from ``url``'s mirror, when
        it has one (the chart keeps ``url`` as its repository: switching to a mirror is no new configuration).
        ``shared``: the repository is a HelmRepository, whose own reconcile refreshes the index (or an OCI
        repository's tags) every ``max_age``: no TTL, and a version the index lacks is not asked for again."""
        if not self.mirrors:
            return await self._resolve(url, name, version, creds, insecure, max_age=max_age, asked_at=asked_at,
                                       shared=shared)
        chart = await self._resolve(self.mirrored(url), name, version, creds, insecure, max_age=max_age,
                                    asked_at=asked_at, shared=shared)
        return replace(chart, repository=safe_url(url), urls=tuple(self.mirrored(u) for u in chart.urls))

    async def index_revision(self, url: str, creds: Credentials, *, max_age: float,
                             asked_at: float = 0.0) -> tuple[str, int]:
        """A HelmRepository's revision (``sha256:<digest>`` of its index) and how many charts the index lists,
        from an index no older than ``max_age``: one fetch per interval however many releases read it."""
        index, _ = await self._index(self.mirrored(url), creds, max_age, asked_at)
        return f"sha256:{index.digest}", len(index.charts)

    async def _resolve(self, url: str, name: str, version: str, creds: Credentials, insecure: bool = False, *,
                       max_age: float | None = None, asked_at: float = 0.0, shared: bool = False) -> ResolvedChart:
        if url.startswith("oci://"):
            return await self._resolve_oci(url, name, version, creds, insecure,
                                           max_age=max_age if shared else None)
        if max_age is None or not shared:
            max_age = self.index_ttl if max_age is None else min(max_age, self.index_ttl)
        index, asked = await self._index(url, creds, max_age, asked_at)
        chosen = self._choose(index, url, name, version)
        if chosen is None and not asked and not shared:  # perhaps published since the cached copy: ask once
            index, _ = await self._index(url, creds, 0.0, time.time())
            chosen = self._choose(index, url, name, version)
        entries = index.charts.get(name) or []
        if not entries:
            has = f"; it has {some(sorted(index.charts))}" if index.charts else "; it has no charts"
            raise SourceError("ChartNotFound", f"chart {name!r} not found in repository {safe_url(url)}{has}",
                              transient=False)
        if chosen is None:
            available = some(sorted({e.version for e in entries}, reverse=True))
            raise SourceError("VersionNotFound", f"no version of chart {name!r} matches {version or 'any'!r} in "
                                                 f"{safe_url(url)} (available: {available})", transient=False)
        entry = next(e for e in entries if e.version == chosen)
        return ResolvedChart(safe_url(url), name, chosen, tuple(urljoin(url + "/", u) for u in entry.urls),
                             entry.digest)

    @staticmethod
    def _choose(index: _Index, url: str, name: str, version: str) -> str | None:
        entries = index.charts.get(name)
        if not entries:
            return None
        if (name, version) not in index.chosen:
            try:
                index.chosen[(name, version)] = highest([e.version for e in entries], version)
            except ValueError as exc:
                raise SourceError("InvalidSpec", f"spec.chart.repository.version: {exc}", transient=False) from None
        return index.chosen[(name, version)]

    async def _index(self, url: str, creds: Credentials, max_age: float, asked_at: float) -> tuple[_Index, bool]:
        """The index, and whether the server was asked for it just now."""
        key = credential_key(url, creds)
        async with self._locks.setdefault(key, asyncio.Lock()):  # one request for every waiting release
            cached = self._indexes.get(key)
            if cached and cached.fetched >= asked_at and time.time() - cached.fetched < max_age:
                return cached, False
            index = await self._fetch_index(url, creds, cached)
            self._indexes[key] = index
            return index, True

    async def _fetch_index(self, url: str, creds: Credentials, cached: _Index | None) -> _Index:
        what = f"repository index {safe_url(url)}/index.yaml"
        self.index_fetches += 1
        with tempfile.TemporaryFile(dir=self._spool_dir()) as spool:
            try:
                async with self.session(creds) as http, \
                        http.get(url + "/index.yaml", headers=cached.validators if cached else {}) as r:
                    if r.status == 304 and cached is not None:
                        return _Index(cached.charts, cached.validators, time.time(), cached.digest, cached.chosen)
                    self.raise_for(r.status, what)
                    digest = hashlib.sha256()
                    await read_capped(r, self.index_max_size, what, "IndexTooLarge", spool, digest)
                    validators = _validators(r.headers)
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                raise unreachable(f"repository {safe_url(url)}", exc) from None
            spool.seek(0)
            try:
                charts = await asyncio.to_thread(index.parse, spool)
            except IndexInvalid as exc:
                raise SourceError("RepositoryIndexInvalid", f"{safe_url(url)}/index.yaml is not a Helm repository "
                                                            f"index: {exc}", transient=False) from None
        return _Index(charts, validators, time.time(), digest.hexdigest())

    def _spool_dir(self) -> Path:
        path = self.cache_dir / "spool"
        path.mkdir(parents=True, exist_ok=True)
        return path

    @staticmethod
    def raise_for(status: int, what: str) -> None:
        if status in (401, 403):
            raise SourceError("RepositoryAuthFailed", f"{what}: access denied (HTTP {status}); check the "
                                                      "credentials in spec.chart.repository.secretRef",
                              transient=False)
        if status == 404:
            raise SourceError("RepositoryNotFound", f"{what}: not found (HTTP 404)", transient=False)
        if status >= 400:
            raise SourceError("RepositoryUnreachable", f"{what}: HTTP {status}", transient=status >= 500)

    def cached_path(self, chart: ResolvedChart, creds: Credentials) -> Path:
        """Where the archive of an exact version is kept for these credentials: names hashed (an index's
        names and versions are not for choosing paths)."""
        folder = credential_key(chart.repository, creds)[:32]
        file = hashlib.sha256(f"{chart.name}\0{chart.version}\0{chart.manifest}".encode()).hexdigest()[:32]
        return self.cache_dir / "charts" / folder / f"{file}.tgz"

    def _verified(self, path: Path) -> bool:
        """Whether ``path`` is an archive this process wrote and checked, unchanged since: its digest is
        computed again whenever the file's identity (inode, size, mtime) is not the one recorded."""
        known = self._written.get(path)
        if known is None:
            return False
        try:
            stat = path.stat()
        except FileNotFoundError:
            return False
        identity = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
        if identity == known[0]:
            return True
        if hashlib.sha256(path.read_bytes()).hexdigest() != known[1]:
            return False
        self._written[path] = (identity, known[1])
        return True

    async def fetch(self, chart: ResolvedChart, url: str, creds: Credentials, insecure: bool = False, *,
                    pass_credentials: bool = False) -> Path:
        """The chart archive in the cache, downloaded on first use of this exact version with these
        credentials; written once, and served only while its digest is the one checked when written. The
        credentials go to the archive's URL when it is on the repository's own host, or ``pass_credentials``
        (a HelmRepository's spec.passCredentials), as Flux sends them."""
        url = self.mirrored(url)

        async def download() -> bytes:
            if url.startswith("oci://"):
                return await self._pull_oci(url, chart, creds, insecure)
            return await self._download(chart, creds, pass_credentials or _same_origin(chart.urls[0] if chart.urls
                                                                                        else url, url))

        return await self.cached(self.cached_path(chart, creds), download, f"chart {chart.name} {chart.version}")

    async def cached(self, path: Path, download: Callable[[], Awaitable[bytes]], what: str,
                     check: Callable[[bytes, str], object] = _check_archive) -> Path:
        """``path`` in the cache: the archive ``download`` gives, checked (a chart archive, unless ``check`` says
        what else) and written once; served only while its digest is the one checked when written."""
        if self._verified(path):
            self.hits += 1
            return path
        async with self._locks.setdefault(str(path), asyncio.Lock()):
            if self._verified(path):
                self.hits += 1
                return path
            self.misses += 1
            data = await download()
            await asyncio.to_thread(check, data, what)
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_suffix(f".{os.getpid()}.part")
            partial.write_bytes(data)
            partial.chmod(0o444)
            partial.replace(path)
            stat = path.stat()
            self._written[path] = ((stat.st_ino, stat.st_size, stat.st_mtime_ns), hashlib.sha256(data).hexdigest())
        return path

    async def _download(self, chart: ResolvedChart, creds: Credentials, basic: bool) -> bytes:
        if not chart.urls:
            raise SourceError("ChartNotFound", f"the index of {chart.repository} lists no URL for "
                                               f"{chart.name} {chart.version}", transient=False)
        try:
            async with self.session(creds, basic=basic) as http, http.get(chart.urls[0]) as r:
                what = f"chart {chart.name} {chart.version}"
                self.raise_for(r.status, what)
                data = await read_capped(r, self.chart_max_size, what, "ChartTooLarge")
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise unreachable(f"chart {chart.name} {chart.version} at {safe_url(chart.urls[0])}", exc) from None
        if chart.digest and hashlib.sha256(data).hexdigest() != chart.digest:
            raise SourceError("ChartDigestMismatch", f"chart {chart.name} {chart.version} does not match the "
                                                     "digest in the repository index", transient=False)
        return data

    async def artifact(self, url: str, digest: str, what: str) -> bytes:
        """An artifact another controller serves (an ExternalArtifact's ``status.artifact.url``): fetched through
        the address policy, bounded as a chart, checked against its digest."""
        if not url.startswith(("http://", "https://")):
            raise SourceError("SourceNotReady", f"{what} has no artifact URL to fetch", transient=True)
        try:
            async with self.session(Credentials(), basic=False) as http, http.get(url) as r:
                self.raise_for(r.status, what)
                data = await read_capped(r, self.chart_max_size, what, "ArtifactTooLarge")
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise unreachable(f"{what} at {safe_url(url)}", exc) from None
        if f"sha256:{hashlib.sha256(data).hexdigest()}" != digest:
            raise SourceError("ArtifactDigestMismatch", f"{what} at {safe_url(url)} does not match its digest",
                              transient=True)
        return data

    # --- OCI -------------------------------------------------------------------------------------

    @staticmethod
    def oci_base(url: str, insecure: bool) -> tuple[str, str]:
        """(https://host or http://host, repository path) of an oci:// reference."""
        rest = url[len("oci://"):]
        host, _, path = rest.partition("/")
        return (f"{'http' if insecure else 'https'}://{host}", path)

    async def oci_get(self, http: aiohttp.ClientSession, base: str, path: str, creds: Credentials,
                       accept: str = "", limit: int = _SMALL_BODY,
                       too_large: str = "ResponseTooLarge") -> tuple[int, bytes, dict[str, str]]:
        return await self.oci_request(http, "GET", base, path, creds, {"Accept": accept} if accept else {},
                                      limit=limit, too_large=too_large)

    async def oci_request(self, http: aiohttp.ClientSession, method: str, base: str, path: str, creds: Credentials,
                          headers: dict[str, str] | None = None, data: bytes | None = None, *,
                          limit: int = _SMALL_BODY, too_large: str = "ResponseTooLarge",
                          ) -> tuple[int, bytes, dict[str, str]]:
        """A registry request (``path`` may be a full URL, as an upload's Location is), with the token its
        challenge asks for; the answer's status, body (at most ``limit`` bytes) and headers. A redirect to
        another origin (a blob store) is followed without the token: aiohttp drops it."""
        sent = dict(headers or {})
        url = path if path.startswith(("http://", "https://")) else base + path
        for _attempt in range(2):
            async with http.request(method, url, headers=sent, data=data, proxy=creds.proxy_url,
                                    proxy_auth=creds.proxy_auth()) as r:
                if r.status != 401:
                    return r.status, await read_capped(r, limit, url, too_large), dict(r.headers)
                challenge = r.headers.get("WWW-Authenticate", "")
            if challenge.lower().startswith("basic ") and creds.username and "Authorization" not in sent:
                sent.update(creds.basic_auth())  # a registry that takes basic auth itself, not a token
                continue
            token = await self._oci_token(http, challenge, creds)
            if token is None:
                return 401, b"", {}
            sent["Authorization"] = f"Bearer {token}"
        return 401, b"", {}

    @staticmethod
    async def _oci_token(http: aiohttp.ClientSession, challenge: str, creds: Credentials) -> str | None:
        if not challenge.lower().startswith("bearer "):
            return None
        fields = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
        realm = fields.pop("realm", "")
        if not realm:
            return None
        async with http.get(realm, params=fields, headers=creds.basic_auth(), proxy=creds.proxy_url,
                            proxy_auth=creds.proxy_auth()) as r:
            if r.status != 200:
                return None
            body = json.loads(await read_capped(r, _SMALL_BODY, "the registry's token", "ResponseTooLarge"))
        token = body.get("token") or body.get("access_token")
        return str(token) if token else None

    async def _resolve_oci(self, url: str, name: str, version: str, creds: Credentials,
                           insecure: bool, *, max_age: float | None = None) -> ResolvedChart:
        if _wants_exact(version):
            return ResolvedChart(url, name, version.lstrip("v") if version.startswith("v") else version)
        tags = await self.tags(url, creds, insecure, max_age=max_age)
        chosen = highest(tags, version)
        if chosen is None:
            raise SourceError("VersionNotFound", f"no tag of {url} matches {version or 'any'!r}", transient=False)
        return ResolvedChart(url, name, chosen)

    async def tags(self, url: str, creds: Credentials, insecure: bool, *, max_age: float | None = None) -> list[str]:
        """An OCI repository's tags (semver's ``+`` for the registry's ``_``), listed at most once per
        ``max_age`` seconds for these credentials (None: listed now)."""
        key = credential_key(url, creds)
        async with self._locks.setdefault(f"tags\0{key}", asyncio.Lock()):
            cached = self._tags.get(key)
            if max_age is not None and cached is not None and time.time() - cached[1] < max_age:
                return cached[0]
            base, path = self.oci_base(url, insecure)
            try:
                async with self.session(creds, insecure, basic=False) as http:
                    status, body, _ = await self.oci_get(http, base, f"/v2/{path}/tags/list", creds)
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                raise unreachable(f"registry of {url}", exc) from None
            self.raise_for(status, f"tags of {url}")
            try:
                tags = [str(t).replace("_", "+") for t in json.loads(body).get("tags") or []]
            except (ValueError, AttributeError):
                raise SourceError("RepositoryIndexInvalid", f"the registry's tags of {url} are not a tags list",
                                  transient=False) from None
            self._tags[key] = (tags, time.time())
            return tags

    async def _pull_oci(self, url: str, chart: ResolvedChart, creds: Credentials, insecure: bool) -> bytes:
        base, path = self.oci_base(url, insecure)
        tag = chart.manifest or chart.version.replace("+", "_")
        try:
            async with self.session(creds, insecure, basic=False) as http:
                status, body, _ = await self.oci_get(http, base, f"/v2/{path}/manifests/{tag}", creds,
                                                      MANIFEST_TYPES)
                if status == 404:
                    raise SourceError("VersionNotFound", f"{url}:{tag} not found in the registry", transient=False)
                self.raise_for(status, f"manifest of {url}:{tag}")
                if chart.manifest and f"sha256:{hashlib.sha256(body).hexdigest()}" != chart.manifest:
                    raise SourceError("ArtifactDigestMismatch", f"{url}@{chart.manifest}: the registry's manifest "
                                                                "does not match the digest", transient=False)
                layers = [x for x in json.loads(body).get("layers") or []
                          if x.get("mediaType") == HELM_CHART_MEDIA_TYPE]
                if not layers:
                    raise SourceError("ChartNotFound", f"{url}:{tag} is not a Helm chart (no chart layer)",
                                      transient=False)
                digest = layers[0]["digest"]
                status, data, _ = await self.oci_get(http, base, f"/v2/{path}/blobs/{digest}", creds,
                                                      limit=self.chart_max_size, too_large="ChartTooLarge")
                self.raise_for(status, f"chart layer of {url}:{tag}")
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise unreachable(f"registry of {url}", exc) from None
        if digest.startswith("sha256:") and hashlib.sha256(data).hexdigest() != digest[7:]:
            raise SourceError("ChartDigestMismatch", f"{url}:{tag} layer digest mismatch", transient=False)
        return data


async def read_capped(r: aiohttp.ClientResponse, limit: int, what: str, reason: str,
                      sink: IO[bytes] | None = None, digest: Any = None) -> bytes:
    """The body, read in chunks up to ``limit`` bytes (into ``sink`` when given): a server that sends more,
    or never stops, costs a bounded amount of memory and gets a specific error."""
    flag = {"IndexTooLarge": " (--helm-index-max-size)", "ChartTooLarge": " (--helm-chart-max-size)"}.get(reason, "")
    too_large = SourceError(reason, f"{what} is larger than {bounded.describe_size(limit)}, the limit{flag}",
                            transient=False)
    if r.content_length is not None and r.content_length > limit:
        raise too_large
    body, total = bytearray(), 0
    async for chunk in r.content.iter_chunked(1 << 16):
        total += len(chunk)
        if total > limit:
            raise too_large
        if digest is not None:
            digest.update(chunk)
        if sink is None:
            body += chunk
        else:
            sink.write(chunk)
        await asyncio.sleep(0)  # a fast server fills the buffer faster than this loop empties it: let others run
    return bytes(body)
