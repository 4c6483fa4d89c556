"""The web UI through a real browser: ``helmop ui`` as a process (locally with the sandbox's kubeconfig, and as in a
cluster with the chart's own ServiceAccount and viewers' tokens), Debian's chromium driven by Playwright, releases
installed by the operator with real helm."""

from __future__ import annotations

import base64
import json
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from helmop_sandbox import Sandbox
from playwright.sync_api import Browser, Page, sync_playwright

from tests.browser import CHROMIUM, FLAGS, NO_CHROMIUM, Ui, screenshot_path
from tests.chartrepo import ChartRepo
from tests.controllers.conftest import Operator, apply, condition, failing, get, hr, ready, watched
from tests.gitserver import Repo
from tests.tools import ROOT, Run, eventually

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)
PASSWORDS = ("first-Pa55word-71", "second-Pa55word-72")
HOOK_TOKEN = "ui-receiver-token-3f9e"
FLUX_HR, FLUX_KS, FLUX_GIT, FLUX_RECEIVER = ("helmreleases.helm.toolkit.fluxcd.io",
                                             "kustomizations.kustomize.toolkit.fluxcd.io",
                                             "gitrepositories.source.toolkit.fluxcd.io",
                                             "receivers.notification.toolkit.fluxcd.io")
WEBAPP = "webapps.demo.helmop.dev"  # the sample app kind (deploy/examples/webapp), found by discovery


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def local_ui(operator: Operator) -> Iterator[Ui]:
    ui = Ui(operator.sandbox.kubeconfig, "--actions")
    yield ui
    ui.close()


@pytest.fixture(scope="module")
def token_ui(operator: Operator, kube: Run, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ui]:
    """As the chart runs it: its ServiceAccount and ClusterRole (from the chart), viewers' tokens."""
    path = ui_account(operator, kube, tmp_path_factory.mktemp("ui"))
    ui = Ui(path, "--auth", "token", "--actions")
    yield ui
    ui.close()


def viewer(kube: Run, ns: str, name: str, role: str) -> str:
    """A ServiceAccount in ``ns`` bound to the cluster's ``role`` (edit, view) there; its token."""
    kube("kubectl", "-n", ns, "create", "serviceaccount", name)
    kube("kubectl", "-n", ns, "create", "rolebinding", name, f"--clusterrole={role}", f"--serviceaccount={ns}:{name}")
    return str(kube("kubectl", "-n", ns, "create", "token", name).stdout.strip())


def log_in(browser: Browser, ui: Ui, token: str) -> Page:
    page = browser.new_context().new_page()
    page.goto(ui.url)
    assert "/login" in page.url
    page.fill("#token", token)
    page.click("button:has-text('Log in')")
    assert page.url == ui.url, page.content() + "".join(ui.output)
    return page


def shoot(page: Page, name: str) -> None:
    path = screenshot_path(name)
    if path is not None:
        page.set_viewport_size({"width": 1200, "height": 800})
        page.screenshot(path=str(path), full_page=True)


def cell(page: Page, kind: str, health: str) -> int:
    """A count of the overview's grid: 0 for a kind folded among the empty ones (it holds nothing, so no row)."""
    if page.locator(f"table.counts tr[data-kind={kind}]").count() == 0:
        assert page.locator(f"a[data-empty-kind={kind}]").count() == 1, kind
        return 0
    return int(page.inner_text(f"table.counts tr[data-kind={kind}] td[data-health={health}]").strip())


def test_overview_counts_search_and_a_failing_reason(operator: Operator, kube: Run, ns: str, chart_repo: ChartRepo,
                                                     local_ui: Ui, browser: Browser) -> None:
    apply(kube, ns, hr("web", chart_repo, version="0.1.0"))
    apply(kube, ns, hr("api", chart_repo, version="0.1.0", dependsOn=[{"name": "web"}]))
    apply(kube, ns, hr("broken", chart_repo, version="9.9.9"))
    for name in ("web", "api"):
        ready(kube, ns, name)
    failing(kube, ns, "broken", "VersionNotFound")
    page = browser.new_page()
    page.goto(f"{local_ui.url}?namespace={ns}")
    # the counts are the cluster's
    items = get(kube, ns, "hr")["items"]
    statuses = [next(c["status"] for c in o["status"]["conditions"] if c["type"] == "Ready") for o in items]
    assert cell(page, "helmreleases", "ready") == statuses.count("True") == 2
    assert cell(page, "helmreleases", "failed") == statuses.count("False") == 1
    assert cell(page, "configsyncs", "ready") == 0
    assert "broken" in page.inner_text(".attention") and "VersionNotFound" in page.inner_text(".attention")
    weight = page.evaluate("() => performance.getEntriesByType('navigation').concat("
                           "performance.getEntriesByType('resource')).reduce((sum, e) => sum + e.transferSize, 0)")
    assert 0 < weight < 300_000
    shoot(page, "overview")

    # search, from the list's own form
    page.goto(f"{local_ui.url}helmreleases?namespace={ns}")
    assert sorted(page.eval_on_selector_all("tr[data-name]", "rows => rows.map(r => r.dataset.name)")) == [
        "api", "broken", "web"]
    page.fill("form.filters input[name=q]", "bro")  # (the header's box searches every kind)
    page.press("form.filters input[name=q]", "Enter")
    page.wait_for_url("**/helmreleases?q=bro**")
    assert page.eval_on_selector_all("tr[data-name]", "rows => rows.map(r => r.dataset.name)") == ["broken"]
    assert page.inner_text("tr[data-name=broken] td.reason") == "VersionNotFound"
    page.goto(f"{local_ui.url}helmreleases?namespace={ns}&health=ready")
    assert sorted(page.eval_on_selector_all("tr[data-name]", "rows => rows.map(r => r.dataset.name)")) == [
        "api", "web"]

    # the failing release's page says why; the graph draws the dependency
    page.goto(f"{local_ui.url}helmreleases?namespace={ns}&q=bro")
    page.click("a:has-text('broken')")
    assert page.url.endswith(f"/helmreleases/{ns}/broken")
    assert page.inner_text("tr[data-type=Ready] td.reason") == "VersionNotFound"
    assert "9.9.9" in page.inner_text("tr[data-type=Ready] td.message")
    page.goto(f"{local_ui.url}graph?namespace={ns}")
    assert page.locator("svg a.node").count() == 3 and page.locator("path.e-dependsOn").count() == 1
    shoot(page, "graph")


def test_values_diff_shows_the_changed_key_and_no_secret(operator: Operator, kube: Run, ns: str,
                                                         chart_repo: ChartRepo, local_ui: Ui,
                                                         browser: Browser) -> None:
    kube("kubectl", "-n", ns, "create", "secret", "generic", "db", f"--from-literal=password={PASSWORDS[0]}")
    secret_ref = [{"kind": "Secret", "name": "db", "valuesKey": "password", "targetPath": "db.password"}]
    apply(kube, ns, hr("app", chart_repo, version="0.1.0", values={"greeting": "hi"}, valuesFrom=secret_ref))
    ready(kube, ns, "app")
    kube("kubectl", "-n", ns, "patch", "secret", "db", "-p",
         json.dumps({"data": {"password": base64.b64encode(PASSWORDS[1].encode()).decode()}}))
    apply(kube, ns, hr("app", chart_repo, version="0.1.0", values={"greeting": "hello"}, valuesFrom=secret_ref))
    ready(kube, ns, "app", generation=2)
    page = browser.new_page()
    page.goto(f"{local_ui.url}helmreleases/{ns}/app")
    # (the Secret's change may have upgraded the release before the spec's did: two or three revisions)
    revisions = sorted(page.eval_on_selector_all("ol.timeline li", "items => items.map(i => +i.dataset.revision)"))
    assert len(revisions) >= 2
    page.select_option("select[name=from]", str(revisions[0]))
    page.select_option("select[name=to]", str(revisions[-1]))
    page.click("button:has-text('Compare values')")
    page.wait_for_url(f"**from={revisions[0]}&to={revisions[-1]}**")
    assert page.inner_text("tr[data-key=greeting] td.old") == '"hi"'
    assert page.inner_text("tr[data-key=greeting] td.new") == '"hello"'
    assert (page.inner_text("tr[data-key='db.password'] td.old"), page.inner_text(
        "tr[data-key='db.password'] td.new")) == ("***", "***")
    html = page.content()
    for secret in PASSWORDS:
        assert secret not in html and base64.b64encode(secret.encode()).decode() not in html
    shoot(page, "helmrelease")


def test_actions_and_what_is_seen_follow_the_viewers_rights(operator: Operator, kube: Run, ns: str,
                                                            chart_repo: ChartRepo, token_ui: Ui,
                                                            browser: Browser) -> None:
    other = mine_and_theirs(kube, ns, chart_repo)
    editor, reader = viewer(kube, ns, "alice", "edit"), viewer(kube, ns, "bob", "view")

    # a viewer with the right to patch: the reconcile is asked for (the annotation the CLI sets)
    alice = log_in(browser, token_ui, editor)
    assert f"system:serviceaccount:{ns}:alice" in alice.inner_text("header")
    alice.goto(f"{token_ui.url}helmreleases/{ns}/mine")
    alice.click("button:has-text('Reconcile')")
    assert "Asked: reconcile" in alice.inner_text("p.done")
    asked = watched(kube, ns, "hr", "mine", lambda obj: obj["metadata"]["annotations"].get("helmop.dev/requestedAt"))

    # a viewer who may only read: refused on the page, nothing asked
    bob = log_in(browser, token_ui, reader)
    bob.goto(f"{token_ui.url}helmreleases/{ns}/mine")
    bob.click("button:has-text('Suspend')")
    assert "forbidden" in bob.inner_text("p.refused-action")
    bob.click("button:has-text('Reconcile')")
    assert "forbidden" in bob.inner_text("p.refused-action")
    obj = get(kube, ns, "hr", "mine")
    assert obj["metadata"]["annotations"]["helmop.dev/requestedAt"] == asked and not obj["spec"].get("suspend")

    # neither sees the other namespace's release: not listed, and its page refused
    for page in (alice, bob):
        page.goto(f"{token_ui.url}helmreleases")
        names = page.eval_on_selector_all("tr[data-name]", "rows => rows.map(r => r.dataset.name)")
        assert "mine" in names and "theirs" not in names
        answer = page.goto(f"{token_ui.url}helmreleases/{other}/theirs")
        assert answer is not None and answer.status == 403 and "forbidden" in page.inner_text("main")
    bob.goto(token_ui.url)
    assert cell(bob, "helmreleases", "ready") == 1

    # a token the API server does not know logs no one in
    stranger = browser.new_context().new_page()
    stranger.goto(f"{token_ui.url}login")
    stranger.fill("#token", "not-a-token")
    stranger.click("button:has-text('Log in')")
    assert "does not know this token" in stranger.inner_text("main")


def request(url: str, *, method: str = "GET", data: bytes | None = None,
            headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], str]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=data, method=method, headers=headers or {}),
                                    timeout=30) as answer:
            return answer.status, dict(answer.headers), answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read().decode()


def test_pages_read_without_javascript_and_forged_requests_are_refused(operator: Operator, kube: Run, ns: str,
                                                                        chart_repo: ChartRepo, local_ui: Ui,
                                                                        browser: Browser) -> None:
    apply(kube, ns, hr("plain", chart_repo, version="0.1.0"))
    ready(kube, ns, "plain")
    page = browser.new_context(java_script_enabled=False).new_page()
    page.goto(f"{local_ui.url}helmreleases/{ns}/plain")
    assert page.inner_text("tr[data-type=Ready] td.reason") == "InstallSucceeded"
    assert "Deployment" in page.inner_text("ul.tree")
    status, headers, html = request(f"{local_ui.url}helmreleases/{ns}/plain")
    csp = headers["Content-Security-Policy"]
    assert status == 200 and "script-src 'self'" in csp and "unsafe-inline" not in csp and "<script>" not in html
    assert headers["X-Frame-Options"] == "DENY" and headers["Cache-Control"] == "no-store"
    csrf = html.split('name="csrf" value="')[1].split('"')[0]
    action = f"{local_ui.url}helmreleases/{ns}/plain/suspend"
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    assert request(action, method="POST", data=b"csrf=forged", headers=form)[0] == 403
    assert request(action, method="POST", data=f"csrf={csrf}".encode(),
                   headers={**form, "Origin": "https://evil.example"})[0] == 403
    assert request(action, method="POST", data=f"csrf={csrf}".encode(),
                   headers={**form, "Sec-Fetch-Site": "cross-site"})[0] == 403
    assert request(local_ui.url, headers={"Host": "evil.example"})[0] == 421  # a rebound DNS name
    assert not get(kube, ns, "hr", "plain")["spec"].get("suspend")
    assert request(action, method="POST", data=f"csrf={csrf}".encode(), headers=form)[0] == 200  # after 303
    assert get(kube, ns, "hr", "plain")["spec"].get("suspend") is True
    assert request(f"{local_ui.url}helmreleases/{ns}/..%2f..%2fsecrets")[0] == 404
    assert request(f"{local_ui.url}secrets")[0] == 404
    status, _, html = request(f"{local_ui.url}helmreleases?label=%21%21%3D")  # a selector the API server refuses
    assert status == 200 and "the API server refused you" in html
    assert request(f"{local_ui.url}helmreleases?q={'x' * 300}")[0] == 400


# A login's "next" that a browser would read as another site, however it is spelled: each lands on the UI's own "/".
FOREIGN = ["//evil.example/", "https://evil.example/", "/\\evil.example/", "\\/evil.example/", "/\t/evil.example/",
           "/\n/evil.example/", "/\r/evil.example", " //evil.example/", "javascript:alert(1)", "http:/evil.example",
           "/\x00/evil.example", "\x1b//evil.example", "https:evil.example"]


def test_a_login_goes_nowhere_but_this_ui(kube: Run, ns: str, token_ui: Ui, browser: Browser) -> None:
    token = viewer(kube, ns, "visitor", "view")
    for target in [*FOREIGN, f"/helmreleases?namespace={ns}"]:
        page = browser.new_context().new_page()
        page.goto(f"{token_ui.url}login?{urllib.parse.urlencode({'next': target})}")
        page.fill("#token", token)
        page.click("button:has-text('Log in')")
        expected = token_ui.url + (target[1:] if target.startswith("/helmreleases") else "")
        assert page.url == expected, (target, page.url)
        page.context.close()


@pytest.mark.alone
def test_a_change_shows_without_a_reload_within_two_seconds(operator: Operator, kube: Run, ns: str,
                                                             chart_repo: ChartRepo, local_ui: Ui,
                                                             browser: Browser) -> None:
    apply(kube, ns, hr("live", chart_repo, version="0.1.0"))
    ready(kube, ns, "live")
    page = browser.new_page()
    page.goto(f"{local_ui.url}helmreleases?namespace={ns}")
    page.wait_for_selector("body[data-live-open='1']")
    assert page.get_attribute("tr[data-name=live]", "data-health") == "ready"
    page.evaluate("() => { window.stillThisPage = true; }")
    kube("kubectl", "-n", ns, "patch", "hr", "live", "--type=merge", "-p", '{"spec":{"suspend":true}}')
    changed = time.monotonic()
    page.wait_for_selector("tr[data-name=live][data-health=suspended]", timeout=2000)
    assert time.monotonic() - changed < 2.0
    assert page.evaluate("() => window.stillThisPage") is True  # updated in place, not reloaded


def settled_ready(kube: Run, ns: str, kind: str, name: str) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        obj = get(kube, ns, kind, name)
        ready_ = condition(obj)
        return obj if ready_.get("status") == "True" and ready_.get("observedGeneration") == obj.get(
            "metadata", {}).get("generation") else None

    found: dict[str, Any] = eventually(check, timeout=90)
    return found


def flux_objects(kube: Run, ns: str, repo: Repo, chart_repo: ChartRepo) -> None:
    """A Flux GitRepository and the Kustomization that applies it, a Flux HelmRelease from a Flux HelmRepository, a
    Flux Receiver for the GitRepository, and a Webapp (an app kind's object)."""
    repo.commit({"config.yaml": yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap",
                                                "metadata": {"name": "site-config", "namespace": ns},
                                                "data": {"greeting": "hello"}})})
    kube("kubectl", "-n", ns, "create", "secret", "generic", "hook", f"--from-literal=token={HOOK_TOKEN}")
    source = "source.toolkit.fluxcd.io/v1"
    for body in (
            {"apiVersion": source, "kind": "GitRepository", "metadata": {"name": "site"},
             "spec": {"interval": "1h", "url": repo.url, "ref": {"branch": "main"}}},
            {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization", "metadata": {"name": "site"},
             "spec": {"interval": "1h", "path": "./", "prune": True,
                      "sourceRef": {"kind": "GitRepository", "name": "site"}}},
            {"apiVersion": source, "kind": "HelmRepository", "metadata": {"name": "charts"},
             "spec": {"interval": "1h", "url": chart_repo.url}},
            {"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease", "metadata": {"name": "web"},
             "spec": {"interval": "1h", "chart": {"spec": {"chart": "demo", "version": "0.1.0", "sourceRef": {
                 "kind": "HelmRepository", "name": "charts"}}}, "values": {"fullnameOverride": "flux-web"}}},
            {"apiVersion": "notification.toolkit.fluxcd.io/v1", "kind": "Receiver", "metadata": {"name": "push"},
             "spec": {"type": "generic", "secretRef": {"name": "hook"},
                      "resources": [{"apiVersion": source, "kind": "GitRepository", "name": "site"}]}},
            {"apiVersion": "demo.helmop.dev/v1alpha1", "kind": "Webapp", "metadata": {"name": "shop"},
             "spec": {"fullnameOverride": "shop"}}):
        apply(kube, ns, yaml.safe_dump(body))
    for kind, name in ((FLUX_GIT, "site"), (FLUX_KS, "site"), (FLUX_HR, "web"), (FLUX_RECEIVER, "push"),
                       (WEBAPP, "shop")):
        settled_ready(kube, ns, kind, name)


def test_flux_kinds_and_app_kinds_have_pages_rows_and_a_graph(operator: Operator, kube: Run, ns: str, repo: Repo,
                                                             chart_repo: ChartRepo, local_ui: Ui,
                                                             browser: Browser) -> None:
    """Under --flux-api: Flux's kinds and an app kind (found by discovery) each have a row in the overview and a
    page; a Receiver's page shows its webhook path, a source's its artifact; a Kustomization's inventory and graph
    are drawn as a ConfigSync's are."""
    flux_objects(kube, ns, repo, chart_repo)
    page = browser.new_page()
    page.goto(f"{local_ui.url}?namespace={ns}")
    for kind in (FLUX_HR, FLUX_KS, FLUX_GIT, FLUX_RECEIVER, WEBAPP):
        assert cell(page, f'"{kind}"', "ready") == 1, kind
    assert cell(page, "helmreleases", "ready") == 1  # the Webapp's own HelmRelease (helmop's), not Flux's

    # from the overview's row to the list, to the Flux HelmRelease's page: its history read from Flux's shape
    page.click(f'tr[data-kind="{FLUX_HR}"] th a')
    page.click("td a:has-text('web')")
    assert page.url.endswith(f"/{FLUX_HR}/{ns}/web")
    assert page.inner_text("tr[data-type=Ready] td:nth-child(2)") == "True"
    assert page.eval_on_selector_all("ol.timeline li", "items => items.map(i => +i.dataset.revision)") == [1]
    assert "0.1.0" in page.inner_text("ol.timeline") and "Deployment" in page.inner_text("ul.tree")

    # the Kustomization: what it applied, and its source in the graph
    page.goto(f"{local_ui.url}{FLUX_KS}/{ns}/site")
    assert "ConfigMap/" in page.inner_text("ul.tree") and "site-config" in page.inner_text("ul.tree")
    git = get(kube, ns, FLUX_GIT, "site")
    page.goto(f"{local_ui.url}{FLUX_GIT}/{ns}/site")
    assert page.inner_text("dd.artifact-revision") == git["status"]["artifact"]["revision"]
    assert page.inner_text("dd.artifact-digest") == git["status"]["artifact"]["digest"]
    assert "Kustomization" in page.inner_text("ul.tree")  # its readers
    page.goto(f"{local_ui.url}{FLUX_RECEIVER}/{ns}/push")
    assert page.inner_text("dd.webhook-path") == get(kube, ns, FLUX_RECEIVER, "push")["status"]["webhookPath"]
    assert HOOK_TOKEN not in page.content()
    page.goto(f"{local_ui.url}{WEBAPP}/{ns}/shop")
    assert page.inner_text("tr[data-type=Ready] td:nth-child(2)") == "True"
    assert f"HelmRelease/{ns}/shop-webapp" in page.inner_text("ul.tree")

    page.goto(f"{local_ui.url}graph?namespace={ns}")
    keys = page.eval_on_selector_all("svg a.node", "nodes => nodes.map(n => n.dataset.key)")
    assert f"Kustomization.kustomize.toolkit.fluxcd.io/{ns}/site" in keys and f"Webapp/{ns}/shop" in keys
    assert page.locator("path.e-sourceRef").count() == 2  # the Kustomization's GitRepository, the release's charts
    assert page.locator("path.e-release").count() == 1  # the Webapp's HelmRelease
    shoot(page, "flux-graph")


def kubeconfig_secret(kube: Run, ns: str, name: str, text: str, cluster: str) -> None:
    kube("kubectl", "-n", ns, "create", "secret", "generic", name, f"--from-literal=value={text}")
    kube("kubectl", "-n", ns, "label", "secret", name, f"helmop.dev/cluster={cluster}")


def mine_and_theirs(kube: Run, ns: str, chart_repo: ChartRepo) -> str:
    """A ready release "mine" in ``ns`` and "theirs" in a namespace of its own (returned)."""
    other = f"{ns}-other"
    kube("kubectl", "create", "namespace", other)
    apply(kube, ns, hr("mine", chart_repo, version="0.1.0"))
    apply(kube, other, hr("theirs", chart_repo, version="0.1.0"))
    ready(kube, ns, "mine")
    ready(kube, other, "theirs")
    return other


def ui_account(operator: Operator, kube: Run, folder: Path, *values: str) -> Path:
    """A kubeconfig of the UI's own account as the chart makes it (its ServiceAccount, ClusterRole and binding,
    rendered with ``values``), written in ``folder``."""
    rendered = kube("helm", "template", "x", str(ROOT / "deploy" / "helmop"), "--namespace", "helmop-ui",
                    "--set", "ui.enabled=true", *values, "--show-only", "templates/ui.yaml").stdout
    account = [d for d in yaml.safe_load_all(rendered)
               if d and d["kind"] in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding")]
    kube("kubectl", "create", "namespace", "helmop-ui")
    kube("kubectl", "-n", "helmop-ui", "apply", "-f", "-", stdin=yaml.safe_dump_all(account))
    config = yaml.safe_load(operator.sandbox.kubeconfig.read_text())
    config["users"][0]["user"] = {"token": kube("kubectl", "-n", "helmop-ui", "create", "token",
                                                "x-helmop-ui").stdout.strip()}
    (folder / "kubeconfig").write_text(yaml.safe_dump(config))
    return folder / "kubeconfig"


def closed_port() -> int:
    """A loopback port nothing listens on (a cluster that went away)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_the_fleet_page_shows_each_cluster_its_counts_and_who_answers(operator: Operator, kube: Run, ns: str,
                                                                      chart_repo: ChartRepo, local_ui: Ui,
                                                                      browser: Browser) -> None:
    """A release here (and a failing one), one on a remote sandbox, one on a cluster that does not answer: a row
    each, with its counts, its reachability and last error; from a cluster to its releases, and a remote release's
    page naming its cluster."""
    with Sandbox(ready_delay=0.05) as east:
        config = east.kubeconfig.read_text()
        kubeconfig_secret(kube, ns, "east", config, "east")
        server = yaml.safe_load(config)["clusters"][0]["cluster"]["server"]
        gone = f"https://127.0.0.1:{closed_port()}"
        kubeconfig_secret(kube, ns, "gone", config.replace(server, gone), "gone")
        apply(kube, ns, hr("far", chart_repo, version="0.1.0", kubeConfig={"secretRef": {"name": "east"}},
                           targetNamespace=ns, install={"createNamespace": True}))
        apply(kube, ns, hr("lost", chart_repo, version="0.1.0", kubeConfig={"secretRef": {"name": "gone"}}))
        apply(kube, ns, hr("near", chart_repo, version="0.1.0"))
        apply(kube, ns, hr("broken", chart_repo, version="9.9.9"))
        ready(kube, ns, "far")
        ready(kube, ns, "near")
        failing(kube, ns, "broken", "VersionNotFound")
        unreachable = condition(failing(kube, ns, "lost", "ClusterUnreachable"))

        page = browser.new_page()
        page.goto(f"{local_ui.url}fleet?namespace={ns}")
        rows = "tr[data-cluster]"
        assert page.eval_on_selector_all(rows, "rows => rows.map(r => r.dataset.cluster)") == ["local", "east", "gone"]
        assert page.eval_on_selector_all(rows, "rows => rows.map(r => r.dataset.reachable)") == ["true", "true",
                                                                                                  "false"]
        counted = "tr[data-cluster={}] td.releases[data-health={}]"
        assert [page.inner_text(counted.format(c, h)) for c, h in (("local", "ready"), ("local", "failed"),
                                                                  ("east", "ready"), ("gone", "failed"))] == ["1"] * 4
        assert gone.removeprefix("https://") in page.inner_text("tr[data-cluster=gone] td.reach .message")
        assert page.inner_text("tr[data-cluster=gone] td.reach .message") == unreachable["message"]
        assert "VersionNotFound" in page.inner_text("tr[data-cluster=local] td.last-error")
        shoot(page, "fleet")

        # from the cluster to its releases (the Cluster column and filter), to one of them
        page.click("tr[data-cluster=east] .kinds a:has-text('HelmRelease')")
        page.wait_for_url("**cluster=east**")
        assert page.eval_on_selector_all("tr[data-name]", "rows => rows.map(r => r.dataset.name)") == ["far"]
        assert page.inner_text("tr[data-name=far] td.cluster") == "east"
        assert page.input_value("select[name=cluster]") == "east"
        page.click("td a:has-text('far')")
        assert page.inner_text("dd.cluster").startswith("east (kubeconfig in Secret east)")
        assert "On cluster east" in page.inner_text("p.tree-cluster") and "NotRead" in page.inner_text("ul.tree")
        # let go of the remotes before they go (one that does not answer: once its kubeconfig is gone)
        kube("kubectl", "-n", ns, "delete", "secret", "gone")
        kube("kubectl", "-n", ns, "delete", "hr", "far", "lost", "--wait=true", "--timeout=60s")
