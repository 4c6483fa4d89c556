"""`helmop sandbox --state-dir` (what a restart keeps) and `--faults` (injected API failures)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from helmop_sandbox import Sandbox
from helmop_sandbox.faults import Faults

from tests.tools import tool


@contextmanager
def _sandbox_process(state: Path, kubeconfig: Path) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen([sys.executable, "-m", "helmop_sandbox", "--state-dir", str(state),
                             "--kubeconfig", str(kubeconfig)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("kubeconfig:")
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        proc.wait(20)


def _kubectl(kubeconfig: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([tool("kubectl"), "--kubeconfig", str(kubeconfig), *args], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 or not check, done.stderr
    return done


def _session(kubeconfig: Path) -> tuple[requests.Session, str]:
    """A client holding on to the kubeconfig it read once, as a running program does."""
    config = yaml.safe_load(kubeconfig.read_text())
    ca = kubeconfig.parent / "held-ca.crt"
    import base64

    ca.write_bytes(base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"]))
    session = requests.Session()
    session.trust_env = False
    session.verify = str(ca)
    session.headers["Authorization"] = f"Bearer {config['users'][0]['user']['token']}"
    return session, config["clusters"][0]["cluster"]["server"]


def _watch_lines(session: requests.Session, url: str, since: str, wanted: int) -> list[dict[str, Any]]:
    reply = session.get(url, params={"watch": "1", "resourceVersion": since, "timeoutSeconds": "5"}, stream=True,
                        timeout=10)
    events = []
    for line in reply.iter_lines():
        events.append(json.loads(line))
        if len(events) >= wanted:
            break
    reply.close()
    return events


def test_state_survives_restarts_and_kills(tmp_path: Path) -> None:
    state, kubeconfig = tmp_path / "state", tmp_path / "kubeconfig"
    with _sandbox_process(state, kubeconfig):
        _kubectl(kubeconfig, "create", "configmap", "before", "--from-literal=k=v")
        _kubectl(kubeconfig, "create", "deployment", "web", "--image=nginx:1")
        _kubectl(kubeconfig, "create", "serviceaccount", "bot")
        sa_token = _kubectl(kubeconfig, "create", "token", "bot").stdout.strip()
        session, server = _session(kubeconfig)
        seen = session.get(f"{server}/api/v1/namespaces/default/configmaps/before").json()
        uid, version = seen["metadata"]["uid"], seen["metadata"]["resourceVersion"]
        _kubectl(kubeconfig, "create", "configmap", "while-away", "--from-literal=k=v")
    with _sandbox_process(state, kubeconfig) as proc:
        # The client goes on with what it held: same server, same CA, same token.
        kept = session.get(f"{server}/api/v1/namespaces/default/configmaps/before").json()
        assert kept["metadata"]["uid"] == uid and kept["metadata"]["resourceVersion"] == version
        _kubectl(kubeconfig, "create", "configmap", "after", "--from-literal=k=v")
        # A watch resumed from the version seen before the restart misses nothing.
        events = _watch_lines(session, f"{server}/api/v1/namespaces/default/configmaps", version, 2)
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
            ("ADDED", "while-away"), ("ADDED", "after")]
        assert int(events[1]["object"]["metadata"]["resourceVersion"]) > int(version)
        whoami = json.loads(_kubectl(kubeconfig, "auth", "whoami", f"--token={sa_token}", "-o", "json").stdout)
        assert whoami["status"]["userInfo"]["username"] == "system:serviceaccount:default:bot"
        _kubectl(kubeconfig, "wait", "--for=condition=Available", "deploy/web", "--timeout=10s")
        _kubectl(kubeconfig, "create", "configmap", "then-killed", "--from-literal=k=v")
        proc.kill()  # no chance to save anything: what was answered is already on disk
    with _sandbox_process(state, kubeconfig):
        names = _kubectl(kubeconfig, "get", "configmaps", "-o", "name").stdout.split()
        assert {"configmap/before", "configmap/while-away", "configmap/after", "configmap/then-killed"} <= set(names)
        # History from before the last compaction is gone: a watch that old is told to re-list.
        gone = _watch_lines(session, f"{server}/api/v1/namespaces/default/configmaps", version, 1)
        assert gone[0]["type"] == "ERROR" and gone[0]["object"]["code"] == 410
    assert oct(state.stat().st_mode & 0o777) == "0o700"


def test_fault_spec_is_checked() -> None:
    faults = Faults.parse("seed=7,error=0.1,conflict=0.2,timeout=0.05,latency=0.5:0.2s,drop=1,verbs=get|create")
    assert (faults.seed, faults.error, faults.conflict, faults.latency, faults.max_delay) == (7, 0.1, 0.2, 0.5, 0.2)
    assert faults.verbs == {"get", "create"} and faults.resources is None
    for bad, message in [("error", "not key=value"), ("boom=1", "unknown fault"), ("error=2", "between 0 and 1"),
                         ("latency=x", "latency=x")]:
        with pytest.raises(ValueError, match=message):
            Faults.parse(bad)


def test_faults_are_reproducible_by_seed_whatever_the_interleaving() -> None:
    requests_ = [("update", "configmaps", "ns", f"cm{i % 7}") for i in range(200)]

    def pattern(order: list[tuple[str, str, str, str]], seed: int) -> dict[tuple[str, ...], list[str]]:
        faults = Faults.parse(f"seed={seed},error=0.2,conflict=0.2,timeout=0.1")
        seen: dict[tuple[str, ...], list[str]] = {}
        for req in order:
            d = faults.decide(*req)
            seen.setdefault(req, []).append(d.error.reason if d.error else "lost" if d.lose_reply else "ok")
        return seen

    first = pattern(requests_, 3)
    assert pattern(list(reversed(requests_)), 3) == first  # per-request sequences do not depend on order
    assert pattern(requests_, 4) != first
    outcomes = [o for seq in first.values() for o in seq]
    assert 0.3 < outcomes.count("ok") / len(outcomes) < 0.7


def test_injected_faults_as_clients_meet_them(tmp_path: Path) -> None:
    with Sandbox(faults="seed=11,error=0.3,verbs=list", ready_delay=0.05) as sb:
        failures = [_kubectl(sb.kubeconfig, "get", "configmaps", "-n", "default", check=False).returncode != 0
                    for _ in range(20)]
        # client-go retries a 503 with Retry-After and a 504 by itself: not every fault is a failure
        assert sb.faults is not None and sb.faults.injected["error"] >= sum(failures) >= 2
    with Sandbox(faults="seed=11,error=0.3,verbs=list", ready_delay=0.05) as again:
        repeat = [_kubectl(again.kubeconfig, "get", "configmaps", "-n", "default", check=False).returncode != 0
                  for _ in range(20)]
        assert repeat == failures  # the same seed, the same requests: the same faults
    with Sandbox(faults="timeout=1,verbs=create", ready_delay=0.05) as sb:
        done = _kubectl(sb.kubeconfig, "create", "configmap", "maybe", "-n", "default", check=False)
        assert done.returncode != 0 and "unable to return a response" in done.stderr
        # The write happened although the client was told it timed out.
        _kubectl(sb.kubeconfig, "get", "configmap", "maybe", "-n", "default")
    with Sandbox(faults="conflict=1,resources=configmaps", ready_delay=0.05) as sb:
        _kubectl(sb.kubeconfig, "create", "configmap", "c", "-n", "default")
        version = json.loads(_kubectl(sb.kubeconfig, "get", "configmap", "c", "-n", "default", "-o", "json")
                             .stdout)["metadata"]["resourceVersion"]
        done = _kubectl(sb.kubeconfig, "label", "configmap", "c", "-n", "default", "x=y",
                        f"--resource-version={version}", check=False)
        assert done.returncode != 0 and "the object has been modified" in done.stderr
        # A patch that names no resourceVersion cannot conflict on a real server either.
        _kubectl(sb.kubeconfig, "label", "configmap", "c", "-n", "default", "x=y")


def test_dropped_watches(tmp_path: Path) -> None:
    with Sandbox(faults="seed=2,drop=1", ready_delay=0.05) as sb:
        session, server = _session(Path(sb.kubeconfig))
        started = time.monotonic()
        reply = session.get(f"{server}/api/v1/namespaces/default/configmaps", params={"watch": "true"},
                            stream=True, timeout=30)
        with pytest.raises(requests.exceptions.ChunkedEncodingError):
            for _ in reply.iter_lines():
                pass
        assert time.monotonic() - started < 6
        assert sb.faults is not None and sb.faults.injected["drop"] == 1


def test_bad_fault_spec_on_the_command_line() -> None:
    done = subprocess.run([sys.executable, "-m", "helmop_sandbox", "--faults", "error=5"],
                          capture_output=True, text=True, timeout=60, env={**os.environ})
    assert done.returncode == 2 and "between 0 and 1" in done.stderr
