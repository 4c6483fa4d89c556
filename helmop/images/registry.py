"""An image repository's tags, listed from its registry (the distribution API's ``tags/list``, page after page by
its ``Link`` header), and a tag's digest, with the registry client every OCI source uses (token and basic auth,
the address policy, a CA, a proxy).

Bounded whatever the registry answers: each page by size, the pages, the tags and their bytes in all, the time
(spec.timeout); a tag that is not a tag by OCI's grammar (``../../x``) is never kept. Listed tags are kept per
image *and* credentials: what one tenant's Secret listed never answers another's, or one without."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin, urlsplit

import aiohttp

from helmop.api.images import TAG, Image
from helmop.sources.errors import SourceError, unreachable
from helmop.sources.repositories import Credentials, Repositories

PAGE = 1000  # tags asked per page (registries cap n themselves)
MAX_TAGS = 50_000
MAX_TAG_BYTES = 4 << 20  # of every tag together
MAX_PAGES = 200
MAX_PAGE_BYTES = 4 << 20
MAX_MANIFEST = 4 << 20
KEPT = 512  # tag lists kept in memory (images x credentials), the least recently used dropped
DIGEST_TYPES = ", ".join((
    "application/vnd.oci.image.index.v1+json", "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.manifest.v1+json", "application/vnd.docker.distribution.manifest.v2+json"))


@dataclass(frozen=True)
class Scan:
    tags: tuple[str, ...]  # as the registry listed them, valid tags only, in its order
    invalid: int  # tags left out: not a tag by OCI's grammar
    at: float  # when listed (epoch seconds)


def revision_of(tags: list[str] | tuple[str, ...]) -> str:
    return "sha256:" + hashlib.sha256("\n".join(sorted(tags)).encode()).hexdigest()


def kept(scan: Scan, exclusions: tuple[Any, ...]) -> tuple[str, ...]:
    """The tags of a scan an exclusion list (compiled expressions) keeps."""
    return tuple(t for t in scan.tags if not any(p.search(t) for p in exclusions))


@dataclass
class Scanner:
    """What the ImageRepositories and ImagePolicies of one operator process listed (through the chart sources'
    registry client, ``repos``)."""

    _kept: OrderedDict[str, Scan] = field(default_factory=OrderedDict)
    _locks: dict[str, asyncio.Lock] = field(default_factory=dict)

    @staticmethod
    def _key(image: Image, creds: Credentials, insecure: bool) -> str:
        return hashlib.sha256(f"{image.canonical}\0{insecure}\0{creds.key()}".encode()).hexdigest()

    async def scan(self, repos: Repositories, image: Image, creds: Credentials, insecure: bool, timeout: float, *,
                   wanted: Callable[[Scan], bool] | None = None) -> Scan:
        """The image's tags: listed now, or as kept when ``wanted`` says they will do (the list an ImageRepository
        reported, read back by its policies: on another replica, or after a restart, it is listed again)."""
        key = self._key(image, creds, insecure)
        async with self._locks.setdefault(key, asyncio.Lock()):
            kept = self._kept.get(key)
            if wanted is not None and kept is not None and wanted(kept):
                self._kept.move_to_end(key)
                return kept
            try:
                async with asyncio.timeout(timeout):
                    found = await _list(repos, image, creds, insecure)
            except TimeoutError:
                raise SourceError("ReadOperationFailed", f"the registry did not list the tags of {image.canonical} "
                                                         f"within {timeout:.0f}s (spec.timeout)",
                                  transient=True) from None
            self._kept[key] = found
            self._kept.move_to_end(key)
            while len(self._kept) > KEPT:
                dropped, _ = self._kept.popitem(last=False)
                if not self._locks[dropped].locked():  # (a rotated Secret's key is not kept forever)
                    del self._locks[dropped]
            return found


async def _list(repos: Repositories, image: Image, creds: Credentials, insecure: bool) -> Scan:
    base, _ = repos.oci_base(f"oci://{image.canonical}", insecure)
    url: str | None = f"/v2/{image.path}/tags/list?n={PAGE}"
    tags: list[str] = []
    seen: set[str] = set()
    invalid, size, pages = 0, 0, 0
    try:
        async with repos.session(creds, insecure, basic=False) as http:
            while url is not None:
                pages += 1
                if pages > MAX_PAGES or url in seen:
                    raise _too_many(image, f"more than {MAX_PAGES} pages of tags")
                seen.add(url)
                status, body, headers = await repos.oci_get(http, base, url, creds, limit=MAX_PAGE_BYTES,
                                                        too_large="ReadOperationFailed")
                _raise_for(status, image)
                for tag in _page(body, image):
                    if not TAG.match(tag):
                        invalid += 1
                        continue
                    size += len(tag)
                    tags.append(tag)
                    if len(tags) > MAX_TAGS or size > MAX_TAG_BYTES:
                        raise _too_many(image, f"more than {MAX_TAGS} tags or {MAX_TAG_BYTES >> 20} MiB of them")
                url = _next(base, headers.get("Link", ""), image)
    except (aiohttp.ClientError, OSError) as exc:
        raise unreachable(f"registry of {image.canonical}", exc) from None
    return Scan(tuple(tags), invalid, time.time())

async def digest(repos: Repositories, image: Image, tag: str, creds: Credentials, insecure: bool,
                 timeout: float) -> str:
    """The digest of the manifest (or index) ``tag`` names: the registry's Docker-Content-Digest, else the
    sha256 of the manifest it sends (bounded)."""
    if not TAG.match(tag):
        raise SourceError("InvalidTag", f"{tag[:130]!r} is not an image tag", transient=False)
    base, _ = repos.oci_base(f"oci://{image.canonical}", insecure)
    try:
        async with asyncio.timeout(timeout), repos.session(creds, insecure, basic=False) as http:
            status, body, headers = await repos.oci_get(http, base, f"/v2/{image.path}/manifests/{tag}",
                                                             creds, DIGEST_TYPES, limit=MAX_MANIFEST,
                                                             too_large="ReadOperationFailed")
    except TimeoutError:
        raise SourceError("ReadOperationFailed", f"the registry did not answer for {image.canonical}:{tag} "
                                                 f"within {timeout:.0f}s", transient=True) from None
    except (aiohttp.ClientError, OSError) as exc:
        raise unreachable(f"registry of {image.canonical}", exc) from None
    _raise_for(status, image)
    given = headers.get("Docker-Content-Digest", "")
    computed = "sha256:" + hashlib.sha256(body).hexdigest()
    if given and given != computed and given.startswith("sha256:"):
        raise SourceError("ReadOperationFailed", f"the manifest of {image.canonical}:{tag} does not match the "
                                                 "digest the registry gives for it", transient=True)
    return computed


def _page(body: bytes, image: Image) -> list[str]:
    try:
        found = json.loads(body).get("tags") or []
    except (ValueError, AttributeError):
        found = None
    if not isinstance(found, list) or not all(isinstance(t, str) for t in found):
        raise SourceError("ReadOperationFailed", f"the registry's answer for the tags of {image.canonical} is not a "
                                                 "tags list", transient=True)
    return found


def _next(base: str, link: str, image: Image) -> str | None:
    """The next page's address from a ``Link: <...>; rel="next"`` header: on the registry itself only (the
    token goes where it points)."""
    if 'rel="next"' not in link or "<" not in link:
        return None
    target = urljoin(base + "/", link[link.index("<") + 1:link.index(">")] if ">" in link else "")
    parts, home = urlsplit(target), urlsplit(base)
    if (parts.scheme, parts.netloc) != (home.scheme, home.netloc) or not parts.path.startswith("/v2/"):
        raise SourceError("ReadOperationFailed", f"the registry of {image.canonical} sent the next page of tags to "
                                                 "another address", transient=False)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def _raise_for(status: int, image: Image) -> None:
    if status in (401, 403):
        raise SourceError("AuthenticationFailed", f"the registry refused access to {image.canonical} (HTTP {status}): "
                                                  "check the credentials of spec.secretRef", transient=False)
    if status == 404:
        raise SourceError("ReadOperationFailed", f"{image.canonical}: not found in its registry (HTTP 404)",
                          transient=True)
    if status >= 400:
        raise SourceError("ReadOperationFailed", f"{image.canonical}: HTTP {status} from its registry",
                          transient=True)


def _too_many(image: Image, what: str) -> SourceError:
    return SourceError("TooManyTags", f"{image.canonical} has {what}: the limit of a scan; exclude tags at the "
                                      "registry or scan a repository with fewer", transient=False)
