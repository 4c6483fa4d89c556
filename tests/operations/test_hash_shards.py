"""Hash shards (`helmop run --shards auto`) as processes: replicas split the objects by uid hash, a replica that
joins takes its share with nothing acted on twice, and a killed one's share is taken over."""

from __future__ import annotations

import itertools
import json
import signal
import time
from collections import Counter
from pathlib import Path

from helmop_sandbox import Sandbox

from helmop.api.shards import SPACE, Range
from tests.chartrepo import ChartRepo
from tests.tools import Run

from .conftest import SHORT_LEASES, Replica, all_ready, helm_recorder, helmrelease, installs_by_release, upgrades_since


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


def test_hash_shards_split_rebalance_and_take_over(cluster: Sandbox, kubectl: Run, tiny_charts: ChartRepo,
                                                   tmp_path: Path) -> None:
    """--shards auto: every object is acted on by exactly one replica, the work splits evenly, a fourth
    replica takes its share with no release acted on twice, and a killed one's share is taken over."""
    calls = tmp_path / "helm.log"
    helm = helm_recorder(tmp_path / "helm", calls)

    def replica(name: str) -> Replica:
        return Replica(cluster, tmp_path / name, "--shards", "auto", "--leader-election-namespace", "default",
                       "--concurrency", "10", *SHORT_LEASES, helm=helm)

    replicas = [replica(f"m{i}") for i in range(3)]
    count = 60  # the figure is 300: this shows the same, in a fifth of the suite's time
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
        all_ready(kubectl, "hashed", names, 400)
        installs = installs_by_release(calls)
        assert all(len(installs[n]) == 1 for n in names), {n: installs[n] for n in names if len(installs[n]) != 1}
        shares = Counter(next(iter(installs[n])) for n in names)
        assert set(shares) == {r.proc.pid for r in replicas}
        # An even split is 20 each; a uniform hash of 60 uids gives ~3.7 either way (one sigma), so this
        # bound (4 sigma) holds by chance as good as always, and a broken split fails it.
        assert all(abs(n - count / 3) <= 15 for n in shares.values()), shares

        # Scale 3 -> 4: the ranges move, and a new revision of every release is upgraded once, by its owner.
        replicas.append(replica("m3"))
        replicas[-1].wait_ready()
        _settled(kubectl, 4)
        start = deploy("two")
        all_ready(kubectl, "hashed", names, 400, generation=2)
        upgrades = upgrades_since(calls, start)
        assert all(len(upgrades[n]) == 1 for n in names), {n: upgrades[n] for n in names if len(upgrades[n]) != 1}
        shares = Counter(upgrades[n][0] for n in names)
        assert set(shares) == {r.proc.pid for r in replicas} and all(abs(n - count / 4) <= 13 for n in shares.values())

        # Kill one without a goodbye: once its Lease expired (6 s), the others take its range over.
        victim = replicas.pop(1)
        victim.stop(signal.SIGKILL)
        killed = time.monotonic()
        start = deploy("three")  # the others upgrade their own share meanwhile
        while not _tiled_by(list(_members(kubectl).values()), 3):
            assert time.monotonic() - killed < 20, f"its range not taken over within 20 s: {_members(kubectl)}"
            time.sleep(0.25)
        all_ready(kubectl, "hashed", names, 120, generation=3)
        upgrades = upgrades_since(calls, start)
        assert all(len(upgrades[n]) == 1 for n in names), {n: upgrades[n] for n in names if len(upgrades[n]) != 1}
        assert {pid for n in names for pid in upgrades[n]} == {r.proc.pid for r in replicas}
        _settled(kubectl, 3)  # the dead member's Lease is removed
    finally:
        for r in replicas:
            r.stop(signal.SIGKILL)
