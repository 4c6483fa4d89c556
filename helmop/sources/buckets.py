"""A Bucket's objects, listed and fetched over S3's API, as Flux's source-controller reads a bucket.

S3's requests are signed here (AWS Signature Version 4, as AWS documents it: a canonical request, a string to
sign, an HMAC key chain) on the operator's own HTTP client rather than through an S3 library: every request then
goes through the address policy (the endpoint's resolved addresses judged, no redirect elsewhere), the
Bucket's proxy and CA, and the bounds below, which an SDK's own connection pool would not give; and the image
stays free of an SDK tens of megabytes large.

The revision is Flux's: the SHA-256 of one line ``<key> <etag>`` per object, keys sorted, etags without quotes,
so an unchanged listing is an unchanged revision and nothing is downloaded. Objects are filtered by the bucket's
root ``.sourceignore`` and ``spec.ignore`` (no default exclusions, as Flux's Bucket). A listing of more keys
than a tree may hold, an object larger than a file may be, or a key that is not a path inside the artifact
(``..``, absolute, control characters) is refused by name; objects are fetched a few at a time, each checked
against the listing's etag. A listing is bounded in pages, in bytes (pages of at most 2 MiB, 2 KiB of listing per
object the tree may hold, a key of S3's 1024 bytes at most, an etag of 256 characters) and in time (spec.timeout,
at most the operator's 10 minutes), and one that cannot be an S3 server's (a key or a continuation token again,
truncated with no token to go on, a run of empty truncated pages) is refused: a server that answers "more" forever
keeps no turn busy, nor the operator's memory full, for longer than that. Pages are parsed off the event loop."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple
from urllib.parse import quote

import aiohttp
import yarl

from helmop.api.buckets import BucketSpec

from . import tarballs
from .errors import SourceError, unreachable
from .git import Limits
from .ignore import FILE, Ignore
from .repositories import Credentials, Repositories, read_capped
from .secrets import decoded

EMPTY = hashlib.sha256(b"").hexdigest()
MAX_PAGE = 2 << 20  # one listing page's XML: S3 sends at most 1000 keys a page, ~1.4 MB if each is of 1 KiB
MAX_PAGES = 1000  # pages of one listing: the entry limit's keys in pages of 20 or more
MAX_TOKEN = 1024  # a continuation token's length (S3's are a few hundred characters)
MAX_KEY = 1024  # a key's UTF-8 bytes (S3's own limit)
MAX_ETAG = 256  # an etag's characters (S3's are an MD5's hex, with a part count for a multipart object)
PER_OBJECT = 2 << 10  # bytes of listing per object the entry limit allows (a listing's pages add up to at most that)
MAX_EMPTY = 10  # truncated pages in a row listing nothing (S3 fills a page before it says "more")
MAX_TIMEOUT = 600.0  # the operator's bound on spec.timeout: a tenant's 10000h would hold a turn for hours
PARALLEL = 8  # objects fetched at once
_NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"


class Object(NamedTuple):
    etag: str  # without quotes
    size: int  # as the listing says


@dataclass(frozen=True)
class Keys:
    """The access keys of spec.secretRef (``accesskey``, ``secretkey``); none: anonymous requests."""

    access: str = ""
    secret: str = ""

    @classmethod
    def of(cls, data: dict[str, str], where: str) -> Keys:
        keys = cls(decoded(data, "accesskey"), decoded(data, "secretkey"))
        if not keys.access or not keys.secret:
            raise SourceError("AuthenticationFailed", f"{where}: required fields 'accesskey' and 'secretkey'",
                              transient=False)
        return keys


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def _query(query: dict[str, str]) -> str:
    """A query string as S3 signs it: sorted, each name and value percent-encoded (RFC 3986's unreserved kept)."""
    return "&".join(f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}" for k, v in sorted(query.items()))


def signed_headers(keys: Keys, method: str, host: str, path: str, query: dict[str, str], region: str,
                   when: datetime, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The headers of an S3 request signed with ``keys`` (Signature Version 4; the payload is empty)."""
    stamp, day = when.strftime("%Y%m%dT%H%M%SZ"), when.strftime("%Y%m%d")
    headers = {"host": host, "x-amz-content-sha256": EMPTY, "x-amz-date": stamp,
               **{k.lower(): v for k, v in (extra or {}).items()}}
    names = sorted(headers)
    canonical = "\n".join([method, quote(path, safe="/-_.~"), _query(query),
                           "".join(f"{n}:{headers[n].strip()}\n" for n in names), ";".join(names), EMPTY])
    scope = f"{day}/{region}/s3/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", stamp, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    key = _hmac(_hmac(_hmac(_hmac(f"AWS4{keys.secret}".encode(), day), region), "s3"), "aws4_request")
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    headers["authorization"] = (f"AWS4-HMAC-SHA256 Credential={keys.access}/{scope}, SignedHeaders={';'.join(names)}, "
                                f"Signature={signature}")
    return headers


def revision_of(index: dict[str, Object]) -> str:
    """Flux's revision of a listing: ``sha256:<hex>`` of ``<key> <etag>\\n`` per object, keys sorted."""
    text = "".join(f"{key} {index[key].etag}\n" for key in sorted(index))
    return f"sha256:{hashlib.sha256(text.encode()).hexdigest()}"


def _check_key(key: str, what: str) -> None:
    parts = key.split("/")
    if key.startswith("/") or "\\" in key or any(p in ("", ".", "..") for p in parts) or any(
            ord(c) < 32 or ord(c) == 127 for c in key):
        raise SourceError("InvalidPath", f"InvalidPath: {what} holds an object {key[:200]!r} that is not a path "
                                         "inside the artifact; refused", transient=False)


@dataclass
class Bucket:
    repos: Repositories
    spec: BucketSpec
    creds: Credentials  # the CA, the proxy
    keys: Keys
    limits: Limits = field(default_factory=Limits)

    @property
    def what(self) -> str:
        return f"bucket '{self.spec.bucket_name}' at {self.spec.endpoint}"

    def _address(self, key: str = "") -> tuple[str, str]:
        """(host, path) of the bucket or one of its objects: virtual-hosted for AWS, path-style elsewhere."""
        endpoint, bucket = self.spec.endpoint, self.spec.bucket_name
        if endpoint.endswith("amazonaws.com"):
            return f"{bucket}.{endpoint}", f"/{key}"
        return endpoint, f"/{bucket}/{key}" if key else f"/{bucket}"

    async def _get(self, http: aiohttp.ClientSession, key: str, query: dict[str, str], limit: int,
                   headers: dict[str, str] | None = None) -> tuple[int, bytes, dict[str, str]]:
        host, path = self._address(key)
        sent = dict(headers or {})
        if self.keys.access:
            sent = signed_headers(self.keys, "GET", host, path, query, self.spec.region or "us-east-1",
                                  datetime.now(UTC), sent)
            sent.pop("host")
        scheme = "http" if self.spec.insecure else "https"
        encoded = _query(query)
        url = yarl.URL(f"{scheme}://{host}{quote(path, safe='/-_.~')}" + (f"?{encoded}" if encoded else ""),
                       encoded=True)
        async with http.get(url, headers=sent, allow_redirects=False, proxy=self.creds.proxy_url,
                            proxy_auth=self.creds.proxy_auth()) as response:
            if response.status >= 300:
                return response.status, b"", {}
            return response.status, await read_capped(response, limit, f"{key or 'the listing'} of {self.what}",
                                                       "ArtifactTooLarge"), dict(response.headers)

    @property
    def timeout(self) -> float:
        """The listing's time, and the fetch's: spec.timeout, at most the operator's MAX_TIMEOUT."""
        return min(self.spec.timeout, MAX_TIMEOUT)

    def _took_longer(self) -> str:
        if self.spec.timeout > MAX_TIMEOUT:
            return f"took longer than {MAX_TIMEOUT:.0f}s, the operator's maximum of spec.timeout"
        return f"took longer than spec.timeout ({self.spec.timeout:.0f}s)"

    async def index(self) -> dict[str, Object]:
        """Every object under spec.prefix that the ignore rules keep, by key; listed within the timeout."""
        try:
            async with asyncio.timeout(self.timeout), self.repos.session(self.creds, basic=False) as http:
                listed = await self._list(http)
                rules = await self._ignore(http, listed)
        except TimeoutError:  # a request's own timeout is said by _request: this is the listing's
            raise SourceError("ListingTooLong", f"the listing of {self.what} {self._took_longer()}",
                              transient=True) from None
        return {key: found for key, found in listed.items()
                if not key.endswith("/") and key != FILE and not rules.excludes(key)}

    async def _list(self, http: aiohttp.ClientSession) -> dict[str, Object]:
        listed: dict[str, Object] = {}
        token = ""
        tokens: set[str] = set()  # every token answered so far (S3 never gives one twice in a listing)
        budget, empty = self.limits.max_entries * PER_OBJECT, 0
        for number in range(1, MAX_PAGES + 1):
            query = {"list-type": "2", **({"prefix": self.spec.prefix} if self.spec.prefix else {}),
                     **({"continuation-token": token} if token else {})}
            _, body, _ = await self._request(http, "", query, MAX_PAGE)
            budget -= len(body)
            if budget < 0:
                raise SourceError("ListingTooLong", f"the listing of {self.what} is larger than "
                                                    f"{self.limits.max_entries * PER_OBJECT >> 10} KiB (2 KiB an "
                                                    f"object of the limit's {self.limits.max_entries}); refused",
                                  transient=False)
            page, truncated, token = await asyncio.to_thread(_page, body, self.what, number)
            empty = 0 if page or not truncated else empty + 1
            if empty >= MAX_EMPTY:
                raise _invalid(self.what, f"pages {number - MAX_EMPTY + 1} to {number} list nothing but are truncated")
            again = next((key for key in page if key in listed), None)
            if again is not None:
                raise _invalid(self.what, f"page {number} lists {again[:200]!r} again")
            listed.update(page)
            if len(listed) > self.limits.max_entries:
                raise SourceError("TooManyFiles", f"{self.what} lists more than {self.limits.max_entries} objects",
                                  transient=False)
            if not truncated:
                return listed
            if not token or len(token) > MAX_TOKEN or token in tokens:
                said = "repeats a continuation token" if token in tokens else "gives no usable continuation token"
                raise _invalid(self.what, f"page {number} is truncated but {said}")
            tokens.add(token)
        raise SourceError("ListingTooLong", f"the listing of {self.what} goes on past {MAX_PAGES} pages; refused",
                          transient=False)

    async def _request(self, http: aiohttp.ClientSession, key: str, query: dict[str, str], limit: int,
                       headers: dict[str, str] | None = None) -> tuple[int, bytes, dict[str, str]]:
        try:
            status, body, answered = await self._get(http, key, query, limit, headers)
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise unreachable(self.what, exc) from None
        if status in (401, 403):
            raise SourceError("AuthenticationFailed", f"{self.what}: access denied (HTTP {status}); check the "
                                                      "access keys of spec.secretRef", transient=False)
        if status == 404 and not key:
            raise SourceError("BucketOperationFailed", f"{self.what} not found", transient=False)
        if status >= 300:
            raise SourceError("BucketOperationFailed", f"{key or 'the listing'} of {self.what}: HTTP {status}",
                              transient=status >= 500 or status == 412)
        return status, body, answered

    async def _ignore(self, http: aiohttp.ClientSession, listed: dict[str, Object]) -> Ignore:
        """The bucket's root .sourceignore and spec.ignore (no default exclusions: Flux's Bucket has none)."""
        text = ""
        if FILE in listed:
            text = (await self._request(http, FILE, {}, 1 << 20))[1].decode(errors="replace")
        try:
            return Ignore.of({"": text} if text else {}, self.spec.ignore, defaults=False)
        except ValueError as exc:
            raise SourceError("SourceIgnoreError", f"{self.what}: {exc}", transient=False) from None

    async def fetch(self, index: dict[str, Object]) -> tarballs.Tree:
        """The objects of ``index``, each checked against its etag; bounded in size and count (as listed, before
        anything is fetched, and as received) and in time (spec.timeout, at most MAX_TIMEOUT)."""
        for key, found in index.items():
            _check_key(key, self.what)
            if found.size > self.limits.max_file:
                raise SourceError("FileTooLarge", f"{key[:200]} of {self.what} is larger than "
                                                  f"{self.limits.max_file >> 20} MiB", transient=False)
        if sum(found.size for found in index.values()) > self.limits.max_total:
            raise SourceError("TreeTooLarge", f"the objects of {self.what} add up to more than "
                                              f"{self.limits.max_total >> 20} MiB", transient=False)
        total = 0
        files: dict[str, bytes] = {}
        gate = asyncio.Semaphore(PARALLEL)

        async def one(http: aiohttp.ClientSession, key: str) -> None:
            nonlocal total
            async with gate:
                _, data, headers = await self._request(http, key, {}, self.limits.max_file,
                                                       {"If-Match": f'"{index[key].etag}"'})
            etag = headers.get("ETag", "").strip('"')
            if etag and etag != index[key].etag:
                raise SourceError("BucketOperationFailed", f"{key} of {self.what} changed while it was fetched",
                                  transient=True)
            total += len(data)
            if total > self.limits.max_total:
                raise SourceError("TreeTooLarge", f"the objects of {self.what} add up to more than "
                                                  f"{self.limits.max_total >> 20} MiB", transient=False)
            files[key] = data

        try:
            async with asyncio.timeout(self.timeout), self.repos.session(self.creds, basic=False) as http:
                await asyncio.gather(*(one(http, key) for key in sorted(index)))
        except TimeoutError:
            raise SourceError("BucketOperationFailed", f"fetching the objects of {self.what} {self._took_longer()}",
                              transient=True) from None
        return tarballs.Tree(files)


def _invalid(what: str, why: str) -> SourceError:
    return SourceError("InvalidListing", f"the listing of {what} cannot be an S3 server's: {why}; refused",
                       transient=False)


def _page(body: bytes, what: str, number: int) -> tuple[dict[str, Object], bool, str]:
    """(key -> object, whether the listing goes on, the continuation token) of a ListObjectsV2 answer, page
    ``number``; run in a thread (a page is up to MAX_PAGE of XML). A key, etag or size no S3 server gives is
    refused here, before it is kept: a listing of a few keys a page, each with an etag of megabytes, would
    otherwise grow by a page's size a page."""
    try:
        root = ElementTree.fromstring(body)
    except ElementTree.ParseError:
        raise SourceError("BucketOperationFailed", f"the listing of {what} is not S3's XML", transient=True) from None
    found: dict[str, Object] = {}
    for item in root.iter(f"{_NS}Contents"):
        key, etag, size = (item.findtext(f"{_NS}{n}") or "" for n in ("Key", "ETag", "Size"))
        if len(key.encode(errors="replace")) > MAX_KEY:
            raise _invalid(what, f"page {number} lists a key {key[:100]!r}... longer than {MAX_KEY} bytes")
        if len(etag) > MAX_ETAG:
            raise _invalid(what, f"page {number} lists {key[:200]!r} with an etag of more than {MAX_ETAG} characters")
        if len(size) > 20:  # more digits than any object's bytes (and int() of thousands of digits raises)
            raise _invalid(what, f"page {number} lists {key[:200]!r} with a size of more than 20 digits")
        found[key] = Object(etag.strip('"'), int(size) if size.isdigit() else 0)
    truncated = (root.findtext(f"{_NS}IsTruncated") or "").lower() == "true"
    return found, truncated, (root.findtext(f"{_NS}NextContinuationToken") or "") if truncated else ""


def _cache_path(repos: Repositories, spec: BucketSpec, creds: Credentials, keys: Keys, revision: str) -> Path:
    """Where an archive of the bucket at ``revision`` is kept: by what was read (endpoint, bucket, prefix, ignore
    rules) and with which credentials (never served to a reader holding others)."""
    secret = hashlib.sha256(f"{keys.access}\0{keys.secret}".encode()).hexdigest()
    read = "\0".join((spec.endpoint, spec.bucket_name, spec.prefix, str(spec.ignore), creds.key(), secret))
    return repos.cache_dir / "buckets" / hashlib.sha256(read.encode()).hexdigest()[:32] / f"{revision[7:71]}.tgz"


Listing = tuple[Bucket, dict[str, Object], str]


async def listed(repos: Repositories, spec: BucketSpec, creds: Credentials, keys: Keys) -> Listing:
    """The bucket, what it holds now, and that listing's revision."""
    bucket = Bucket(repos, spec, creds, keys)
    index = await bucket.index()
    return bucket, index, revision_of(index)


async def archive(repos: Repositories, spec: BucketSpec, creds: Credentials, keys: Keys, revision: str,
                  found: Listing | None = None) -> Path:
    """The archive of the bucket's objects at ``revision``: from the cache, else fetched (the bucket listed again
    unless ``found`` is that listing); SourceNotReady when the bucket holds another revision by then (its Bucket,
    woken by the change, publishes it)."""
    async def download() -> bytes:
        bucket, index, now = found or await listed(repos, spec, creds, keys)
        if now != revision:
            raise SourceError("SourceNotReady", f"{bucket.what} changed since {revision} was published; waiting for "
                                                "its Bucket to publish again", transient=True)
        tree = await bucket.fetch(index)
        return await asyncio.to_thread(tarballs.pack, tree.files)

    return await repos.cached(_cache_path(repos, spec, creds, keys, revision), download,
                              f"the objects of bucket '{spec.bucket_name}'", check=tarballs.unpack)
