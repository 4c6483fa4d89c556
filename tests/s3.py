"""An S3-compatible server on 127.0.0.1 for the tests: moto's server mode (a PyPI package that answers S3's API as
AWS documents it), run as a process from its own folder (``.tools/moto``, installed by scripts/setup --test: its
botocore pins a python-dateutil older than the Kubernetes client's). Buckets and objects are written with plain
S3 requests, signed as the bucket's owner (moto does not check signatures; helmop's signer is checked against
AWS's published example)."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import http.server
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import pytest

from helmop.sources.buckets import Keys, signed_headers

MOTO = Path(__file__).resolve().parents[1] / ".tools" / "moto"
ACCESS, SECRET = "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"


class S3:
    def __init__(self) -> None:
        if not (MOTO / ".installed-5").exists():
            pytest.skip("moto's S3 server is not in .tools/moto: scripts/setup --test installs it")
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        env = {**os.environ, "PYTHONPATH": str(MOTO), "PYTHONNOUSERSITE": "1"}
        self.process = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                                        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.endpoint = f"127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"http://{self.endpoint}/", timeout=2).close()
                break
            except (urllib.error.URLError, ConnectionError):
                if time.monotonic() > deadline or self.process.poll() is not None:
                    self.stop()
                    raise RuntimeError("moto's S3 server did not start") from None
                time.sleep(0.2)

    def _send(self, method: str, path: str, body: bytes = b"") -> None:
        """A request as the bucket's owner (moto takes any signed request as the account's: it checks none)."""
        # a type of its own: urllib's default (a form) would have the server read the body as form fields
        headers = signed_headers(Keys(ACCESS, SECRET), method, self.endpoint, unquote(path), {}, "us-east-1",
                                 datetime.now(UTC), {"content-type": "application/octet-stream"})
        headers["x-amz-content-sha256"] = "UNSIGNED-PAYLOAD"
        request = urllib.request.Request(f"http://{self.endpoint}{path}", data=body if method == "PUT" else None,
                                         method=method, headers={k: v for k, v in headers.items() if k != "host"})
        urllib.request.urlopen(request, timeout=10).close()

    def bucket(self, name: str, objects: dict[str, str | bytes]) -> None:
        self._send("PUT", f"/{name}")
        self.put(name, dict(objects))

    def put(self, bucket: str, objects: dict[str, str | bytes | None]) -> None:
        for key, body in objects.items():
            path = f"/{bucket}/{quote(key, safe='')}"
            if body is None:
                self._send("DELETE", path)
            else:
                self._send("PUT", path, body.encode() if isinstance(body, str) else body)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)


@pytest.fixture(scope="module")
def s3() -> Iterator[S3]:
    server = S3()
    yield server
    server.stop()


class Listings:
    """An S3 endpoint on 127.0.0.1 whose listings are what a bucket's name says, counted per bucket (hostile
    servers, no moto needed): ``loop-*`` answers "truncated" with the same keys and the same token forever,
    ``notoken-*`` "truncated" with no token, ``rekeyed-*`` the same keys under a new token each time,
    ``endless-*`` a new key and a new token each time (``slow-*``: the same, each page after ``delay`` seconds),
    ``retoken-*`` a new key and the same token each time, ``empty-*`` no key and a new token each time,
    ``sparse-*`` nine such pages then one key, ``padded-<n>-*`` as ``endless`` with n KiB of padding a page,
    ``bigetag-*`` as ``endless`` with an etag of 400 KB, ``bigkey-*`` one key of 1025 bytes (513 characters),
    ``fullkeys-*`` one page of 1000 keys of 1024 bytes, ``bigsize-*`` one key of a 5000-digit size,
    ``hang-*`` no answer to any request until ``release`` is set,
    anything else one page of one object, ``config.yaml``, which it serves."""

    PAGE = 1000  # keys a page of ``loop`` and ``rekeyed`` holds, as S3's pages

    def __init__(self, delay: float = 0.02) -> None:
        self.delay = delay
        self.release = threading.Event()
        self.counts: dict[str, int] = {}
        self.lock = threading.Lock()
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Listing, self))
        self.endpoint = f"127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def count(self, bucket: str) -> int:
        with self.lock:
            return self.counts.get(bucket, 0)

    def _keys(self, bucket: str, number: int) -> tuple[list[str], str | None]:
        """The keys of page ``number`` of ``bucket``'s listing and the token after it (None: the last page)."""
        mode = bucket.split("-", 1)[0]
        if mode in ("loop", "rekeyed"):
            return [f"k{i:04d}.yaml" for i in range(self.PAGE)], "t0" if mode == "loop" else f"t{number + 1}"
        if mode in ("endless", "slow", "padded", "bigetag"):
            return [f"k{number:06d}.yaml"], f"t{number + 1}"
        if mode in ("empty", "sparse"):
            return ([], f"t{number + 1}") if mode == "empty" or number < 9 else (["config.yaml"], None)
        if mode in ("bigkey", "fullkeys"):
            return ([f"k{'é' * 512}"] if mode == "bigkey" else [f"{i:04d}{'é' * 510}" for i in range(self.PAGE)]), None
        return {"retoken": ([f"k{self.count(bucket):06d}.yaml"], "t1"), "notoken": (["k.yaml"], "")}.get(
            mode, (["config.yaml"], None))

    def page(self, bucket: str, token: str) -> bytes:
        mode = bucket.split("-", 1)[0]
        keys, after = self._keys(bucket, int(token[1:]) if token[1:].isdigit() else 0)
        etag, size = "e" * 400_000 if mode == "bigetag" else ETAG, "9" * 5000 if mode == "bigsize" else len(CONFIG)
        contents = "".join(f"<Contents><Key>{k}</Key><ETag>&quot;{etag}&quot;</ETag><Size>{size}</Size>"
                           "</Contents>" for k in keys)
        more = "<IsTruncated>false</IsTruncated>" if after is None else (
            "<IsTruncated>true</IsTruncated>" + (f"<NextContinuationToken>{after}</NextContinuationToken>"
                                                 if after else ""))
        pad = f"<Padding>{'x' * (int(bucket.split('-')[1]) << 10)}</Padding>" if mode == "padded" else ""
        return (f'<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/'
                f'2006-03-01/"><Name>{bucket}</Name>{more}{contents}{pad}</ListBucketResult>').encode()


CONFIG = b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: from-listing}\ndata: {value: listed}\n"
ETAG = hashlib.md5(CONFIG).hexdigest()  # S3's etag of a single-part object


class _Listing(http.server.BaseHTTPRequestHandler):
    def __init__(self, listings: Listings, *args: Any) -> None:
        self.listings = listings
        super().__init__(*args)

    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        bucket, _, key = url.path.lstrip("/").partition("/")
        with self.listings.lock:
            self.listings.counts[bucket] = self.listings.counts.get(bucket, 0) + 1
        if bucket.startswith("hang-"):
            self.listings.release.wait(60)  # bounded: a test that forgets to release holds no thread for ever
        if key:
            body, headers = CONFIG, {"ETag": f'"{ETAG}"'}
        else:
            if bucket.startswith("slow-"):
                time.sleep(self.listings.delay)
            token = urllib.parse.parse_qs(url.query).get("continuation-token", [""])[0]
            body, headers = self.listings.page(bucket, token), {"Content-Type": "application/xml"}
        self.send_response(200)
        for name, value in {**headers, "Content-Length": str(len(body))}.items():
            self.send_header(name, value)
        self.end_headers()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # a client that refused it by its length
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def listings() -> Iterator[Listings]:
    server = Listings()
    yield server
    server.release.set()
    server.server.shutdown()
    server.server.server_close()
