"""Chart repository indexes: one shared, bounded, revalidated copy per repository and credentials."""

from __future__ import annotations

import email.utils
import http.server
import subprocess
import threading
import time
from collections.abc import Iterator
from io import BytesIO
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml

from helmop.sources import index
from helmop.sources.errors import SourceError
from helmop.sources.repositories import Credentials, Repositories
from tests.tools import tool

INDEX = b"""apiVersion: v1
entries:
  app:
  - version: 1.10.0
    appVersion: "2"
    urls: [app-1.10.0.tgz]
    digest: abc
  - {version: 1.9.0, urls: [app-1.9.0.tgz]}
  empty: null
generated: "2024-01-01T00:00:00Z"
"""


class _Server:
    """An index over HTTP that answers conditional requests (Last-Modified) and counts requests."""

    def __init__(self) -> None:
        self.body, self.modified = INDEX, time.time() - 60
        self.date = 0.0  # the answers' Date (0: now)
        self.requests: list[dict[str, str]] = []
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *_: Any) -> None:
                pass

            def do_GET(self) -> None:
                owner.requests.append(dict(self.headers))
                since = self.headers.get("If-Modified-Since")
                stamp = email.utils.formatdate(owner.modified, usegmt=True)
                if since == stamp:
                    self.send_response(304)
                    self.end_headers()
                    return
                self.send_response_only(200)
                self.send_header("Date", email.utils.formatdate(owner.date or time.time(), usegmt=True))
                self.send_header("Last-Modified", stamp)
                self.send_header("Content-Length", str(len(owner.body)))
                self.end_headers()
                self.wfile.write(owner.body)

        self.http = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()


@pytest.fixture
def server() -> Iterator[_Server]:
    srv = _Server()
    yield srv
    srv.http.shutdown()


def test_entries_keep_versions_as_written() -> None:
    charts = index.parse(BytesIO(INDEX))
    assert [e.version for e in charts["app"]] == ["1.10.0", "1.9.0"]  # not floats, not reordered
    assert charts["app"][0].urls == ("app-1.10.0.tgz",) and charts["app"][0].digest == "abc"
    assert charts["empty"] == []
    for bad in (b"", b"- a list\n", b"apiVersion: v1\n", b"entries: [unclosed"):
        with pytest.raises(index.IndexInvalid):
            index.parse(BytesIO(bad))


async def test_one_request_per_ttl_then_a_conditional_one(server: _Server, tmp_path: Path) -> None:
    repos = Repositories(tmp_path, index_ttl=60)
    found = await repos.resolve(server.url, "app", "1.x", Credentials())
    assert (found.version, found.digest) == ("1.10.0", "abc")
    await repos.resolve(server.url, "app", "~1.9", Credentials())
    assert len(server.requests) == 1  # within the TTL: answered from the shared copy
    await repos.resolve(server.url, "app", "1.x", Credentials(), max_age=0)  # a release with a short interval
    assert len(server.requests) == 2 and server.requests[1].get("If-Modified-Since")  # revalidated: 304
    assert (await repos.resolve(server.url, "app", "1.x", Credentials())).version == "1.10.0"


async def test_a_last_modified_within_the_second_is_not_trusted(server: _Server, tmp_path: Path) -> None:
    """A server comparing whole seconds would answer 304 for an index changed within the same second."""
    server.modified = server.date = time.time()  # as fresh as the answer's Date: a weak validator
    repos = Repositories(tmp_path)
    await repos.resolve(server.url, "app", "1.x", Credentials())
    await repos.resolve(server.url, "app", "1.x", Credentials(), max_age=0)
    assert "If-Modified-Since" not in server.requests[1]


async def test_a_version_missing_from_the_cached_copy_is_asked_for(server: _Server, tmp_path: Path) -> None:
    repos = Repositories(tmp_path, index_ttl=3600)
    await repos.resolve(server.url, "app", "1.x", Credentials())
    server.body, server.modified = INDEX.replace(b"1.10.0", b"1.11.0"), time.time() + 10
    assert (await repos.resolve(server.url, "app", "1.11.0", Credentials())).version == "1.11.0"
    asked_at = time.time()  # an explicit reconcile request: an index fetched after it
    server.body, server.modified = INDEX.replace(b"1.10.0", b"1.12.0"), time.time() + 20
    assert (await repos.resolve(server.url, "app", "1.x", Credentials(), asked_at=asked_at)).version == "1.12.0"


async def test_concurrent_resolutions_share_one_request(server: _Server, tmp_path: Path) -> None:
    import asyncio

    repos = Repositories(tmp_path)
    await asyncio.gather(*(repos.resolve(server.url, "app", "1.x", Credentials()) for _ in range(20)))
    assert len(server.requests) == 1


async def test_other_credentials_never_read_a_cached_index(server: _Server, tmp_path: Path) -> None:
    repos = Repositories(tmp_path)
    await repos.resolve(server.url, "app", "1.x", Credentials("team-a", "secret-a"))
    await repos.resolve(server.url, "app", "1.x", Credentials())
    assert len(server.requests) == 2 and "Authorization" not in server.requests[1]


async def test_an_index_over_the_cap_is_refused(server: _Server, tmp_path: Path) -> None:
    repos = Repositories(tmp_path, index_max_size=64)
    with pytest.raises(SourceError) as too_large:
        await repos.resolve(server.url, "app", "1.x", Credentials())
    assert too_large.value.reason == "IndexTooLarge" and "64 bytes" in str(too_large.value)


async def test_what_a_repository_has_is_named_within_bounds(server: _Server, tmp_path: Path) -> None:
    """ChartNotFound and VersionNotFound name what the index has: its owner chose those names, so each is cut
    and at most ten are listed."""
    long_name, versions = "a" * 100_000, [f"1.0.{i}" for i in range(30)]  # listed first
    entries = {long_name: [{"version": "1.0.0", "urls": ["x.tgz"]}],
               **{f"c{i:02}": [{"version": "1.0.0", "urls": ["c.tgz"]}] for i in range(20)},
               "app": [{"version": v, "urls": [f"app-{v}.tgz"]} for v in versions]}
    server.body = yaml.safe_dump({"apiVersion": "v1", "entries": entries}).encode()
    repos = Repositories(tmp_path)
    with pytest.raises(SourceError) as missing:
        await repos.resolve(server.url, "nope", "", Credentials())
    message = str(missing.value)
    assert missing.value.reason == "ChartNotFound" and f"it has {'a' * 100}, app, c00" in message
    assert message.endswith(", ...")
    assert len(message) < 2000
    with pytest.raises(SourceError) as no_version:
        await repos.resolve(server.url, "app", "9.x", Credentials())
    assert no_version.value.reason == "VersionNotFound" and str(no_version.value).endswith(", ...)")


@pytest.mark.parametrize("url", ["http://169.254.169.254/charts", "http://[::ffff:169.254.169.254]/charts",
                                 "http://[64:ff9b::a9fe:a9fe]/charts", "http://2852039166/charts",
                                 "oci://[fd00:ec2::254]/charts", "http://metadata.google.internal./charts"])
async def test_a_repository_at_a_refused_address_is_refused_before_any_request(tmp_path: Path, url: str) -> None:
    with pytest.raises(SourceError) as refused:
        await Repositories(tmp_path).resolve(url, "app", "1.x", Credentials())
    assert refused.value.reason == "AddressRefused" and not refused.value.transient, str(refused.value)


async def test_a_redirect_to_a_refused_address_is_not_followed(tmp_path: Path) -> None:
    """The repository answers with a redirect to the metadata endpoint: refused at that hop, for what it is."""

    class Redirect(http.server.BaseHTTPRequestHandler):
        def log_message(self, *_: Any) -> None:
            pass

        def do_GET(self) -> None:
            self.send_response(302)
            self.send_header("Location", "http://[::ffff:a9fe:a9fe]/latest/meta-data/")
            self.send_header("Content-Length", "0")
            self.end_headers()

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        with pytest.raises(SourceError) as refused:
            await Repositories(tmp_path).resolve(f"http://127.0.0.1:{httpd.server_address[1]}", "app", "1.x",
                                                 Credentials())
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert refused.value.reason == "AddressRefused" and "169.254.169.254" in str(refused.value), str(refused.value)


class _Archives(http.server.BaseHTTPRequestHandler):
    """An index on one host name whose chart is served under another (``localhost`` for ``127.0.0.1``), both
    asking for basic auth, recording whether each request carried it."""

    archive = b""
    seen: ClassVar[list[tuple[str, bool]]] = []

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        port = self.server.server_address[1]
        authorized = self.headers.get("Authorization") == "Basic cm9ib3Q6czNjcjN0"  # robot:s3cr3t
        self.seen.append((self.path, authorized))
        if not authorized:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="charts"')
            self.end_headers()
            return
        body = self.archive if self.path.endswith(".tgz") else yaml.safe_dump({"apiVersion": "v1", "entries": {
            "tiny": [{"version": "0.1.0", "urls": [f"http://localhost:{port}/files/tiny-0.1.0.tgz"]}]}}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


async def test_credentials_go_to_another_host_only_with_pass_credentials(tmp_path: Path) -> None:
    (tmp_path / "tiny" / "templates").mkdir(parents=True)
    (tmp_path / "tiny" / "Chart.yaml").write_text("apiVersion: v2\nname: tiny\nversion: 0.1.0\n")
    subprocess.run([tool("helm"), "package", str(tmp_path / "tiny"), "-d", str(tmp_path)], check=True,
                   capture_output=True)
    _Archives.archive = (tmp_path / "tiny-0.1.0.tgz").read_bytes()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Archives)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        creds = Credentials(username="robot", password="s3cr3t", scope="shop/charts")
        resolved = await Repositories(tmp_path / "a").resolve(url, "tiny", "0.1.0", creds)
        with pytest.raises(SourceError) as refused:  # the chart is on another host: the credentials stay home
            await Repositories(tmp_path / "a").fetch(resolved, url, creds)
        assert refused.value.reason == "RepositoryAuthFailed"
        assert ("/files/tiny-0.1.0.tgz", False) in _Archives.seen
        path = await Repositories(tmp_path / "b").fetch(resolved, url, creds, pass_credentials=True)
        assert path.read_bytes() == _Archives.archive and ("/files/tiny-0.1.0.tgz", True) in _Archives.seen
    finally:
        server.shutdown()
        server.server_close()
