"""Several replicas: leader election through a Lease, and shards that split the work."""

from __future__ import annotations

import json
import signal
import time
from collections import defaultdict
from pathlib import Path

from helmop_sandbox import Sandbox

from tests.chartrepo import ChartRepo
from tests.tools import Run

from .conftest import Replica, helm_recorder, helmrelease, ready_condition


def _installs(log: Path) -> dict[str, set[int]]:
    """release name -> pids of the operators that started `helm upgrade --install` for it."""
    by_release: dict[str, set[int]] = defaultdict(set)
    for line in log.read_text().splitlines() if log.exists() else []:
        pid, verb, *rest = line.split()
        if verb == "upgrade":
            by_release[rest[0]].add(int(pid))
    return by_release


def _all_ready(kubectl: Run, namespace: str, names: list[str], timeout: float) -> None:
    """Until every HelmRelease named is Ready; polled gently (each poll is a kubectl of every object)."""
    deadline = time.monotonic() + timeout
    pending = list(names)
    while pending:
        assert time.monotonic() < deadline, f"not Ready within {timeout}s: {pending[:5]} ({len(pending)} left)"
        listed = json.loads(kubectl("kubectl", "-n", namespace, "get", "hr", "-o", "json").stdout)["items"]
        ready = {o["metadata"]["name"] for o in listed
                 if any(c["type"] == "Ready" and c["status"] == "True"
                        for c in o.get("status", {}).get("conditions", []))}
        pending = [n for n in pending if n not in ready]
        time.sleep(0.5 if len(names) < 20 else 3)


def _holder(kubectl: Run, name: str = "helmop-leader", namespace: str = "default") -> str:
    out = kubectl("kubectl", "-n", namespace, "get", "lease", name, "-o", "json", check=False)
    return str(json.loads(out.stdout)["spec"].get("holderIdentity") or "") if out.returncode == 0 else ""


def test_only_the_leader_acts_and_a_standby_takes_over(cluster: Sandbox, kubectl: Run, tiny_charts: ChartRepo,
                                                       tmp_path: Path) -> None:
    calls = tmp_path / "helm.log"
    helm = helm_recorder(tmp_path / "helm", calls)
    replicas = [Replica(cluster, tmp_path / f"r{i}", "--leader-elect", "--leader-election-namespace", "default",
                        helm=helm) for i in range(2)]
    try:
        for replica in replicas:
            replica.wait_serving()
        kubectl("kubectl", "create", "namespace", "ha")
        names = [f"app{i}" for i in range(4)]
        for name in names:
            kubectl("kubectl", "apply", "-f", "-", stdin=helmrelease(name, "ha", tiny_charts.url))
        _all_ready(kubectl, "ha", names, 120)
        installs = _installs(calls)
        acting = {pid for pids in installs.values() for pid in pids}
        assert set(installs) == set(names) and len(acting) == 1, installs  # one replica ran helm, once each
        assert all(len(pids) == 1 for pids in installs.values())
        leader = next(r for r in replicas if r.proc.pid in acting)
        standby = next(r for r in replicas if r is not leader)
        assert standby.probe("/readyz")[0] == 200  # ready to answer webhooks; a rollout need not wait for it
        assert "InstallFailed" not in kubectl("kubectl", "-n", "ha", "get", "events").stdout

        # The leader dies without giving the Lease up: the standby takes over within 20 s.
        before = _holder(kubectl)
        leader.stop(signal.SIGKILL)
        killed = time.monotonic()
        while _holder(kubectl) in ("", before):
            assert time.monotonic() - killed < 20, "no new leader within 20 s of the leader's death"
            time.sleep(0.25)
        standby.wait_ready(30)
        kubectl("kubectl", "apply", "-f", "-", stdin=helmrelease("after", "ha", tiny_charts.url))
        _all_ready(kubectl, "ha", ["after"], 60)
        assert _installs(calls)["after"] == {standby.proc.pid}
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
        _all_ready(kubectl, "unflagged", names, 120)
        installs = _installs(calls)
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
        for i in range(120):  # 40 a shard: enough to show the split is exact
            shard = shards[i % 3]
            names[f"r{i}"] = shard
            manifests.append(helmrelease(f"r{i}", "shards", tiny_charts.url,
                                         labels={"helmop.dev/shard": shard} if shard else {}))
        kubectl("kubectl", "apply", "-f", "-", stdin="\n".join(manifests), timeout=300)
        _all_ready(kubectl, "shards", list(names), 400)
        installs = _installs(calls)
        for name, shard in names.items():
            assert installs[name] == {replicas[shard].proc.pid}, (name, shard, installs[name])
        for shard in shards:
            assert _holder(kubectl, f"helmop-leader-{shard}" if shard else "helmop-leader")
        assert ready_condition(kubectl, "shards", "r0")["status"] == "True"
    finally:
        for replica in replicas.values():
            replica.stop(signal.SIGKILL)
