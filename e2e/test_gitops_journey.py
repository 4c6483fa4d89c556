"""Journey: a team keeps its HelmReleases in a config repository; `git push` deploys, nobody runs
kubectl or helm after the initial GitRepository + ConfigSync."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
import yaml

from e2e.conftest import Operator, Run, serve_chart, until
from tests.chartrepo import ChartRepo
from tests.gitserver import GitServer, Repo


@pytest.fixture(scope="module")
def charts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChartRepo]:
    repo = serve_chart(tmp_path_factory, "shop", "2.0.0")
    yield repo
    repo.close()


def test_push_deploys_upgrades_and_removes(operator: Operator, run: Run, namespace: str, charts: ChartRepo,
                                           tmp_path: Path) -> None:
    (tmp_path / "srv").mkdir()
    server = GitServer(tmp_path / "srv")
    try:
        config = Repo(server, "team-config", tmp_path / "work")
        # A folder with a file of its own: deleting the last release must not delete the folder, which
        # helmop (as Flux) reads as a broken path rather than "prune everything".
        config.commit({"releases/README.md": "one file per release\n"})
        run("kubectl", "-n", namespace, "create", "secret", "generic", "hook", "--from-literal=token=t0ken")
        source = {"apiVersion": "helmop.dev/v1alpha1", "kind": "GitRepository",
                  "metadata": {"name": "team", "namespace": namespace},
                  "spec": {"url": config.url, "interval": "1h", "ref": {"branch": "main"},
                           "webhook": {"secretRef": {"name": "hook"}}}}
        sync = {"apiVersion": "helmop.dev/v1alpha1", "kind": "ConfigSync",
                "metadata": {"name": "team", "namespace": namespace},
                "spec": {"sourceRef": {"name": "team"}, "path": "releases", "interval": "1h"}}
        run("kubectl", "apply", "-f", "-", stdin=yaml.safe_dump_all([source, sync]))

        def push(files: dict[str, str | None]) -> None:
            config.commit(files)
            body = b'{"ref": "refs/heads/main"}'
            signature = "sha256=" + hmac.new(b"t0ken", body, hashlib.sha256).hexdigest()
            reply = requests.post(f"{operator.webhook_url}/hooks/{namespace}/team", data=body, timeout=10,
                                  headers={"X-Hub-Signature-256": signature, "X-GitHub-Event": "push"})
            assert reply.status_code == 202

        def shop(replicas: int) -> str:
            return yaml.safe_dump({"apiVersion": "helmop.dev/v1alpha1", "kind": "HelmRelease",
                                   "metadata": {"name": "shop"},
                                   "spec": {"interval": "1h",
                                            "chart": {"repository": {"url": charts.url, "name": "shop"}},
                                            "values": {"fullnameOverride": "shop", "replicaCount": replicas}}})

        push({"releases/shop.yaml": shop(1)})
        until(run, "kubectl", "-n", namespace, "wait", "--for=condition=Ready", "hr/shop", "--timeout=5s",
              timeout=180)
        push({"releases/shop.yaml": shop(2)})
        until(run, "kubectl", "-n", namespace, "wait", "--for=jsonpath={.spec.replicas}=2", "deploy/shop",
              "--timeout=5s", timeout=180)
        push({"releases/shop.yaml": None})
        until(run, "kubectl", "-n", namespace, "wait", "--for=delete", "hr/shop", "--timeout=5s", timeout=180)
        assert json.loads(run("helm", "list", "-n", namespace, "-o", "json").stdout) == []
    finally:
        server.close()
