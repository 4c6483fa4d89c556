"""What people are shown of where things deliver, without a cluster: the cluster cell of helmop's and Flux's kinds,
``helmop get``'s CLUSTER column (only when something delivers to a remote, always in -o wide) and its filter, the
fleet's counts, reachability and last error, and a tree whose remote cluster was not read."""

from __future__ import annotations

import asyncio
from typing import Any

from helmop.api.kinds import CONFIGSYNC, FLUX, GITREPOSITORY, HELMRELEASE
from helmop.cli.show import on_cluster, render
from helmop.views.cells import cluster
from helmop.views.fleet import fleet
from helmop.views.tree import tree


def delivering(name: str, *, kind: str = "HelmRelease", api: str = "helmop.dev/v1alpha1", secret: str = "",
               named: str = "", ready: str = "True", reason: str = "InstallSucceeded", at: str = "2026-01-01T00:00:00Z",
               message: str = "", inventory: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"conditions": [{"type": "Ready", "status": ready, "reason": reason, "message": message,
                                              "lastTransitionTime": at}]}
    if named:
        status["cluster"] = named
    if inventory is not None:
        status["inventory"] = {"entries": inventory}
    spec = {"kubeConfig": {"secretRef": {"name": secret}}} if secret else {}
    return {"apiVersion": api, "kind": kind, "metadata": {"name": name, "namespace": "team"}, "spec": spec,
            "status": status}


def test_the_cluster_cell() -> None:
    assert cluster(delivering("a")) == "local"
    assert cluster(delivering("b", secret="east-kubeconfig", named="east")) == "east"
    assert cluster(delivering("c", secret="east-kubeconfig")) == "east-kubeconfig"  # not reconciled yet
    # Flux's status schema has no cluster: the Secret's name stands in
    flux = delivering("d", api="helm.toolkit.fluxcd.io/v2", secret="west-kubeconfig")
    assert cluster(flux) == "west-kubeconfig"
    assert cluster(delivering("e", kind="ConfigSync", named="10.0.0.7:6443", secret="s")) == "10.0.0.7:6443"
    assert cluster({"apiVersion": "helmop.dev/v1alpha1", "kind": "GitRepository", "metadata": {"name": "g"}}) == ""


def test_get_shows_the_cluster_column_only_when_something_is_remote() -> None:
    local = [(HELMRELEASE, delivering("web")), (GITREPOSITORY, {"apiVersion": "helmop.dev/v1alpha1",
                                                               "kind": "GitRepository", "metadata": {"name": "g"}})]
    plain = render(local, "", "team", single=False).splitlines()
    assert plain[0].split() == ["NAME", "REVISION", "SUSPENDED", "READY", "MESSAGE"]  # as before fleets
    assert render(local, "wide", "team", single=False).splitlines()[0].split()[-2:] == ["CLUSTER", "MESSAGE"]
    mixed = [*local, (CONFIGSYNC, delivering("apps", kind="ConfigSync", secret="s", named="east"))]
    lines = render(mixed, "", None, single=False).splitlines()
    assert lines[0].split() == ["NAMESPACE", "NAME", "REVISION", "SUSPENDED", "READY", "CLUSTER", "MESSAGE"]
    assert lines[1].split()[-2:] == ["True", "local"] and lines[3].split()[-2:] == ["True", "east"]
    assert [o["metadata"]["name"] for _, o in on_cluster(mixed, "east")] == ["apps"]
    assert [o["metadata"]["name"] for _, o in on_cluster(mixed, "local")] == ["web"]  # delivering kinds only


def test_the_fleet_counts_and_says_which_cluster_answers() -> None:
    objects = [
        (HELMRELEASE, delivering("web")),
        (HELMRELEASE, delivering("bad", ready="False", reason="VersionNotFound", message="no 9.9.9",
                                 at="2026-01-02T00:00:00Z")),
        (HELMRELEASE, delivering("east-1", secret="e", named="east", at="2026-01-01T00:00:00Z")),
        (CONFIGSYNC, delivering("east-2", kind="ConfigSync", secret="e", named="east", ready="False",
                                reason="ClusterUnreachable", message="cluster east (https://e:6443) does not answer",
                                at="2026-01-03T00:00:00Z")),
        (FLUX.helmrelease, delivering("west-1", api="helm.toolkit.fluxcd.io/v2", secret="west", ready="False",
                                      reason="ClusterUnreachable", at="2026-01-01T00:00:00Z")),
        (FLUX.helmrelease, delivering("west-2", api="helm.toolkit.fluxcd.io/v2", secret="west",
                                      at="2026-01-04T00:00:00Z")),
        (GITREPOSITORY, {"apiVersion": "helmop.dev/v1alpha1", "kind": "GitRepository", "metadata": {"name": "g"}}),
    ]
    local, east, west = fleet(objects)
    assert (local.name, east.name, west.name) == ("local", "east", "west")
    assert local.releases == {"failed": 1, "progressing": 0, "ready": 1, "suspended": 0}
    assert local.kinds == {HELMRELEASE: 2}
    assert local.last_error is not None and local.last_error.reason == "VersionNotFound" and local.unreachable is None
    # east: its ConfigSync's ClusterUnreachable is newer than its last Ready: unreachable, said with when and why
    assert east.unreachable is not None and east.unreachable.at == "2026-01-03T00:00:00Z"
    assert "does not answer" in east.unreachable.message
    assert east.syncs["failed"] == 1 and east.releases["ready"] == 1 and east.kinds == {HELMRELEASE: 1, CONFIGSYNC: 1}
    # west: one of its objects was Ready after the other last failed to reach it: it answers again
    assert west.unreachable is None and west.last_error is not None and west.kinds == {FLUX.helmrelease: 2}


def test_a_tree_shows_a_remote_inventory_unread_with_the_reason() -> None:
    release = delivering("web", secret="east-kubeconfig", named="east", inventory=[
        {"id": "team_web_apps_Deployment", "v": "v1"}])

    class Management:  # what the reader's own cluster answers: the release, nothing of the remote's
        async def path_of(self, api_version: str, kind: str, namespace: str, name: str) -> str:
            return f"{api_version}/{kind}/{namespace}/{name}"

        async def get(self, path: str) -> dict[str, Any] | None:
            assert path.startswith("helmop.dev/v1alpha1/HelmRelease/"), f"{path} was looked for here"
            return release

    async def refused(kube: Any, obj: dict[str, Any]) -> str:
        return "cluster east not followed: you may not read Secret team/east-kubeconfig"

    ref = ("helmop.dev/v1alpha1", "HelmRelease", "team", "web")
    shown = asyncio.run(tree(Management(), ref, reach=refused))  # type: ignore[arg-type]
    assert [shown.line, *shown.lines()] == [
        "HelmRelease/team/web  Ready  → cluster east",
        "! cluster east not followed: you may not read Secret team/east-kubeconfig",
        "└── Deployment/team/web  NotRead"]
    unreached = asyncio.run(tree(Management(), ref))  # type: ignore[arg-type]  # the web UI: never looked for
    assert unreached.note == "cluster east is not read here" and unreached.children[0].unread
