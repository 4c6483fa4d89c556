"""Several replicas: leader election through a Lease, and shards that split the work."""

from __future__ import annotations

import itertools
import json
import signal
import time
from collections import Counter, defaultdict
from pathlib import Path

from helmop_sandbox import Sandbox

from helmop.api.shards import SPACE, Range
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


def _all_ready(kubectl: Run, namespace: str, names: list[str], timeout: float, generation: int = 0) -> None:
    """Until every HelmRelease named is Ready (for ``generation`` of its spec, when given); polled gently (each
    poll is a kubectl of every object)."""
    deadline = time.monotonic() + timeout
    pending = list(names)
    while pending:
        assert time.monotonic() < deadline, f"not Ready within {timeout}s: {pending[:5]} ({len(pending)} left)"
        listed = json.loads(kubectl("kubectl", "-n", namespace, "get", "hr", "-o", "json").stdout)["items"]
        ready = {o["metadata"]["name"] for o in listed
                 if any(c["type"] == "Ready" and c["status"] == "True"
                        and (not generation or c.get("observedGeneration") == generation)
                        for c in o.get("status", {}).get("conditions", []))}
        pending = [n for n in pending if n not in ready]
        time.sleep(0.5 if len(names) < 20 else 1 if generation else 3)


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
        # Relabelled into another shard, with a new revision: only that shard's replica acts on it now.
        assert names["r1"] == "blue"
        start = len(calls.read_text().splitlines())
        kubectl("kubectl", "apply", "-f", "-", stdin=helmrelease("r1", "shards", tiny_charts.url, values={
            "greeting": "moved"}, labels={"helmop.dev/shard": "green"}))
        _all_ready(kubectl, "shards", ["r1"], 60, generation=2)
        assert _upgrades(calls, start)["r1"] == [replicas["green"].proc.pid]
    finally:
        for replica in replicas.values():
            replica.stop(signal.SIGKILL)


def _members(kubectl: Run) -> dict[str, Range]:
    """identity -> the hash range its member Lease says it holds."""
    listed = json.loads(kubectl("kubectl", "-n", "default", "get", "lease", "-l", "helmop.dev/member-of=default",
                                "-o", "json").stdout)["items"]
    return {lease["spec"]["holderIdentity"]: Range.parse(lease["metadata"]["annotations"].get("helmop.dev/holds", ""))
            for lease in listed}


def _settled(kubectl: Run, count: int, timeout: float = 60) -> dict[str, Range]:
    """Until ``count`` members hold ranges that cover the hash space once (no gap, no overlap)."""
    deadline = time.monotonic() + timeout
    while True:
        held = list(_members(kubectl).values())
        if len(held) == count and _tiled_by(held, count):
            return _members(kubectl)
        assert time.monotonic() < deadline, f"{count} members did not settle: {held}"
        time.sleep(0.25)


def _tiled_by(ranges: list[Range], count: int) -> bool:
    """Whether ``count`` of the ranges cover the hash space once (no gap, no overlap)."""
    for chosen in itertools.combinations([r for r in ranges if not r.empty], count):
        ordered = sorted(chosen, key=lambda r: r.start)
        if ordered[0].start == 0 and ordered[-1].end == SPACE and all(
                a.end == b.start for a, b in itertools.pairwise(ordered)):
            return True
    return False


def _upgrades(log: Path, after: int) -> dict[str, list[int]]:
    """release -> pids of the operators that ran `helm upgrade` for it, from line ``after`` of the log on."""
    by_release: dict[str, list[int]] = defaultdict(list)
    for line in log.read_text().splitlines()[after:]:
        pid, verb, *rest = line.split()
        if verb == "upgrade":
            by_release[rest[0]].append(int(pid))
    return by_release


def test_hash_shards_split_rebalance_and_take_over(cluster: Sandbox, kubectl: Run, tiny_charts: ChartRepo,
                                                   tmp_path: Path) -> None:
    """--shards auto: every object is acted on by exactly one replica, the work splits evenly, a fourth
    replica takes its share with no release acted on twice, and a killed one's share is taken over."""
    calls = tmp_path / "helm.log"
    helm = helm_recorder(tmp_path / "helm", calls)

    def replica(name: str) -> Replica:
        return Replica(cluster, tmp_path / name, "--shards", "auto", "--leader-election-namespace", "default",
                       "--concurrency", "10", helm=helm)

    replicas = [replica(f"m{i}") for i in range(3)]
    count = 90  # the figure is 300: this shows the same, in a third of the suite's time
    names = [f"h{i}" for i in range(count)]

    def deploy(greeting: str) -> int:
        """Apply every HelmRelease with this greeting; the log line the resulting upgrades start after."""
        start = len(calls.read_text().splitlines()) if calls.exists() else 0
        manifests = [helmrelease(n, "hashed", tiny_charts.url, values={"greeting": greeting}) for n in names]
        kubectl("kubectl", "apply", "-f", "-", stdin="\n".join(manifests), timeout=300)
        return start

    try:
        for r in replicas:
            r.wait_ready()
        _settled(kubectl, 3)
        kubectl("kubectl", "create", "namespace", "hashed")
        deploy("one")
        _all_ready(kubectl, "hashed", names, 400)
        installs = _installs(calls)
        assert all(len(installs[n]) == 1 for n in names), {n: installs[n] for n in names if len(installs[n]) != 1}
        shares = Counter(next(iter(installs[n])) for n in names)
        assert set(shares) == {r.proc.pid for r in replicas}
        # An even split is 30 each; a uniform hash of 90 uids gives ~4.5 either way (one sigma), so this
        # bound (4 sigma) holds by chance as good as always, and a broken split fails it.
        assert all(abs(n - count / 3) <= 18 for n in shares.values()), shares

        # Scale 3 -> 4: the ranges move, and a new revision of every release is upgraded once, by its owner.
        replicas.append(replica("m3"))
        replicas[-1].wait_ready()
        _settled(kubectl, 4)
        start = deploy("two")
        _all_ready(kubectl, "hashed", names, 400, generation=2)
        upgrades = _upgrades(calls, start)
        assert all(len(upgrades[n]) == 1 for n in names), {n: upgrades[n] for n in names if len(upgrades[n]) != 1}
        shares = Counter(upgrades[n][0] for n in names)
        assert set(shares) == {r.proc.pid for r in replicas} and all(abs(n - count / 4) <= 16 for n in shares.values())

        # Kill one without a goodbye: once its Lease expired (15 s), the others take its range over.
        victim = replicas.pop(1)
        victim.stop(signal.SIGKILL)
        killed = time.monotonic()
        start = deploy("three")  # the others upgrade their own share meanwhile
        while not _tiled_by(list(_members(kubectl).values()), 3):
            assert time.monotonic() - killed < 30, f"its range not taken over within 30 s: {_members(kubectl)}"
            time.sleep(0.25)
        _all_ready(kubectl, "hashed", names, 120, generation=3)
        upgrades = _upgrades(calls, start)
        assert all(len(upgrades[n]) == 1 for n in names), {n: upgrades[n] for n in names if len(upgrades[n]) != 1}
        assert {pid for n in names for pid in upgrades[n]} == {r.proc.pid for r in replicas}
        _settled(kubectl, 3)  # the dead member's Lease is removed
    finally:
        for r in replicas:
            r.stop(signal.SIGKILL)
