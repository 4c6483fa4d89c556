"""Shared by the sandbox tests: raw HTTP to the sandbox."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from helmop.sandbox import Sandbox


class Raw:
    """Plain HTTP to the sandbox: what each status code and body really are."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.base = sandbox.url
        self.session = requests.Session()
        self.session.trust_env = False  # else $REQUESTS_CA_BUNDLE replaces our CA
        self.session.verify = str(sandbox.ca_file)
        self.session.headers["Authorization"] = f"Bearer {sandbox.token}"

    def __call__(self, method: str, path: str, body: Any = None, *, ctype: str = "application/json",
                 raw: bytes | None = None, **params: Any) -> tuple[int, Any]:
        data = raw if raw is not None else (json.dumps(body) if body is not None else None)
        r = self.session.request(method, self.base + path, data=data, params=params,
                                 headers={"Content-Type": ctype} if data is not None else {})
        try:
            return r.status_code, r.json()
        except ValueError:
            return r.status_code, r.text


@pytest.fixture(scope="module")
def http(sandbox: Sandbox) -> Iterator[Raw]:
    raw = Raw(sandbox)
    yield raw
    raw.session.close()
