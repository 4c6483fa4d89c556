"""A Bucket's objects over S3's API (helmop.sources.buckets) against a real S3-compatible server on loopback
(moto's): Flux's revision of keys and etags, the root .sourceignore and spec.ignore, a prefix, an unchanged
listing that fetches nothing, the cache keyed by what was read and with which keys; a key that leaves the
artifact, a listing past the limits and an object larger than a file may be, refused by reason; listings no S3
server gives (a key or a token again, "truncated" with no token, a run of empty pages, a key, etag or size
longer than S3's, pages or bytes or time without end, a tenant's timeout past the operator's) refused by reason
against hostile servers, each page parsed off the event loop. The request signature is checked against AWS's
own published example."""

from __future__ import annotations

import threading
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest

from helmop.api.buckets import BucketSpec, parse_bucket
from helmop.api.errors import SpecError
from helmop.sources import buckets, tarballs
from helmop.sources.buckets import Bucket, Keys, signed_headers
from helmop.sources.errors import SourceError
from helmop.sources.git import Limits
from helmop.sources.repositories import Credentials, Repositories
from tests.s3 import ACCESS, CONFIG, ETAG, S3, SECRET, Listings, listings, s3  # noqa: F401 - the fixtures

KEYS = Keys(ACCESS, SECRET)


def test_the_signature_is_aws_documented_example() -> None:
    """AWS's example of a signed GET (Signature Version 4 for S3, "GET Object" with a Range header)."""
    headers = signed_headers(Keys("AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"), "GET",
                             "examplebucket.s3.amazonaws.com", "/test.txt", {}, "us-east-1",
                             datetime(2013, 5, 24, tzinfo=UTC), {"Range": "bytes=0-9"})
    assert headers["authorization"].endswith(
        "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
        "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")


def spec(server: S3, name: str, **fields: object) -> BucketSpec:
    return parse_bucket({"bucketName": name, "endpoint": server.endpoint, "insecure": True, **fields})


async def test_revision_ignore_rules_and_prefix_as_flux(s3: S3, tmp_path: Path) -> None:  # noqa: F811
    name = f"cfg-{uuid.uuid4().hex[:8]}"
    s3.bucket(name, {"apps/a.yaml": "a", "apps/b.yaml": "b", "docs/x.md": "d", "apps/logo.png": "p",
                     ".sourceignore": "docs/\n"})
    repos = Repositories(tmp_path)
    bucket, index, revision = await buckets.listed(repos, spec(s3, name), Credentials(), KEYS)
    assert sorted(index) == ["apps/a.yaml", "apps/b.yaml", "apps/logo.png"]  # no default exclusions for a Bucket
    assert revision == buckets.revision_of(index) and revision.startswith("sha256:")
    tree = await bucket.fetch(index)
    assert tree.files["apps/a.yaml"] == b"a"
    _, same, again = await buckets.listed(repos, spec(s3, name), Credentials(), KEYS)
    assert again == revision  # unchanged objects: the same revision
    _, only, _ = await buckets.listed(repos, spec(s3, name, prefix="apps/", ignore="*.png\n"),
                                      Credentials(), KEYS)
    assert sorted(only) == ["apps/a.yaml", "apps/b.yaml"]
    s3.put(name, {"apps/b.yaml": "changed"})
    _, _, moved = await buckets.listed(repos, spec(s3, name), Credentials(), KEYS)
    assert moved != revision


async def test_the_archive_is_cached_per_revision_and_keys(s3: S3, tmp_path: Path) -> None:  # noqa: F811
    name = f"cfg-{uuid.uuid4().hex[:8]}"
    s3.bucket(name, {"a.yaml": "a"})
    repos = Repositories(tmp_path)
    found = await buckets.listed(repos, spec(s3, name), Credentials(), KEYS)
    path = await buckets.archive(repos, spec(s3, name), Credentials(), KEYS, found[2], found)
    assert tarballs.unpack(path.read_bytes(), "t").files == {"a.yaml": b"a"}
    other = await buckets.archive(repos, spec(s3, name), Credentials(), Keys(ACCESS, "another secret"),
                                  found[2])
    assert other != path  # another tenant's keys: another cache entry, fetched for it
    s3.put(name, {"a.yaml": "changed"})
    with pytest.raises(SourceError, match="changed since") as moved:  # a reader wanting the old revision waits
        await buckets.archive(Repositories(tmp_path / "b"), spec(s3, name), Credentials(), KEYS,
                              found[2])
    assert moved.value.reason == "SourceNotReady" and moved.value.transient


@pytest.mark.parametrize("key", ["a/../../etc/passwd", "/abs.yaml", "a//b.yaml", "x\\y.yaml"])
async def test_a_key_that_is_not_a_path_inside_is_refused(s3: S3, tmp_path: Path, key: str) -> None:  # noqa: F811
    name = f"cfg-{uuid.uuid4().hex[:8]}"
    s3.bucket(name, {"ok.yaml": "x", key: "evil"})
    repos = Repositories(tmp_path)
    bucket, index, _ = await buckets.listed(repos, spec(s3, name), Credentials(), KEYS)
    with pytest.raises(SourceError, match="not a path inside the artifact") as refused:
        await bucket.fetch(index)
    assert refused.value.reason == "InvalidPath"
    assert not list(tmp_path.rglob("*"))  # nothing written


async def test_listings_and_objects_past_the_limits_are_refused(s3: S3, tmp_path: Path) -> None:  # noqa: F811
    name = f"cfg-{uuid.uuid4().hex[:8]}"
    s3.bucket(name, {f"k{i:04d}.yaml": "x" for i in range(1100)} | {"big.yaml": b"y" * 3000})
    repos = Repositories(tmp_path)
    many = Bucket(repos, spec(s3, name), Credentials(), KEYS, Limits(max_entries=1050))
    with pytest.raises(SourceError, match="more than 1050 objects") as listing:  # past S3's first page of 1000
        await many.index()
    assert listing.value.reason == "TooManyFiles"
    large = Bucket(repos, spec(s3, name, prefix="big"), Credentials(), KEYS, Limits(max_file=1000))
    with pytest.raises(SourceError) as big:
        await large.fetch(await large.index())
    assert big.value.reason == "FileTooLarge"


def test_buckets_helmop_cannot_read_are_refused_by_name() -> None:
    for fields, said in (({"provider": "gcp"}, "only S3's API"), ({"provider": "aws"}, "workload identity"),
                         ({"sts": {"provider": "ldap", "endpoint": "https://sts"}}, "spec.sts"),
                         ({"endpoint": "https://s3.example.com"}, "without a scheme"),
                         ({"bucketName": "A_B"}, "not an S3 bucket name"), ({"prefix": "../up"}, "spec.prefix")):
        with pytest.raises(SpecError, match=said):
            parse_bucket({"bucketName": "cfg", "endpoint": "s3.example.com", **fields})


def hostile(server: Listings, mode: str, **fields: object) -> tuple[str, BucketSpec]:
    name = f"{mode}-{uuid.uuid4().hex[:8]}"
    return name, parse_bucket({"bucketName": name, "endpoint": server.endpoint, "insecure": True, **fields})


@pytest.mark.parametrize(("mode", "said", "requests"), [
    ("loop", "page 2 lists 'k0000.yaml' again", 2),  # the same keys and token forever
    ("rekeyed", "page 2 lists 'k0000.yaml' again", 2),  # the same keys under new tokens
    ("notoken", "page 1 is truncated but gives no usable continuation token", 1)])
async def test_a_listing_no_s3_server_gives_is_refused(listings: Listings, tmp_path: Path, mode: str,  # noqa: F811
                                                       said: str, requests: int) -> None:
    name, found = hostile(listings, mode)
    with pytest.raises(SourceError, match=said) as refused:
        await buckets.listed(Repositories(tmp_path), found, Credentials(), Keys())
    assert (refused.value.reason, refused.value.transient) == ("InvalidListing", False)
    assert listings.count(name) == requests


async def test_a_listing_that_repeats_a_token_is_refused(listings: Listings, tmp_path: Path) -> None:  # noqa: F811
    name, found = hostile(listings, "retoken")  # new keys, but the token of page 1 again from page 2 on
    with pytest.raises(SourceError, match="page 2 is truncated but repeats a continuation token") as refused:
        await buckets.listed(Repositories(tmp_path), found, Credentials(), Keys())
    assert refused.value.reason == "InvalidListing" and listings.count(name) == 2


async def test_a_listing_is_bounded_in_pages_and_time(listings: Listings, tmp_path: Path,  # noqa: F811
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(buckets, "MAX_PAGES", 30)
    name, found = hostile(listings, "endless")  # a new key and token each page, forever
    with pytest.raises(SourceError, match="goes on past 30 pages") as pages:
        await buckets.listed(Repositories(tmp_path), found, Credentials(), Keys())
    assert (pages.value.reason, pages.value.transient) == ("ListingTooLong", False)
    assert listings.count(name) == 30
    name, found = hostile(listings, "slow", timeout="1s")  # 50 pages a second at most: past 30 pages otherwise
    monkeypatch.setattr(buckets, "MAX_PAGES", 10_000)
    with pytest.raises(SourceError, match=r"took longer than spec.timeout \(1s\)") as slow:
        await buckets.listed(Repositories(tmp_path), found, Credentials(), Keys())
    assert (slow.value.reason, slow.value.transient) == ("ListingTooLong", True)
    assert 0 < listings.count(name) <= 60


@pytest.mark.parametrize(("mode", "said"), [
    ("bigetag", r"page 1 lists 'k000000.yaml' with an etag of more than 256 characters"),  # 400 KB, a new token
    ("bigkey", r"page 1 lists a key 'kéé.*longer than 1024 bytes"),  # 513 characters, 1025 bytes
    ("bigsize", r"page 1 lists 'config.yaml' with a size of more than 20 digits")])
async def test_a_key_etag_or_size_no_s3_server_gives_is_refused_as_the_page_is_read(
        listings: Listings, tmp_path: Path, mode: str, said: str) -> None:  # noqa: F811
    name, found = hostile(listings, mode)
    with pytest.raises(SourceError, match=said) as refused:
        await buckets.listed(Repositories(tmp_path), found, Credentials(), Keys())
    assert (refused.value.reason, refused.value.transient) == ("InvalidListing", False)
    assert listings.count(name) == 1  # not a second page: nothing of it kept


async def test_a_full_page_of_the_longest_keys_is_read(listings: Listings, tmp_path: Path) -> None:  # noqa: F811
    _, found = hostile(listings, "fullkeys")  # S3's largest page: 1000 keys of 1024 bytes, ~1.2 MB
    _, index, _ = await buckets.listed(Repositories(tmp_path), found, Credentials(), Keys())
    assert len(index) == 1000 and {len(key.encode()) for key in index} == {1024}


async def test_a_listing_is_bounded_in_bytes(listings: Listings, tmp_path: Path) -> None:  # noqa: F811
    name, found = hostile(listings, "padded-2048")  # one page of more than MAX_PAGE (2 MiB)
    with pytest.raises(SourceError, match=r"the listing of .* is larger than 2 MiB") as page:
        await buckets.listed(Repositories(tmp_path), found, Credentials(), Keys())
    assert page.value.reason == "ArtifactTooLarge" and listings.count(name) == 1
    name, found = hostile(listings, "padded-90")  # a new key and token a page, each page of 90 KiB
    small = Bucket(Repositories(tmp_path), found, Credentials(), Keys(), Limits(max_entries=100))
    with pytest.raises(SourceError, match=r"is larger than 200 KiB \(2 KiB an object of the limit's 100\)") as total:
        await small.index()
    assert (total.value.reason, total.value.transient) == ("ListingTooLong", False)
    assert listings.count(name) == 3  # 180 KiB in two pages, past 200 KiB in the third


async def test_a_run_of_empty_truncated_pages_is_refused(listings: Listings, tmp_path: Path) -> None:  # noqa: F811
    name, found = hostile(listings, "empty")  # no key and a new token, forever
    with pytest.raises(SourceError, match="pages 1 to 10 list nothing but are truncated") as refused:
        await buckets.listed(Repositories(tmp_path), found, Credentials(), Keys())
    assert (refused.value.reason, refused.value.transient) == ("InvalidListing", False)
    assert listings.count(name) == 10
    name, found = hostile(listings, "sparse")  # nine empty pages, then a key: a listing still
    _, index, _ = await buckets.listed(Repositories(tmp_path), found, Credentials(), Keys())
    assert list(index) == ["config.yaml"] and listings.count(name) == 10


async def test_pages_are_parsed_off_the_event_loop(listings: Listings, tmp_path: Path,  # noqa: F811
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    threads: list[int] = []
    parse = buckets._page

    def spy(body: bytes, what: str, number: int) -> tuple[dict[str, buckets.Object], bool, str]:
        threads.append(threading.get_ident())
        return parse(body, what, number)

    monkeypatch.setattr(buckets, "_page", spy)
    _, found = hostile(listings, "sparse")
    await buckets.listed(Repositories(tmp_path), found, Credentials(), Keys())
    assert len(threads) == 10 and threading.get_ident() not in threads


async def test_spec_timeout_is_bounded_by_the_operators_maximum(listings: Listings, tmp_path: Path,  # noqa: F811
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(buckets, "MAX_TIMEOUT", 1.0)  # 600s in the operator
    name, found = hostile(listings, "hang", timeout="10000h")  # a server that never answers, a tenant's timeout
    bucket = Bucket(Repositories(tmp_path), found, Credentials(), Keys())
    try:
        with pytest.raises(SourceError, match=r"took longer than 1s, the operator's maximum of spec.timeout") as ls:
            await bucket.index()
        assert (ls.value.reason, ls.value.transient) == ("ListingTooLong", True) and listings.count(name) == 1
        with pytest.raises(SourceError, match=r"fetching .* took longer than 1s, the operator's maximum") as fetch:
            await bucket.fetch({"config.yaml": buckets.Object(ETAG, len(CONFIG))})
        assert fetch.value.reason == "BucketOperationFailed" and listings.count(name) == 2
    finally:
        listings.release.set()
