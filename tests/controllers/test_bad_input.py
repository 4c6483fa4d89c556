"""The bad-input catalogue: each case is one thing a user (or an attacker) gets wrong, with the specific
reason helmop answers it with (in the resource's condition and a Warning Event) — or the API's refusal
when the CRD schema already stops it. All cases are applied at once, each in a namespace of its own, to one
sandbox; driven by turns (:mod:`tests.controllers.turns`: the operator's dispatcher and services, no kopf, no
scheduler): each case's objects get turns, sources first, until its target has settled, and the same dispatcher
and services must go on serving the good release applied after them. The push webhook is the operator's own
server (:func:`helmop.infra.webhooks.app`), served on the turns' loop."""

from __future__ import annotations

import hashlib
import hmac
import json
import subprocess
import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from helmop_sandbox import Sandbox

from helmop.infra import webhooks
from helmop.infra.serving import serve
from tests.chartrepo import ChartRepo
from tests.conftest import _runner
from tests.controllers.conftest import get, operator_settings
from tests.controllers.turns import Turns, ready
from tests.gitserver import GitServer, Repo
from tests.tools import ROOT, Runner, tool

GROUP = "helmop.dev/v1alpha1"
SECRET_VALUE = "s3cr3t-catalogue-value"


class BadRepository:
    """Chart repositories that misbehave: 500, HTML, garbage, an endless index, 401, a corrupt archive."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, code: int, body: bytes, ctype: str = "application/x-yaml") -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                kind = self.path.strip("/").split("/")[0]
                port = self.server.server_address[1]
                if kind == "e500":
                    self._send(500, b"internal error")
                elif kind == "html":
                    self._send(200, b"<html><body>Welcome to nginx!</body></html>", "text/html")
                elif kind == "garbage":
                    self._send(200, b"\x00\xff{[: not: an: index\n\t- ]")
                elif kind == "auth":
                    self._send(401, b"unauthorized")
                elif kind == "endless":
                    self.send_response(200)
                    self.end_headers()
                    line = b"  - version: 1.0.0\n    urls: [x.tgz]\n" * 1000
                    try:
                        self.wfile.write(b"apiVersion: v1\nentries:\n  demo:\n")
                        while True:
                            self.wfile.write(line)
                    except (BrokenPipeError, ConnectionResetError):
                        pass
                elif kind == "corrupt" and self.path.endswith("index.yaml"):
                    index = {"apiVersion": "v1", "entries": {"demo": [{
                        "name": "demo", "version": "0.1.0", "apiVersion": "v2",
                        "urls": [f"http://127.0.0.1:{port}/corrupt/demo-0.1.0.tgz"]}]}}
                    self._send(200, yaml.safe_dump(index).encode())
                elif kind == "corrupt":
                    self._send(200, b"\x1f\x8b\x08 this is not a gzip stream", "application/gzip")
                else:
                    self._send(404, b"not found")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@dataclass
class Env:
    charts: str
    bad: str
    git: GitServer
    tmp: Path


@dataclass
class Case:
    id: str
    docs: Callable[[Env, str], list[dict[str, Any]]]
    target: str  # the resource whose condition answers, "<kind key>/<name>" (:meth:`Turns.settle`)
    reason: str  # the condition's reason; "refused": the API refuses the object
    message: str  # a fragment of the condition message (or of the refusal)
    setup: Callable[[Env, str], None] | None = None
    event: str = "Warning"  # the type of the Event that reports it
    outcome: dict[str, Any] = field(default_factory=dict)


def hr(name: str, chart: dict[str, Any] | None = None, **spec: Any) -> Callable[[Env, str], list[dict[str, Any]]]:
    def docs(env: Env, ns: str) -> list[dict[str, Any]]:
        return [{"apiVersion": GROUP, "kind": "HelmRelease", "metadata": {"name": name},
                 "spec": {"interval": "1h", "chart": chart or {"repository": {"url": env.charts, "name": "demo",
                                                                              "version": "0.1.0"}}, **spec}}]
    return docs


def from_bad(path: str, chart: str = "demo") -> Callable[[Env, str], list[dict[str, Any]]]:
    def docs(env: Env, ns: str) -> list[dict[str, Any]]:
        return hr("x", {"repository": {"url": f"{env.bad}/{path}", "name": chart, "version": "0.1.0"}})(env, ns)
    return docs


def with_chart(**chart: Any) -> Callable[[Env, str], list[dict[str, Any]]]:
    def docs(env: Env, ns: str) -> list[dict[str, Any]]:
        return hr("x", {"repository": {"url": env.charts, **chart}})(env, ns)
    return docs


def gitrepo(url: str | Callable[[Env], str], **spec: Any) -> Callable[[Env, str], list[dict[str, Any]]]:
    def docs(env: Env, ns: str) -> list[dict[str, Any]]:
        return [{"apiVersion": GROUP, "kind": "GitRepository", "metadata": {"name": "src"},
                 "spec": {"url": url(env) if callable(url) else url, "interval": "1h",
                          "ref": {"branch": "main"}, **spec}}]
    return docs


def _repo(env: Env, ns: str, files: dict[str, str | None], branch: str = "main") -> Repo:
    repo = Repo(env.git, f"{ns}", env.tmp / ns)
    repo.commit(files, branch=branch)
    return repo


def from_git(files: dict[str, str], path: str, kind: str = "ConfigSync",
             **spec: Any) -> Callable[[Env, str], list[dict[str, Any]]]:
    def docs(env: Env, ns: str) -> list[dict[str, Any]]:
        source = gitrepo(f"{env.git.base}/{ns}.git")(env, ns)
        if kind == "ConfigSync":
            return [*source, {"apiVersion": GROUP, "kind": "ConfigSync", "metadata": {"name": "x"},
                              "spec": {"sourceRef": {"name": "src"}, "path": path, "interval": "1h", **spec}}]
        return source + hr("x", {"sourceRef": {"kind": "GitRepository", "name": "src"}, "path": path})(env, ns)
    return docs


def git_setup(files: dict[str, str | None]) -> Callable[[Env, str], None]:
    def setup(env: Env, ns: str) -> None:
        _repo(env, ns, files)
    return setup


def configmap(name: str, data: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def values_from(*sources: dict[str, Any], extra: list[dict[str, Any]] | None = None
                ) -> Callable[[Env, str], list[dict[str, Any]]]:
    def docs(env: Env, ns: str) -> list[dict[str, Any]]:
        return (extra or []) + hr("x", valuesFrom=list(sources))(env, ns)
    return docs


def jenkins(**spec: Any) -> Callable[[Env, str], list[dict[str, Any]]]:
    def docs(env: Env, ns: str) -> list[dict[str, Any]]:
        return [{"apiVersion": "apps.helmop.dev/v1alpha1", "kind": "Jenkins", "metadata": {"name": "ci"},
                 "spec": {"project": "demo", "chart": {"repository": {"url": env.charts, "name": "jenkins",
                                                                      "version": "0.1.0"}}, **spec}}]
    return docs


BIG = "x" * (1000 * 1024)
CLUSTER_ROLE = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: grab}\nrules: []\n"
ELSEWHERE = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: far, namespace: kube-system}\ndata: {a: b}\n"
OK = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ok}\ndata: {a: b}\n"
BAD_DATA = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bad}\ndata: {a: [not, a, string]}\n"
# the targets (kind key/name): the release, the source, the config sync a case makes
HR, SRC, SYNC = "HelmRelease/x", "GitRepository/src", "ConfigSync/x"

CASES = [
    # charts, versions, constraints
    # what the repository has, as VersionNotFound lists versions (sorted: other tests' charts may come first)
    Case("chart-not-in-repository", with_chart(name="nope", version="0.1.0"), HR, "ChartNotFound", "broken"),
    Case("version-not-published", with_chart(name="demo", version="9.9.9"), HR, "VersionNotFound", "9.9.9"),
    Case("constraint-matches-nothing", with_chart(name="demo", version=">=5.0.0 <6"), HR, "VersionNotFound",
         ">=5.0.0 <6"),
    Case("constraint-syntax", with_chart(name="demo", version=">>1.0"), HR, "InvalidSpec", ">>1.0"),
    Case("chart-fails-to-render", with_chart(name="broken", version="0.1.0"), HR, "RenderFailed",
         "deliberately broken"),
    # repositories that misbehave
    Case("repository-500", from_bad("e500"), HR, "RepositoryUnreachable", "500"),
    Case("repository-html", from_bad("html"), HR, "RepositoryIndexInvalid", "index"),
    Case("repository-garbage", from_bad("garbage"), HR, "RepositoryIndexInvalid", "index"),
    Case("repository-endless-index", from_bad("endless"), HR, "IndexTooLarge", "larger than"),
    Case("repository-401", from_bad("auth"), HR, "RepositoryAuthFailed", "401"),
    Case("repository-corrupt-archive", from_bad("corrupt"), HR, "ChartInvalid", "not a chart archive"),
    Case("repository-refuses-connections", hr("x", {"repository": {"url": "http://127.0.0.1:9/charts",
                                                                   "name": "demo", "version": "0.1.0"}}),
         HR, "RepositoryUnreachable", "Cannot connect to host 127.0.0.1:9: connection refused"),
    Case("repository-url-scheme", hr("x", {"repository": {"url": "ftp://127.0.0.1/charts", "name": "demo",
                                                          "version": "0.1.0"}}), HR, "InvalidSpec", "ftp://"),
    Case("oci-registry-down", hr("x", {"repository": {"url": "oci://127.0.0.1:9/charts/demo", "version": "0.1.0"}}),
         HR, "RepositoryUnreachable", "Cannot connect to host 127.0.0.1:9: connection refused"),
    # values
    Case("values-not-a-map", hr("x", values=["a", "b"]), HR, "refused", "spec.values"),
    Case("values-from-missing-configmap", values_from({"kind": "ConfigMap", "name": "absent"}), HR,
         "ValuesFromNotFound", "absent"),
    Case("values-from-missing-key", values_from({"kind": "ConfigMap", "name": "v", "valuesKey": "nope.yaml"},
                                                extra=[configmap("v", {"values.yaml": "a: 1"})]),
         HR, "ValuesKeyNotFound", "nope.yaml"),
    Case("values-from-not-a-map", values_from({"kind": "ConfigMap", "name": "v"},
                                              extra=[configmap("v", {"values.yaml": "- a\n- b\n"})]),
         HR, "ValuesInvalid", "values.yaml"),
    Case("values-from-bad-yaml", values_from({"kind": "ConfigMap", "name": "v"},
                                             extra=[configmap("v", {"values.yaml": "a: [1, 2\n"})]),
         HR, "ValuesInvalid", "values.yaml"),
    Case("target-path-syntax", values_from({"kind": "ConfigMap", "name": "v", "valuesKey": "k",
                                            "targetPath": "a..b"}, extra=[configmap("v", {"k": "1"})]),
         HR, "ValuesInvalid", "a..b"),
    Case("values-too-large", values_from(*({"kind": "ConfigMap", "name": f"v{i}", "valuesKey": "k",
                                            "targetPath": f"k{i}"} for i in range(5)),
                                         extra=[configmap(f"v{i}", {"k": BIG}) for i in range(5)]),
         HR, "ValuesTooLarge", "4"),
    Case("values-from-secret-missing", values_from({"kind": "Secret", "name": "gone"}), HR,
         "ValuesFromNotFound", "gone"),
    # names
    Case("release-name-too-long", hr("x", releaseName="r" * 54), HR, "refused",
         "may not have more than 53 characters"),
    Case("release-name-invalid", hr("x", releaseName="Bad_Name"), HR, "InvalidSpec", "Bad_Name"),
    Case("object-name-invalid", lambda env, ns: [{**hr("x")(env, ns)[0], "metadata": {"name": "Not/Valid"}}],
         HR, "refused", "Not/Valid"),
    # names of other objects that the API would refuse: a specific reason, not an error from deep inside
    Case("values-from-name-dotdot", values_from({"kind": "Secret", "name": ".."}), HR, "InvalidSpec",
         "spec.valuesFrom[0].name: '..' is not an object name"),
    Case("chart-secret-ref-slash", with_chart(name="demo", version="0.1.0", secretRef={"name": "a/../b"}), HR,
         "InvalidSpec", "spec.chart.repository.secretRef.name"),
    Case("target-namespace-dotdot", hr("x", targetNamespace=".."), HR, "InvalidSpec", "spec.targetNamespace"),
    Case("git-secret-ref-dotdot", gitrepo(lambda env: f"{env.git.base}/none.git", secretRef={"name": ".."}),
         SRC, "InvalidSpec", "spec.secretRef.name: '..'"),
    Case("substitute-from-dotdot", lambda env, ns: [
        {"apiVersion": GROUP, "kind": "ConfigSync", "metadata": {"name": "x"},
         "spec": {"sourceRef": {"name": "src"}, "path": "apps", "interval": "1h",
                  "postBuild": {"substituteFrom": [{"kind": "Secret", "name": "../../x" + "y" * 300}]}}}],
         SYNC, "InvalidSpec", "spec.postBuild.substituteFrom[0].name"),
    # references
    Case("source-ref-missing", hr("x", {"sourceRef": {"kind": "GitRepository", "name": "absent"}, "path": "c"}),
         HR, "SourceNotFound", "absent"),
    Case("cross-namespace-source-ref", hr("x", {"sourceRef": {"kind": "GitRepository", "name": "src",
                                                              "namespace": "default"}, "path": "c"}),
         HR, "CrossNamespaceRef", "default"),
    Case("depends-on-itself", hr("x", dependsOn=[{"name": "x"}]), HR, "DependencyCycle", "itself"),
    # Waiting for a dependency is not an error (as Flux): a Normal Event.
    Case("depends-on-missing", hr("x", dependsOn=[{"name": "absent"}]), HR, "DependencyNotReady", "absent",
         event="Normal"),
    Case("health-expression-syntax", hr("x", healthCheckExprs=[{"apiVersion": "v1", "kind": "ConfigMap",
                                                               "current": "self.data.a =="}]),
         HR, "InvalidSpec", "healthCheckExprs[0].current"),
    # hostile git
    Case("git-ext-transport", gitrepo("ext::sh%20-c%20touch%20/tmp/pwned"), SRC, "InvalidURL", "ext::"),
    Case("git-url-with-spaces", gitrepo("ext::sh -c touch% /tmp/pwned"), SRC, "InvalidURL", "spaces"),
    Case("git-fd-transport", gitrepo("fd::3"), SRC, "InvalidURL", "fd::"),
    Case("git-option-in-url", gitrepo("--upload-pack=touch /tmp/pwned"), SRC, "InvalidURL", "'-'"),
    Case("git-option-in-ref", gitrepo(lambda env: f"{env.git.base}/none.git", ref={"branch": "--upload-pack=x"}),
         SRC, "InvalidRef", "--upload-pack=x"),
    Case("git-commit-not-a-sha", gitrepo(lambda env: f"{env.git.base}/none.git", ref={"commit": "HEAD~1"}),
         SRC, "refused", "should match '^[0-9a-f]{40}$'"),
    Case("git-tag-syntax", gitrepo(lambda env: f"{env.git.base}/none.git", ref={"tag": "v1..2"}),
         SRC, "InvalidRef", "v1..2"),
    Case("git-plain-http-remote", gitrepo("http://example.com/repo.git"), SRC, "InvalidURL", "https://"),
    Case("git-file-url", gitrepo("file:///etc"), SRC, "InvalidURL", "file://"),
    Case("git-credentials-in-url", gitrepo(f"https://user:{SECRET_VALUE}@127.0.0.1:9/r.git"), SRC,
         "InvalidURL", "spec.secretRef (https://127.0.0.1:9/r.git)"),
    Case("git-branch-missing", from_git({"c/x.yaml": "a: b\n"}, "c"), SRC, "RefNotFound",
         "'main' not found in the repository (branches: other)", setup=lambda env, ns: _other_branch_only(env, ns)),
    Case("path-traversal", from_git({"apps/a.yaml": ELSEWHERE}, "../../etc"), SYNC, "InvalidPath",
         "spec.path leaves the artifact", setup=git_setup({"apps/a.yaml": ELSEWHERE})),
    Case("symlink-out-of-repository", from_git({}, "apps"), SYNC, "InvalidPath", "outside",
         setup=lambda env, ns: _symlink_repo(env, ns)),
    Case("chart-path-missing", from_git({}, "charts/none", kind="HelmRelease"), HR, "PathNotFound",
         "charts/none", setup=git_setup({"README": "x"})),
    # tenants reaching past their namespace
    Case("cluster-scoped-object", from_git({}, "apps"), SYNC, "ClusterScopedObject", "ClusterRole",
         setup=git_setup({"apps/r.yaml": CLUSTER_ROLE})),
    Case("object-in-another-namespace", from_git({}, "apps"), SYNC, "ObjectOutsideNamespace", "kube-system",
         setup=git_setup({"apps/c.yaml": ELSEWHERE})),
    Case("object-the-api-refuses", from_git({}, "apps"), SYNC, "ApplyFailed",
         "/bad dry-run failed (", setup=git_setup({"apps/ok.yaml": OK, "apps/bad.yaml": BAD_DATA})),
    Case("component-missing", from_git({}, "apps", components=["../nowhere"]), SYNC, "PathNotFound",
         "spec.components[0]", setup=git_setup({"apps/ok.yaml": OK})),
    Case("ignore-path-not-a-pointer", from_git({}, "apps", ignore=[{"paths": ["spec/replicas"]}]), SYNC,
         "InvalidSpec", "spec.ignore[0].paths[0]"),
    Case("ignore-target-regex", from_git({}, "apps", ignore=[{"paths": ["/spec"], "target": {"name": "(["}}]),
         SYNC, "InvalidSpec", "spec.ignore[0].target.name"),
    Case("build-metadata-unknown", from_git({}, "apps", buildMetadata=["originAnnotations", "everything"]), SYNC,
         "refused", "buildMetadata"),
    # Jenkins
    Case("jenkins-plugin-name", jenkins(plugins=["not a plugin!"]), "Jenkins/ci", "InvalidPlugin", "not a plugin!"),
    Case("jenkins-casc-not-a-map", jenkins(configAsCode={"x": "- just\n- a list\n"}), "Jenkins/ci",
         "InvalidConfigAsCode", "x"),
]


def _other_branch_only(env: Env, ns: str) -> None:
    _repo(env, ns, {"README": "x"}, branch="other")


def _symlink_repo(env: Env, ns: str) -> None:
    repo = _repo(env, ns, {"apps/ok.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ok}\n"})
    (repo.work / "apps" / "escape.yaml").symlink_to("../../../../etc/passwd")
    repo.commit({})


@dataclass
class Catalogue:
    turns: Turns
    kube: Runner
    webhook_url: str
    settled: dict[str, dict[str, Any]] = field(default_factory=dict)  # each case's target once settled

    def outcome(self, case: Case) -> dict[str, Any]:
        """The case's target once its namespace's turns have settled it (settled once, whichever test asks first)."""
        if case.id not in self.settled:
            self.settled[case.id] = self.turns.settle(case.outcome["ns"], case.target)
        return self.settled[case.id]


def _apply(kube: Runner, env: Env, case: Case) -> None:
    """The case's objects applied with kubectl in a namespace of its own; its outcome recorded on it."""
    ns = f"bad-{uuid.uuid4().hex[:6]}"
    kube.api.create_namespace(ns)
    if case.setup is not None:
        case.setup(env, ns)
    done = kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=yaml.safe_dump_all(case.docs(env, ns)), check=False)
    case.outcome = {"ns": ns, "returncode": done.returncode, "stderr": done.stderr}


@pytest.fixture(scope="module")
def catalogue(tmp_path_factory: pytest.TempPathFactory, chart_repo: ChartRepo) -> Iterator[Catalogue]:
    work = tmp_path_factory.mktemp("catalogue")
    bad, git = BadRepository(), GitServer(work / "git")
    env = Env(chart_repo.url, bad.base, git, work)
    with Sandbox(ready_delay=0.05) as sandbox:
        subprocess.run([tool("kubectl"), "--kubeconfig", str(sandbox.kubeconfig), "apply", "-f",
                        str(ROOT / "deploy/examples/webapp/crd.yaml")], check=True, capture_output=True)
        settings = operator_settings(sandbox.kubeconfig, "helm", work, chart_repo)
        settings = replace(settings, helm=replace(settings.helm, index_max_size=1 << 20),  # the endless index: 1 MiB
                           tenancy=replace(settings.tenancy, no_cross_namespace_refs=True))
        turns = Turns(sandbox, settings)  # the CRDs installed
        hooks = turns.run(serve(webhooks.app(turns.kube), "127.0.0.1", 0))
        kube = _runner(sandbox)
        assert isinstance(kube, Runner)
        with ThreadPoolExecutor(4) as pool:  # a kubectl process takes 0.1 s to start: a few at once
            list(pool.map(lambda case: _apply(kube, env, case), CASES))
        yield Catalogue(turns, kube, f"http://127.0.0.1:{hooks.port}")
        turns.run(hooks.stop())
        turns.close()
    bad.server.shutdown()
    git.close()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(catalogue: Catalogue, case: Case) -> None:
    ns = case.outcome["ns"]
    if case.reason == "refused":
        assert case.outcome["returncode"] != 0 and case.message in case.outcome["stderr"], case.outcome
        return
    assert case.outcome["returncode"] == 0, case.outcome["stderr"]
    obj = catalogue.outcome(case)
    condition = ready(obj)
    assert condition["status"] == "False", condition
    assert condition["reason"] == case.reason and case.message in condition["message"], condition
    assert SECRET_VALUE not in json.dumps(obj.get("status"))
    name = case.target.rpartition("/")[2]
    # the Event is posted by the turn that wrote the status: there once the turn has ended
    events = [e for e in get(catalogue.kube, ns, "events")["items"] if e["involvedObject"]["name"] == name]
    assert any(e["reason"] == case.reason and e["type"] == case.event for e in events), events
    assert all(SECRET_VALUE not in e.get("message", "") for e in events)


def test_webhook_bodies_unsigned_badly_signed_and_oversize(catalogue: Catalogue) -> None:
    ns = next(c.outcome["ns"] for c in CASES if c.id == "git-branch-missing")
    url = f"{catalogue.webhook_url}/hooks/{ns}/src"
    body = b'{"ref":"refs/heads/main"}'
    assert requests.post(url, data=body, timeout=10).status_code == 401
    wrong = "sha256=" + hmac.new(b"not-the-token", body, hashlib.sha256).hexdigest()
    assert requests.post(url, data=body, headers={"X-Hub-Signature-256": wrong, "X-GitHub-Event": "push"},
                         timeout=10).status_code == 401
    huge = requests.post(url, data=b"x" * (30 << 20), headers={"X-GitHub-Event": "push"}, timeout=30)
    assert huge.status_code in (401, 413)


def test_the_operator_keeps_serving(catalogue: Catalogue, chart_repo: ChartRepo) -> None:
    """Every bad case has had its turns (whatever order the tests run in), then the good release gets its own."""
    for case in CASES:
        if case.reason != "refused":
            catalogue.outcome(case)
    ns = f"good-{uuid.uuid4().hex[:6]}"
    catalogue.kube.api.create_namespace(ns)
    catalogue.kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=yaml.safe_dump(hr("fine")(
        Env(chart_repo.url, "", None, Path()), ns)[0]))  # type: ignore[arg-type]
    fine = catalogue.turns.settle(ns, "HelmRelease/fine")
    assert ready(fine).get("status") == "True", fine
