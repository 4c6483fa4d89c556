"""--chart-mirror: which chart URLs a mirror serves."""

from __future__ import annotations

from pathlib import Path

import pytest

from helmop.sources.repositories import Repositories


@pytest.mark.parametrize(("url", "fetched"), [
    ("https://charts.example.com", "http://127.0.0.1:8080/mirror"),
    ("https://charts.example.com/stable/index.yaml", "http://127.0.0.1:8080/mirror/stable/index.yaml"),
    ("https://charts.example.com.evil.org/x", "https://charts.example.com.evil.org/x"),  # not at a boundary
    ("oci://registry.example.com/charts/web", "oci://127.0.0.1:5000/charts/web"),
    ("https://other.example.com/x", "https://other.example.com/x"),
    ("https://charts.example.com/bitnami/redis", "http://127.0.0.1:8080/bitnami-mirror/redis"),  # the longest wins
])
def test_a_mirror_serves_the_urls_that_start_with_its_prefix(url: str, fetched: str, tmp_path: Path) -> None:
    repos = Repositories(tmp_path, mirrors=(("https://charts.example.com", "http://127.0.0.1:8080/mirror"),
                                            ("https://charts.example.com/bitnami", "http://127.0.0.1:8080/bitnami-mirror"),
                                            ("oci://registry.example.com", "oci://127.0.0.1:5000")))
    assert repos.mirrored(url) == fetched
