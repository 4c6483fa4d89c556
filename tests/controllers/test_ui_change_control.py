"""People in the loop from the web UI (issue 61), through a real browser and over HTTP: a rollback from a release's
history that pins it, approvals that only RBAC's verb approve may give, and who asked for what, shown on the page.
The operator (real helm) acts on the requests; the helmop-requests admission policy is in force, as the chart
installs it (this module's sandbox is its own: the policy stays until the sandbox goes)."""

from __future__ import annotations

import json
import urllib.parse
from typing import Any

import pytest
import yaml
from playwright.sync_api import Browser

from tests.browser import CHROMIUM, NO_CHROMIUM, Ui
from tests.chartrepo import ChartRepo
from tests.conftest import _runner
from tests.controllers.conftest import Operator, apply, condition, get, hr, ready, watched
from tests.controllers.test_ui import browser, log_in, request, token_ui, viewer
from tests.tools import ROOT, Run

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)
POLICY = ROOT / "deploy" / "helmop" / "files" / "requests-policy.yaml"
FORM = {"Content-Type": "application/x-www-form-urlencoded"}
__all__ = ["browser", "token_ui"]  # the fixtures, as test_ui has them


@pytest.fixture(scope="module")
def kube(operator: Operator) -> Run:
    run = _runner(operator.sandbox)
    run("kubectl", "apply", "-f", str(POLICY))  # requests attested, approvals RBAC's
    return run


def _status(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("status") or {}


def _history(kube: Run, ns: str, name: str) -> list[dict[str, Any]]:
    return json.loads(kube("helm", "history", name, "-n", ns, "-o", "json").stdout)


def _post(ui: Ui, token: str, path: str, action: str, **fields: str) -> tuple[int, str]:
    """``action`` posted as the viewer of ``token`` would, with the form token of their own page."""
    bearer = {"Authorization": f"Bearer {token}"}
    page = request(f"{ui.url}{path}", headers=bearer)[2]
    csrf = page.split('name="csrf" value="')[1].split('"')[0]
    status, _, html = request(f"{ui.url}{path}/{action}", method="POST", headers={**FORM, **bearer},
                              data=urllib.parse.urlencode({"csrf": csrf, **fields}).encode())
    return status, html


def _approver(kube: Run, ns: str, account: str) -> None:
    """RBAC's verb approve on the namespace's HelmReleases for the ServiceAccount ``account``."""
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=yaml.safe_dump_all([
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "approver"},
         "rules": [{"apiGroups": ["helmop.dev"], "resources": ["helmreleases"], "verbs": ["approve"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "approvers"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "approver"},
         "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": ns}]}]))


def test_a_rollback_from_the_history_pins_the_release_in_the_viewers_name(
        operator: Operator, kube: Run, ns: str, chart_repo: ChartRepo, token_ui: Ui, browser: Browser) -> None:
    apply(kube, ns, hr("web", chart_repo, version="0.1.0", values={"replicaCount": 1}))
    ready(kube, ns, "web")
    apply(kube, ns, hr("web", chart_repo, version="0.1.0", values={"replicaCount": 2}))  # the bad change
    ready(kube, ns, "web", generation=2)
    token = viewer(kube, ns, "alice", "edit")
    alice, who = log_in(browser, token_ui, token), f"system:serviceaccount:{ns}:alice"
    path = f"helmreleases/{ns}/web"
    alice.goto(f"{token_ui.url}{path}")
    # a button for each revision but the current one
    assert alice.eval_on_selector_all("ol.timeline button.rollback", "bs => bs.map(b => b.value)") == ["1"]

    # the form is hostile: a revision that is not a number, a reason past its bound, an action that is none
    assert _post(token_ui, token, path, "rollback", revision="1 --force")[0] == 400
    assert _post(token_ui, token, path, "rollback")[0] == 400
    assert _post(token_ui, token, path, "rollback", revision="1", reason="x" * 1025)[0] == 400
    assert _post(token_ui, token, path, "uninstall", revision="1")[0] == 404
    assert "helmop.dev/rollback" not in get(kube, ns, "hr", "web")["metadata"].get("annotations", {})

    alice.fill("textarea[name=reason]", "2 replicas break the cache")
    alice.click("button:has-text('Roll back to revision 1')")
    assert "Asked: rollback" in alice.inner_text("p.done")
    obj = watched(kube, ns, "hr", "web", lambda o: o if condition(o).get("reason") == "Pinned" else None)
    pin = _status(obj)["pin"]
    assert (pin["action"], pin["revision"], pin["by"], pin["reason"]) == (
        "rollback", "3", who, "2 replicas break the cache")
    assert [h["revision"] for h in _history(kube, ns, "web")] == [1, 2, 3]
    assert "Rollback to 1" in _history(kube, ns, "web")[-1]["description"]

    # the page says who pinned it, where and why, and the request handled
    alice.goto(f"{token_ui.url}{path}")
    shown = alice.inner_text("dd.pin")
    assert "at revision 3 (rollback)" in shown and who in shown and pin["at"] in shown
    assert shown.endswith(": 2 replicas break the cache")
    last = alice.inner_text("dd.last-request")
    assert last.startswith(f"rollback (revision 3) by {who}") and "2 replicas break the cache" in last
    assert "Pinned" in alice.inner_text("tr[data-type=Ready] td.reason")

    # unpinned from the page, with its own reason
    alice.fill("textarea[name=reason]", "cache fixed")
    alice.click("button:has-text('Unpin')")
    assert "Asked: unpin" in alice.inner_text("p.done")
    handled = watched(kube, ns, "hr", "web", lambda obj: "pin" not in _status(obj) and _status(obj).get(
        "lastHandledRequest", {}).get("action") == "unpin" and _status(obj)["lastHandledRequest"])
    assert (handled["by"], handled["reason"]) == (who, "cache fixed")


def test_an_approval_is_given_from_the_page_by_an_approver_only(
        operator: Operator, kube: Run, ns: str, chart_repo: ChartRepo, token_ui: Ui, browser: Browser) -> None:
    apply(kube, ns, hr("db", chart_repo, version="0.1.0", approval={"required": True}))
    obj = watched(kube, ns, "hr", "db", lambda o: o if _status(o).get("pendingRevision") and condition(o).get(
        "reason") == "AwaitingApproval" else None)
    pending, path = _status(obj)["pendingRevision"], f"helmreleases/{ns}/db"
    editor, approver = viewer(kube, ns, "bob", "edit"), viewer(kube, ns, "carol", "edit")
    _approver(kube, ns, "carol")

    # bob may edit, not approve: what waits is shown, no approve button; a forged approval is refused, said why
    bob = log_in(browser, token_ui, editor)
    bob.goto(f"{token_ui.url}{path}")
    assert pending in bob.inner_text("dd.pending") and "AwaitingApproval" in bob.inner_text("dd.pending")
    assert condition(obj)["message"] in bob.inner_text("dd.pending")
    assert bob.locator("button:has-text('Approve')").count() == 0
    assert bob.locator("button:text-is('Pin')").count() == 1  # the other actions are there
    status, html = _post(token_ui, editor, path, "approve", revision=pending)
    assert status == 403 and f"forbidden: system:serviceaccount:{ns}:bob may not approve HelmRelease" in html
    obj = get(kube, ns, "hr", "db")
    assert "helmop.dev/approve" not in obj["metadata"].get("annotations", {})

    # carol may: an approval of another revision than the one waiting is refused, hers of it lets it through
    carol, who = log_in(browser, token_ui, approver), f"system:serviceaccount:{ns}:carol"
    status, html = _post(token_ui, approver, path, "approve", revision="sha256:" + "0" * 64)
    assert status == 403 and "the revision waiting changed: look again" in html
    carol.goto(f"{token_ui.url}{path}")
    assert carol.get_attribute("dd.pending button:has-text('Approve now')", "value") == pending
    carol.fill("textarea[name=reason]", "change 42")
    carol.click("dd.pending button:text-is('Approve')")
    assert "Asked: approve" in carol.inner_text("p.done")
    installed = watched(kube, ns, "hr", "db", lambda o: o if condition(o).get("reason") == "InstallSucceeded"
                        else None)
    approved = _status(installed)["approved"]
    assert (approved["action"], approved["by"], approved["reason"], approved["revision"]) == (
        "approve", who, "change 42", pending)

    carol.goto(f"{token_ui.url}{path}")
    shown = carol.inner_text("dd.approved")
    assert shown.startswith(f"approve of {pending} by {who}") and shown.endswith(": change 42")
    assert carol.inner_text("dd.last-request").startswith(f"approve (revision {pending}) by {who}")
    assert carol.locator("dd.pending").count() == 0  # nothing waits any more


def test_a_read_only_ui_offers_no_change_control(operator: Operator, kube: Run, ns: str, chart_repo: ChartRepo,
                                                 browser: Browser) -> None:
    """Without --actions: no reason to write, no rollback, pin or approve button."""
    apply(kube, ns, hr("ro", chart_repo, version="0.1.0", approval={"required": True}))
    watched(kube, ns, "hr", "ro", lambda o: _status(o).get("pendingRevision"))
    ui = Ui(operator.sandbox.kubeconfig)
    try:
        page = browser.new_page()
        page.goto(f"{ui.url}helmreleases/{ns}/ro")
        assert "AwaitingApproval" in page.inner_text("dd.pending")
        assert page.locator("textarea[name=reason], form#actions, dd.pending button").count() == 0
    finally:
        ui.close()
