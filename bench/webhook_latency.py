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
import statistics
import sys
import tempfile
import time
from pathlib import Path

import requests
from operator_process import ROOT, TOOLS, free_port, kubectl, start_operator

sys.path.insert(0, str(ROOT))

from helmop_sandbox import Sandbox

from tests.gitserver import GitServer, Repo

TOKEN = b"bench-token"


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
    hook_port = free_port()
    with Sandbox(ready_delay=0.05) as sandbox:
        kc = sandbox.kubeconfig
        operator, _ = start_operator(kc, work / "operator.log", "--cache-dir", str(work / "cache"), "--webhook-port",
                                     str(hook_port), helm=TOOLS / "helm")
        try:
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
