"""Notifications to git hosts through the real path: a release whose chart is in git marks the commit it was
deployed from, a pull request named by an object gets one comment that later events edit (a loopback fake of
GitHub's comment API), and the Provider types and fields helmop cannot honour are refused by name."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import yaml

from tests.controllers.conftest import Operator, apply, condition, events, get, watched
from tests.controllers.test_notifications import alert, configsync, gitrepo, operator, provider, ready_object, receiver
from tests.forges import Forge
from tests.gitserver import Repo
from tests.receiver import Receiver
from tests.tools import Run, eventually

__all__ = ["operator", "receiver"]  # this module's operator (allowed to notify 127.0.0.1) and receiver
CHART = {"charts/web/Chart.yaml": "apiVersion: v2\nname: web\nversion: 0.1.0\n",
         "charts/web/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web-settings\n"
                                         "data:\n  a: '1'\n"}


@pytest.fixture
def forge() -> Iterator[Forge]:
    f = Forge("github", "forge-token-123")
    yield f
    f.close()


def test_a_release_from_git_marks_the_commit_it_was_deployed_from(kube: Run, ns: str, receiver: Receiver,
                                                                  repo: Repo) -> None:
    """Pending when helm starts on a chart read at a commit, success once deployed: that commit, the one the chart
    was read at (not whatever the GitRepository says by the time the status is sent)."""
    commit = repo.commit(CHART)
    kube("kubectl", "-n", ns, "create", "secret", "generic", "forge", "--from-literal=token=forge-token-123")
    apply(kube, ns, provider("github", "github", address=receiver.url("/org/charts"), secret="forge"))
    apply(kube, ns, alert("releases", "github", "HelmRelease"))
    ready_object(kube, ns, "alerts.helmop.dev", "releases")
    apply(kube, ns, gitrepo("charts", repo.url))
    apply(kube, ns, yaml.safe_dump({"apiVersion": "helmop.dev/v1alpha1", "kind": "HelmRelease",
                                    "metadata": {"name": "web"},
                                    "spec": {"interval": "1h", "timeout": "60s", "chart": {
                                        "sourceRef": {"kind": "GitRepository", "name": "charts"},
                                        "path": "charts/web"}}}))
    statuses = eventually(lambda: len(receiver.at("/api/v3/")) >= 2 and receiver.at("/api/v3/"), 60)
    assert [r.path for r in statuses] == [f"/api/v3/repos/org/charts/statuses/{commit}"] * 2
    uid = get(kube, ns, "providers.helmop.dev", "github")["metadata"]["uid"]
    assert [(r.json()["state"], r.json()["context"]) for r in statuses] == [
        ("pending", f"helmrelease/web/{uid[:8]}"), ("success", f"helmrelease/web/{uid[:8]}")]
    assert statuses[1].json()["description"] == "install succeeded"
    said = [e for e in events(kube, ns, "web") if e["reason"] == "Progressing"]
    assert commit in said[0]["message"] and "web@0.1.0" in said[0]["message"]


def test_a_pull_request_gets_one_comment_that_the_next_event_edits(operator: Operator, kube: Run, ns: str,
                                                                   repo: Repo, forge: Forge) -> None:
    """A ConfigSync annotated with its pull request (Flux's event.toolkit.fluxcd.io/change_request): its start and
    its success are one comment, created then edited; objects without the annotation are not commented on."""
    repo.commit({"apps/cm.yaml": yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap",
                                                 "metadata": {"name": "settings"}, "data": {"a": "1"}})})
    kube("kubectl", "-n", ns, "create", "secret", "generic", "forge", "--from-literal=token=forge-token-123")
    apply(kube, ns, provider("pr", "githubpullrequestcomment", address=f"{forge.url}/org/config", secret="forge"))
    apply(kube, ns, alert("pr", "pr", "ConfigSync"))
    ready_object(kube, ns, "alerts.helmop.dev", "pr")
    apply(kube, ns, gitrepo("config", repo.url))
    annotated = yaml.safe_load(configsync("apps", "config"))
    annotated["metadata"]["annotations"] = {"event.toolkit.fluxcd.io/change_request": "12"}
    apply(kube, ns, yaml.safe_dump(annotated))
    watched(kube, ns, "configsyncs.helmop.dev", "apps", lambda obj: condition(obj).get("status") == "True")
    # its start, then its success (which edits what the start wrote)
    eventually(lambda: forge.comments and "applying revision" not in forge.comments[0]["body"], 30)
    writes = forge.writes()
    [comment] = forge.comments
    assert (writes[0].method, writes[0].path) == ("POST", "/api/v3/repos/org/config/issues/12/comments")
    assert {(w.method, w.path) for w in writes[1:]} == {("PATCH", f"/api/v3/repos/org/config/issues/comments/"
                                                                  f"{comment['id']}")}
    assert writes[0].headers["authorization"] == "Bearer forge-token-123"
    uid = get(kube, ns, "providers.helmop.dev", "pr")["metadata"]["uid"]
    assert comment["number"] == 12 and comment["body"].startswith(
        f"<!-- flux-pr-comment-key:{uid}/ConfigSync/{ns}/apps -->\n\n## helmop Status\n\n")
    assert any("applying revision" in w.body["body"] for w in writes)
    written = len(writes)
    # a ConfigSync that names no pull request: its events are skipped, nothing is written
    apply(kube, ns, configsync("plain", "config"))
    eventually(lambda: operator.metric("helmop_notifications_total", provider=f"{ns}/pr", result="skipped") >= 1, 30)
    assert len(forge.writes()) == written


def test_what_helmop_cannot_send_is_refused_by_name(kube: Run, ns: str) -> None:
    apply(kube, ns, provider("bus", "nats", address="nats://nats.example:4222", channel="flux"))
    refused = eventually(lambda: condition(get(kube, ns, "providers.helmop.dev", "bus")).get("reason")
                         == "UnsupportedProviderType" and get(kube, ns, "providers.helmop.dev", "bus"), 30)
    assert "NATS's own protocol" in condition(refused)["message"] and condition(refused)["status"] == "False"
    # the Event follows the status
    eventually(lambda: [e["type"] for e in events(kube, ns, "bus") if e["reason"] == "UnsupportedProviderType"]
               == ["Warning"])
    apply(kube, ns, provider("devops", "azuredevops", address="https://dev.azure.com/org/proj/_git/repo",
                             serviceAccountName="tenant-a"))
    refused = eventually(lambda: condition(get(kube, ns, "providers.helmop.dev", "devops")).get("reason")
                         == "UnsupportedField" and get(kube, ns, "providers.helmop.dev", "devops"), 30)
    assert "spec.serviceAccountName (a cloud workload identity" in condition(refused)["message"]
    # Flux's Provider: the same field, refused the same way (said in an Event: Flux's kind has no status of its own)
    apply(kube, ns, yaml.safe_dump({"apiVersion": "notification.toolkit.fluxcd.io/v1beta3", "kind": "Provider",
                                    "metadata": {"name": "flux-devops"},
                                    "spec": {"type": "azuredevops", "serviceAccountName": "tenant-a",
                                             "address": "https://dev.azure.com/org/proj/_git/repo"}}))
    said = eventually(lambda: [e for e in events(kube, ns, "flux-devops") if e["reason"] == "UnsupportedField"], 30)
    assert "spec.serviceAccountName" in said[0]["message"]
