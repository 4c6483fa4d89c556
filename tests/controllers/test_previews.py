"""The Preview kind through the real path: the open pull requests of a config repository listed from a loopback fake
of GitHub's API, each one's head fetched from the git server (refs/pull/N/head), rendered as the operator would and
compared with its merge base, posted as one comment per pull request that a new push edits in place, and a commit
status on each head; no Secret value in anything posted, and nothing applied."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests.chartrepo import ChartRepo
from tests.controllers.conftest import Operator, apply, condition, events, get, settled, watched
from tests.controllers.test_notifications import operator, provider
from tests.forges import Forge
from tests.gitserver import Repo
from tests.test_preview import CHART as PREVIEW_CHART
from tests.tools import Run, eventually

__all__ = ["operator"]  # this module's operator (allowed to notify 127.0.0.1)
OLD_SECRET, NEW_SECRET = "hunter2-the-old-password", "hunter3-the-new-password"
# the chart of helmop preview's tests, at charts/web of the config repository (its Deployment alone)
CHART = {f"charts/web/{name}": text for name, text in PREVIEW_CHART.items() if name != "templates/service.yaml"}


@pytest.fixture
def forge() -> Iterator[Forge]:
    f = Forge("github", "forge-token-123")
    yield f
    f.close()


def _release(replicas: int) -> str:
    return yaml.safe_dump({"apiVersion": "helmop.dev/v1alpha1", "kind": "HelmRelease",
                           "metadata": {"name": "web", "namespace": "shop"},
                           "spec": {"chart": {"sourceRef": {"name": "config"}, "path": "charts/web"},
                                    "interval": "5m", "values": {"replicaCount": replicas}}})


def _secret(password: str) -> str:
    return yaml.safe_dump({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db", "namespace": "shop"},
                           "data": {"password": base64.b64encode(password.encode()).decode()}})


def _pull_request(repo: Repo, number: int, files: dict[str, str | None]) -> str:
    """A commit on top of main pushed to refs/pull/<number>/head, as GitHub keeps a pull request's head."""
    repo.git("checkout", "-q", "-B", f"pr-{number}", "origin/main")
    repo.write(files)
    repo.git("add", "-A")
    repo.git("commit", "-q", "-m", f"pull request {number}")
    repo.git("push", "-q", "--force", "origin", f"HEAD:refs/pull/{number}/head")
    return repo.git("rev-parse", "HEAD")


def _posted(forge: Forge) -> str:
    return json.dumps([c.body for c in forge.calls]) + json.dumps(forge.comments)


def _no_secret_in(text: str) -> None:
    for secret in (OLD_SECRET, NEW_SECRET):
        for form in (secret, base64.b64encode(secret.encode()).decode()):
            assert form not in text


def _preview(name: str, **spec: Any) -> str:
    return yaml.safe_dump({"apiVersion": "helmop.dev/v1alpha1", "kind": "Preview", "metadata": {"name": name},
                           "spec": {"sourceRef": {"name": "config"}, "providerRef": {"name": "pr"}, "base": "main",
                                    "interval": "1h", **spec}})


def _setup(kube: Run, ns: str, repo: Repo, forge: Forge) -> None:
    repo.commit({**CHART, "clusters/prod/apps.yaml": yaml.safe_dump({
        "apiVersion": "helmop.dev/v1alpha1", "kind": "ConfigSync", "metadata": {"name": "apps"},
        "spec": {"sourceRef": {"name": "config"}, "path": "./apps", "interval": "1h"}}),
        "apps/kustomization.yaml": "resources: [web.yaml, secret.yaml]\n", "apps/web.yaml": _release(1),
        "apps/secret.yaml": _secret(OLD_SECRET)})
    repo.git("fetch", "-q", "origin")
    kube("kubectl", "-n", ns, "create", "secret", "generic", "forge", "--from-literal=token=forge-token-123")
    apply(kube, ns, provider("pr", "githubpullrequestcomment", address=f"{forge.url}/org/config", secret="forge"))
    apply(kube, ns, yaml.safe_dump({"apiVersion": "helmop.dev/v1alpha1", "kind": "GitRepository",
                                    "metadata": {"name": "config"},
                                    "spec": {"url": repo.url, "interval": "1h", "ref": {"branch": "main"}}}))


def test_a_preview_comments_once_per_pull_request_and_edits_it_on_a_new_push(operator: Operator, kube: Run,
                                                                              ns: str, repo: Repo,
                                                                              forge: Forge) -> None:
    _setup(kube, ns, repo, forge)
    head = _pull_request(repo, 7, {"apps/web.yaml": _release(3), "apps/secret.yaml": _secret(NEW_SECRET),
                                   "apps/kustomization.yaml": "resources: [web.yaml, secret.yaml, settings.yaml]\n",
                                   "apps/settings.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, "
                                                         "namespace: shop}\ndata: {mode: fast}\n"})
    broken = _pull_request(repo, 8, {"apps/kustomization.yaml": "resources: [web.yaml, missing.yaml]\n"})
    forge.pulls = [{"number": 7, "head": head, "base": "main"}, {"number": 8, "head": broken, "base": "main"},
                   {"number": 9, "head": broken, "base": "release-1"}]  # into another branch: not previewed
    apply(kube, ns, _preview("prs"))
    watched(kube, ns, "previews.helmop.dev", "prs", lambda obj: condition(obj).get("status") == "True", 90)
    assert sorted(c["number"] for c in forge.comments) == [7, 8]
    seven = next(c for c in forge.comments if c["number"] == 7)
    uid = get(kube, ns, "providers.helmop.dev", "pr")["metadata"]["uid"]
    assert seven["body"].startswith(f"<!-- flux-pr-comment-key:{uid}/Preview/{ns}/prs -->\n\n### helmop preview: "
                                    f"`main@")
    assert "| 1 | 3 | 0 |" in seven["body"]  # the ConfigMap added; the HelmRelease, its Deployment, the Secret changed
    assert "-  replicas: 1\n+  replicas: 3\n" in seven["body"] and "<secret hmac-sha256:" in seven["body"]
    eight = next(c for c in forge.comments if c["number"] == 8)
    assert "could not be previewed" in eight["body"] and "missing.yaml" in eight["body"]
    context = f"preview/prs/{uid[:8]}"
    assert sorted((sha, s["state"], s["context"]) for sha, s in forge.statuses) == sorted(
        [(head, "success", context), (broken, "failure", context)])
    status = get(kube, ns, "previews.helmop.dev", "prs")["status"]
    assert [(p["number"], p["headCommit"], p["result"]) for p in status["pullRequests"]] == [
        (7, head, "Rendered"), (8, broken, "Unbuildable")]
    assert (status["pullRequests"][0]["added"], status["pullRequests"][0]["changed"]) == (1, 3)
    assert {e["reason"] for e in events(kube, ns, "prs")} >= {"Previewed"}

    # nothing moved: a look writes nothing
    writes = len(forge.writes())
    settled(kube, ns, "previews.helmop.dev", "prs")
    assert len(forge.writes()) == writes

    # a new push to pull request 7: its one comment edited in place, its new head marked
    pushed = _pull_request(repo, 7, {"apps/web.yaml": _release(5), "apps/secret.yaml": _secret(NEW_SECRET)})
    forge.pulls[0]["head"] = pushed
    settled(kube, ns, "previews.helmop.dev", "prs")
    assert sorted(c["number"] for c in forge.comments) == [7, 8]
    seven = next(c for c in forge.comments if c["number"] == 7)
    assert "+  replicas: 5\n" in seven["body"] and "settings" not in seven["body"]
    edits = [w for w in forge.writes()[writes:] if w.method == "PATCH"]
    assert [w.path for w in edits] == [f"/api/v3/repos/org/config/issues/comments/{seven['id']}"]
    assert [(sha, s["state"]) for sha, s in forge.statuses[-1:]] == [(pushed, "success")]
    _no_secret_in(_posted(forge) + json.dumps(get(kube, ns, "previews.helmop.dev", "prs")))
    # nothing applied: the preview renders, it does not deploy
    assert not get(kube, "shop", "helmreleases.helmop.dev", "web") and not get(kube, ns, "configsyncs.helmop.dev",
                                                                               "apps")


def test_a_preview_without_a_pull_request_comment_provider_stalls(kube: Run, ns: str, repo: Repo,
                                                                  forge: Forge) -> None:
    _setup(kube, ns, repo, forge)
    apply(kube, ns, provider("status", "github", address=f"{forge.url}/org/config", secret="forge"))
    apply(kube, ns, _preview("wrong", providerRef={"name": "status"}))
    found = eventually(lambda: condition(get(kube, ns, "previews.helmop.dev", "wrong")).get("reason")
                       == "InvalidProvider" and get(kube, ns, "previews.helmop.dev", "wrong"), 30)
    assert "not one that comments on pull requests" in condition(found)["message"]
    assert condition(found, "Stalled").get("status") == "True"
    assert not forge.writes()


def _flux_release(name: str, chart: str, version: str) -> str:
    return yaml.safe_dump({"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
                           "metadata": {"name": name, "namespace": "shop"},
                           "spec": {"interval": "5m", "chart": {"spec": {
                               "chart": chart, "version": version,
                               "sourceRef": {"kind": "HelmRepository", "name": "charts"}}}}})


def test_a_preview_renders_flux_helmreleases_and_names_a_chart_it_cannot_fetch(operator: Operator, kube: Run,
                                                                                ns: str, repo: Repo, forge: Forge,
                                                                                chart_repo: ChartRepo) -> None:
    """A Flux HelmRelease's chart (from a Flux HelmRepository of the build) moves 0.1.0 -> 0.2.0: its objects' diff
    is in the comment under its group; another's chart cannot be fetched: the comment says why, the head is marked
    failure, and the rest is still shown."""
    _setup(kube, ns, repo, forge)
    charts = {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "HelmRepository",
              "metadata": {"name": "charts", "namespace": "shop"}, "spec": {"url": chart_repo.url, "interval": "1h"}}
    repo.commit({"apps/kustomization.yaml": "resources: [web.yaml, secret.yaml, charts.yaml, demo.yaml, gone.yaml]\n",
                 "apps/charts.yaml": yaml.safe_dump(charts), "apps/demo.yaml": _flux_release("demo", "demo", "0.1.0"),
                 "apps/gone.yaml": _flux_release("gone", "demo", "0.1.0")})
    repo.git("fetch", "-q", "origin")
    head = _pull_request(repo, 10, {"apps/demo.yaml": _flux_release("demo", "demo", "0.2.0"),
                                    "apps/gone.yaml": _flux_release("gone", "no-such-chart", "1.0.0")})
    forge.pulls = [{"number": 10, "head": head, "base": "main"}]
    apply(kube, ns, _preview("flux"))
    watched(kube, ns, "previews.helmop.dev", "flux", lambda obj: condition(obj).get("status") == "True", 90)
    body = next(c["body"] for c in forge.comments if c["number"] == 10)
    assert "#### HelmRelease shop/demo <sub>helm.toolkit.fluxcd.io/v2</sub>" in body, body
    assert "changed: <code>Deployment/shop/demo</code>" in body and "+    helm.sh/chart: demo-0.2.0" in body
    assert "- `HelmRelease shop/demo`: chart" in body and "**Releases not rendered**" in body
    assert f"- `HelmRelease shop/gone`: not rendered in `#10@{head[:12]}`: " in body and "no-such-chart" in body
    assert "<code>HelmRelease/shop/gone</code>" in body  # its manifest's change is still shown
    assert [(sha, s["state"]) for sha, s in forge.statuses] == [(head, "failure")]
    record = get(kube, ns, "previews.helmop.dev", "flux")["status"]["pullRequests"][0]
    assert record["result"] == "Unbuildable" and "HelmRelease shop/gone" in record["message"], record
