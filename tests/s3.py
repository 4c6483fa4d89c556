"""An S3-compatible server on 127.0.0.1 for the tests: moto's server mode (a PyPI package that answers S3's API as
AWS documents it), with boto3 to put and delete objects as a user of the bucket would."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

moto_server = pytest.importorskip("moto.server", reason="moto[server] is in the test dependencies")
boto3 = pytest.importorskip("boto3", reason="moto[server] brings boto3")

ACCESS, SECRET = "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"


class S3:
    def __init__(self) -> None:
        self.server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.server.start()
        self.endpoint = f"127.0.0.1:{self.server._server.server_port}"
        self.client: Any = boto3.client("s3", endpoint_url=f"http://{self.endpoint}", aws_access_key_id=ACCESS,
                                        aws_secret_access_key=SECRET, region_name="us-east-1")

    def bucket(self, name: str, objects: dict[str, str | bytes]) -> None:
        self.client.create_bucket(Bucket=name)
        self.put(name, objects)

    def put(self, bucket: str, objects: dict[str, str | bytes | None]) -> None:  # type: ignore[misc]
        for key, body in objects.items():
            if body is None:
                self.client.delete_object(Bucket=bucket, Key=key)
            else:
                self.client.put_object(Bucket=bucket, Key=key, Body=body.encode() if isinstance(body, str) else body)

    def stop(self) -> None:
        self.server.stop()


@pytest.fixture(scope="module")
def s3() -> Iterator[S3]:
    server = S3()
    yield server
    server.stop()
