"""An S3-compatible server on 127.0.0.1 for the tests: moto's server mode (a PyPI package that answers S3's API as
AWS documents it), run as a process from its own folder (``.tools/moto``, installed by scripts/setup --test: its
botocore pins a python-dateutil older than the Kubernetes client's). Buckets and objects are written with plain
S3 requests, signed as the bucket's owner (moto does not check signatures; helmop's signer is checked against
AWS's published example)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
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
