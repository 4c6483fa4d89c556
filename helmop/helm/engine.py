"""Running helm: request building (pure) apart from execution (pyhelm3).

Arguments are built here rather than through pyhelm3's ``install_or_upgrade`` because helmop needs
``--labels`` (ownership and config digest on the release record) and per-action flags pyhelm3
lacks; pyhelm3 still runs the process (values on stdin, cancellation kills helm) and classifies
its errors, which :func:`classify` turns into condition reasons.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyhelm3 import Command
from pyhelm3 import errors as helm_errors


@dataclass(frozen=True)
class UpgradeRequest:
    release: str
    namespace: str
    chart: Path
    values: dict[str, Any]
    timeout: float
    wait: bool = True
    disable_hooks: bool = False
    force: bool = False
    cleanup_on_fail: bool = False
    create_namespace: bool = False
    max_history: int = 5
    labels: dict[str, str] = field(default_factory=dict)
    description: str = ""
    impersonate: str = ""  # a user helm acts as (a ServiceAccount's "system:serviceaccount:<ns>:<name>")


def upgrade_args(req: UpgradeRequest, major: int) -> list[str]:
    """``helm upgrade --install`` for a request; values go on stdin (never on the command line)."""
    args = ["upgrade", req.release, str(req.chart), "--install", "--namespace", req.namespace,
            "--values", "-", "--output", "json", "--timeout", f"{int(req.timeout)}s",
            "--history-max", str(req.max_history)]
    if req.wait:
        args += ["--wait=watcher", "--wait-for-jobs"] if major >= 4 else ["--wait", "--wait-for-jobs"]
    if req.disable_hooks:
        args.append("--no-hooks")
    if req.force:
        args.append("--force-replace" if major >= 4 else "--force")
    if req.cleanup_on_fail:
        args.append("--cleanup-on-fail")
    if req.create_namespace:
        args.append("--create-namespace")
    if req.labels:
        args += ["--labels", ",".join(f"{k}={v}" for k, v in sorted(req.labels.items()))]
    if req.description:
        args += ["--description", req.description]
    if req.impersonate:
        args += ["--kube-as-user", req.impersonate]
    return args


def template_args(req: UpgradeRequest) -> list[str]:
    """``helm template`` for the same request: what an install would render, without a cluster."""
    args = ["template", req.release, str(req.chart), "--namespace", req.namespace, "--values", "-"]
    if req.disable_hooks:
        args.append("--no-hooks")
    return args


def uninstall_args(release: str, namespace: str, timeout: float, *, wait: bool, keep_history: bool,
                   disable_hooks: bool, impersonate: str = "") -> list[str]:
    args = ["uninstall", release, "--namespace", namespace, "--timeout", f"{int(timeout)}s"]
    if impersonate:
        args += ["--kube-as-user", impersonate]
    if wait:
        args.append("--wait")
    if keep_history:
        args.append("--keep-history")
    if disable_hooks:
        args.append("--no-hooks")
    return args


class HelmError(Exception):
    """A failed helm action: ``reason`` for the condition, ``transient`` if retrying may help."""

    def __init__(self, reason: str, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.reason = reason
        self.transient = transient


_NOISE = re.compile(r"^(WARNING|W\d{4}|I\d{4}).*$", re.MULTILINE)


def _message(stderr: bytes | str) -> str:
    text = stderr.decode(errors="replace") if isinstance(stderr, bytes) else stderr
    text = _NOISE.sub("", text).strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    joined = "; ".join(lines) or "helm failed without a message"
    return joined.removeprefix("Error: ")[:1500]


def classify(exc: helm_errors.Error, action: str) -> HelmError:
    message = _message(exc.stderr)
    low = message.lower()
    if "another operation (install/upgrade/rollback) is in progress" in low:
        return HelmError("ReleaseLocked", message, transient=True)
    if "context deadline exceeded" in low or "timed out waiting" in low or ("timeout" in low and "wait" in low):
        return HelmError("Timeout", f"{action} timed out: {message}")
    if re.search(r'namespaces? "[^"]+" not found', low):
        return HelmError("NamespaceNotFound", message)
    if isinstance(exc, helm_errors.FailedToRenderChartError) or "parse error" in low or "template:" in low:
        return HelmError("RenderFailed", message)
    if isinstance(exc, helm_errors.ConnectionError) or "connection refused" in low:
        return HelmError("ClusterUnreachable", message, transient=True)
    if isinstance(exc, helm_errors.ResourceAlreadyExistsError):
        return HelmError("ResourceConflict", message)
    if isinstance(exc, helm_errors.InvalidResourceError):
        return HelmError("InvalidResources", message)
    return HelmError(f"{action.capitalize()}Failed", message)


class Engine:
    """One pyhelm3 Command for the process: it is cheap, and the helm version is asked once."""

    def __init__(self, executable: str, kubeconfig: Path | None = None) -> None:
        self.executable = executable
        self.command = Command(executable=executable, kubeconfig=kubeconfig)
        self.major = int(self.command.client_version().major)

    async def _run(self, args: list[str], values: dict[str, Any] | None, action: str) -> bytes:
        try:
            out: bytes = await self.command.run(args, json.dumps(values).encode() if values is not None else None)
            return out
        except helm_errors.Error as exc:
            raise classify(exc, action) from None

    async def upgrade(self, req: UpgradeRequest, *, installing: bool) -> dict[str, Any]:
        out = await self._run(upgrade_args(req, self.major), req.values, "install" if installing else "upgrade")
        start = out.find(b"{")
        release: dict[str, Any] = json.loads(out[start:]) if start >= 0 else {}
        return release

    async def rendered(self, req: UpgradeRequest) -> str:
        """The manifest an upgrade would apply now (a server-side dry run: real capabilities, lookups)."""
        args = upgrade_args(req, self.major)
        args = [a for a in args if a not in ("--wait", "--wait=watcher", "--wait-for-jobs")] + ["--dry-run=server"]
        out = await self._run(args, req.values, "render")
        release: dict[str, Any] = json.loads(out[out.find(b"{"):])
        return str(release.get("manifest", ""))

    async def template(self, req: UpgradeRequest) -> str:
        """Render a request offline (no cluster), as ``helm template``."""
        return (await self._run(template_args(req), req.values, "render")).decode()

    async def manifest(self, release: str, namespace: str) -> str:
        """The manifest of the deployed release ("" when there is none)."""
        try:
            return (await self._run(["get", "manifest", release, "--namespace", namespace], None, "get")).decode()
        except HelmError as exc:
            if "not found" in str(exc).lower():
                return ""
            raise

    async def dependency_build(self, chart: Path) -> None:
        """Fetch the dependencies a chart declares into its charts/ folder."""
        await self._run(["dependency", "build", str(chart), "--skip-refresh"], None, "dependency build")

    async def uninstall(self, release: str, namespace: str, timeout: float, *, wait: bool, keep_history: bool,
                        disable_hooks: bool, impersonate: str = "") -> None:
        args = uninstall_args(release, namespace, timeout, wait=wait, keep_history=keep_history,
                              disable_hooks=disable_hooks, impersonate=impersonate)
        try:
            await self._run(args, None, "uninstall")
        except HelmError as exc:
            if "not found" not in str(exc).lower():
                raise
