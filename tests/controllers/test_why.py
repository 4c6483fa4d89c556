"""``helmop why``: the chain of what an object waits for, read from a sandbox over HTTP with helmop's CRDs and no
operator: each object and its status are written through the API as the operator would have written them, and the
verb runs in-process (``tests.clirun``)."""

from __future__ import annotations

import asyncio
import json
import re
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helmop_sandbox import Sandbox

from helmop.controllers.operator import install_crds
from helmop.infra.kube import Connection, Kube
from helmop.infra.worker import Worker
from helmop.ui.pages import waiting_for
from helmop.views import why as why_view
from helmop.views.why import Link
from tests.browser import Ui
from tests.clirun import run_cli

V1 = "helmop.dev/v1alpha1"
FLUX_HR, FLUX_KS, FLUX_SOURCE = ("helm.toolkit.fluxcd.io/v2", "kustomize.toolkit.fluxcd.io/v1",
                                 "source.toolkit.fluxcd.io/v1")
STAMP = "2025-01-01T00:00:00Z"


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    """A sandbox with helmop's CRDs and Flux's (faults ready to be injected: none until a test asks)."""
    with Sandbox(ready_delay=0.05, faults="seed=5") as running:
        asyncio.run(_with_kube(running.kubeconfig, lambda kube: install_crds(kube, flux=True)))
        yield running


@pytest.fixture(scope="module")
def cluster(sandbox: Sandbox) -> Path:
    """The sandbox's kubeconfig."""
    return sandbox.kubeconfig


@pytest.fixture
def ns(cluster: Path) -> str:
    name = f"why-{uuid.uuid4().hex[:6]}"
    put(cluster, "", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name


async def _with_kube(kubeconfig: Path, work: Any) -> Any:
    kube = Kube(Connection.from_kubeconfig(kubeconfig))
    try:
        return await work(kube)
    finally:
        await kube.close()


def put(kubeconfig: Path, ns: str, *objects: dict[str, Any]) -> None:
    """Apply each object, then write its ``status`` (when it has one) through the status subresource."""
    async def work(kube: Kube) -> None:
        for obj in objects:
            body = {k: v for k, v in obj.items() if k != "status"}
            path = await kube.path_of(obj["apiVersion"], obj["kind"], ns, obj["metadata"]["name"])
            await kube.apply(path, {**body, "metadata": {**body["metadata"], **({"namespace": ns} if ns else {})}},
                             "test-why")
            if "status" in obj:
                await kube.merge_patch(f"{path}/status", {"status": obj["status"]})

    asyncio.run(_with_kube(kubeconfig, work))


def ready(status: str, reason: str, message: str = "", **more: Any) -> dict[str, Any]:
    return {"conditions": [{"type": "Ready", "status": status, "reason": reason, "message": message,
                            "lastTransitionTime": STAMP}], **more}


def obj(kind: str, name: str, spec: dict[str, Any], status: dict[str, Any] | None = None,
        api_version: str = V1) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": name}, "spec": spec,
            **({"status": status} if status is not None else {})}


def release(name: str, repository: str, status: dict[str, Any], **spec: Any) -> dict[str, Any]:
    chart = {"spec": {"chart": "demo", "sourceRef": {"kind": "HelmRepository", "name": repository}}}
    return obj("HelmRelease", name, {"chart": chart, **spec}, status)


def repository(name: str, status: dict[str, Any]) -> dict[str, Any]:
    return obj("HelmRepository", name, {"url": f"https://{name}.example.invalid"}, status)


PUBLISHED = ready("True", "Succeeded", "stored artifact", artifact={"revision": "sha256:0123abcd"})


def why(kubeconfig: Path, ns: str, *args: str) -> str:
    done = run_cli(["why", *args, "-n", ns], {"KUBECONFIG": str(kubeconfig)})
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def why_json(kubeconfig: Path, ns: str, *args: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(why(kubeconfig, ns, *args, "-o", "json"))
    return found


def rows(text: str) -> dict[str, list[str]]:
    """The table's rows by object (the tree's drawing taken off), each its other cells."""
    lines = [line for line in text.splitlines()[1:] if line and not line.startswith("root cause:")]
    out = {}
    for line in lines:
        cells = line.lstrip("│├└─ ").split()
        out[cells[0]] = cells[1:]
    return out


def chain(link: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(kind, name, state) down the first of each link's waits."""
    out = [(link["kind"], link["name"], link["state"])]
    while link["waitsFor"]:
        link = link["waitsFor"][0]
        out.append((link["kind"], link["name"], link["state"]))
    return out


def three_links(cluster: Path, ns: str) -> None:
    """HelmRelease app -> ConfigSync infra -> HelmRelease db (each by dependsOn) -> HelmRepository charts (db's
    source, which has published nothing: its index does not answer); app's and infra's sources are published."""
    put(cluster, ns,
        repository("stable", PUBLISHED),
        repository("charts", ready("False", "RepositoryUnreachable", "https://charts.example.invalid/index.yaml: "
                                                                     "connection refused")),
        obj("GitRepository", "config", {"url": "https://git.example.invalid/config"},
            ready("True", "Succeeded", artifact={"revision": "main@sha1:0123abcd"})),
        release("db", "charts", ready("False", "SourceNotReady", f"HelmRepository {ns}/charts has no artifact yet")),
        obj("ConfigSync", "infra", {"sourceRef": {"name": "config"}, "path": "infra",
                                    "dependsOn": [{"apiVersion": V1, "kind": "HelmRelease", "name": "db"}]},
            ready("False", "DependencyNotReady", f"waiting for HelmRelease/{ns}/db")),
        release("app", "stable", ready("False", "DependencyNotReady", f"waiting for ConfigSync/{ns}/infra"),
                dependsOn=[{"apiVersion": V1, "kind": "ConfigSync", "name": "infra"}]))


def test_three_links_down_to_a_helm_repository_without_an_artifact(cluster: Path, ns: str) -> None:
    three_links(cluster, ns)
    text = why(cluster, ns, "hr/app")
    assert text.splitlines()[0].split() == ["OBJECT", "VIA", "STATE", "REASON", "MESSAGE"]
    found = rows(text)
    assert list(found) == [f"HelmRelease/{ns}/app", f"ConfigSync/{ns}/infra", f"HelmRelease/{ns}/db",
                           f"HelmRepository/{ns}/charts"]  # neither the published sources nor anything else
    assert found[f"HelmRelease/{ns}/app"][:3] == ["-", "Waiting", "DependencyNotReady"]
    assert found[f"ConfigSync/{ns}/infra"][:3] == ["dependsOn", "Waiting", "DependencyNotReady"]
    assert found[f"HelmRelease/{ns}/db"][:3] == ["dependsOn", "Waiting", "SourceNotReady"]
    assert found[f"HelmRepository/{ns}/charts"][:3] == ["source", "Failed", "RepositoryUnreachable"]
    assert text.splitlines()[-1] == (f"root cause: HelmRepository/{ns}/charts is Failed: RepositoryUnreachable: "
                                     "https://charts.example.invalid/index.yaml: connection refused")
    assert why(cluster, ns, "helmrelease", "app") == text  # KIND NAME as kubectl takes it

    said = why_json(cluster, ns, "hr/app")
    assert chain(said["object"]) == [("HelmRelease", "app", "Waiting"), ("ConfigSync", "infra", "Waiting"),
                                     ("HelmRelease", "db", "Waiting"), ("HelmRepository", "charts", "Failed")]
    [cause] = said["rootCauses"]
    assert cause == {"apiVersion": V1, "kind": "HelmRepository", "namespace": ns, "name": "charts", "via": "source",
                     "state": "Failed", "reason": "RepositoryUnreachable",
                     "message": "https://charts.example.invalid/index.yaml: connection refused"}

    # published now, and Ready: the release no longer waits for it, and it is its own root cause (not yet retried)
    put(cluster, ns, repository("charts", PUBLISHED))
    said = why_json(cluster, ns, "hr/app")
    assert chain(said["object"])[-1] == ("HelmRelease", "db", "Waiting")
    assert [(c["name"], c["reason"]) for c in said["rootCauses"]] == [("db", "SourceNotReady")]


def test_a_ready_object_waits_for_nothing(cluster: Path, ns: str) -> None:
    put(cluster, ns, repository("stable", PUBLISHED),
        release("web", "stable", ready("True", "InstallSucceeded", "Helm install succeeded")))
    assert why(cluster, ns, "hr/web").strip() == (f"HelmRelease/{ns}/web is Ready and waits for nothing "
                                                  "(Helm install succeeded)")
    said = why_json(cluster, ns, "hr/web")
    assert said["object"]["state"] == "Ready" and said["object"]["waitsFor"] == [] and said["rootCauses"] == []


def test_a_configmap_judged_by_its_ready_expr(cluster: Path, ns: str) -> None:
    flag = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "flag"}, "data": {"ready": "no"}}
    present = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "present"}}
    put(cluster, ns, repository("stable", PUBLISHED), flag, present,
        release("gate", "stable", ready("False", "DependencyNotReady", "waiting"), dependsOn=[
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "flag", "readyExpr": "dep.data.ready == 'yes'"},
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "present", "ready": False},
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "ghost"}]))
    said = why_json(cluster, ns, "hr/gate")
    waits = {link["name"]: (link["state"], link["reason"], link["message"]) for link in said["object"]["waitsFor"]}
    assert waits == {"flag": ("Waiting", "ReadyExprNotTrue", "readyExpr is not true: dep.data.ready == 'yes'"),
                     "ghost": ("Missing", "NotFound", f"ConfigMap/{ns}/ghost not found")}  # present: enough
    assert sorted(c["name"] for c in said["rootCauses"]) == ["flag", "ghost"]

    put(cluster, ns, {**flag, "data": {"ready": "yes"}}, {**present, "metadata": {"name": "ghost"}})
    said = why_json(cluster, ns, "hr/gate")
    assert said["object"]["waitsFor"] == []  # (its status still says it waits: it is its own root cause)
    assert [(c["name"], c["state"]) for c in said["rootCauses"]] == [("gate", "Waiting")]


def test_a_cycle_through_two_kinds_is_said_not_followed(cluster: Path, ns: str) -> None:
    put(cluster, ns, repository("stable", PUBLISHED),
        obj("GitRepository", "config", {"url": "https://git.example.invalid/config"},
            ready("True", "Succeeded", artifact={"revision": "main@sha1:0123abcd"})),
        release("front", "stable", ready("False", "DependencyNotReady", "waiting"),
                dependsOn=[{"apiVersion": V1, "kind": "ConfigSync", "name": "back"}]),
        obj("ConfigSync", "back", {"sourceRef": {"name": "config"},
                                   "dependsOn": [{"apiVersion": V1, "kind": "HelmRelease", "name": "front"}]},
            ready("False", "DependencyNotReady", "waiting")))
    said = why_json(cluster, ns, "hr/front")
    assert chain(said["object"]) == [("HelmRelease", "front", "Waiting"), ("ConfigSync", "back", "Waiting"),
                                     ("HelmRelease", "front", "Failed")]
    [cause] = said["rootCauses"]
    assert (cause["reason"], cause["message"]) == (
        "DependencyCycle", f"spec.dependsOn makes a cycle: HelmRelease/{ns}/front -> ConfigSync/{ns}/back -> "
                           f"HelmRelease/{ns}/front")


def test_a_suspended_source_and_an_unreachable_cluster_end_the_chain(cluster: Path, ns: str) -> None:
    put(cluster, ns,
        obj("GitRepository", "paused", {"url": "https://git.example.invalid/config", "suspend": True}),
        obj("ConfigSync", "waits", {"sourceRef": {"name": "paused"}},
            ready("False", "SourceNotReady", f"GitRepository {ns}/paused has no artifact yet")),
        repository("stable", PUBLISHED),
        release("far", "stable", ready("False", "ClusterUnreachable", "cluster prod (https://prod.example.invalid) "
                                                                     "does not answer: connection refused"),
                kubeConfig={"secretRef": {"name": "prod"}}),
        release("after", "stable", ready("False", "DependencyNotReady", "waiting"),
                dependsOn=[{"name": "far"}, {"apiVersion": V1, "kind": "ConfigSync", "name": "waits"}]))
    said = why_json(cluster, ns, "hr/after")
    causes = {c["name"]: (c["state"], c["reason"], c["via"]) for c in said["rootCauses"]}
    assert causes == {"far": ("Unreachable", "ClusterUnreachable", "dependsOn"),
                      "paused": ("Suspended", "Suspended", "source")}
    assert [link["name"] for link in said["object"]["waitsFor"]] == ["far", "waits"]


def test_flux_kinds_follow_the_same_links(cluster: Path, ns: str) -> None:
    """A Kustomization waits for a Flux HelmRelease, which waits for the OCIRepository its chartRef names."""
    artifact = {"revision": "main@sha1:0123abcd", "digest": "sha256:0123", "path": "x", "url": "http://x/x.tgz",
                "lastUpdateTime": STAMP}
    put(cluster, ns,
        obj("OCIRepository", "podinfo", {"url": "oci://ghcr.example.invalid/podinfo", "interval": "5m"},
            ready("Unknown", "Progressing", "reconciliation in progress"), api_version=FLUX_SOURCE),
        obj("HelmRelease", "podinfo", {"interval": "5m", "chartRef": {"kind": "OCIRepository", "name": "podinfo"}},
            ready("False", "SourceNotReady", "waiting"), api_version=FLUX_HR),
        obj("GitRepository", "config", {"url": "https://git.example.invalid/config", "interval": "5m"},
            ready("True", "Succeeded", artifact=artifact), api_version=FLUX_SOURCE),
        obj("Kustomization", "apps", {"interval": "5m", "prune": True, "path": "./apps",
                                      "sourceRef": {"kind": "GitRepository", "name": "config"},
                                      "dependsOn": [{"apiVersion": FLUX_HR, "kind": "HelmRelease", "name": "podinfo"}]},
            ready("False", "DependencyNotReady", "waiting"), api_version=FLUX_KS))
    said = why_json(cluster, ns, "ks/apps")
    assert [(link["apiVersion"], link["kind"], link["via"], link["state"]) for link in said["object"]["waitsFor"]
            ] == [(FLUX_HR, "HelmRelease", "dependsOn", "Waiting")]
    assert chain(said["object"])[-1] == ("OCIRepository", "podinfo", "Waiting")
    [cause] = said["rootCauses"]
    assert (cause["apiVersion"], cause["via"], cause["reason"]) == (FLUX_SOURCE, "source", "Progressing")


def test_an_object_not_there_is_an_error(cluster: Path, ns: str) -> None:
    done = run_cli(["why", "hr/ghost", "-n", ns], {"KUBECONFIG": str(cluster)})
    assert done.returncode == 2 and f"HelmRelease/{ns}/ghost not found" in done.stderr
    done = run_cli(["why", "hr", "-n", ns], {"KUBECONFIG": str(cluster)})
    assert done.returncode == 2 and "give KIND/NAME" in done.stderr


def page(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as answer:
        assert answer.status == 200
        return str(answer.read().decode())


def test_the_ui_object_page_shows_the_same_chain(cluster: Path, ns: str) -> None:
    three_links(cluster, ns)
    put(cluster, ns, release("web", "stable", ready("True", "InstallSucceeded", "Helm install succeeded")))
    ui = Ui(cluster)
    try:
        html = page(f"{ui.url}helmreleases/{ns}/app")
        shown = html[html.index('id="waiting-h"'):]
        assert re.findall(r'data-object="([^"]+)" data-state="([^"]+)"', shown) == [
            (f"ConfigSync/{ns}/infra", "Waiting"), (f"HelmRelease/{ns}/db", "Waiting"),
            (f"HelmRepository/{ns}/charts", "Failed")]
        assert (f'Root cause: <span class="obj">HelmRepository/{ns}/charts</span> is Failed: '
                '<span class="reason">RepositoryUnreachable</span>') in shown
        html = page(f"{ui.url}helmreleases/{ns}/web")
        assert '<p class="none">Nothing.</p>' in html[html.index('id="waiting-h"'):html.index('id="conditions-h"')]
    finally:
        ui.close()


def test_a_diamond_shows_the_shared_object_in_full_once(cluster: Path, ns: str) -> None:
    """top waits for left and right, both for bottom, which waits for a ConfigMap that is not there: bottom is shown
    in full under left, and under right as one link "(see above)", which is no root cause of its own."""
    waiting = ready("False", "DependencyNotReady", "waiting")
    put(cluster, ns, repository("stable", PUBLISHED),
        release("bottom", "stable", waiting, dependsOn=[{"apiVersion": "v1", "kind": "ConfigMap", "name": "absent"}]),
        release("left", "stable", waiting, dependsOn=[{"name": "bottom"}]),
        release("right", "stable", waiting, dependsOn=[{"name": "bottom"}]),
        release("top", "stable", waiting, dependsOn=[{"name": "left"}, {"name": "right"}]))
    lines = why(cluster, ns, "hr/top").splitlines()
    assert [re.findall(r"^[│├└─ ]*\S+", line)[0] for line in lines[1:7]] == [
        f"HelmRelease/{ns}/top", f"├── HelmRelease/{ns}/left", f"│   └── HelmRelease/{ns}/bottom",
        f"│       └── ConfigMap/{ns}/absent", f"└── HelmRelease/{ns}/right", f"    └── HelmRelease/{ns}/bottom"]
    assert lines[6].split()[2:] == ["dependsOn", "Waiting", "DependencyNotReady", "(see", "above)"]
    assert lines[7:] == ["", f"root cause: ConfigMap/{ns}/absent is Missing: NotFound: ConfigMap/{ns}/absent not found"]

    said = why_json(cluster, ns, "hr/top")
    left, right = said["object"]["waitsFor"]
    [shown], [again] = left["waitsFor"], right["waitsFor"]
    assert (shown["name"], shown["seeAbove"], [d["name"] for d in shown["waitsFor"]]) == ("bottom", False, ["absent"])
    assert (again["name"], again["seeAbove"], again["waitsFor"], again["message"]) == ("bottom", True, [],
                                                                                        "(see above)")
    assert [c["name"] for c in said["rootCauses"]] == ["absent"]


def layers(width: int, depth: int) -> list[dict[str, Any]]:
    """HelmReleases l<i>-<j>, ``width`` in each of ``depth`` layers, each waiting for every one of the next layer
    (the last layer's wait for nothing); top waits for the first layer. Their chart source is published."""
    waiting = ready("False", "DependencyNotReady", "waiting")
    below = [[{"name": f"l{i + 1}-{j}"} for j in range(width)] if i < depth else [] for i in range(depth + 1)]
    return [release("top", "stable", waiting, dependsOn=below[0]),
            *(release(f"l{i}-{j}", "stable", waiting, dependsOn=below[i]) for i in range(1, depth + 1)
              for j in range(width))]


def links(link: dict[str, Any]) -> list[dict[str, Any]]:
    return [link, *(n for below in link["waitsFor"] for n in links(below))]


def test_a_wide_layered_chain_is_cut_at_the_cap_with_what_was_left_out(cluster: Path, ns: str) -> None:
    """8 wide, 5 layers deep, each waiting for all of the next layer: 8**5 ways down to the last layer, 264 links
    with each object in full once. Shown: the first 200 links in the order they are drawn (below l1-0: l2-0 to
    l2-7; under l2-7, see above, l3-0 to l3-5), then one link saying what was not looked at: l3-6 and l3-7 under
    l2-7, the sources of l2-7, l1-0 and top, and l1-1 to l1-7 under top, 12."""
    put(cluster, ns, repository("stable", PUBLISHED), *layers(8, 5))
    started = time.monotonic()
    said = why_json(cluster, ns, "hr/top")
    assert time.monotonic() - started < 60  # (unbounded, this tree is 37,449 links)
    shown = links(said["object"])
    assert len(shown) == 201
    *first, cut = said["object"]["waitsFor"]
    assert [link["name"] for link in first] == ["l1-0"]
    assert (cut["state"], cut["name"], cut["message"]) == (
        "Cut", "…", "the chain was cut at 200 links: 12 more dependsOn entries and sources were not looked at")
    expanded = [link["name"] for link in shown if link["waitsFor"]]
    assert len(expanded) == len(set(expanded))  # each in full once
    assert [link["name"] for link in first[0]["waitsFor"][-1]["waitsFor"]] == [f"l3-{j}" for j in range(6)]
    assert {c["name"] for c in said["rootCauses"]} == {f"l5-{j}" for j in range(8)}  # not the cut, nor "see above"
    lines = why(cluster, ns, "hr/top").splitlines()
    assert len(lines) == 1 + 201 + 1 + 8  # heading, links, a blank line, root causes
    assert lines[201].split()[:5] == ["└──", "…", "-", "Cut", "NotFollowed"] and lines[202] == ""


def test_looking_stops_at_the_deadline(cluster: Path, ns: str, monkeypatch: pytest.MonkeyPatch) -> None:
    put(cluster, ns, repository("stable", PUBLISHED), *layers(2, 1))
    monkeypatch.setattr(why_view, "DEADLINE", 0.0)
    said = why_json(cluster, ns, "hr/top")
    assert [(link["state"], link["message"]) for link in said["object"]["waitsFor"]] == [
        ("Cut", "the chain was cut after 0 s: 3 more dependsOn entries and sources were not looked at")]


def test_a_dependency_the_api_will_not_read_is_an_error_link(sandbox: Sandbox, cluster: Path, ns: str) -> None:
    """The API failing every read of one kind (500, 503, 504: retried, then given up): each dependency of that kind its
    Error link, with the API's words; the chain, the exit code and the UI's page as ever. (An apiVersion or a name no
    API path can hold is refused with the spec, before any request: tests/unit/test_dependencies.py.)"""
    put(cluster, ns, repository("stable", PUBLISHED), release("gate", "stable", ready(
        "False", "DependencyNotReady", "waiting"), dependsOn=[
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "x"},
            {"apiVersion": "v1", "kind": "Secret", "name": "absent"}]))
    faults = sandbox.faults
    assert faults is not None
    faults.verbs, faults.resources, faults.error = frozenset({"get"}), frozenset({"configmaps"}), 1.0
    try:
        said = why_json(cluster, ns, "hr/gate")
        table = rows(why(cluster, ns, "hr/gate"))
        ui = Ui(cluster)
        try:
            html = page(f"{ui.url}helmreleases/{ns}/gate")
        finally:
            ui.close()
    finally:
        faults.error = 0.0
    waits = [(link["kind"], link["name"], link["state"]) for link in said["object"]["waitsFor"]]
    assert waits == [("ConfigMap", "x", "Error"), ("Secret", "absent", "Missing")], waits
    error = said["object"]["waitsFor"][0]
    assert error["reason"] in ("InternalError", "ServiceUnavailable", "Timeout") and error["message"], error
    assert [c["name"] for c in said["rootCauses"]] == ["x", "absent"]
    assert table[f"ConfigMap/{ns}/x"][:2] == ["dependsOn", "Error"]
    for section in ("state-h", "conditions-h", "tree-h", "events-h", "spec-h"):
        assert f'id="{section}"' in html
    assert re.findall(r'data-object="([^"]+)" data-state="([^"]+)"', html[html.index('id="waiting-h"'):]) == [
        (f"ConfigMap/{ns}/x", "Error"), (f"Secret/{ns}/absent", "Missing")]

def test_the_page_notes_an_object_it_cannot_follow(cluster: Path, ns: str) -> None:
    """What the object page shows when following fails (here the API's refusal of the object's own path): one link
    in the Waiting-for section saying why, and no root cause."""
    async def work(kube: Kube) -> tuple[Link, list[Link]]:
        cel = Worker()
        try:
            return await waiting_for(kube, (V1, "HelmRelease", ns, ".."), cel)
        finally:
            await cel.close()

    top, causes = asyncio.run(_with_kube(cluster, work))
    assert [(link.state, link.reason, link.message) for link in top.waits_for] == [
        ("Error", "NotFollowed", f"refused to request '/apis/{V1}/namespaces/{ns}/helmreleases/..': "
                                 "not a path of object names")]
    assert causes == []


def test_an_entry_ready_false_is_only_looked_for(cluster: Path, ns: str) -> None:
    """``ready: false``: the operator waits for the object to be there, not for what it waits for itself."""
    put(cluster, ns, repository("stable", PUBLISHED),
        release("slow", "stable", ready("False", "DependencyNotReady", "waiting"),
                dependsOn=[{"apiVersion": "v1", "kind": "ConfigMap", "name": "deep"}]),
        release("gate", "stable", ready("False", "DependencyNotReady", "waiting"), dependsOn=[
            {"name": "slow", "ready": False}, {"name": "ghost", "ready": False},
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "absent", "ready": False}]))
    said = why_json(cluster, ns, "hr/gate")
    assert [(link["kind"], link["name"], link["state"], link["waitsFor"]) for link in links(said["object"])[1:]] == [
        ("HelmRelease", "ghost", "Missing", []), ("ConfigMap", "absent", "Missing", [])]
