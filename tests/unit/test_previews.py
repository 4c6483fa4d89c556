"""Previews' pure parts: how a live object is shown against a rendered one (what the server adds, defaults and other
managers' fields left out; what the appliers own kept, so a field no longer rendered shows as removed), a comment's
bound, the Preview's spec, which pull requests a turn posts on, its status, and what is asked of each git host."""

from __future__ import annotations

import json
from typing import Any

import pytest

from helmop.api.changes import compare, markdown
from helmop.api.errors import SpecError
from helmop.api.previews import parse_preview
from helmop.api.rendered import Rendering, live_view, server_view
from helmop.api.status.preview import PreviewStatus, PullRequestPreview
from helmop.decisions.previews import NOT_POSTED, Open, plan
from helmop.decisions.settle.preview import previewed
from helmop.notifications.payloads import Request, Target
from helmop.notifications.payloads.commits import status
from helmop.notifications.payloads.pullrequests import open_change_requests

SHA, OTHER = "a" * 40, "b" * 40

LIVE: dict[str, Any] = {
    "apiVersion": "apps/v1", "kind": "Deployment",
    "metadata": {"name": "web", "namespace": "shop", "uid": "u-1", "resourceVersion": "42", "generation": 3,
                 "creationTimestamp": "2026-01-01T00:00:00Z",
                 "labels": {"app": "web", "helmop.dev/configsync": "shop.apps", "old": "gone"},
                 "annotations": {"meta.helm.sh/release-name": "web", "deployment.kubernetes.io/revision": "3"},
                 "managedFields": [
                     {"manager": "helmop-configsync", "operation": "Apply", "fieldsV1": {
                         "f:metadata": {"f:labels": {"f:app": {}, "f:old": {}, "f:helmop.dev/configsync": {}}},
                         "f:spec": {"f:replicas": {}, "f:paused": {}, "f:template": {"f:spec": {"f:containers": {
                             'k:{"name":"web"}': {".": {}, "f:image": {}}}}}}}},
                     {"manager": "kube-controller-manager", "operation": "Update", "fieldsV1": {
                         "f:spec": {"f:progressDeadlineSeconds": {}}}}]},
    "spec": {"replicas": 1, "paused": False, "progressDeadlineSeconds": 600, "revisionHistoryLimit": 10,
             "template": {"spec": {"containers": [{"name": "web", "image": "nginx:1", "imagePullPolicy": "Always",
                                                   "terminationMessagePath": "/dev/termination-log"}],
                                   "dnsPolicy": "ClusterFirst"}}},
    "status": {"replicas": 1},
}
RENDERED: dict[str, Any] = {
    "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "shop",
                                                                "labels": {"app": "web"}},
    "spec": {"replicas": 3, "template": {"spec": {"containers": [{"name": "web", "image": "nginx:2"}]}}},
}


def test_a_live_object_is_seen_through_what_is_rendered_and_what_its_applier_owns() -> None:
    view = live_view(LIVE, RENDERED, {"helmop-configsync"})
    assert view == {"apiVersion": "apps/v1", "kind": "Deployment",
                    "metadata": {"name": "web", "namespace": "shop", "labels": {"app": "web", "old": "gone"}},
                    "spec": {"replicas": 1, "paused": False,  # owned, no longer rendered: shows as removed
                             "template": {"spec": {"containers": [{"name": "web", "image": "nginx:1"}]}}}}
    # a dry run's answer, cut to what is rendered: defaults within the rendered fields' shape go
    answered = {**LIVE, "spec": {**LIVE["spec"], "replicas": 3, "template": {"spec": {"containers": [
        {"name": "web", "image": "nginx:2", "imagePullPolicy": "IfNotPresent"}]}}}}
    assert server_view(answered, RENDERED)["spec"] == RENDERED["spec"]
    # a list item the other side lacks is kept whole (a removed container shows, with what it had)
    two = {**LIVE, "spec": {"template": {"spec": {"containers": [*LIVE["spec"]["template"]["spec"]["containers"],
                                                                 {"name": "sidecar", "image": "envoy"}]}}}}
    containers = live_view(two, RENDERED, ())["spec"]["template"]["spec"]["containers"]
    assert containers[1] == {"name": "sidecar", "image": "envoy"}


def test_a_comment_stays_within_its_size_and_counts_what_it_leaves_out() -> None:
    base, head = Rendering(), Rendering()
    base.groups["ConfigSync apps"] = {f"ConfigMap/shop/c{i}": f"data: {{a: '{i}'}}\n" for i in range(50)}
    head.groups["ConfigSync apps"] = {f"ConfigMap/shop/c{i}": f"data: {{a: '{i}x'}}\n" for i in range(50)}
    found = compare(base, head, max_objects=40)
    assert found.counts == {"added": 0, "changed": 50, "removed": 0} and found.left_out == 10
    text = markdown(found, "main", "#7", max_chars=2000)
    assert len(text) <= 2000 and text.endswith(" more objects\n")
    assert int(text.rsplit("… ", 1)[1].split()[0]) == 50 - text.count("<details>")
    assert "<code>ConfigMap/shop/c0</code>" in text
    assert "&lt;img" in markdown(compare(Rendering(), Rendering({"ConfigSync a<img src=x>": {"x": "a: 1\n"}})),
                                 "main", "#7")


def test_a_release_one_side_could_not_render_is_said_and_not_compared() -> None:
    """Its objects are not diffed (all would look added or removed), nor its chart and values; the other groups
    are; why is said for each side (once when both say the same), masked, in every output."""
    base, head = Rendering(secrets=["hunter2"]), Rendering()
    base.groups = {"HelmRelease shop/web": {"ConfigMap/shop/web": "a: 1\n"}, "ConfigSync apps": {"x": "a: 1\n"}}
    base.releases["HelmRelease shop/web"] = ("c1", "v1")
    head.groups = {"ConfigSync apps": {"x": "a: 2\n"}}
    head.unrendered["HelmRelease shop/web"] = "apps/web.yaml:1: chart tiny 9.9.9 not found (password hunter2)"
    head.api_versions = {"HelmRelease shop/web": "helm.toolkit.fluxcd.io/v2"}
    found = compare(base, head)
    assert [(c.group, c.change) for c in found.objects] == [("ConfigSync apps", "changed")] and not found.releases
    [line] = found.unrendered[0].lines("main", "pr")
    assert line.startswith("HelmRelease shop/web: not rendered in pr: apps/web.yaml:1: chart tiny 9.9.9 not found")
    assert "hunter2" not in line and "***" in line
    assert found.json()["groups"] == {"HelmRelease shop/web": "helm.toolkit.fluxcd.io/v2"}
    assert "- `HelmRelease shop/web`: not rendered in `pr`: apps/web.yaml:1" in markdown(found, "main", "pr")
    base.unrendered["HelmRelease shop/web"] = head.unrendered["HelmRelease shop/web"]
    assert compare(base, head).unrendered[0].lines("main", "pr")[0].startswith(
        "HelmRelease shop/web: not rendered in main, pr: apps/web.yaml:1")


def test_a_previews_spec_is_checked() -> None:
    spec = parse_preview({"sourceRef": {"name": "config"}, "providerRef": {"name": "pr"}, "paths": ["./apps/", "."],
                          "substitute": {"cluster": "prod"}, "decryption": {"secretRef": {"name": "keys"}}})
    assert (spec.source, spec.provider, spec.paths, spec.substitute, spec.decryption_secret) == (
        "config", "pr", ("apps", "."), (("cluster", "prod"),), "keys")
    assert (spec.interval, spec.max_lines, spec.max_objects, spec.max_pull_requests) == (300.0, 500, 200, 20)
    for bad, said in [({"providerRef": {"name": "pr"}}, "spec.sourceRef.name"),
                      ({"sourceRef": {"name": "c", "namespace": "other"}, "providerRef": {"name": "pr"}},
                       "own namespace"),
                      ({"sourceRef": {"name": "c"}, "providerRef": {"name": "pr"}, "paths": ["../up"]}, "inside"),
                      ({"sourceRef": {"name": "c"}, "providerRef": {"name": "pr"}, "maxObjects": 0}, "1 to 2000"),
                      ({"sourceRef": {"name": "c"}, "providerRef": {"name": "pr"}, "base": "refs/heads/main"},
                       "branch name"),
                      ({"sourceRef": {"name": "c", "kind": "Bucket"}, "providerRef": {"name": "pr"}},
                       "GitRepository"),
                      ({"sourceRef": {"name": "c"}, "providerRef": {"name": "pr"}, "substitute": {"1x": "y"}},
                       "variable names")]:
        with pytest.raises(SpecError, match=said):
            parse_preview(bad)


def test_a_turn_posts_on_what_moved_and_forgets_what_closed() -> None:
    posted = PullRequestPreview(number=7, head_commit=SHA, result="Rendered")
    failed = PullRequestPreview(number=8, head_commit=SHA, result=NOT_POSTED)
    closed = PullRequestPreview(number=3, head_commit=SHA, result="Rendered")
    status = PreviewStatus(observed_generation=2, pull_requests=(closed, posted, failed))
    found = [Open(7, SHA), Open(8, SHA), Open(9, OTHER), Open(10, OTHER)]
    decided = plan(status, 2, found, 3)
    assert (decided.post, decided.kept, decided.closed, decided.left_out) == (
        (Open(8, SHA), Open(9, OTHER)), (posted,), (3,), 1)
    assert plan(status, 2, [Open(7, OTHER)], 3).post == (Open(7, OTHER),)  # a new push
    assert plan(status, 3, [Open(7, SHA)], 3).post == (Open(7, SHA),)  # the spec changed


def test_a_previews_status_says_whether_every_comment_is_posted() -> None:
    records = [PullRequestPreview(number=9, head_commit=SHA, result="Rendered"),
               PullRequestPreview(number=7, head_commit=SHA, result="Unbuildable", message="apps: broken")]
    done = previewed(PreviewStatus(), 4, "main", f"main@sha1:{SHA}", records, 2)
    ready = done.condition("Ready")
    assert ready is not None and ready.true and ready.message == ("2 open pull request(s) into main previewed "
                                                                  "(2 more not: spec.maxPullRequests)")
    assert [r.number for r in done.pull_requests] == [7, 9] and done.observed_generation == 4
    failing = previewed(done, 4, "main", "", [*records, PullRequestPreview(number=8, head_commit=SHA,
                                                                          result=NOT_POSTED, message="401")], 0)
    failed = failing.condition("Ready")
    assert failed is not None and (failed.true, failed.reason, failed.message) == (False, "PostFailed",
                                                                                   "pull request #8: 401")
    assert previewed(PreviewStatus(), 1, "main", "", [], 0).condition("Ready").message == (  # type: ignore[union-attr]
        "no open pull request into main")


@pytest.mark.parametrize(("kind", "address", "listed", "url"), [
    ("githubpullrequestcomment", "https://github.com/org/config",
     [{"number": 7, "head": {"sha": SHA}, "base": {"ref": "main"}}, {"number": 8, "head": {"sha": OTHER},
                                                                     "base": {"ref": "dev"}}],
     "https://api.github.com/repos/org/config/pulls?state=open&base=main&sort=updated&direction=desc&per_page=50"),
    ("gitlabmergerequestcomment", "https://gitlab.example/group/sub/config.git",
     [{"iid": 7, "sha": SHA, "target_branch": "main"}, {"iid": "x", "sha": SHA, "target_branch": "main"}],
     "https://gitlab.example/api/v4/projects/group%2Fsub%2Fconfig/merge_requests?state=opened&target_branch=main"
     "&order_by=updated_at&per_page=50"),
    ("giteapullrequestcomment", "https://gitea.example/org/config",
     [{"number": 7, "head": {"sha": SHA}, "base": {"ref": "main"}}, {"number": 9, "head": {"sha": "short"},
                                                                     "base": {"ref": "main"}}],
     "https://gitea.example/api/v1/repos/org/config/pulls?state=open&sort=recentupdate&limit=50"),
])
async def test_each_host_lists_its_open_change_requests(kind: str, address: str, listed: list[Any],
                                                        url: str) -> None:
    asked: list[Request] = []

    async def send(request: Request) -> str:
        asked.append(request)
        return json.dumps(listed)

    found = await open_change_requests(Target(type=kind, address=address, token="t0ken"), "main", send)
    ref = "refs/merge-requests/7/head" if kind.startswith("gitlab") else "refs/pull/7/head"
    assert [(c.number, c.head, c.base, c.ref) for c in found] == [(7, SHA, "main", ref)]
    assert [(r.method, r.url) for r in asked] == [("GET", url)]


def test_a_commit_status_is_set_as_each_host_takes_it() -> None:
    for kind, address, said in [("github", "https://github.com/org/config", {"state": "failure", "context": "p/x"}),
                                ("gitlab", "https://gitlab.example/org/config", {"state": "failed", "name": "p/x"}),
                                ("gitea", "https://gitea.example/org/config", {"state": "failure", "context": "p/x"})]:
        request = status(Target(type=kind, address=address, token="t0ken", status_id="p/x"), SHA, "failure",
                         "helmop preview: does not render")
        assert request.url.endswith(f"/statuses/{SHA}")
        assert json.loads(request.body) == {**said, "description": "helmop preview: does not render"}
