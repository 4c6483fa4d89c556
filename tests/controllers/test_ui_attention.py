"""The web UI leads with what needs a person (issue 63): the overview's first section is what failed, then what
waits for an approval or a window, what is pinned and what is suspended, each with its reason and a way to its
page; the kinds that hold nothing are folded; a search from the header finds objects of every kind by name,
namespace and label. Through chromium against the operator (real helm) and ``helmop ui`` as a process."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest
import yaml
from playwright.sync_api import Browser, Page

from tests.browser import CHROMIUM, NO_CHROMIUM, Ui
from tests.chartrepo import ChartRepo
from tests.controllers.conftest import Operator, apply, condition, failing, get, hr, ready, watched
from tests.controllers.test_ui import FLUX_HR, browser, local_ui, request, shoot
from tests.tools import TOOLS, Run

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)
__all__ = ["browser", "local_ui"]  # the fixtures, as test_ui has them
FLUX_REPO = "helmrepositories.source.toolkit.fluxcd.io"
DENY_ALWAYS = [{"schedule": "* * * * *", "duration": "1h", "mode": "deny"}]  # a deny window open whenever asked


def attention(page: Page) -> list[tuple[str, str]]:
    """The overview's attention rows, in order: (what it needs, object name)."""
    return [(r["need"], r["name"]) for r in page.eval_on_selector_all(
        "table.attention tbody tr", "rows => rows.map(r => ({need: r.dataset.need, name: r.dataset.name}))")]


def kinds_held(page: Page) -> list[str]:
    return list(page.eval_on_selector_all("table.counts tr[data-kind]", "rows => rows.map(r => r.dataset.kind)"))


def kinds_folded(page: Page) -> list[str]:
    return list(page.eval_on_selector_all("a[data-empty-kind]", "links => links.map(a => a.dataset.emptyKind)"))


def cli(operator: Operator, *args: str) -> None:
    """The helmop command in a process of its own (this thread runs Playwright's event loop)."""
    env = {**os.environ, "KUBECONFIG": str(operator.sandbox.kubeconfig), "HELMOP_HELM": str(TOOLS / "helm")}
    done = subprocess.run([sys.executable, "-m", "helmop.cli", *args], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, (done.stdout, done.stderr)


def reason_of(reason: str) -> Any:
    return lambda obj: obj if condition(obj).get("reason") == reason else None


def test_the_overview_leads_with_what_needs_a_person(operator: Operator, kube: Run, ns: str, chart_repo: ChartRepo,
                                                     local_ui: Ui, browser: Browser) -> None:
    """A failing release first, then one awaiting approval, one outside its window, a pinned one, a suspended one;
    a Ready one is not among them; each row says why and links to where it is acted on."""
    for name in ("fine", "held", "paused"):
        apply(kube, ns, hr(name, chart_repo, version="0.1.0"))
    apply(kube, ns, hr("gate", chart_repo, version="0.1.0", approval={"required": True}))
    apply(kube, ns, hr("later", chart_repo, version="0.1.0", windows=DENY_ALWAYS))
    apply(kube, ns, hr("broken", chart_repo, version="9.9.9"))
    for name in ("fine", "held", "paused"):
        ready(kube, ns, name)
    gate = watched(kube, ns, "hr", "gate", reason_of("AwaitingApproval"))
    later = watched(kube, ns, "hr", "later", reason_of("OutsideWindow"))
    broken = condition(failing(kube, ns, "broken", "VersionNotFound"))
    cli(operator, "pin", "hr", "held", "-n", ns, "--reason", "hold for the audit")
    cli(operator, "suspend", "hr", "paused", "-n", ns, "--reason", "db migration tonight")
    watched(kube, ns, "hr", "paused", lambda o: (o.get("status") or {}).get("lastHandledRequest", {}).get(
        "action") == "suspend")

    page = browser.new_page()
    page.goto(f"{local_ui.url}?namespace={ns}")
    assert attention(page) == [("failed", "broken"), ("approval", "gate"), ("window", "later"),
                               ("pinned", "held"), ("suspended", "paused")]
    # the section comes first on the page, before the counts
    assert page.eval_on_selector_all("main section h2", "hs => hs.map(h => h.id)")[:2] == ["attention-h", "counts-h"]
    row = "table.attention tr[data-name={}] td.{}"
    assert page.inner_text(row.format("broken", "reason")) == "VersionNotFound"
    assert "9.9.9" in page.inner_text(row.format("broken", "message")) and broken["message"].startswith(
        page.inner_text(row.format("broken", "message")).rstrip("…"))
    assert page.inner_text(row.format("gate", "reason")) == "AwaitingApproval"
    assert page.inner_text(row.format("gate", "message")) == condition(gate)["message"]
    assert page.inner_text(row.format("later", "message")) == condition(later)["message"]
    assert page.inner_text(row.format("held", "reason")) == "Pinned"
    assert "hold for the audit" in page.inner_text(row.format("held", "message"))
    assert page.inner_text(row.format("paused", "message")) == "suspended by sandbox-admin: db migration tonight"
    shoot(page, "attention")

    # each row leads to the object's page, where its actions are (this UI runs with --actions)
    assert page.inner_text(row.format("gate", "act")) == "Approve"
    assert page.inner_text(row.format("paused", "act")) == "Resume"
    page.click("table.attention tr[data-name=gate] td.act a")
    assert page.url.endswith(f"/helmreleases/{ns}/gate#actions")
    assert get(kube, ns, "hr", "gate")["status"]["pendingRevision"] in page.inner_text("dd.pending")

    # the kinds: only those holding objects in rows; the rest folded into one element, closed
    page.goto(f"{local_ui.url}?namespace={ns}")
    assert kinds_held(page) == ["helmreleases"]
    folded = kinds_folded(page)
    assert "configsyncs" in folded and "helmreleases" not in folded and FLUX_HR in folded
    assert page.inner_text("details.empty-kinds summary") == f"{len(folded)} empty kinds"
    assert page.get_attribute("details.empty-kinds", "open") is None
    counted = {h: int(page.inner_text(f"table.counts tr[data-kind=helmreleases] td[data-health={h}]"))
               for h in ("failed", "progressing", "ready", "suspended")}
    # awaiting an approval or a window is not a failure: it waits (progressing), as a dependency wait does
    assert counted == {"failed": 1, "progressing": 2, "ready": 2, "suspended": 1}

    live_suspend(page, kube, ns)


def live_suspend(page: Page, kube: Run, ns: str) -> None:
    """The overview is live: a release suspended now joins the section in place, without a reload."""
    page.wait_for_selector("body[data-live-open='1']")
    page.evaluate("() => { window.stillThisPage = true; }")
    kube("kubectl", "-n", ns, "patch", "hr", "fine", "--type=merge", "-p", '{"spec":{"suspend":true}}')
    page.wait_for_selector("table.attention tr[data-name=fine][data-need=suspended]", timeout=5000)
    assert attention(page)[-2:] == [("suspended", "paused"), ("suspended", "fine")]  # (it has no time of its own)
    assert page.evaluate("() => window.stillThisPage") is True


def test_a_failing_flux_release_is_the_first_row_and_helmops_empty_kinds_are_folded(
        operator: Operator, kube: Run, ns: str, chart_repo: ChartRepo, local_ui: Ui, browser: Browser) -> None:
    """As a Flux user meets the UI (the operator serving Flux's kinds, --flux-api): a failing Flux HelmRelease is
    the overview's first row, with its reason; the kinds shown are Flux's that hold the user's objects."""
    source = "source.toolkit.fluxcd.io/v1"
    for body in ({"apiVersion": source, "kind": "HelmRepository", "metadata": {"name": "charts"},
                  "spec": {"interval": "1h", "url": chart_repo.url}},
                 *({"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease", "metadata": {"name": name},
                    "spec": {"interval": "1h", "chart": {"spec": {"chart": "demo", "version": version, "sourceRef": {
                        "kind": "HelmRepository", "name": "charts"}}}, "values": {"fullnameOverride": name}}}
                   for name, version in (("web", "0.1.0"), ("api", "9.9.9")))):
        apply(kube, ns, yaml.safe_dump(body))
    watched(kube, ns, FLUX_HR, "web", lambda o: condition(o).get("status") == "True")
    api = condition(watched(kube, ns, FLUX_HR, "api", lambda o: o if condition(o).get("status") == "False" and
                            condition(o).get("reason") not in ("DependencyNotReady", "SourceNotReady") else None))

    page = browser.new_page()
    page.goto(f"{local_ui.url}?namespace={ns}")
    first = "table.attention tbody tr:first-child"
    assert (page.get_attribute(first, "data-name"), page.get_attribute(first, "data-kind")) == ("api", FLUX_HR)
    assert page.inner_text(f"{first} td.reason") == api["reason"]
    assert "(Flux)" in page.inner_text(first) and attention(page) == [("failed", "api")]
    assert kinds_held(page) == [FLUX_HR, FLUX_REPO]  # (in the order of the menus)
    assert {"helmreleases", "configsyncs", "gitrepositories"} <= set(kinds_folded(page))
    page.click(f"{first} td.object a")
    assert page.url.endswith(f"/{FLUX_HR}/{ns}/api")


def test_the_header_searches_every_kind_by_name_namespace_and_label(
        operator: Operator, kube: Run, ns: str, chart_repo: ChartRepo, local_ui: Ui, browser: Browser) -> None:
    apply(kube, ns, hr("shop-web", chart_repo, version="0.1.0"))
    apply(kube, ns, hr("shop-db", chart_repo, version="0.1.0"))
    apply(kube, ns, hr("blog", chart_repo, version="0.1.0"))
    apply(kube, ns, yaml.safe_dump({"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "HelmRepository",
                                    "metadata": {"name": "shop-charts"},
                                    "spec": {"interval": "1h", "url": chart_repo.url}}))
    kube("kubectl", "-n", ns, "label", "hr", "shop-db", "tier=db")
    kube("kubectl", "-n", ns, "label", f"{FLUX_REPO}", "shop-charts", "tier=db")
    kube("kubectl", "-n", ns, "label", "hr", "blog", "tier=web")

    def found(page: Page) -> dict[str, list[str]]:
        return {str(s["kind"]): list(s["names"]) for s in page.eval_on_selector_all(
            "section.found", "ss => ss.map(s => ({kind: s.dataset.kind, names: [...s.querySelectorAll("
                             "'tr[data-name]')].map(r => r.dataset.name)}))")}

    # by name (a part of namespace/name), from the header's box on any page
    page = browser.new_page()
    page.goto(f"{local_ui.url}helmreleases")
    page.fill("header input[name=q]", f"{ns}/shop")
    page.press("header input[name=q]", "Enter")
    page.wait_for_url("**/search?q=**")
    assert found(page) == {"helmreleases": ["shop-db", "shop-web"], FLUX_REPO: ["shop-charts"]}
    assert page.input_value("header input[name=q]") == f"{ns}/shop"
    page.click(f'section.found[data-kind="{FLUX_REPO}"] a:has-text("shop-charts")')
    assert page.url.endswith(f"/{FLUX_REPO}/{ns}/shop-charts")

    # by namespace, and by label selector (the API server's), alone and with a name
    page.goto(f"{local_ui.url}search?q={ns}")
    assert found(page) == {"helmreleases": ["blog", "shop-db", "shop-web"], FLUX_REPO: ["shop-charts"]}
    page.goto(f"{local_ui.url}search?namespace={ns}&label=tier%3Ddb")
    assert found(page) == {"helmreleases": ["shop-db"], FLUX_REPO: ["shop-charts"]}
    shoot(page, "search")
    page.fill("main input[name=q]", "shop-d")
    page.click("main button:has-text('Search')")
    page.wait_for_url("**q=shop-d**")
    assert found(page) == {"helmreleases": ["shop-db"]}
    page.goto(f"{local_ui.url}search?q={ns}&label=tier%21%3Ddb")
    assert found(page) == {"helmreleases": ["blog", "shop-web"]}
    # the kind's heading leads to its own list, filtered alike
    page.click("section.found[data-kind=helmreleases] h2 a")
    assert sorted(page.eval_on_selector_all("tr[data-name]", "rows => rows.map(r => r.dataset.name)")) == [
        "blog", "shop-web"]

    # nothing asked, nothing listed; a selector the API server refuses is said; a search past its bound refused
    page.goto(f"{local_ui.url}search")
    assert page.locator("section.found").count() == 0 and "Search every kind" in page.inner_text("main")
    status, _, html = request(f"{local_ui.url}search?label=%21%21%3D")
    assert status == 200 and "the API server refused you" in html and "section class=\"found\"" not in html
    assert request(f"{local_ui.url}search?q={'x' * 300}")[0] == 400
