"""The fleet as the CLI shows it: ``helmop get`` names the cluster each HelmRelease, ConfigSync and Kustomization
delivers to (and filters by it), ``helmop tree`` and ``trace`` follow spec.kubeConfig into the remote sandbox with
the user's own rights, and say in one line what they could not follow."""

from __future__ import annotations

import base64
import json
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from helmop_sandbox import Sandbox

from tests.chartrepo import ChartRepo
from tests.conftest import _runner
from tests.tools import Run

from .conftest import Operator, apply, hr, ready
from .conftest import helmop as run_helmop

pytestmark = pytest.mark.timeout(300)


def kubeconfig_secret(kube: Run, ns: str, name: str, text: str, cluster: str = "") -> None:
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": ns, "labels": {
        "helmop.dev/cluster": cluster} if cluster else {}}, "data": {"value": base64.b64encode(text.encode()).decode()}}
    kube("kubectl", "apply", "-f", "-", stdin=json.dumps(secret))


@dataclass(frozen=True)
class Delivered:
    ns: str
    east: Run  # kubectl and helm against the remote sandbox
    east_kubeconfig: str
    viewer: Path  # a kubeconfig of a user who may read the namespace's objects but not its Secrets (`view`)


@pytest.fixture(scope="module")
def delivered(operator: Operator, kube: Run, chart_repo: ChartRepo,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[Delivered]:
    """A namespace with a HelmRelease released to a remote sandbox (cluster "east") and one released here, and a
    Flux HelmRelease (suspended) naming another kubeconfig Secret."""
    ns = f"fleet-{uuid.uuid4().hex[:6]}"
    kube("kubectl", "create", "namespace", ns)
    with Sandbox(ready_delay=0.05) as east:
        kubeconfig_secret(kube, ns, "east", east.kubeconfig.read_text(), cluster="east")
        apply(kube, ns, hr("far", chart_repo, version="0.1.0", kubeConfig={"secretRef": {"name": "east"}},
                           targetNamespace=ns, install={"createNamespace": True}))
        apply(kube, ns, hr("near", chart_repo, version="0.1.0"))
        apply(kube, ns, yaml.safe_dump({
            "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease", "metadata": {"name": "other"},
            "spec": {"interval": "1h", "suspend": True, "kubeConfig": {"secretRef": {"name": "west-kubeconfig"}},
                     "chart": {"spec": {"chart": "demo", "sourceRef": {"kind": "HelmRepository", "name": "x"}}}}}))
        for name in ("far", "near"):
            ready(kube, ns, name)
        kube("kubectl", "-n", ns, "create", "serviceaccount", "viewer")
        kube("kubectl", "-n", ns, "create", "rolebinding", "viewer", "--clusterrole=view",
             f"--serviceaccount={ns}:viewer")
        config = yaml.safe_load(operator.sandbox.kubeconfig.read_text())
        config["users"][0]["user"] = {"token": kube("kubectl", "-n", ns, "create", "token", "viewer").stdout.strip()}
        viewer = tmp_path_factory.mktemp("viewer") / "kubeconfig"
        viewer.write_text(yaml.safe_dump(config))
        yield Delivered(ns, _runner(east), east.kubeconfig.read_text(), viewer)
        kube("kubectl", "-n", ns, "delete", "hr", "far", "--wait=true", "--timeout=60s")  # let go of the remote


def helmop(operator: Operator, *args: str, as_: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The helmop command, as the operator's sandbox's admin or as the user of kubeconfig ``as_``."""
    done = run_helmop(operator, *args, env={"KUBECONFIG": str(as_)} if as_ else None)
    assert done.returncode in (0, 2), done.stderr
    return done


def test_get_names_and_filters_the_cluster(operator: Operator, delivered: Delivered) -> None:
    ns = delivered.ns
    table = helmop(operator, "get", "hr", "-n", ns).stdout.splitlines()
    assert table[0].split() == ["NAME", "REVISION", "SUSPENDED", "READY", "CLUSTER", "MESSAGE"]
    assert {r.split()[0]: r.split()[4] for r in table[1:]} == {"helmrelease/far": "east", "helmrelease/near": "local"}
    only = helmop(operator, "get", "hr", "-n", ns, "--cluster", "east").stdout.splitlines()
    assert [r.split()[0] for r in only[1:]] == ["helmrelease/far"]
    here = helmop(operator, "get", "hr", "-n", ns, "--cluster", "local").stdout.splitlines()
    assert here[0].split()[-1] == "MESSAGE" and "CLUSTER" not in here[0], "nothing remote listed: today's columns"
    assert [r.split()[0] for r in here[1:]] == ["helmrelease/near"]
    none = helmop(operator, "get", "hr", "-n", ns, "--cluster", "nowhere")
    assert none.stdout == "" and "delivering to cluster nowhere" in none.stderr
    # Flux's kind: its status keeps no cluster, the kubeconfig Secret's name stands in
    flux = helmop(operator, "get", "helmreleases.helm.toolkit.fluxcd.io", "-n", ns, "-o", "wide").stdout.splitlines()
    assert flux[0].split()[-2:] == ["CLUSTER", "MESSAGE"] and "west-kubeconfig" in flux[1].split()


def test_tree_and_trace_follow_into_the_remote_cluster(operator: Operator, kube: Run, delivered: Delivered) -> None:
    ns = delivered.ns
    lines = helmop(operator, "tree", "hr", "far", "-n", ns).stdout.splitlines()
    assert lines[0] == f"HelmRelease/{ns}/far  Ready  → cluster east"
    assert any(line.endswith(f"Deployment/{ns}/far  Current") for line in lines), lines
    assert kube("kubectl", "-n", ns, "get", "deploy", "far", check=False).returncode != 0, "read there, not here"
    fields = trace_fields(helmop(operator, "trace", "deploy", "far", "-n", ns, "--cluster", "east").stdout)
    assert fields["Object"] == f"Deployment/{ns}/far" and fields["Health"] == "Current"
    assert fields["HelmRelease"] == f"{ns}/far" and fields["Cluster"] == "east"
    assert helmop(operator, "trace", "deploy", "far", "-n", ns).returncode == 2, "not on the operator's cluster"

    # a user who may not read the kubeconfig's Secret: one line says so; what the status lists is shown unread,
    # and trace finds the release through its inventory
    refused = helmop(operator, "tree", "hr", "far", "-n", ns, as_=delivered.viewer).stdout.splitlines()
    assert refused[1].startswith(f"! cluster east not followed: you may not read Secret {ns}/east"), refused
    assert any(line.endswith(f"Deployment/{ns}/far  NotRead") for line in refused), refused
    traced = helmop(operator, "trace", "deploy", "far", "-n", ns, "--cluster", "east", as_=delivered.viewer).stdout
    assert traced.startswith(f"! cluster east not followed: you may not read Secret {ns}/east"), traced
    assert trace_fields(traced)["HelmRelease"] == f"{ns}/far" and trace_fields(traced)["Health"] == "NotRead"


def test_an_exec_plugin_runs_only_when_the_user_allows_it(operator: Operator, kube: Run, chart_repo: ChartRepo,
                                                          delivered: Delivered, tmp_path: Path) -> None:
    ns, marker = delivered.ns, tmp_path / "ran"
    plugged = yaml.safe_load(delivered.east_kubeconfig)
    credential = json.dumps({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                             "status": {"token": plugged["users"][0]["user"]["token"]}})
    plugged["users"][0]["user"] = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "sh",
                                            "args": ["-c", f"touch {marker}; echo '{credential}'"]}}
    kubeconfig_secret(kube, ns, "plugged", yaml.safe_dump(plugged))
    apply(kube, ns, hr("plugged", chart_repo, kubeConfig={"secretRef": {"name": "plugged"}}, suspend=True))
    said = helmop(operator, "tree", "hr", "plugged", "-n", ns).stdout.splitlines()
    assert "runs an exec credential plugin" in said[1] and "--insecure-kubeconfig-exec" in said[1], said
    assert not marker.exists()
    allowed = helmop(operator, "tree", "hr", "plugged", "-n", ns, "--insecure-kubeconfig-exec").stdout.splitlines()
    assert len(allowed) == 1 and allowed[0].endswith("→ cluster plugged") and marker.exists(), allowed


def trace_fields(text: str) -> dict[str, str]:
    """The last value of each field of ``helmop trace``'s blocks."""
    return {key: value.strip() for key, _, value in (line.partition(":") for line in text.splitlines()
                                                     if ":" in line and not line.startswith("!"))}
