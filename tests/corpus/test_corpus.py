"""Every chart helm can install, helmop installs alike: each chart of a corpus of public charts
($HELMOP_CHART_CORPUS: a folder of packaged charts; skipped, with the reason, when unset) goes through
raw helm 4 on one sandbox and through a HelmRelease on another (each side has a cluster of its own:
two releases of one chart clash on cluster-scoped objects). At every step the two must agree: install,
an upgrade (a values change), `helm test` where the chart has tests, and the deletion, after which
nothing of the release is left but what `helm.sh/resource-policy: keep` keeps. helmop's inventory must
be what `helm get manifest` lists. The table of results is printed at the end of the run."""

from __future__ import annotations

import json
import os
import tarfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from helmop_sandbox import Sandbox

from tests.chartrepo import ChartRepo
from tests.conftest import _runner
from tests.controllers.conftest import Operator, condition, eventually, get
from tests.tools import Run, tool

from .conftest import RESULTS

pytestmark = [pytest.mark.corpus, pytest.mark.timeout(900)]
CORPUS = Path(os.environ["HELMOP_CHART_CORPUS"]) if os.environ.get("HELMOP_CHART_CORPUS") else None
CHARTS = sorted(CORPUS.glob("*.tgz")) if CORPUS else []
TIMEOUT = "180s"
WAITING = ("", "Progressing", "Reconciling")


# A values change every chart takes: a label or annotation map of the chart's own values, if it has one.
_CHANGEABLE = ("commonLabels", "commonAnnotations", "podLabels", "podAnnotations")


@dataclass(frozen=True)
class Chart:
    archive: Path
    name: str
    version: str
    has_tests: bool
    changeable: str  # a map of the chart's values an upgrade adds a key to

    @classmethod
    def read(cls, archive: Path) -> Chart:
        with tarfile.open(archive) as tgz:
            names = tgz.getnames()
            top = names[0].split("/")[0]
            meta, values = (yaml.safe_load(member.read()) if (member := tgz.extractfile(f"{top}/{file}")) else {}
                            for file in ("Chart.yaml", "values.yaml"))
        has_tests = any(n.startswith(f"{top}/templates/tests/") for n in names)
        changeable = next((k for k in _CHANGEABLE if k in (values or {})), "helmopCorpus")
        return cls(archive, str(meta["name"]), str(meta["version"]), has_tests, changeable)


@pytest.fixture(scope="module")
def sides(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Run, Operator, Run, ChartRepo]]:
    """(raw helm's cluster, the operator, its cluster, the repository serving the corpus to it)."""
    work = tmp_path_factory.mktemp("corpus")
    source = work / "unused"
    source.mkdir()
    repo = ChartRepo(work, source, tool("helm"))
    for archive in CHARTS:
        repo.add_archive(archive)
    with Sandbox(ready_delay=0.05) as raw_cluster, Sandbox(ready_delay=0.05) as helmop_cluster:
        (work / "op").mkdir()
        operator = Operator(helmop_cluster, "helm", work / "op", repo)
        operator.start()
        try:
            yield _runner(raw_cluster), operator, _runner(helmop_cluster), repo
        finally:
            operator.close()
            repo.close()


def _manifest_ids(kube: Run, release: str, ns: str) -> set[tuple[str, str, str]]:
    """(group, kind, name) of each object of the release's manifest."""
    text = kube("helm", "get", "manifest", release, "-n", ns).stdout
    return {(d["apiVersion"].rpartition("/")[0], d["kind"], d["metadata"]["name"])
            for d in yaml.safe_load_all(text) if isinstance(d, dict) and d.get("kind")}


def _settled(kube: Run, ns: str, name: str, generation: int) -> dict[str, Any]:
    return dict(eventually(lambda: (o := get(kube, ns, "hr", name)) and o.get("status", {}).get("observedGeneration")
                           == generation and condition(o).get("reason") not in WAITING and o, timeout=300))


def _left(kube: Run, ns: str, manifest: str) -> list[str]:
    """Objects of ``manifest`` still there that no keep policy keeps."""
    out = []
    for doc in yaml.safe_load_all(manifest):
        if not isinstance(doc, dict) or not doc.get("kind"):
            continue
        meta = doc["metadata"]
        if (meta.get("annotations") or {}).get("helm.sh/resource-policy") == "keep":
            continue
        where = ["-n", meta.get("namespace") or ns]
        found = kube("kubectl", *where, "get", f"{doc['kind']}.{doc['apiVersion'].rpartition('/')[0]}".rstrip("."),
                     meta["name"], "--ignore-not-found", "-o", "name", check=False)
        if found.stdout.strip():
            out.append(found.stdout.strip())
    return out


@pytest.mark.parametrize("archive", CHARTS or [None], ids=[a.name for a in CHARTS] or ["no-corpus"])
def test_helmop_agrees_with_raw_helm(archive: Path | None, sides: tuple[Run, Operator, Run, ChartRepo]) -> None:
    if archive is None:
        pytest.skip("HELMOP_CHART_CORPUS is not set: no public-chart corpus to run against")
    raw, operator, kube, repo = sides
    chart = Chart.read(archive)
    ns = f"corpus-{chart.name}"[:50]
    row = {"chart": chart.name, "version": chart.version}
    RESULTS.append(row)

    started = time.monotonic()
    installed = raw("helm", "install", chart.name, str(archive), "-n", ns, "--create-namespace", "--wait",
                    "--timeout", TIMEOUT, check=False, timeout=400)
    row["raw helm"] = "deployed" if installed.returncode == 0 else "failed"
    kube("kubectl", "create", "namespace", ns)
    spec: dict[str, Any] = {"interval": "1h", "timeout": TIMEOUT,
                            "chart": {"repository": {"url": repo.url, "name": chart.name, "version": chart.version}},
                            "test": {"enable": chart.has_tests}}
    hr = {"apiVersion": "helmop.dev/v1alpha1", "kind": "HelmRelease", "metadata": {"name": chart.name}, "spec": spec}
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=json.dumps(hr))
    obj = _settled(kube, ns, chart.name, 1)
    ok = condition(obj).get("status") == "True"
    row["helmop"] = "Ready" if ok else condition(obj).get("reason", "?")
    assert ok == (installed.returncode == 0), (installed.stderr[-2000:], condition(obj))
    if not ok:
        row["seconds"] = f"{time.monotonic() - started:.0f}"
        return
    ids = _manifest_ids(kube, chart.name, ns)
    assert ids == _manifest_ids(raw, chart.name, ns)  # both sides deployed the same objects
    inventory = {(group, kind, name) for _ns, name, group, kind in
                 (e["id"].split("_") for e in obj["status"]["inventory"]["entries"])}
    assert inventory == ids, inventory ^ ids
    if chart.has_tests:
        tested = raw("helm", "test", chart.name, "-n", ns, "--timeout", TIMEOUT, check=False, timeout=400)
        assert (obj["status"]["history"][0].get("tests") == "passed") == (tested.returncode == 0), tested.stderr
        row["helm test"] = "passed" if tested.returncode == 0 else "failed on both"

    # an upgrade: a values change
    upgraded = raw("helm", "upgrade", chart.name, str(archive), "-n", ns, "--reuse-values", "--set",
                   f"{chart.changeable}.helmop-corpus=upgraded", "--wait", "--timeout", TIMEOUT, check=False,
                   timeout=400)
    spec["values"] = {chart.changeable: {"helmop-corpus": "upgraded"}}
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=json.dumps(hr))
    obj = _settled(kube, ns, chart.name, 2)
    assert (condition(obj).get("status") == "True") == (upgraded.returncode == 0), (upgraded.stderr[-2000:],
                                                                                     condition(obj))
    row["upgrade"] = "ok" if upgraded.returncode == 0 else "failed on both"

    # deletion: nothing left but what a keep policy keeps
    manifest = kube("helm", "get", "manifest", chart.name, "-n", ns).stdout
    raw("helm", "uninstall", chart.name, "-n", ns, "--wait", "--timeout", TIMEOUT, timeout=400)
    kube("kubectl", "-n", ns, "delete", "hr", chart.name, "--wait=false")
    eventually(lambda: not get(kube, ns, "hr", chart.name), timeout=300)
    assert not kube("helm", "list", "-n", ns, "-q").stdout.strip()
    assert _left(kube, ns, manifest) == []
    row["seconds"] = f"{time.monotonic() - started:.0f}"

