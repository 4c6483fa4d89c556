"""The real binaries and how tests run them: shared by tests/ and e2e/ (no sandbox here)."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from tests import kubecreate
from tests.kubeapi import Api

ROOT = Path(__file__).resolve().parent.parent
TOOLS = Path(os.environ.get("HELMOP_TOOLS", ROOT / ".tools" / "bin"))

Run = Callable[..., subprocess.CompletedProcess[str]]  # a Runner, or a stand-in for one
T = TypeVar("T")


def eventually(check: Callable[[], T], timeout: float = 60.0, interval: float = 0.2,
               ignoring: tuple[type[Exception], ...] = ()) -> T:
    """Call ``check`` until it returns something true, and return that; after ``timeout`` seconds, an
    AssertionError with the last value. Exceptions of the ``ignoring`` types count as "not yet" (any other
    ends the wait at once). The one way the tests wait for something to happen."""
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            last = result = check()
            if result:
                return result
        except ignoring as exc:
            last = exc
        if time.monotonic() >= deadline:
            raise AssertionError(f"not within {timeout}s; last: {last!r}"[:2000])
        time.sleep(interval)


def tool(name: str) -> str:
    path = TOOLS / name
    if not path.exists():
        pytest.fail(f"{path} is missing: run scripts/install-tools (the test command does)")
    return str(path)


class Runner:
    """Runs kubectl, helm or helm3 against a kubeconfig, helm's cache, config and data under ``home``; ``api``
    reads the same cluster in-process (what a wait polls)."""

    def __init__(self, kubeconfig: Path | str, home: Path, default_timeout: float = 120) -> None:
        self.kubeconfig, self.default_timeout = kubeconfig, default_timeout
        self.env = {**os.environ, "KUBECONFIG": str(kubeconfig), "HELM_CACHE_HOME": str(home / "helm-cache"),
                    "HELM_CONFIG_HOME": str(home / "helm-config"), "HELM_DATA_HOME": str(home / "helm-data"),
                    # kubectl's discovery cache is keyed by host:port, and a port is reused by the next sandbox
                    "KUBECACHEDIR": str(home / "kube-cache")}
        self._api: Api | None = None

    def __call__(self, *args: str, check: bool = True, timeout: float | None = None,
                 stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        done = self._created(args) if stdin is None else self._applied(args, stdin)
        if done is None:
            cmd = [tool(args[0]), *args[1:]]
            done = subprocess.run(cmd, env=self.env, capture_output=True, text=True,
                                  timeout=timeout or self.default_timeout, input=stdin)
        if check and done.returncode != 0:
            raise AssertionError(f"{' '.join(args)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
        return done

    def _created(self, args: tuple[str, ...]) -> subprocess.CompletedProcess[str] | None:
        """A plain ``kubectl create`` (:mod:`tests.kubecreate`) posted in-process, as kubectl posts it; None (kubectl
        runs, and says what it says) for any other command, or when the server does not create it (kubectl's own
        error message is what a test reads then)."""
        creation = kubecreate.creation(args)
        warnings: list[str] = []
        if creation is None or not kubecreate.plain(self.kubeconfig) or self.api.post(
                creation.path, creation.body, warnings) != 201:
            return None
        return subprocess.CompletedProcess(list(args), 0, creation.said + "\n", _said(warnings))

    def _applied(self, args: tuple[str, ...], stdin: str) -> subprocess.CompletedProcess[str] | None:
        """A plain ``kubectl apply -f -`` of objects none of which exists (:mod:`tests.kubecreate`), created in-process
        as kubectl's client-side apply creates them; None (kubectl runs) otherwise. Should the server refuse one,
        kubectl applies them all again: those created here are then unchanged, as in its own run."""
        plan = kubecreate.applied(args, stdin) if args[:1] == ("kubectl",) else None
        if plan is None or not kubecreate.plain(self.kubeconfig):
            return None
        namespace, docs = plan
        posts = []
        for doc in docs:
            resource = self.api.resource_of(doc["apiVersion"], doc["kind"])
            where = namespace if resource is not None and resource.namespaced else ""
            if resource is None or doc["metadata"].get("namespace", where) != where:
                return None
            path = self.api.collection(resource, where)
            if self.api.status(f"{path}/{doc['metadata']['name']}") != 404:
                return None
            said = f"{doc['kind'].lower()}{'.' + resource.group if resource.group else ''}/{doc['metadata']['name']}"
            posts.append((f"{path}?fieldManager=kubectl-client-side-apply&fieldValidation=Strict",
                          kubecreate.with_last_applied(doc, where), said + " created\n"))
        warnings: list[str] = []
        for path, body, _ in posts:
            if self.api.post(path, body, warnings) != 201:
                return None
        return subprocess.CompletedProcess(list(args), 0, "".join(said for _, _, said in posts), _said(warnings))

    @property
    def api(self) -> Api:
        if self._api is None:
            self._api = Api(self.kubeconfig)
        return self._api


def _said(warnings: list[str]) -> str:
    """The server's warnings as kubectl prints them (once each, in order)."""
    return "".join(f"Warning: {text}\n" for text in dict.fromkeys(warnings))


def runner(kubeconfig: Path | str, home: Path, default_timeout: float = 120) -> Runner:
    """Run kubectl, helm or helm3 against ``kubeconfig``, helm's cache, config and data under ``home``."""
    return Runner(kubeconfig, home, default_timeout)
