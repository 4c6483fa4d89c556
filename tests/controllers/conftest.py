"""The operator under test: a real chart repository on loopback, the operator in a thread against a
sandbox of its own, and helm wrapped so every helm process it starts is counted."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import threading
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml
from helmop_sandbox import Sandbox

from helmop.api.apps import parse_apps
from helmop.api.settings import Backoff, Backoffs, Flux, Helm, Intervals, Servers, Settings, Sources
from helmop.controllers.operator import Bound, run
from tests.chartrepo import JENKINS_STAND_IN, ChartRepo, chart_version, official_jenkins_chart
from tests.clirun import run_cli
from tests.conftest import _runner
from tests.controllers.turns import Turns
from tests.gitserver import GitServer, Repo
from tests.tools import ROOT, TOOLS, Run, Runner, eventually, tool

T = TypeVar("T")
JENKINS_STAND_IN_VERSION = "0.1.0"
# The operator's waits, shortened: backoffs start at 0.2 s (the behaviour is the same, the suite does not
# wait it out), a clean-up looks again after 0.2 s.
MIRRORED = "https://charts.example.invalid/stable"
# kubectl's name for helmop's GitRepository: with Flux's CRDs installed, `gitrepo` names Flux's (kube-apiserver
# lists source.toolkit.fluxcd.io first)
GITREPO = "gitrepositories.helmop.dev"  # what the operators fetch from the test repository
FAST = Settings(backoffs=Backoffs(failure=Backoff(0.2, 5.0), error=Backoff(0.5, 5.0)),
                intervals=Intervals(dependency_recheck=2.0, dependents_wait=0.2, cleanup_wait=0.2))


@pytest.fixture(params=["stand-in", "official"])
def jenkins_chart(request: pytest.FixtureRequest, chart_repo: ChartRepo) -> dict[str, Any]:
    """A Jenkins spec's `chart`: the stand-in chart, and the official one when HELMOP_JENKINS_CHART names it."""
    version = JENKINS_STAND_IN_VERSION if request.param == "stand-in" else chart_version(official_jenkins_chart())
    return {"repository": {"url": chart_repo.url, "name": "jenkins", "version": version}}


@pytest.fixture(scope="session")
def chart_repo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChartRepo]:
    root = tmp_path_factory.mktemp("chartrepo")
    subprocess.run([tool("helm"), "create", str(root / "src")], check=True, capture_output=True)
    repo = ChartRepo(root, root / "src", tool("helm"))
    for version in ("0.1.0", "0.2.0", "0.2.1", "1.0.0"):
        repo.publish("demo", version)
    repo.publish("broken", "0.1.0", templates={"broken.yaml": '{{ fail "this chart is deliberately broken" }}'})
    repo.publish("unknownfield", "0.1.0", templates={  # a field no API server knows
        "extra.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-extra\nbogus: 1\n"})
    repo.add_chart(JENKINS_STAND_IN)
    if os.environ.get("HELMOP_JENKINS_CHART"):
        repo.add_archive(official_jenkins_chart())
    repo.publish("secretive", "0.1.0", templates={"secret.yaml": "{{ fail (printf \"bad password %s\" "
                                                                   ".Values.password) }}"})
    yield repo
    repo.close()


@pytest.fixture
def own_repo(tmp_path: Path) -> Iterator[ChartRepo]:
    """A chart repository of this test alone (what is asked of it is this test's doing), its chart with a
    values-prod.yaml (for valuesFiles to name)."""
    subprocess.run([tool("helm"), "create", str(tmp_path / "src")], check=True, capture_output=True)
    repo = ChartRepo(tmp_path, tmp_path / "src", tool("helm"))
    repo.publish("demo", "0.1.0", files={"values-prod.yaml": "replicaCount: 2\n"})
    yield repo
    repo.close()


def helm_wrapper(path: Path, helm: Path, log: Path, values_log: Path) -> Path:
    """A helm that logs its arguments (one line per process) and, for upgrade/template, the values it
    was given on stdin (a line "<args><TAB><values JSON>"), then runs the real helm."""
    path.write_text(f"""#!/bin/sh
echo "$@" >> {log}
case "$1" in
  upgrade|template)
    v=$(cat); printf '%s\\t%s\\n' "$*" "$v" >> {values_log}
    # exec, so that stopping this process (a cancelled action) stops helm itself
    f=$(mktemp); printf '%s' "$v" > "$f"; exec {helm} "$@" < "$f" ;;
  *) exec {helm} "$@" ;;
esac
""")
    path.chmod(0o755)
    return path


def helm_calls(values_log: Path, release: str) -> list[tuple[list[str], dict[str, Any]]]:
    """(arguments, values) of each logged upgrade/template of ``release``."""
    calls = []
    for line in values_log.read_text().splitlines() if values_log.exists() else []:
        args, _, values = line.partition("\t")
        if args.split()[1:2] == [release]:
            calls.append((args.split(), json.loads(values)))
    return calls


def operator_settings(kubeconfig: Path, helm: str, workdir: Path, charts: ChartRepo) -> Settings:
    """The settings of the operator under test (:data:`FAST`): ``helm`` (helm 4's "helm" or "helm3") wrapped to log
    its calls in ``workdir`` (:func:`helm_wrapper`), the test repository as a chart mirror and as the charts of
    Jenkins and the sample app kind, Flux's kinds served, an empty SOPS key folder."""
    wrapper = helm_wrapper(workdir / "helm-wrapper", TOOLS / helm, workdir / "helm-calls.log",
                           workdir / "helm-values.log")
    # The sample app kind from deploy/examples, its chart served by the test repository.
    apps = parse_apps((ROOT / "deploy/examples/webapp/apps.yaml").read_text())
    (workdir / "decryption-keys").mkdir()
    return replace(
        FAST, kubeconfig=kubeconfig, install_crds=True,
        helm=Helm(executable=str(wrapper), concurrency=4, cache_dir=workdir / "cache",
                  # (a repository written for the public internet, served by the test repository: --chart-mirror)
                  mirrors=((MIRRORED, charts.url),),
                  jenkins_chart={"repository": {"url": charts.url, "name": "jenkins",
                                                "version": JENKINS_STAND_IN_VERSION}},
                  apps=tuple(replace(kind, chart={"repository": {"url": charts.url, "name": "demo",
                                                                 "version": "0.1.0"}}) for kind in apps)),
        servers=Servers(address="127.0.0.1", webhook_port=0, metrics_port=0),
        # the operator's SOPS key folder (--decryption-keys), empty until a test puts a key there
        sources=Sources(decryption_keys=workdir / "decryption-keys"),
        flux=Flux(api=True))  # Flux's kinds beside helmop's, as a cluster moving over has them


class Operator:
    def __init__(self, sandbox: Sandbox, helm: str, workdir: Path, charts: ChartRepo,
                 kubeconfig: Path | None = None) -> None:
        self.sandbox = sandbox
        self.helm = helm  # "helm" (4) or "helm3"
        self.log = workdir / "helm-calls.log"
        self.values_log = workdir / "helm-values.log"
        self.settings = operator_settings(kubeconfig or sandbox.kubeconfig, helm, workdir, charts)
        self.bound = Bound()  # the ports the servers listen on
        self.stop = threading.Event()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._main, daemon=True)
        self.failure: BaseException | None = None

    def _main(self) -> None:
        try:
            asyncio.run(run(self.settings, stop_flag=self.stop, ready_flag=self.ready, bound=self.bound))
        except BaseException as exc:  # surfaced by the tests
            self.failure = exc

    def set(self, group: str, **values: Any) -> None:
        """Change settings of one group (before :meth:`start`): ``op.set("flux", check=0.3)``."""
        self.settings = replace(self.settings, **{group: replace(getattr(self.settings, group), **values)})

    def start(self) -> None:
        self.thread.start()
        assert self.ready.wait(60), f"operator did not start: {self.failure}"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.bound.metrics}"

    @property
    def webhook_url(self) -> str:
        return f"http://127.0.0.1:{self.bound.webhook}"

    def reconciles(self, kind: str) -> float:
        """Reconciles of ``kind`` finished so far (helmop_reconcile_duration_seconds_count)."""
        return self.metric("helmop_reconcile_duration_seconds_count", kind=kind)

    def metric(self, name: str, **labels: str) -> float:
        """The sum of ``name``'s samples whose labels include ``labels``, from /metrics."""
        text = urllib.request.urlopen(f"{self.metrics_url}/metrics", timeout=10).read().decode()
        wanted = [f'{key}="{value}"' for key, value in labels.items()]
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.split("{")[0].split(" ")[0] == name and all(w in line for w in wanted))

    def helm_actions(self) -> list[str]:
        """helm processes the operator started for actions (the version probe is not one)."""
        if not self.log.exists():
            return []
        return [line for line in self.log.read_text().splitlines() if not line.startswith("version")]

    def close(self) -> None:
        self.stop.set()
        self.thread.join(30)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """The operator runs helm 4; tests marked ``helm_versions`` (helm's own behaviour: actions,
    remediation, storage) run with helm 3 as well."""
    if "operator" in metafunc.fixturenames:
        helms = ["helm", "helm3"] if metafunc.definition.get_closest_marker("helm_versions") else ["helm"]
        metafunc.parametrize("operator", helms, indirect=True, scope="module")


@pytest.fixture(scope="module")
def operator(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
             chart_repo: ChartRepo) -> Iterator[Operator]:
    workdir = tmp_path_factory.mktemp(f"operator-{request.param}")
    with Sandbox(ready_delay=0.05) as sandbox:
        # The sample kind's CRD is the user's to install, before the operator watches it.
        subprocess.run([tool("kubectl"), "--kubeconfig", str(sandbox.kubeconfig), "apply", "-f",
                        str(ROOT / "deploy/examples/webapp/crd.yaml")], check=True, capture_output=True)
        op = Operator(sandbox, request.param, workdir, chart_repo)
        op.start()
        yield op
        op.close()


@pytest.fixture(scope="module")
def turns_sandbox() -> Iterator[Sandbox]:
    """A sandbox of the module's own, for a module driven by turns (:mod:`tests.controllers.turns`); such a module
    gives ``kube`` (what its tests run kubectl and helm with) from it."""
    with Sandbox(ready_delay=0.05) as running:
        yield running


@pytest.fixture(scope="module")
def turns(turns_sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory, chart_repo: ChartRepo) -> Iterator[Turns]:
    """The default operator's turns (its test settings: :func:`operator_settings`) against ``turns_sandbox``, with
    the sandbox's own rights."""
    harness = Turns(turns_sandbox, operator_settings(turns_sandbox.kubeconfig, "helm",
                                                     tmp_path_factory.mktemp("turns"), chart_repo))
    yield harness
    harness.close()


@pytest.fixture(scope="module")
def git_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GitServer]:
    """A git server over loopback HTTP (for GitRepositories)."""
    server = GitServer(tmp_path_factory.mktemp("gitsrv"))
    yield server
    server.close()


@pytest.fixture
def repo(git_server: GitServer, tmp_path: Path) -> Repo:
    """A fresh repository on the git server, with a working clone to commit from."""
    import uuid

    return Repo(git_server, f"r-{uuid.uuid4().hex[:6]}", tmp_path / "work")


@pytest.fixture(scope="module")
def kube(operator: Operator) -> Run:
    return _runner(operator.sandbox)


@pytest.fixture
def ns(kube: Run) -> str:
    import uuid

    name = f"hr-{uuid.uuid4().hex[:6]}"
    if isinstance(kube, Runner):
        kube.api.create_namespace(name)
    else:
        kube("kubectl", "create", "namespace", name)
    return name


def settled(kube: Run, ns: str, kind: str, name: str, timeout: float = 60.0) -> None:
    """Ask ``kind/name`` for a reconcile and wait until it has handled that request: whatever its current
    spec and inputs lead to has been done. How a test shows that something did *not* happen, without
    sleeping."""
    import uuid

    stamp = uuid.uuid4().hex
    kube("kubectl", "-n", ns, "annotate", kind, name, f"helmop.dev/requestedAt={stamp}", "--overwrite")
    watched(kube, ns, kind, name, lambda obj: (obj.get("status") or {}).get("lastHandledReconcileAt") == stamp, timeout)


def watched(kube: Run, ns: str, kind: str, name: str, check: Callable[[dict[str, Any]], T],
            timeout: float = 60.0) -> T:
    """Wait until ``check`` of ``kind/name`` ({} while there is none) returns something true, and return that:
    following the object's watch, each change looked at as it comes (:meth:`tests.kubeapi.Api.until`)."""
    if isinstance(kube, Runner):
        return kube.api.until(ns, kind, name, check, timeout)
    return eventually(lambda: check(get(kube, ns, kind, name)), timeout)


def get(kube: Run, ns: str, *what: str) -> dict[str, Any]:
    """What ``kubectl -n <ns> get <what> -o json`` prints ({} for an error): read in-process (a wait polls it),
    ``what`` being a resource, a name and ``-l <selector>``."""
    if not isinstance(kube, Runner):
        done = kube("kubectl", "-n", ns, "get", *what, "-o", "json", check=False)
        return json.loads(done.stdout) if done.returncode == 0 else {}
    args = list(what)
    selector = args.pop(args.index("-l") + 1) if "-l" in args else ""
    args = [a for a in args if a != "-l"]
    return kube.api.get(ns, args[0], args[1] if len(args) > 1 else "", selector)


def condition(obj: dict[str, Any], kind: str = "Ready") -> dict[str, Any]:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == kind), {})


def hr(name: str, repo: ChartRepo, *, chart: str = "demo", version: str = "", values: dict[str, Any] | None = None,
       **spec: Any) -> str:
    body: dict[str, Any] = {"apiVersion": "helmop.dev/v1alpha1", "kind": "HelmRelease", "metadata": {"name": name},
                            "spec": {"interval": "1h", "timeout": "60s",
                                     "chart": {"repository": {"url": repo.url, "name": chart, "version": version}},
                                     **spec}}
    # Objects are named after the release (helm create's chart would say <release>-<chart>).
    body["spec"]["values"] = {"fullnameOverride": spec.get("releaseName", name), **(values or {})}
    return yaml.safe_dump(body)


def apply(kube: Run, ns: str, manifest: str) -> None:
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=manifest)


def ready(kube: Run, ns: str, name: str, *, generation: int | None = None) -> dict[str, Any]:
    def check(obj: dict[str, Any]) -> dict[str, Any] | None:
        c = condition(obj)
        wanted = generation or obj.get("metadata", {}).get("generation")
        return obj if c.get("status") == "True" and c.get("observedGeneration") == wanted else None

    return watched(kube, ns, "hr", name, check)


def failing(kube: Run, ns: str, name: str, reason: str) -> dict[str, Any]:
    def check(obj: dict[str, Any]) -> dict[str, Any] | None:
        c = condition(obj)
        return obj if c.get("status") == "False" and c.get("reason") == reason else None

    return watched(kube, ns, "hr", name, check)


def events(kube: Run, ns: str, name: str) -> list[dict[str, Any]]:
    items = get(kube, ns, "events").get("items") or []
    return [e for e in items if e["involvedObject"]["name"] == name]


def helmop(operator: Operator, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The helmop command as a user runs it, against the operator's sandbox: in-process (:mod:`tests.clirun`:
    what it prints and its exit code)."""
    return run_cli(list(args), {"KUBECONFIG": str(operator.sandbox.kubeconfig), "HELMOP_HELM": str(TOOLS / "helm"),
                                **(env or {})})
