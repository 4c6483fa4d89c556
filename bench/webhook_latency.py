"""Push to reconcile: how long from a signed push webhook to the GitRepository reconciling the new commit.

    .venv/bin/python bench/webhook_latency.py [--pushes 10]

A git repository served over loopback HTTP, the sandbox in this process and the operator as `helmop run`
in a child process. Each round commits and pushes, POSTs the webhook (GitHub's X-Hub-Signature-256),
and measures until the GitRepository's status.artifact names the new commit: the reconcile started,
fetched and recorded it, so this bounds "push -> reconcile start" from above. Not a test: it prints
numbers.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from helmop.sandbox import Sandbox  # noqa: E402
from tests.gitserver import GitServer, Repo  # noqa: E402

TOOLS = ROOT / ".tools" / "bin"
TOKEN = b"bench-token"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def kubectl(kubeconfig: Path, *args: str, stdin: str | None = None) -> str:
    return subprocess.run([str(TOOLS / "kubectl"), "--kubeconfig", str(kubeconfig), *args], input=stdin,
                          capture_output=True, text=True, check=True).stdout


def artifact(kubeconfig: Path) -> str:
    obj = json.loads(kubectl(kubeconfig, "-n", "hooks", "get", "gitrepository", "config", "-o", "json"))
    return str(((obj.get("status") or {}).get("artifact") or {}).get("revision", ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pushes", type=int, default=10)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="helmop-hook-bench-"))
    (work / "srv").mkdir()
    server = GitServer(work / "srv")
    repo = Repo(server, "config", work / "checkout")
    repo.commit({"app/values.yaml": "round: 0\n"})
    hook_port, metrics_port = free_port(), free_port()
    with Sandbox(ready_delay=0.05) as sandbox:
        kc = sandbox.kubeconfig
        log_path = work / "operator.log"
        with log_path.open("w") as log:
            operator = subprocess.Popen(
                [sys.executable, "-m", "helmop.cli", "run", "--kubeconfig", str(kc), "--install-crds",
                 "--cache-dir", str(work / "cache"), "--webhook-port", str(hook_port), "--metrics-port",
                 str(metrics_port), "--bind-address", "127.0.0.1", "--log-format", "json"],
                env={**os.environ, "HELMOP_HELM": str(TOOLS / "helm")}, stdout=log, stderr=log)
        try:
            while True:
                try:
                    if requests.get(f"http://127.0.0.1:{metrics_port}/readyz", timeout=2).status_code == 200:
                        break
                except requests.RequestException:
                    pass
                time.sleep(0.2)
            kubectl(kc, "create", "namespace", "hooks")
            kubectl(kc, "-n", "hooks", "create", "secret", "generic", "hook",
                    f"--from-literal=token={TOKEN.decode()}")
            kubectl(kc, "apply", "-f", "-", stdin=json.dumps({
                "apiVersion": "helmop.dev/v1alpha1", "kind": "GitRepository",
                "metadata": {"name": "config", "namespace": "hooks"},
                "spec": {"url": repo.url, "ref": {"branch": "main"}, "interval": "1h",
                         "webhook": {"secretRef": {"name": "hook"}}}}))
            while not artifact(kc):
                time.sleep(0.2)
            fetched: list[float] = []
            for i in range(1, args.pushes + 1):
                sha = repo.commit({"app/values.yaml": f"round: {i}\n"})
                body = json.dumps({"ref": "refs/heads/main", "after": sha}).encode()
                signature = "sha256=" + hmac.new(TOKEN, body, hashlib.sha256).hexdigest()
                t0 = time.perf_counter()
                answer = requests.post(f"http://127.0.0.1:{hook_port}/hooks/hooks/config", data=body, timeout=10,
                                       headers={"X-Hub-Signature-256": signature, "X-GitHub-Event": "push"})
                assert answer.status_code == 202, answer.text
                while sha not in artifact(kc):
                    time.sleep(0.01)
                fetched.append(time.perf_counter() - t0)
        finally:
            operator.terminate()
            operator.wait(30)
    server.close()
    print(f"{args.pushes} pushes: webhook -> new commit fetched and recorded: median "
          f"{statistics.median(fetched) * 1000:.0f} ms, max {max(fetched) * 1000:.0f} ms")
    print(json.dumps({"pushes": args.pushes, "median_ms": round(statistics.median(fetched) * 1000),
                      "max_ms": round(max(fetched) * 1000)}))


if __name__ == "__main__":
    main()
