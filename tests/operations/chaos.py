"""A fault-injection run, shared by `bench/faults.py` (long) and `test_faults.py` (short, fixed seed).

Everything runs as it would in production, as processes: the sandbox (`helmop sandbox --state-dir
--faults`), two operator replicas with leader election (`helmop run --leader-elect`, each in its process
group, helm recorded). Each cycle changes one HelmRelease (install, upgrade, a failing upgrade that
remediation rolls back, uninstall) and now and then pushes a commit for a ConfigSync (one ConfigMap
added, one pruned) announced by a flood of signed webhook calls, then SIGKILLs a replica at a random
moment: its whole process group, or the operator alone (its helm child left running). The git server is
down for two cycles, and the chart repository with it; the sandbox is killed and restarted once mid-run.
Then the invariants are checked on what the cluster shows:

- converged: each HelmRelease Ready for its generation, or Stalled with a specific reason;
- stuck: a deleted HelmRelease still held by its finalizer; pending: a release left `pending-*`;
- orphaned: a helm release with no HelmRelease; double_actions: two successful helm revisions in a row
  of the same configuration (one change acted on twice);
- leaks: the secret value of the values Secret in any status, Event, operator log or metrics page;
- unsynced: the ConfigSync not at the repository's last commit, or a ConfigMap missing or not pruned;
- memory: repeating the same work afterwards must not grow the operators' resident memory.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import itertools
import json
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
import yaml

from tests.chartrepo import ChartRepo
from tests.gitserver import GitServer, Repo
from tests.operations.conftest import free_port
from tests.tools import ROOT, TOOLS

HELMOP = Path(sys.executable).with_name("helmop")
SECRET = "chaos-secret-value-8d1f"
HOOK_TOKEN = "chaos-hook-token-55e1"
DIGEST = "helmop.dev/config-digest"
NAMESPACE = "chaos"


class SandboxProcess:
    """`helmop sandbox` as a process that can be killed and started again on the same state."""

    def __init__(self, work: Path, faults: str) -> None:
        self.state, self.kubeconfig, self.faults = work / "sandbox-state", work / "kubeconfig", faults
        self.log = work / "sandbox.log"
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> None:
        args = [str(HELMOP), "sandbox", "--state-dir", str(self.state), "--kubeconfig", str(self.kubeconfig)]
        if self.faults:
            args += ["--faults", self.faults]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self.log.open("a"), text=True)
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline().startswith("kubeconfig:"), self.log.read_text()[-2000:]

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


class Replica:
    """`helmop run --leader-elect` in a process group of its own, with a helm that records each action."""

    def __init__(self, work: Path, index: int, kubeconfig: Path) -> None:
        self.work = work / f"replica-{index}"
        self.work.mkdir(parents=True, exist_ok=True)
        self.kubeconfig, self.index = kubeconfig, index
        self.log = self.work / "operator.log"
        self.helm = self.work / "helm"
        self.helm.write_text(f'#!/bin/sh\necho "$@" >> {work}/helm-actions.log\nexec {TOOLS / "helm"} "$@"\n')
        self.helm.chmod(0o755)
        self.port, self.hook_port = free_port(), free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        env = {**os.environ, "HELMOP_HELM": str(self.helm), "PATH": f"{TOOLS}:{os.environ['PATH']}",
               "POD_NAMESPACE": "default", "HELM_CACHE_HOME": str(self.work / "helm-cache")}
        with self.log.open("a") as out:
            self.proc = subprocess.Popen(
                [str(HELMOP), "run", "--kubeconfig", str(self.kubeconfig), "--cache-dir", str(self.work / "cache"),
                 "--metrics-port", str(self.port), "--webhook-port", str(self.hook_port),
                 "--bind-address", "127.0.0.1", "--leader-elect",
                 "--namespace", NAMESPACE], stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        self.starts += 1

    def kill(self, whole_group: bool) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        if whole_group:
            os.killpg(self.proc.pid, signal.SIGKILL)
        else:
            self.proc.kill()  # helm, if one is running, is left behind as an orphan
        self.proc.wait(10)

    def metrics(self) -> str:
        try:
            return requests.get(f"http://127.0.0.1:{self.port}/metrics", timeout=3).text
        except requests.RequestException:
            return ""


@dataclass
class Report:
    cycles: int = 0
    kills: int = 0
    sandbox_restarts: int = 0
    releases: int = 0
    converged: int = 0
    stuck: int = 0
    orphaned: int = 0
    pending: int = 0
    leaks: int = 0
    double_actions: int = 0
    unsynced: int = 0  # differences between the config repository and the ConfigSync's objects
    webhook_calls: int = 0
    outages: int = 0  # the git server and the chart repository down together
    faults: dict[str, int] = field(default_factory=dict)
    settle_s: float = 0.0  # from the last kill until everything converged
    memory_growth_mib: float = 0.0  # resident memory added by repeating the same work (see Chaos.memory)
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def json(self) -> str:
        keys = ("kills", "converged", "stuck", "orphaned", "pending", "leaks", "double_actions")
        extra = {"unsynced": self.unsynced, "cycles": self.cycles, "releases": self.releases,
                 "sandbox_restarts": self.sandbox_restarts, "outages": self.outages,
                 "webhook_calls": self.webhook_calls, "faults": self.faults, "settle_s": round(self.settle_s, 1),
                 "memory_growth_mib": round(self.memory_growth_mib, 1),
                 "seconds": round(self.seconds, 1)}
        return json.dumps({k: getattr(self, k) for k in keys} | extra)


class Chaos:
    def __init__(self, work: Path, charts: ChartRepo, *, seed: int, faults: str, releases: int = 4) -> None:
        self.work, self.charts, self.chart_url, self.rng = work, charts, charts.url, random.Random(seed)
        self.git = GitServer(work / "git")
        self.repo = Repo(self.git, "config", work / "config")
        self.files = {f"apps/cm{i}.yaml": i for i in range(3)}
        self.sandbox = SandboxProcess(work, faults)
        self.replicas: list[Replica] = []
        self.names = [f"app{i}" for i in range(releases)]
        self.report = Report()

    # --- cluster access ----------------------------------------------------------------------------

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        for attempt in range(20):  # the sandbox injects faults and restarts: retry what the harness asks
            done = subprocess.run([str(TOOLS / "kubectl"), "--kubeconfig", str(self.sandbox.kubeconfig), *args],
                                  capture_output=True, text=True, input=stdin, timeout=60)
            if done.returncode == 0 or not check:
                return done
            time.sleep(0.5 + attempt * 0.1)
        raise AssertionError(f"kubectl {' '.join(args)}: {done.stderr}")

    def get(self, *what: str) -> dict[str, Any]:
        return json.loads(self.kubectl("-n", NAMESPACE, "get", *what, "-o", "json").stdout)

    # --- the run -----------------------------------------------------------------------------------

    def setup(self) -> None:
        self.sandbox.start()
        crds = [arg for path in sorted((ROOT / "crds").glob("*.yaml")) for arg in ("-f", str(path))]
        self.kubectl("apply", "--server-side", *crds)
        self.kubectl("wait", "--for", "condition=Established", "crd", "--all")
        # apply, not create: a write the faulty sandbox did but answered 504 is retried, and must not fail then
        self.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all([
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
            {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "values", "namespace": NAMESPACE},
             "stringData": {"values.yaml": f"password: {SECRET}\n"}},
            {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hook", "namespace": NAMESPACE},
             "stringData": {"token": HOOK_TOKEN}}]))
        self._commit()
        self.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all([
            {"apiVersion": "helmop.dev/v1alpha1", "kind": "GitRepository",
             "metadata": {"name": "config", "namespace": NAMESPACE},
             "spec": {"url": self.repo.url, "interval": "10s", "ref": {"branch": "main"},
                      "webhook": {"secretRef": {"name": "hook"}}}},
            {"apiVersion": "helmop.dev/v1alpha1", "kind": "ConfigSync",
             "metadata": {"name": "apps", "namespace": NAMESPACE},
             "spec": {"sourceRef": {"name": "config"}, "path": "apps", "interval": "10s", "prune": True}}]))
        self.replicas = [Replica(self.work, i, self.sandbox.kubeconfig) for i in range(2)]
        for replica in self.replicas:
            replica.start()

    def _release(self, name: str, greeting: str, fail: bool) -> str:
        values: dict[str, Any] = {"greeting": greeting}
        if fail:
            values["fail"] = True
        return json.dumps({"apiVersion": "helmop.dev/v1alpha1", "kind": "HelmRelease",
                           "metadata": {"name": name, "namespace": NAMESPACE},
                           "spec": {"interval": "30s", "timeout": "5s",
                                    "chart": {"repository": {"url": self.chart_url, "name": "chaos",
                                                             "version": "0.1.0"}},
                                    "values": values, "valuesFrom": [{"kind": "Secret", "name": "values"}],
                                    "upgrade": {"remediation": {"retries": 1, "strategy": "rollback"}}}})

    def _commit(self) -> None:
        """The config repository holds a ConfigMap per entry of ``files``."""
        wanted = {path: f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: synced-{n}}}\ndata: {{n: '{n}'}}\n"
                  for path, n in self.files.items()}
        gone: dict[str, str | None] = {str(p.relative_to(self.repo.work)): None
                                       for p in (self.repo.work / "apps").glob("*.yaml")} \
            if (self.repo.work / "apps").exists() else {}
        self.repo.commit({**gone, **wanted})

    def gitops(self) -> None:
        """A push that adds one ConfigMap and drops another (pruned), told by a flood of webhook calls."""
        dropped = self.rng.choice(sorted(self.files))
        self.files.pop(dropped)
        self.files[f"apps/cm{self.report.cycles + 100}.yaml"] = self.report.cycles + 100
        self._commit()
        body = b'{"ref":"refs/heads/main"}'
        signature = "sha256=" + hmac.new(HOOK_TOKEN.encode(), body, hashlib.sha256).hexdigest()
        headers = {"X-Hub-Signature-256": signature, "X-GitHub-Event": "push"}
        for replica in self.replicas:
            for _ in range(25):
                with contextlib.suppress(requests.RequestException):
                    requests.post(f"http://127.0.0.1:{replica.hook_port}/hooks/{NAMESPACE}/config", data=body,
                                  headers=headers, timeout=2)
        self.report.webhook_calls += 50

    def cycle(self) -> None:
        if self.rng.random() < 0.25:
            self.gitops()
        name = self.rng.choice(self.names)
        exists = self.kubectl("-n", NAMESPACE, "get", "hr", name, check=False).returncode == 0
        action = self.rng.choice(["upgrade", "upgrade", "fail", "uninstall"]) if exists else "install"
        if action == "uninstall":
            self.kubectl("-n", NAMESPACE, "delete", "hr", name, "--wait=false", "--ignore-not-found")
        else:
            greeting = f"v{self.report.cycles}"
            self.kubectl("apply", "-f", "-", stdin=self._release(name, greeting, fail=action == "fail"))
        time.sleep(self.rng.uniform(0.0, 2.5))  # a random moment of the action
        victim = self.rng.choice(self.replicas)
        victim.kill(whole_group=self.rng.random() < 0.5)
        self.report.kills += 1
        victim.start()
        self.revive()
        self.report.cycles += 1

    def revive(self) -> None:
        """Start replicas that exited (a leader that could not renew its Lease does), as a Deployment would."""
        for replica in self.replicas:
            if replica.proc is not None and replica.proc.poll() is not None:
                replica.start()

    def restart_sandbox(self) -> None:
        self.sandbox.kill()
        self.report.sandbox_restarts += 1
        self.sandbox.start()

    def run(self, cycles: int, settle: float) -> Report:
        started = time.monotonic()
        self.setup()
        try:
            for i in range(cycles):
                self.cycle()
                if i == cycles // 2:
                    self.restart_sandbox()
                if i == cycles // 4:
                    self.git.close()  # the git server and the chart repository are down for a few cycles
                    self.charts.close()
                    self.report.outages += 1
                if i == cycles // 4 + 2:
                    self.git.restart()
                    self.charts.restart()
            self.settle(settle)
            self.check()
            self.memory()
        finally:
            for replica in self.replicas:
                replica.kill(whole_group=True)
            self.sandbox.kill()
            self.git.close()
        self.report.seconds = time.monotonic() - started
        return self.report

    # --- invariants --------------------------------------------------------------------------------

    def _verdicts(self) -> tuple[list[str], list[str]]:
        """(converged, not converged) HelmReleases."""
        good, bad = [], []
        for hr in self.get("hr")["items"]:
            meta, status = hr["metadata"], hr.get("status") or {}
            conditions = {c["type"]: c for c in status.get("conditions") or []}
            ready, stalled = conditions.get("Ready", {}), conditions.get("Stalled", {})
            if meta.get("deletionTimestamp"):
                bad.append(f"{meta['name']}: deleted, still held by its finalizer")
            elif status.get("observedGeneration") == meta.get("generation") and (
                    ready.get("status") == "True" or (stalled.get("status") == "True" and stalled.get("reason"))):
                good.append(meta["name"])
            else:
                bad.append(f"{meta['name']}: {ready.get('reason')}: {ready.get('message', '')[:200]}")
        return good, bad

    def settle(self, timeout: float) -> None:
        """Until everything converged after the last kill (``settle_s`` says how long that took)."""
        started = time.monotonic()
        while time.monotonic() < started + timeout:
            self.revive()
            _, bad = self._verdicts()
            if not bad and not self._pending() and not self._sync_problems():
                break
            time.sleep(1)
        self.report.settle_s = time.monotonic() - started

    def _secrets(self) -> list[dict[str, Any]]:
        return [s for s in self.get("secrets", "-l", "owner=helm")["items"]]

    def _pending(self) -> list[str]:
        latest: dict[str, dict[str, Any]] = {}
        for s in self._secrets():
            labels = s["metadata"]["labels"]
            if int(labels["version"]) >= int(latest.get(labels["name"], {}).get("version", 0)):
                latest[labels["name"]] = labels
        return [name for name, labels in latest.items() if labels["status"].startswith("pending")]

    def check(self) -> None:
        for line in self.sandbox.log.read_text().splitlines() if self.sandbox.log.exists() else []:
            if "sandbox fault: " in line:
                kind = line.split("sandbox fault: ", 1)[1].split(" on ")[0]
                self.report.faults[kind] = self.report.faults.get(kind, 0) + 1
        good, bad = self._verdicts()
        self.report.releases = len(good) + len(bad)
        self.report.converged = len(good)
        self.report.stuck = sum("finalizer" in b for b in bad)
        self.report.problems += bad
        self.report.pending = len(self._pending())
        existing = {hr["metadata"]["name"] for hr in self.get("hr")["items"]}
        secrets = self._secrets()
        releases = {s["metadata"]["labels"]["name"] for s in secrets
                    if s["metadata"]["labels"].get("status") != "uninstalled"}
        orphans = releases - existing
        self.report.orphaned = len(orphans)
        self.report.problems += [f"{o}: a helm release without its HelmRelease" for o in sorted(orphans)]
        self.report.double_actions = self._doubles(secrets)
        self.report.leaks = self._leaks()
        sync = self._sync_problems()
        self.report.unsynced = len(sync)
        self.report.problems += sync

    def memory(self, rounds: int = 3) -> None:
        """After the storm, the same work again and again must not grow the operators: each round asks
        every HelmRelease to reconcile and waits for it; growth is the resident memory after the last
        round minus after the first (a process that keeps what it no longer needs grows every round)."""
        def rss(replica: Replica) -> float:
            if replica.proc is None or replica.proc.poll() is not None:
                return 0.0
            for line in Path(f"/proc/{replica.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
            return 0.0

        after: list[list[float]] = []
        for i in range(rounds):
            stamp = f"memory-{i}-{time.monotonic()}"
            self.kubectl("-n", NAMESPACE, "annotate", "hr", "--all", "--overwrite", f"helmop.dev/requestedAt={stamp}")
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and any(
                    (hr.get("status") or {}).get("lastHandledReconcileAt") != stamp for hr in self.get("hr")["items"]):
                time.sleep(0.5)
            after.append([rss(r) for r in self.replicas])
        self.report.memory_growth_mib = max(b - a for a, b in zip(after[0], after[-1], strict=True))

    def _sync_problems(self) -> list[str]:
        """What differs between the config repository's last commit and the namespace's ConfigMaps."""
        head = self.repo.git("rev-parse", "HEAD")
        sync = self.get("configsync", "apps")
        ready = next((c for c in (sync.get("status") or {}).get("conditions") or [] if c["type"] == "Ready"), {})
        problems = [] if ready.get("status") == "True" and head in str((sync.get("status") or {}).get(
            "lastAppliedRevision", "")) else [f"ConfigSync apps: not at {head[:8]}: {ready.get('message', '')[:150]}"]
        present = {cm["metadata"]["name"] for cm in self.get("configmaps")["items"]
                   if cm["metadata"]["name"].startswith("synced-")}
        wanted = {f"synced-{n}" for n in self.files.values()}
        problems += [f"ConfigMap {name}: not pruned" for name in sorted(present - wanted)]
        problems += [f"ConfigMap {name}: missing" for name in sorted(wanted - present)]
        return problems

    def _doubles(self, secrets: list[dict[str, Any]]) -> int:
        by_release: dict[str, list[dict[str, str]]] = {}
        for s in secrets:
            by_release.setdefault(s["metadata"]["labels"]["name"], []).append(s["metadata"]["labels"])
        doubles = 0
        for name, revisions in by_release.items():
            ordered = sorted(revisions, key=lambda labels: int(labels["version"]))
            for before, after in itertools.pairwise(ordered):
                done = ("deployed", "superseded")
                if before["status"] in done and after["status"] in done and before.get(DIGEST) and \
                        before.get(DIGEST) == after.get(DIGEST) and int(after["version"]) == int(before["version"]) + 1:
                    doubles += 1
                    self.report.problems.append(f"{name}: revisions {before['version']} and {after['version']} "
                                                "applied the same configuration")
        return doubles

    def _leaks(self) -> int:
        places = {"status": json.dumps([hr.get("status") for hr in self.get("hr")["items"]]),
                  "events": json.dumps([e.get("message") for e in self.get("events")["items"]])}
        for replica in self.replicas:
            places[f"replica {replica.index} log"] = replica.log.read_text() if replica.log.exists() else ""
            places[f"replica {replica.index} metrics"] = replica.metrics()
        leaked = [where for where, text in places.items() if SECRET in text]
        self.report.problems += [f"the secret value appears in {where}" for where in leaked]
        return len(leaked)


CHART_TEMPLATE = """apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}
data:
  greeting: {{ .Values.greeting | quote }}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
  annotations:
    sandbox.helmop.dev/ready-delay: "0.3"
    {{- if .Values.fail }}
    sandbox.helmop.dev/simulate: fail
    {{- end }}
spec:
  replicas: 1
  selector: {matchLabels: {app: {{ .Release.Name }}}}
  template:
    metadata: {labels: {app: {{ .Release.Name }}}}
    spec: {containers: [{name: c, image: "busybox:1"}]}
"""


def chart_source(root: Path) -> Path:
    """A chart of a ConfigMap and a Deployment that never gets ready when ``fail`` is set."""
    source = root / "chaos-src"
    (source / "templates").mkdir(parents=True, exist_ok=True)
    (source / "Chart.yaml").write_text("apiVersion: v2\nname: chaos\nversion: 0.1.0\n")
    (source / "values.yaml").write_text(yaml.safe_dump({"greeting": "hello", "fail": False}))
    (source / "templates" / "all.yaml").write_text(CHART_TEMPLATE)
    return source
