"""An operator under attack, as it runs in a cluster: `helmop run` as a process (its files, its memory, its
probes are what is attacked), webhooks and probes on loopback, in both tenancy modes: ``default`` (no
flags: releases act with the operator's rights) and ``lockdown`` (the chart's multitenancy block:
--default-service-account, --no-cross-namespace-refs, the operator's own RBAC only). The attacker owns a
namespace, pushes to its git repositories and chart repositories, and creates helmop's resources there.

Every attack of a mode is applied at once, each in a namespace of its own, then each test checks one
class: the specific reason, the Event, what was (not) written or served, and the operator's health."""

from __future__ import annotations

import base64
import functools
import gzip
import hashlib
import hmac
import http.server
import io
import json
import subprocess
import tarfile
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from helmop_sandbox import Sandbox

from helmop.api.flux import crds as flux_crds
from tests.chartrepo import ChartRepo, tar_gz, tiny_chart
from tests.conftest import _runner
from tests.controllers.conftest import condition, eventually, get
from tests.controllers.tenants import tenant as readme_tenant
from tests.gitserver import GitServer, Repo
from tests.operations.conftest import Replica, free_port
from tests.registry import Registry
from tests.tools import ROOT, TOOLS, Run, tool

GROUP = "helmop.dev/v1alpha1"
HOOK_TOKEN = "hook-token-of-the-attacker"
# In the operator's environment, as a cloud credential would be; helm and git must never see it.
CANARY = "HELMOP_TEST_CANARY_CREDENTIAL"


# --- crafted git objects (what `git push` accepts from anyone unless the server runs fsck) -------------

def _git(cwd: Path, *args: str, data: bytes | None = None) -> bytes:
    env = {"GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@x", "GIT_COMMITTER_NAME": "a", "GIT_COMMITTER_EMAIL": "a@x",
           "PATH": "/usr/bin:/bin", "HOME": str(cwd)}
    return subprocess.run(["git", "-C", str(cwd), *args], input=data, capture_output=True, check=True, env=env).stdout


# (name, file content | subtree | (mode, content)) in the order given: names are not checked, not sorted,
# not even unique.
Tree = list[tuple[bytes, Any]]


def _write(repo: Path, tree: Tree) -> bytes:
    """A tree object written as given (``hash-object --literally``)."""
    raw = b""
    for name, item in tree:
        if isinstance(item, list):
            mode, oid = b"40000", _write(repo, item)
        else:
            mode_text, content = item if isinstance(item, tuple) else ("100644", item)
            mode = mode_text.encode()
            oid = bytes.fromhex(_git(repo, "hash-object", "-w", "--stdin", data=content).decode().strip())
        raw += mode + b" " + name + b"\0" + oid
    return bytes.fromhex(_git(repo, "hash-object", "-t", "tree", "--literally", "-w", "--stdin", data=raw)
                         .decode().strip())


def push_tree(repo: Repo, tree: Tree) -> str:
    """Commit ``tree`` as it is and push it to the repository's main branch (over the git server)."""
    commit = _git(repo.work, "commit-tree", _write(repo.work, tree).hex(), "-m", "crafted", data=b"").decode().strip()
    _git(repo.work, "push", "-q", "--force", "origin", f"{commit}:refs/heads/main")
    return commit


# --- archives ----------------------------------------------------------------------------------------

def chart_archive(name: str, files: dict[str, bytes], *, links: dict[str, str] | None = None) -> bytes:
    """A gzipped tar as a chart archive is, with whatever entries it is given (names unchecked)."""
    chart = f"apiVersion: v2\nname: {name}\nversion: 0.1.0\n".encode()
    return tar_gz({f"{name}/Chart.yaml": chart, **files}, links)


def zero_bomb_archive(name: str, size: int) -> bytes:
    """A chart archive holding one file of ``size`` zero bytes (a few hundred kilobytes compressed)."""
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=9) as packed, \
            tarfile.open(fileobj=packed, mode="w|") as archive:
        chart = f"apiVersion: v2\nname: {name}\nversion: 0.1.0\n".encode()
        for path, length, source in ((f"{name}/Chart.yaml", len(chart), io.BytesIO(chart)),
                                     (f"{name}/templates/zeros.txt", size, _Zeros(size))):
            info = tarfile.TarInfo(path)
            info.size = length
            archive.addfile(info, source)
    return out.getvalue()


class _Zeros(io.RawIOBase):
    def __init__(self, size: int) -> None:
        self.left = size

    def readinto(self, buffer: Any) -> int:
        n = min(len(buffer), self.left)
        buffer[:n] = bytes(n)
        self.left -= n
        return n

    def readable(self) -> bool:
        return True


class RawChartRepository:
    """A chart repository serving archives as given, with an index written here (helm's own `repo index`
    would refuse to read a hostile archive)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        handler = functools.partial(_Quiet, directory=str(root))
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.entries: dict[str, list[dict[str, Any]]] = {}
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def add(self, name: str, data: bytes) -> None:
        (self.root / f"{name}-0.1.0.tgz").write_bytes(data)
        self.entries[name] = [{"name": name, "version": "0.1.0", "apiVersion": "v2",
                               "urls": [f"{self.url}/{name}-0.1.0.tgz"], "digest": hashlib.sha256(data).hexdigest()}]
        partial = self.root / "index.yaml.part"  # replaced whole: a reader never sees it half written
        partial.write_text(yaml.safe_dump({"apiVersion": "v1", "entries": self.entries}))
        partial.replace(self.root / "index.yaml")

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


# --- the target -----------------------------------------------------------------------------------------

@dataclass
class Target:
    mode: str
    sandbox: Sandbox
    kube: Run
    work: Path
    charts: ChartRepo
    raw: RawChartRepository
    git: GitServer
    registry: Registry
    allowed: Path  # the directory --allow-file-git names
    operator: Replica | None = None
    hooks: int = 0
    namespaces: list[str] = field(default_factory=list)

    @property
    def cache(self) -> Path:
        return self.work / "operator" / "cache"

    def namespace(self, purpose: str) -> str:
        """A namespace the attacker owns: set up as the multi-tenancy guide says in lockdown mode."""
        if self.mode == "lockdown":
            ns = readme_tenant(self.kube)
        else:
            ns = f"{purpose[:40]}-{uuid.uuid4().hex[:5]}"
            self.kube("kubectl", "create", "namespace", ns)
        self.kube("kubectl", "-n", ns, "create", "secret", "generic", "hook", f"--from-literal=token={HOOK_TOKEN}")
        self.namespaces.append(ns)
        return ns

    def apply(self, ns: str, *docs: dict[str, Any]) -> None:
        self.kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=yaml.safe_dump_all(docs))

    def repo(self, ns: str) -> Repo:
        return Repo(self.git, f"{ns}-{uuid.uuid4().hex[:4]}", self.work / "clones" / uuid.uuid4().hex[:8])

    def hook(self, path: str, body: bytes = b'{"ref":"refs/heads/main"}') -> int:
        signature = "sha256=" + hmac.new(HOOK_TOKEN.encode(), body, hashlib.sha256).hexdigest()
        answer = requests.post(f"http://127.0.0.1:{self.hooks}{path}", data=body, timeout=10,
                               headers={"X-Hub-Signature-256": signature, "X-GitHub-Event": "push"})
        return answer.status_code

    def log(self) -> str:
        assert self.operator is not None
        return self.operator.log.read_text()


def gitrepository(name: str, url: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": GROUP, "kind": "GitRepository", "metadata": {"name": name},
            "spec": {"url": url, "interval": "1h", "ref": {"branch": "main"},
                     "webhook": {"secretRef": {"name": "hook"}}, **spec}}


def helmrelease(name: str, chart: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": GROUP, "kind": "HelmRelease", "metadata": {"name": name},
            "spec": {"interval": "1h", "timeout": "60s", "chart": chart, **spec}}


def flux(kind: str, name: str, **spec: Any) -> dict[str, Any]:
    """A Flux object (HelmRelease, HelmRepository, OCIRepository, GitRepository, Kustomization)."""
    group = {"HelmRelease": "helm.toolkit.fluxcd.io/v2",
             "Kustomization": "kustomize.toolkit.fluxcd.io/v1"}.get(kind, "source.toolkit.fluxcd.io/v1")
    return {"apiVersion": group, "kind": kind, "metadata": {"name": name}, "spec": {"interval": "1h", **spec}}


def configsync(name: str, source: str, path: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": GROUP, "kind": "ConfigSync", "metadata": {"name": name},
            "spec": {"sourceRef": {"name": source}, "path": path, "interval": "1h", **spec}}


WAITING = (None, "", "Progressing", "Reconciling", "SourceNotReady", "DependencyNotReady")  # not an outcome yet


def settled(target: Target, ns: str, kind: str, name: str, timeout: float = 90) -> dict[str, Any]:
    """The resource once its Ready condition says more than "in progress"."""
    return dict(eventually(lambda: (o := get(target.kube, ns, kind, name)) and condition(o).get("reason") not in WAITING
                           and o, timeout=timeout))


def refused(target: Target, ns: str, kind: str, name: str, reason: str) -> str:
    """The message of a refusal with ``reason``: Ready False, Stalled, and a Warning Event with that reason."""
    obj = settled(target, ns, kind, name)
    ready = condition(obj)
    assert (ready.get("status"), ready.get("reason")) == ("False", reason), ready
    assert condition(obj, "Stalled").get("status") == "True", obj["status"]
    eventually(lambda: any(e["reason"] == reason and e["type"] == "Warning" and e["involvedObject"]["name"] == name
                           for e in get(target.kube, ns, "events")["items"]), timeout=15)  # posted after the status
    return str(ready["message"])


def _lockdown_kubeconfig(sandbox: Sandbox, admin: Run, work: Path) -> Path:
    """The chart's multitenancy RBAC installed, and a kubeconfig with its ServiceAccount's token."""
    admin("helm", "install", "helmop", str(ROOT / "deploy" / "helmop"), "-n", "helmop-system", "--create-namespace",
          "--set", "multitenancy.enabled=true", "--set", "fluxAPI.enabled=true")
    token = admin("kubectl", "-n", "helmop-system", "create", "token", "helmop").stdout.strip()
    config = yaml.safe_load(sandbox.kubeconfig.read_text())
    config["users"][0]["user"]["token"] = token
    path = work / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture(scope="package")
def workbench(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """What both modes share: the chart repositories, the git server, the OCI registry."""
    root = tmp_path_factory.mktemp("security")
    source = tiny_chart(root / "tiny", "data: {greeting: hello}\n",
                        "{{- range $k, $v := .Values.data }}\n  {{ $k }}: {{ $v | quote }}\n{{- end }}\n")
    charts = ChartRepo(root, source, tool("helm"))
    charts.publish("tiny", "0.1.0")
    raw = RawChartRepository(root / "raw")
    (root / "git").mkdir()
    git = GitServer(root / "git")
    oci_source = root / "oci"
    subprocess.run([tool("helm"), "package", str(source), "--version", "1.0.0", "-d", str(oci_source)], check=True,
                   capture_output=True)
    registry = Registry({"1.0.0": next(oci_source.glob("*.tgz")).read_bytes()})
    yield {"root": root, "charts": charts, "raw": raw, "git": git, "registry": registry}
    registry.loop.call_soon_threadsafe(registry.loop.stop)
    git.close()
    raw.close()
    charts.close()


@pytest.fixture(scope="package", params=["default", "lockdown"])
def target(request: pytest.FixtureRequest, workbench: dict[str, Any]) -> Iterator[Target]:
    mode = str(request.param)
    work = workbench["root"] / mode
    work.mkdir()
    allowed = work / "allowed"
    allowed.mkdir()
    with Sandbox(ready_delay=0.05) as sandbox:
        admin = _runner(sandbox)
        # Flux's kinds served too (as a cluster moving from Flux has them), their CRDs installed by the admin
        admin("kubectl", "apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(flux_crds.definitions()))
        (work / "decryption-keys").mkdir()  # the operator's SOPS keys (--decryption-keys): a test puts them there
        args = ["--allow-file-git", str(allowed), "--flux-api", "--decryption-keys", str(work / "decryption-keys")]
        kubeconfig = None
        if mode == "lockdown":
            kubeconfig = _lockdown_kubeconfig(sandbox, admin, work)
            args += ["--default-service-account", "helmop-tenant", "--no-cross-namespace-refs"]
        else:
            crds = [a for path in sorted((ROOT / "crds").glob("*.yaml")) for a in ("-f", str(path))]
            admin("kubectl", "apply", "--server-side", *crds)
            admin("kubectl", "wait", "--for", "condition=Established", "crd", "--all")
        target = Target(mode, sandbox, admin, work, workbench["charts"], workbench["raw"], workbench["git"],
                        workbench["registry"], allowed)
        target.hooks = free_port()
        recorder = work / "helm-env"  # a helm that writes down the environment it was given
        recorder.write_text(f'#!/bin/sh\nenv >> {work / "helm-env.log"}\necho ---- >> {work / "helm-env.log"}\n'
                            f'exec {TOOLS / "helm"} "$@"\n')
        recorder.chmod(0o755)
        target.operator = Replica(sandbox, work / "operator", "--webhook-port", str(target.hooks), *args,
                                  kubeconfig=kubeconfig, helm=recorder, env={CANARY: f"secret-{uuid.uuid4().hex}"})
        try:
            target.operator.wait_ready()
            yield target
        finally:
            target.operator.stop()


def secret_forms(value: str) -> list[str]:
    """How a secret could show up in text that leaks it."""
    raw = value.encode()
    return [value, base64.b64encode(raw).decode(), raw.hex(), base64.b32encode(raw).decode().rstrip("="),
            json.dumps(value)[1:-1]]


def nothing_named(marker: str, *roots: Path) -> list[Path]:
    """Files or folders called ``marker`` (or holding it in their name) under ``roots``."""
    return [p for root in roots if root.exists() for p in root.rglob(f"*{marker}*")]

