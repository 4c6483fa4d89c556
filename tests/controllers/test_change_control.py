"""People in the loop, driven by turns against the sandbox with real helm: a rollback that sticks (a pin), approvals
enforced by RBAC through the helmop-requests admission policy, deployment windows, and who asked for what.

Requests are written as the CLI and the web UI write them (helmop.views.requests: the asker found with a
SelfSubjectReview); ``helmop approve`` runs as a child where what it prints to a person is the point."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from helmop_sandbox import Sandbox

from helmop.api.kinds import FLUX, FORCE_AT, HELMOP
from helmop.api.requests import Asked
from helmop.views import requests
from tests.chartrepo import ChartRepo
from tests.clirun import run_cli
from tests.conftest import _runner
from tests.controllers.conftest import condition, events, hr
from tests.controllers.turns import Turns
from tests.gitserver import GitServer, Repo
from tests.tools import TOOLS, Run, eventually

ROOT = Path(__file__).resolve().parents[2]
POLICY = ROOT / "deploy" / "helmop" / "files" / "requests-policy.yaml"
ALWAYS = {"schedule": "* * * * *", "duration": "1h"}  # a window open whenever it is asked about


@pytest.fixture(scope="module")
def kube(turns_sandbox: Sandbox) -> Run:
    run = _runner(turns_sandbox)
    run("kubectl", "apply", "-f", str(POLICY))  # what the chart installs: requests attested, approvals RBAC's
    return run


def _apply(kube: Run, ns: str, manifest: str) -> None:
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=manifest)


def _history(kube: Run, ns: str, name: str) -> list[dict[str, Any]]:
    return json.loads(kube("helm", "history", name, "-n", ns, "-o", "json").stdout)


def _ask(turns: Turns, ns: str, name: str, action: Asked, **what: str) -> None:
    turns.run(requests.ask(turns.kube, HELMOP.helmrelease, ns, name, action, **what))


def _status(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("status") or {}


def _said(kube: Run, ns: str, name: str, reason: str) -> dict[str, Any]:
    return eventually(lambda: next((e for e in events(kube, ns, name) if e["reason"] == reason), None))


def test_a_rollback_pins_the_release_until_the_spec_moves_on(turns: Turns, kube: Run, ns: str,
                                                             chart_repo: ChartRepo) -> None:
    _apply(kube, ns, hr("web", chart_repo, version="0.1.0", values={"replicaCount": 1}))
    turns.turn("HelmRelease", ns, "web")
    _apply(kube, ns, hr("web", chart_repo, version="0.1.0", values={"replicaCount": 2}))  # the bad change
    assert condition(turns.turn("HelmRelease", ns, "web"))["reason"] == "UpgradeSucceeded"

    _ask(turns, ns, "web", Asked.ROLLBACK, revision="1", reason="2 replicas break the cache")
    obj = turns.turn("HelmRelease", ns, "web")
    history = _history(kube, ns, "web")
    assert [h["revision"] for h in history] == [1, 2, 3] and "Rollback to 1" in history[-1]["description"]
    ready = condition(obj)
    assert (ready["status"], ready["reason"]) == ("True", "Pinned"), ready
    assert "pinned at revision 3 by sandbox-admin" in ready["message"]
    assert "2 replicas break the cache" in ready["message"]
    pin = _status(obj)["pin"]
    assert (pin["action"], pin["revision"], pin["by"], pin["reason"]) == (
        "rollback", "3", "sandbox-admin", "2 replicas break the cache")
    assert "as asked by sandbox-admin" in _said(kube, ns, "web", "RollbackSucceeded")["message"]
    assert _said(kube, ns, "web", "Pinned")["type"] == "Normal"

    # a forced upgrade asked for, and the next interval: the pin holds (no helm upgrade)
    kube("kubectl", "-n", ns, "annotate", "--overwrite", "hr", "web", f"{FORCE_AT}=now")
    assert condition(turns.turn("HelmRelease", ns, "web"))["reason"] == "Pinned"
    assert condition(turns.turn("HelmRelease", ns, "web"))["reason"] == "Pinned"
    assert len(_history(kube, ns, "web")) == 3

    # the fix lands in the spec: the pin ends, the release is upgraded to it
    _apply(kube, ns, hr("web", chart_repo, version="0.2.0", values={"replicaCount": 1}))
    obj = turns.turn("HelmRelease", ns, "web")
    assert condition(obj)["reason"] == "UpgradeSucceeded" and "pin" not in _status(obj)
    assert [h["chart"] for h in _history(kube, ns, "web")][-1] == "demo-0.2.0"
    assert "the desired state changed" in _said(kube, ns, "web", "PinEnded")["message"]


def test_the_cli_waits_for_the_operator_and_get_wide_says_who(turns: Turns, kube: Run, ns: str,
                                                              chart_repo: ChartRepo, turns_sandbox: Sandbox) -> None:
    _apply(kube, ns, hr("cli", chart_repo, version="0.1.0"))
    turns.turn("HelmRelease", ns, "cli")
    _apply(kube, ns, hr("cli", chart_repo, version="0.2.0"))
    turns.turn("HelmRelease", ns, "cli")
    env = {"KUBECONFIG": str(turns_sandbox.kubeconfig), "HELMOP_HELM": str(TOOLS / "helm")}
    with ThreadPoolExecutor(1) as pool:
        asked = pool.submit(run_cli, ["rollback", "hr/cli", "-n", ns, "--reason", "bad build", "--timeout", "60s"],
                            env)
        eventually(lambda: "helmop.dev/rollback" in kube("kubectl", "-n", ns, "get", "hr", "cli", "-o",
                                                         "jsonpath={.metadata.annotations}").stdout)
        turns.turn("HelmRelease", ns, "cli")
        done = asked.result(timeout=60)
    assert done.returncode == 0, done.stderr
    assert "► rollback asked of HelmRelease" in done.stdout and "✔ Pinned: pinned at revision 3" in done.stdout
    wide = run_cli(["get", "hr", "cli", "-n", ns, "-o", "wide"], env).stdout.splitlines()
    assert "LAST REQUEST" in wide[0] and "rollback by sandbox-admin" in wide[1]
    nothing = run_cli(["approve", "hr/cli", "-n", ns], env)
    assert nothing.returncode != 0 and "nothing waits for an approval" in nothing.stderr
    wrong = run_cli(["rollback", "gitrepo/cli", "-n", ns], env)
    assert wrong.returncode != 0 and "rollback applies to HelmReleases, not GitRepository" in wrong.stderr


def test_a_pin_holds_drift_correction_to_the_pinned_revision_and_unpin_ends_it(
        turns: Turns, kube: Run, ns: str, chart_repo: ChartRepo) -> None:
    _apply(kube, ns, hr("api", chart_repo, version="0.1.0", driftDetection={"mode": "enabled"}))
    turns.turn("HelmRelease", ns, "api")
    _ask(turns, ns, "api", Asked.PIN, reason="hold for the audit")
    obj = turns.turn("HelmRelease", ns, "api")
    assert condition(obj)["reason"] == "Pinned" and _status(obj)["pin"]["revision"] == "1"

    # a person scales the Deployment: drift from the pinned revision is still corrected (no new revision)
    kube("kubectl", "-n", ns, "scale", "deploy", "api", "--replicas=3")
    turns.turn("HelmRelease", ns, "api")
    replicas = kube("kubectl", "-n", ns, "get", "deploy", "api", "-o", "jsonpath={.spec.replicas}").stdout
    assert replicas == "1" and len(_history(kube, ns, "api")) == 1

    _ask(turns, ns, "api", Asked.UNPIN, reason="audit done")
    obj = turns.turn("HelmRelease", ns, "api")
    assert "pin" not in _status(obj) and condition(obj)["reason"] != "Pinned", json.dumps(_status(obj))
    assert _status(obj)["lastHandledRequest"]["action"] == "unpin"
    assert "unpinned by sandbox-admin" in _said(kube, ns, "api", "PinEnded")["message"]


def test_a_change_waits_for_its_own_approval(turns: Turns, kube: Run, ns: str, chart_repo: ChartRepo) -> None:
    approval = {"approval": {"required": True}}
    _apply(kube, ns, hr("db", chart_repo, version="0.1.0", **approval))
    obj = turns.turn("HelmRelease", ns, "db")
    assert condition(obj)["reason"] == "AwaitingApproval" and kube(
        "helm", "status", "db", "-n", ns, check=False).returncode != 0  # nothing reached helm
    first = _status(obj)["pendingRevision"]
    assert first and first in condition(obj)["message"]
    # what it changes, rendered as the install would run it
    assert f"3 added, 0 changed, 0 removed object(s): Deployment/{ns}/db (added)" in condition(obj)["message"]

    _ask(turns, ns, "db", Asked.APPROVE, revision=first, reason="change 42")
    obj = turns.turn("HelmRelease", ns, "db")
    assert condition(obj)["reason"] == "InstallSucceeded", condition(obj)
    approved = _status(obj)["approved"]
    assert approved == {"action": "approve", "by": "sandbox-admin", "at": approved["at"], "reason": "change 42",
                        "revision": first}
    assert "approved by sandbox-admin" in _said(kube, ns, "db", "Approved")["message"]

    # a second change needs its own approval: the first one approves only its revision
    _apply(kube, ns, hr("db", chart_repo, version="0.1.0", values={"replicaCount": 2}, **approval))
    obj = turns.turn("HelmRelease", ns, "db")
    assert condition(obj)["reason"] == "AwaitingApproval" and _status(obj)["pendingRevision"] not in ("", first)
    assert f"0 added, 1 changed, 0 removed object(s): Deployment/{ns}/db (changed)" in condition(obj)["message"]
    said = [e["message"] for e in events(kube, ns, "db") if e["reason"] == "AwaitingApproval"]
    assert any("-  replicas: 1\n+  replicas: 2" in m for m in said), said  # the diff, in the Event
    assert turns.turn("HelmRelease", ns, "db")["status"]["conditions"] == obj["status"]["conditions"]  # rendered once
    assert len(_history(kube, ns, "db")) == 1


def test_approving_takes_rbacs_approve_verb(turns: Turns, kube: Run, ns: str, chart_repo: ChartRepo,
                                             tmp_path: Path) -> None:
    _apply(kube, ns, hr("queue", chart_repo, version="0.1.0", approval={"required": True}))
    pending = _status(turns.turn("HelmRelease", ns, "queue"))["pendingRevision"]
    kube("kubectl", "-n", ns, "create", "serviceaccount", "bob")
    kube("kubectl", "-n", ns, "create", "rolebinding", "bob-edit", "--clusterrole=edit", f"--serviceaccount={ns}:bob")
    bob = _kubeconfig(kube, ns, "bob", tmp_path)

    # bob may edit HelmReleases, not approve them: the CLI says so, and the API refuses an approval he writes
    cli = run_cli(["approve", "hr/queue", "-n", ns], {"KUBECONFIG": str(bob), "HELMOP_HELM": str(TOOLS / "helm")})
    assert cli.returncode != 0 and f'forbidden: system:serviceaccount:{ns}:bob cannot "approve"' in cli.stderr
    forged = json.dumps({"by": f"system:serviceaccount:{ns}:bob", "at": "2026-11-29T00:00:00Z",
                         "revision": pending}, separators=(",", ":"))
    refused = kube("kubectl", "--kubeconfig", str(bob), "-n", ns, "annotate", "hr", "queue",
                   f"helmop.dev/approve={forged}", check=False)
    assert refused.returncode != 0 and "may not approve helmreleases.helmop.dev queue" in refused.stderr
    # nor can he write a request in someone else's name
    as_admin = forged.replace(f"system:serviceaccount:{ns}:bob", "sandbox-admin")
    refused = kube("kubectl", "--kubeconfig", str(bob), "-n", ns, "annotate", "hr", "queue",
                   f"helmop.dev/pin={as_admin}", check=False)
    assert refused.returncode != 0 and "must name who writes it" in refused.stderr

    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=yaml.safe_dump_all([
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "approver"},
         "rules": [{"apiGroups": ["helmop.dev"], "resources": ["helmreleases"], "verbs": ["approve"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "bob-approves"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "approver"},
         "subjects": [{"kind": "ServiceAccount", "name": "bob", "namespace": ns}]}]))
    kube("kubectl", "--kubeconfig", str(bob), "-n", ns, "annotate", "hr", "queue", f"helmop.dev/approve={forged}")
    obj = turns.turn("HelmRelease", ns, "queue")
    assert condition(obj)["reason"] == "InstallSucceeded"
    assert _status(obj)["approved"]["by"] == f"system:serviceaccount:{ns}:bob"


def test_approvals_are_refused_without_the_policy_that_attests_them(
        turns: Turns, kube: Run, ns: str, chart_repo: ChartRepo) -> None:
    _apply(kube, ns, hr("cache", chart_repo, version="0.1.0", approval={"required": True}))
    pending = _status(turns.turn("HelmRelease", ns, "cache"))["pendingRevision"]
    kube("kubectl", "delete", "validatingadmissionpolicybinding", "helmop-requests")
    try:
        _ask(turns, ns, "cache", Asked.APPROVE, revision=pending)
        obj = turns.turn("HelmRelease", ns, "cache")
    finally:
        kube("kubectl", "apply", "-f", str(POLICY))
    assert condition(obj)["reason"] == "AwaitingApproval" and "approved" not in _status(obj)
    assert "helmop-requests" in _said(kube, ns, "cache", "ApprovalRefused")["message"]


def test_a_deny_window_holds_a_change_until_approve_now(turns: Turns, kube: Run, ns: str,
                                                        chart_repo: ChartRepo) -> None:
    _apply(kube, ns, hr("shop", chart_repo, version="0.1.0"))
    turns.turn("HelmRelease", ns, "shop")
    began = datetime.now(UTC) - timedelta(minutes=1)  # a deny window that opened a minute ago, for an hour
    schedule = f"{began.minute} {began.hour} * * *"
    _apply(kube, ns, hr("shop", chart_repo, version="0.2.0",
                        windows=[{"schedule": schedule, "duration": "1h", "mode": "deny"}]))
    obj = turns.turn("HelmRelease", ns, "shop")
    ready = condition(obj)
    assert (ready["status"], ready["reason"]) == ("False", "OutsideWindow"), ready
    opens = (began.replace(second=0, microsecond=0) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert f"inside the deny window {schedule} (UTC); changes wait until {opens}" in ready["message"], ready
    assert len(_history(kube, ns, "shop")) == 1

    _ask(turns, ns, "shop", Asked.APPROVE_NOW, revision=_status(obj)["pendingRevision"], reason="hotfix")
    obj = turns.turn("HelmRelease", ns, "shop")
    assert condition(obj)["reason"] == "UpgradeSucceeded" and _status(obj)["approved"]["action"] == "approve-now"

    # the window closed (an allow window open now): the next change goes by itself
    _apply(kube, ns, hr("shop", chart_repo, version="1.0.0", windows=[{**ALWAYS, "mode": "allow"}]))
    assert condition(turns.turn("HelmRelease", ns, "shop"))["reason"] == "UpgradeSucceeded"


def test_a_namespace_default_window_applies_to_objects_without_their_own(
        turns: Turns, kube: Run, ns: str, chart_repo: ChartRepo) -> None:
    kube("kubectl", "-n", ns, "create", "configmap", "helmop-windows",
         f"--from-literal=windows={json.dumps([{**ALWAYS, 'mode': 'deny'}])}")
    _apply(kube, ns, hr("blog", chart_repo, version="0.1.0"))
    assert condition(turns.turn("HelmRelease", ns, "blog"))["reason"] == "OutsideWindow"
    _apply(kube, ns, hr("blog", chart_repo, version="0.1.0", windows=[]))  # its own: none
    assert condition(turns.turn("HelmRelease", ns, "blog"))["reason"] == "InstallSucceeded"
    # a namespace whose defaults are not windows: refused by name (another namespace: each is read on its own, and
    # at most every DEFAULTS_TTL seconds)
    other = f"{ns}-bad"
    kube("kubectl", "create", "namespace", other)
    kube("kubectl", "-n", other, "create", "configmap", "helmop-windows", "--from-literal=windows=- schedule: nope")
    _apply(kube, other, hr("wiki", chart_repo, version="0.1.0"))
    ready = condition(turns.turn("HelmRelease", other, "wiki"))
    assert (ready["reason"], "ConfigMap " + other + "/helmop-windows" in ready["message"]) == ("InvalidSpec", True)


def test_who_asked_for_a_suspend_and_a_reconcile_is_recorded(turns: Turns, kube: Run, ns: str,
                                                              chart_repo: ChartRepo) -> None:
    _apply(kube, ns, hr("docs", chart_repo, version="0.1.0"))
    turns.turn("HelmRelease", ns, "docs")
    turns.run(requests.set_suspended(turns.kube, HELMOP.helmrelease, ns, "docs", True, reason="freeze"))
    obj = turns.turn("HelmRelease", ns, "docs")
    assert _status(obj)["lastHandledRequest"] == {"action": "suspend", "by": "sandbox-admin", "reason": "freeze",
                                                  "at": _status(obj)["lastHandledRequest"]["at"]}
    assert _said(kube, ns, "docs", "SuspendRequested")["message"].startswith("suspend asked by sandbox-admin at ")
    turns.turn("HelmRelease", ns, "docs")  # once: the same request is not said again
    assert [e["count"] for e in events(kube, ns, "docs") if e["reason"] == "SuspendRequested"] == [1]

    turns.run(requests.set_suspended(turns.kube, HELMOP.helmrelease, ns, "docs", False))
    assert _status(turns.turn("HelmRelease", ns, "docs"))["lastHandledRequest"]["action"] == "resume"
    obj = turns.run(turns.kube.get(HELMOP.helmrelease.path(ns, "docs")))
    turns.run(requests.ask_reconcile(turns.kube, HELMOP.helmrelease, obj or {}, force=True, reason="new certs"))
    handled = _status(turns.turn("HelmRelease", ns, "docs"))["lastHandledRequest"]
    assert (handled["action"], handled["reason"]) == ("force", "new certs")


def _files(n: int) -> dict[str, str | None]:
    return {"app/cm.yaml": f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: flags}}\ndata: {{level: '{n}'}}\n"}


def _synced(kube: Run, ns: str, repo: Repo, **spec: Any) -> None:
    """A GitRepository of ``repo`` and a ConfigSync ``app`` of its folder app/."""
    _apply(kube, ns, yaml.safe_dump_all([
        {"apiVersion": "helmop.dev/v1alpha1", "kind": "GitRepository", "metadata": {"name": "config"},
         "spec": {"url": repo.url, "interval": "1h", "ref": {"branch": "main"}}},
        {"apiVersion": "helmop.dev/v1alpha1", "kind": "ConfigSync", "metadata": {"name": "app"},
         "spec": {"sourceRef": {"name": "config"}, "path": "app", "interval": "1h", **spec}}]))


def _flags(kube: Run, ns: str) -> str:
    return kube("kubectl", "-n", ns, "get", "cm", "flags", "-o", "jsonpath={.data.level}").stdout


def test_a_configsync_pin_holds_a_hand_made_fix_until_git_moves(turns: Turns, kube: Run, ns: str,
                                                                git_server: GitServer, tmp_path: Path) -> None:
    repo = Repo(git_server, f"pin-{ns}", tmp_path / "work")
    repo.commit(_files(1))
    _synced(kube, ns, repo, prune=True)
    turns.turn("GitRepository", ns, "config")
    applied = _status(turns.turn("ConfigSync", ns, "app"))["lastAppliedRevision"]
    kube("kubectl", "-n", ns, "patch", "cm", "flags", "-p", '{"data": {"level": "hotfix"}}')  # 3 a.m.
    turns.run(requests.ask(turns.kube, HELMOP.configsync, ns, "app", Asked.PIN, reason="hotfix by hand"))
    obj = turns.turn("ConfigSync", ns, "app")
    assert (condition(obj)["status"], condition(obj)["reason"]) == ("True", "Pinned")
    assert _status(obj)["pin"]["revision"] == applied and _flags(kube, ns) == "hotfix"
    turns.turn("ConfigSync", ns, "app")  # the interval: still held
    assert _flags(kube, ns) == "hotfix"

    second = repo.commit(_files(2))  # the fix lands in git: the pin ends, git wins
    turns.turn("GitRepository", ns, "config")
    obj = turns.turn("ConfigSync", ns, "app")
    assert _status(obj)["lastAppliedRevision"] == f"main@sha1:{second}" and "pin" not in _status(obj)
    assert _flags(kube, ns) == "2" and "PinEnded" in [e["reason"] for e in events(kube, ns, "app")]


def test_a_configsync_new_revision_waits_for_approval(turns: Turns, kube: Run, ns: str, git_server: GitServer,
                                                       tmp_path: Path) -> None:
    repo = Repo(git_server, f"approve-{ns}", tmp_path / "work")
    repo.commit(_files(1))
    _synced(kube, ns, repo, approval={"required": True})
    turns.turn("GitRepository", ns, "config")
    obj = turns.turn("ConfigSync", ns, "app")
    pending = _status(obj)["pendingRevision"]
    assert condition(obj)["reason"] == "AwaitingApproval" and pending.startswith("main@sha1:")
    assert kube("kubectl", "-n", ns, "get", "cm", "flags", check=False).returncode != 0
    turns.run(requests.ask(turns.kube, HELMOP.configsync, ns, "app", Asked.APPROVE, revision=pending))
    obj = turns.turn("ConfigSync", ns, "app")
    assert condition(obj)["reason"] == "ReconciliationSucceeded" and _flags(kube, ns) == "1"
    kube("kubectl", "-n", ns, "patch", "cm", "flags", "-p", '{"data": {"level": "drifted"}}')
    turns.turn("ConfigSync", ns, "app")  # the approved revision applied again: drift corrected without approval
    assert _flags(kube, ns) == "1"
    repo.commit(_files(2))
    turns.turn("GitRepository", ns, "config")
    assert condition(turns.turn("ConfigSync", ns, "app"))["reason"] == "AwaitingApproval" and _flags(kube, ns) == "1"


def test_flux_helmreleases_take_change_control_through_annotations(turns: Turns, kube: Run, ns: str,
                                                                     chart_repo: ChartRepo) -> None:
    def release(replicas: int) -> str:
        return yaml.safe_dump_all([
            {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "HelmRepository", "metadata": {"name": "charts"},
             "spec": {"interval": "1h", "url": chart_repo.url}},
            {"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
             "metadata": {"name": "flux", "annotations": {"helmop.dev/approval": "required"}},
             "spec": {"interval": "1h", "chart": {"spec": {"chart": "demo", "version": "0.1.0",
                                                           "sourceRef": {"kind": "HelmRepository", "name": "charts"}}},
                      "values": {"fullnameOverride": "flux", "replicaCount": replicas}}}])

    _apply(kube, ns, release(1))
    turns.turn(FLUX.helmrepository, ns, "charts")
    obj = turns.turn(FLUX.helmrelease, ns, "flux")
    assert condition(obj)["reason"] == "AwaitingApproval"
    turns.run(requests.ask(turns.kube, FLUX.helmrelease, ns, "flux", Asked.APPROVE,
                           revision=_status(obj)["pendingRevision"]))
    assert condition(turns.turn(FLUX.helmrelease, ns, "flux"))["reason"] == "InstallSucceeded"
    _apply(kube, ns, release(2))
    obj = turns.turn(FLUX.helmrelease, ns, "flux")
    turns.run(requests.ask(turns.kube, FLUX.helmrelease, ns, "flux", Asked.APPROVE,
                           revision=_status(obj)["pendingRevision"]))
    assert condition(turns.turn(FLUX.helmrelease, ns, "flux"))["reason"] == "UpgradeSucceeded"

    turns.run(requests.ask(turns.kube, FLUX.helmrelease, ns, "flux", Asked.ROLLBACK))  # to the one before
    obj = turns.turn(FLUX.helmrelease, ns, "flux")
    assert condition(obj)["reason"] == "Pinned" and _status(obj)["pin"]["revision"] == "3"
    assert condition(turns.turn(FLUX.helmrelease, ns, "flux"))["reason"] == "Pinned"  # the pin is kept in status
    assert "Rollback to 1" in _history(kube, ns, "flux")[-1]["description"]


def _kubeconfig(kube: Run, ns: str, account: str, where: Path) -> Path:
    token = kube("kubectl", "-n", ns, "create", "token", account).stdout.strip()
    config = yaml.safe_load(Path(kube.kubeconfig).read_text())
    config["users"][0]["user"] = {"token": token}
    path = where / f"{account}.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path

