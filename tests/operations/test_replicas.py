"""Several replicas: leader election through a Lease, and label shards that split the work (hash shards:
test_hash_shards.py, a module of its own so that both test workers share the replica journeys)."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

from helmop_sandbox import Sandbox

from tests.chartrepo import ChartRepo
from tests.tools import Run

from .conftest import (
    SHORT_LEASES,
    Replica,
    all_ready,
    helm_recorder,
    helmrelease,
    installs_by_release,
    ready_condition,
    upgrades_since,
)


def _holder(kubectl: Run, name: str = "helmop-leader", namespace: str = "default") -> str:
    out = kubectl("kubectl", "-n", namespace, "get", "lease", name, "-o", "json", check=False)
    return str(json.loads(out.stdout)["spec"].get("holderIdentity") or "") if out.returncode == 0 else ""


def test_only_the_leader_acts_and_a_standby_takes_over(cluster: Sandbox, kubectl: Run, tiny_charts: ChartRepo,
                                                       tmp_path: Path) -> None:
    calls = tmp_path / "helm.log"
    helm = helm_recorder(tmp_path / "helm", calls)
    replicas = [Replica(cluster, tmp_path / f"r{i}", "--leader-elect", "--leader-election-namespace", "default",
                        *SHORT_LEASES, helm=helm) for i in range(2)]
    try:
        for replica in replicas:
            replica.wait_serving()
        kubectl("kubectl", "create", "namespace", "ha")
        names = [f"app{i}" for i in range(4)]
        for name in names:
            kubectl("kubectl", "apply", "-f", "-", stdin=helmrelease(name, "ha", tiny_charts.url))
        all_ready(kubectl, "ha", names, 120)
        installs = installs_by_release(calls)
        acting = {pid for pids in installs.values() for pid in pids}
        assert set(installs) == set(names) and len(acting) == 1, installs  # one replica ran helm, once each
        assert all(len(pids) == 1 for pids in installs.values())
        leader = next(r for r in replicas if r.proc.pid in acting)
        standby = next(r for r in replicas if r is not leader)
        assert standby.probe("/readyz")[0] == 200  # ready to answer webhooks; a rollout need not wait for it
        assert "InstallFailed" not in kubectl("kubectl", "-n", "ha", "get", "events").stdout

        # The leader dies without giving the Lease up: the standby takes over once the Lease (6 s) ran out.
        before = _holder(kubectl)
        leader.stop(signal.SIGKILL)
        killed = time.monotonic()
        while _holder(kubectl) in ("", before):
            assert time.monotonic() - killed < 15, "no new leader within 15 s of the leader's death"
            time.sleep(0.25)
        standby.wait_ready(30)
        kubectl("kubectl", "apply", "-f", "-", stdin=helmrelease("after", "ha", tiny_charts.url))
        all_ready(kubectl, "ha", ["after"], 60)
        assert installs_by_release(calls)["after"] == {standby.proc.pid}
    finally:
        for replica in replicas:
            replica.stop(signal.SIGKILL)


def test_leader_election_is_on_by_default_in_a_pod(cluster: Sandbox, kubectl: Run, tiny_charts: ChartRepo,
                                                  tmp_path: Path) -> None:
    """Two unflagged replicas in pods (KUBERNETES_SERVICE_HOST set, as in every pod) elect a leader: one acts."""
    kubectl("kubectl", "create", "namespace", "pods")
    calls = tmp_path / "helm.log"
    helm = helm_recorder(tmp_path / "helm", calls)
    in_a_pod = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "POD_NAMESPACE": "pods"}
    replicas = [Replica(cluster, tmp_path / f"p{i}", helm=helm, env=in_a_pod) for i in range(2)]
    try:
        for replica in replicas:
            replica.wait_serving()
        deadline = time.monotonic() + 30
        while not (holder := _holder(kubectl, namespace="pods")):
            assert time.monotonic() < deadline, "no leader Lease in the pod's namespace"
            time.sleep(0.25)
        kubectl("kubectl", "create", "namespace", "unflagged")
        names = ["one", "two"]
        for name in names:
            kubectl("kubectl", "apply", "-f", "-", stdin=helmrelease(name, "unflagged", tiny_charts.url))
        all_ready(kubectl, "unflagged", names, 120)
        installs = installs_by_release(calls)
        assert {n: len(p) for n, p in installs.items() if n in names} == {"one": 1, "two": 1}, installs
        assert len({pid for n in names for pid in installs[n]}) == 1 and holder
    finally:
        for replica in replicas:
            replica.stop(signal.SIGKILL)


def test_shards_split_the_work_exactly(cluster: Sandbox, kubectl: Run, tiny_charts: ChartRepo, tmp_path: Path) -> None:
    calls = tmp_path / "helm.log"
    helm = helm_recorder(tmp_path / "helm", calls)
    shards = ["", "blue", "green"]
    replicas = {shard: Replica(cluster, tmp_path / (shard or "default"), "--leader-elect",
                               "--leader-election-namespace", "default", "--concurrency", "10",
                               *(["--shard", shard] if shard else []), helm=helm) for shard in shards}
    try:
        for replica in replicas.values():
            replica.wait_ready()  # each shard elects its own leader
        kubectl("kubectl", "create", "namespace", "shards")
        names: dict[str, str] = {}
        manifests = []
        for i in range(60):  # 20 a shard: enough to show the split is exact
            shard = shards[i % 3]
            names[f"r{i}"] = shard
            manifests.append(helmrelease(f"r{i}", "shards", tiny_charts.url,
                                         labels={"helmop.dev/shard": shard} if shard else {}))
        kubectl("kubectl", "apply", "-f", "-", stdin="\n".join(manifests), timeout=300)
        all_ready(kubectl, "shards", list(names), 400)
        installs = installs_by_release(calls)
        for name, shard in names.items():
            assert installs[name] == {replicas[shard].proc.pid}, (name, shard, installs[name])
        for shard in shards:
            assert _holder(kubectl, f"helmop-leader-{shard}" if shard else "helmop-leader")
        assert ready_condition(kubectl, "shards", "r0")["status"] == "True"
        # Relabelled into another shard, with a new revision: only that shard's replica acts on it now.
        assert names["r1"] == "blue"
        start = len(calls.read_text().splitlines())
        kubectl("kubectl", "apply", "-f", "-", stdin=helmrelease("r1", "shards", tiny_charts.url, values={
            "greeting": "moved"}, labels={"helmop.dev/shard": "green"}))
        all_ready(kubectl, "shards", ["r1"], 60, generation=2)
        assert upgrades_since(calls, start)["r1"] == [replicas["green"].proc.pid]
    finally:
        for replica in replicas.values():
            replica.stop(signal.SIGKILL)
