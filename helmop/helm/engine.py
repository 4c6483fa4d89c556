"""Running helm: request building (pure) apart from execution (pyhelm3).

Arguments are built here rather than through pyhelm3's ``install_or_upgrade`` because helmop needs
``--labels`` (ownership and config digest on the release record) and per-action flags pyhelm3
lacks; pyhelm3 still runs the process (values on stdin, cancellation kills helm) and classifies
its errors, which :func:`classify` turns into condition reasons.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import signal
import subprocess
import tempfile
import weakref
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field, replace
from pathlib import Path
from typing import Any

from pyhelm3 import Command
from pyhelm3 import errors as helm_errors

from helmop.api.actions import Action
from helmop.api.process import minimal_env, niced

from . import postrender
from .errors import HelmError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Request:
    """What every helm request names: the release and its namespace, who helm acts as and on which cluster. The
    fields a base class adds are keyword-only: each request's own come next when constructed positionally."""

    release: str
    namespace: str
    _: KW_ONLY
    impersonate: str = ""  # a user helm acts as (a ServiceAccount's "system:serviceaccount:<ns>:<name>")
    kubeconfig: str = ""  # the cluster helm acts on ("": the operator's): a remote's (spec.kubeConfig)

    @property
    def as_user(self) -> list[str]:
        """The flag that makes helm act as ``impersonate`` (none without one)."""
        return ["--kube-as-user", self.impersonate] if self.impersonate else []


@dataclass(frozen=True)
class _Mutation(_Request):
    """A request that changes the release (upgrade, rollback, uninstall): whether helm waits for what it did, and
    whether the chart's hooks run."""

    _: KW_ONLY
    wait: bool = True
    disable_hooks: bool = False


@dataclass(frozen=True)
class _Change(_Mutation):
    """The options upgrade and rollback share (a new revision of the release): :func:`_change_flags`."""

    _: KW_ONLY
    force: bool = False
    cleanup_on_fail: bool = False
    max_history: int = 5
    server_side: str = "auto"  # helm 4's --server-side: true | false | auto (as the last revision was applied;
    # resolved by the caller from helm's records where it can: conflicts are forced only server-side)
    wait_for_jobs: bool = True
    legacy_wait: bool = False  # helm's own readiness logic of helm 3 (waitStrategy legacy) rather than its watcher


@dataclass(frozen=True)
class UpgradeRequest(_Change):
    chart: Path
    values: dict[str, Any]
    timeout: float
    create_namespace: bool = False
    labels: dict[str, str] = field(default_factory=dict)
    description: str = ""
    skip_crds: bool = False  # leave the chart's crds/ out (CRD policy Skip, or helmop applies them itself)
    post_render: dict[str, Any] = field(default_factory=dict)  # helmop's post-renderer configuration
    take_ownership: bool = True
    schema_validation: bool = True
    reuse_values: bool = False


@dataclass(frozen=True)
class RollbackRequest(_Change):
    revision: int
    timeout: float
    recreate: bool = False  # helm 3's --recreate-pods


@dataclass(frozen=True)
class UninstallRequest(_Mutation):
    timeout: float
    keep_history: bool = False
    cascade: str = "background"  # how the objects' dependents are deleted: background | foreground | orphan


@dataclass(frozen=True)
class TestRequest(_Request):
    timeout: float
    filters: tuple[tuple[str, bool], ...] = ()  # (test name, exclude)


def upgrade_args(req: UpgradeRequest, major: int) -> list[str]:
    """``helm upgrade --install`` for a request; values go on stdin (never on the command line)."""
    args = ["upgrade", req.release, str(req.chart), "--install", "--namespace", req.namespace,
            "--values", "-", "--output", "json", "--timeout", f"{int(req.timeout)}s",
            "--history-max", str(req.max_history),
            # helm's own OpenAPI check only asks whether the API server validates fields itself (every server
            # since 1.25 does, and then client-go skips the check): ~750 KB of schema fetched and parsed by every
            # helm run, a sixth to a third of its CPU, for nothing. Validation stays the server's (Strict: helm 4).
            "--disable-openapi-validation"]
    args += _change_flags(major, req)
    if req.labels:
        args += ["--labels", ",".join(f"{k}={v}" for k, v in sorted(req.labels.items()))]
    if req.description:
        args += ["--description", req.description]
    return args + _switches((req.create_namespace, "--create-namespace"), (req.skip_crds, "--skip-crds"),
                            (req.take_ownership, "--take-ownership"),
                            (not req.schema_validation, "--skip-schema-validation"),
                            (req.reuse_values, "--reuse-values")) + req.as_user


def _switches(*flags: tuple[bool, str]) -> list[str]:
    """The flags whose condition holds, in their order."""
    return [flag for on, flag in flags if on]


def _change_flags(major: int, req: _Change) -> list[str]:
    """The flags upgrade and rollback share, in each helm major's spelling."""
    args = []
    if req.wait:
        if major >= 4:
            args.append("--wait=legacy" if req.legacy_wait else "--wait=watcher")
        else:
            args.append("--wait")
        if req.wait_for_jobs:
            args.append("--wait-for-jobs")
    elif major >= 4:
        args.append("--wait=hookOnly")  # helm 4's default, said: hooks are still waited for (helm 3 always does)
    if req.disable_hooks:
        args.append("--no-hooks")
    if req.force:
        # helm 4 replaces objects only with client-side apply ("cannot use server-side apply and force replace
        # together"): a forced action is a client-side one, as `helm upgrade --force-replace` needs by hand.
        args += ["--force-replace", "--server-side=false"] if major >= 4 else ["--force"]
    elif major >= 4:
        # helm-controller forces conflicts whenever it applies server-side: the release's values win over
        # another manager's for the fields the chart sets (fields it does not set stay theirs)
        # (auto unresolved: helm refuses forced conflicts when auto turns out client-side)
        args.append(f"--server-side={req.server_side}")
        if req.server_side == "true":
            args.append("--force-conflicts")
    if req.cleanup_on_fail:
        args.append("--cleanup-on-fail")
    return args


def rollback_args(req: RollbackRequest, major: int) -> list[str]:
    """``helm rollback`` to a revision (the last successful one: remediation of a failed upgrade)."""
    args = ["rollback", req.release, str(req.revision), "--namespace", req.namespace, "--timeout",
            f"{int(req.timeout)}s", "--history-max", str(req.max_history)]
    args += _change_flags(major, req)
    if req.recreate and major < 4:
        args.append("--recreate-pods")
    return args + req.as_user


def test_args(req: TestRequest) -> list[str]:
    args = ["test", req.release, "--namespace", req.namespace, "--timeout", f"{int(req.timeout)}s"]
    for name, exclude in req.filters:
        args += ["--filter", f"{'!' if exclude else ''}name={name}"]
    return args + req.as_user


def template_args(req: UpgradeRequest) -> list[str]:
    """``helm template`` for the same request: what an install would render, without a cluster."""
    args = ["template", req.release, str(req.chart), "--namespace", req.namespace, "--values", "-"]
    if req.disable_hooks:
        args.append("--no-hooks")
    return args


def uninstall_args(req: UninstallRequest) -> list[str]:
    args = ["uninstall", req.release, "--namespace", req.namespace, "--timeout", f"{int(req.timeout)}s"]
    args += req.as_user + _switches((req.wait, "--wait"), (req.keep_history, "--keep-history"),
                                    (req.disable_hooks, "--no-hooks"))
    if req.cascade != "background":  # helm's default
        args.append(f"--cascade={req.cascade}")
    return args


# helm's own log lines (helm 4's slog: level=WARN msg=..., client-go's klog: W1124 ..., helm 3's WARNING:)
_LOG_LINE = re.compile(r"^(level=[A-Z]+ |time=\S+ |WARNING:|[WIE]\d{4} )")
# helm names the action in its error ("UPGRADE FAILED: ..."): helmop's message names it already, once
_ACTION_PREFIX = re.compile(r"^(UPGRADE|INSTALLATION|ROLLBACK|UNINSTALLATION|INSTALL|UNINSTALL) FAILED: "
                            r"|^(install|upgrade|rollback|uninstall) failed: ", re.IGNORECASE)
_MULTI = re.compile(r"^\d+ errors? occurred:; ")  # helm 3 wraps errors in a multierror list


def _message(stderr: bytes | str) -> str:
    """helm's error, without its log: the text from the last ``Error:`` line on (helm's log lines, which
    repeat the error among other things, go to helmop's debug log)."""
    text = stderr.decode(errors="replace") if isinstance(stderr, bytes) else stderr
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    logged = [line for line in lines if _LOG_LINE.match(line)]
    if logged:
        log.debug("helm logged: %s", " | ".join(logged)[:2000])
    kept = [line for line in lines if not _LOG_LINE.match(line)]
    start = max((i for i, line in enumerate(kept) if line.startswith("Error: ")), default=0)
    joined = "; ".join(line.removeprefix("* ") for line in kept[start:]).removeprefix("Error: ")
    joined = _MULTI.sub("", _ACTION_PREFIX.sub("", joined))
    return joined[:1500] or "helm failed without a message"


def classify(exc: helm_errors.Error, action: str) -> HelmError:
    """A condition reason for a failed helm, from what helm wrote to stderr."""
    message = _message(exc.stderr)
    low = message.lower()
    if "another operation (install/upgrade/rollback) is in progress" in low:
        return HelmError("ReleaseLocked", message, transient=True)
    if "context deadline exceeded" in low or "timed out waiting" in low or ("timeout" in low and "wait" in low):
        return HelmError("Timeout", f"{action} timed out: {message}")
    if re.search(r'namespaces? "[^"]+" not found', low):
        return HelmError("NamespaceNotFound", message)
    if any(s in low for s in ("parse error", "template:", "execution error", "failed to render chart")):
        return HelmError("RenderFailed", message)
    if any(s in low for s in ("connection refused", "etcdserver", "no such host", "i/o timeout")):
        return HelmError("ClusterUnreachable", message, transient=True)
    if "rendered manifests contain a resource that already exists" in low or "cannot be imported into the current" \
            " release" in low:
        return HelmError("ResourceConflict", message)
    if "is invalid" in low:
        return HelmError("InvalidResources", message)
    return HelmError(f"{action.capitalize()}Failed", message)


class Processes:
    """The helm processes an operator has running (each in a process group of its own)."""

    def __init__(self) -> None:
        self.groups: set[int] = set()

    def signal(self, signum: int) -> None:
        """Send ``signum`` to every running helm process group (the operator is being terminated).
        Safe from a signal handler or another thread: it only reads a set of numbers and calls kill."""
        for pgid in list(self.groups):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signum)


class _Command(Command):  # type: ignore[misc]
    """pyhelm3's Command, but helm runs without a shell, in a process group of its own: pyhelm3 starts helm
    under ``sh -c`` and, when the action is stopped, terminates only the shell (dash does not exec the
    last command), which leaves helm waiting out its --timeout with the release locked. Here a stopped
    action sends helm SIGTERM (so it can record the release as failed), and SIGKILL after a grace."""

    GRACE = 3.0  # within the 5 s an operator being terminated has

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.env: dict[str, str] = {}  # set by the Engine: the whole environment helm runs with
        self.check: Callable[[], None] = lambda: None  # set by the Engine: verifies its runtime directory
        self.processes = Processes()  # set by the Engine: the operator's (signalled at termination)

    async def run(self, command: list[str], input: bytes | None = None, env: dict[str, str] | None = None,
                  kubeconfig: str = "") -> bytes:
        self.check()
        argv = [*niced(), self._executable, *map(str, command)]
        if kubeconfig or self._kubeconfig:
            argv += ["--kubeconfig", kubeconfig or str(self._kubeconfig)]
        log.debug("running helm %s", " ".join(map(str, command[:2])))
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.PIPE if input is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, process_group=0,
            env=env or self.env)
        self.processes.groups.add(proc.pid)
        try:
            stdout, stderr = await proc.communicate(input)
        except asyncio.CancelledError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(asyncio.shield(proc.wait()), self.GRACE)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # helpers it may have left
            await proc.wait()
            raise
        finally:
            self.processes.groups.discard(proc.pid)
        if proc.returncode != 0:
            raise helm_errors.Error(proc.returncode, stdout, stderr)
        return stdout


# Go's garbage collector in a process that lives a fraction of a second: at Go's default (100) a helm install
# collects a few-MiB heap over and over, about a fifth of its CPU (measured: 110-118 -> 90-101 ms per install of
# `helm create`'s chart); at 400 a heap may grow to five times what is live before a collection, not two.
HELM_GOGC = "400"


def helm_env(home: Path, **extra: str) -> dict[str, str]:
    """What a helm process sees: the minimal environment, helm's own settings the operator was started
    with (``HELM_*``, Go's ``GOMEMLIMIT``, and ``GOGC``, by default :data:`HELM_GOGC`), its cache/config/data
    under ``home`` unless those name other places, and ``extra``."""
    settings = {k: v for k, v in os.environ.items() if k.startswith("HELM_") or k in ("GOGC", "GOMEMLIMIT")}
    settings.setdefault("GOGC", HELM_GOGC)
    for var, sub in (("HELM_CACHE_HOME", "cache"), ("HELM_CONFIG_HOME", "config"), ("HELM_DATA_HOME", "data")):
        settings.setdefault(var, str(home / sub))
    return minimal_env(str(home / "home"), **settings, **extra)


class Engine:
    """One pyhelm3 Command for the process: it is cheap, and the helm version is asked once.

    What helm executes of helmop's (the post-renderer) lives in a runtime directory made at start outside
    every cache, made read-only once written, and its digest is checked before every helm run: nothing
    a tenant's input is written to can become code helm runs."""

    def __init__(self, command: _Command, runtime: Path, post_renderer: Path, configs: Path, major: int) -> None:
        self.command = command
        self.runtime = runtime
        self.runtime_digest = postrender.digest(runtime)
        self.post_renderer = post_renderer
        self.configs = configs
        self.major = major
        command.check = self._check_runtime
        weakref.finalize(self, postrender.remove, runtime, configs)

    @classmethod
    def start(cls, executable: str, kubeconfig: Path | None = None, helm_home: Path | None = None,
              processes: Processes | None = None) -> Engine:
        """Make the runtime directory (the post-renderer, frozen), and ask helm its version: the work of
        setting up, done here and not in a constructor. Blocking: call it from a thread in async code."""
        command = _Command(executable=executable, kubeconfig=kubeconfig)
        if processes is not None:
            command.processes = processes
        runtime = Path(tempfile.mkdtemp(prefix="helmop-runtime-"))
        plugins = runtime / "helm-plugins"
        # helmop's post-renderer: a plugin in a private plugin directory (helm 4), an executable (helm 3)
        post_renderer = postrender.install_plugin(plugins)
        postrender.freeze(runtime)
        configs = Path(tempfile.mkdtemp(prefix="helmop-postrender-"))  # data only, never executed
        command.env = helm_env(helm_home or Path(tempfile.mkdtemp(prefix="helmop-helm-")), HELM_PLUGINS=str(plugins))
        # asked here rather than with pyhelm3's client_version(), which runs helm with the whole environment
        version = subprocess.run([executable, "version", "--template", "{{ .Version }}"], env=command.env,
                                 capture_output=True, text=True, check=True).stdout
        major, minor = (int(part) for part in version.strip().lstrip("v").split(".")[:2])
        if (major, minor) < (3, 17):
            raise RuntimeError(f"helm {version.strip()} is too old: helmop needs helm 3.17 or later (its installs "
                               "and upgrades pass --take-ownership and --skip-schema-validation), or helm 4")
        return cls(command, runtime, post_renderer, configs, major)

    def _check_runtime(self) -> None:
        if postrender.digest(self.runtime) != self.runtime_digest:
            log.error("helmop's runtime directory %s was changed: refusing to run helm", self.runtime)
            raise HelmError("RuntimeTampered", "helmop's post-renderer was changed since start; the operator "
                                               "refuses to run helm until restarted", transient=True)

    def _post_render_args(self, req: UpgradeRequest) -> list[str]:
        if not req.post_render:
            return []
        config = postrender.config_file(self.configs, req.post_render)
        renderer = postrender.PLUGIN if self.major >= 4 else str(self.post_renderer)
        return ["--post-renderer", renderer, "--post-renderer-args", str(config)]

    async def _run(self, args: list[str], values: dict[str, Any] | None, action: str,
                   env: dict[str, str] | None = None, kubeconfig: str = "") -> bytes:
        try:
            out: bytes = await self.command.run(args, json.dumps(values).encode() if values is not None else None,
                                                env, kubeconfig)
            return out
        except helm_errors.Error as exc:
            raise classify(exc, action) from None

    async def upgrade(self, req: UpgradeRequest, action: Action) -> dict[str, Any]:
        """``helm upgrade --install``; ``action`` (install or upgrade) names what failed in an error."""
        out = await self._run(upgrade_args(req, self.major) + self._post_render_args(req), req.values, action.value,
                              kubeconfig=req.kubeconfig)
        start = out.find(b"{")
        release: dict[str, Any] = json.loads(out[start:]) if start >= 0 else {}
        return release

    async def rendered(self, req: UpgradeRequest) -> str:
        """The manifest an upgrade would apply now (a server-side dry run: real capabilities, lookups)."""
        # a dry run creates nothing to wait for: the request without waiting, rather than flags filtered out
        args = upgrade_args(replace(req, wait=False), self.major) + self._post_render_args(req) + ["--dry-run=server"]
        out = await self._run(args, req.values, "render", kubeconfig=req.kubeconfig)
        release: dict[str, Any] = json.loads(out[out.find(b"{"):])
        return str(release.get("manifest", ""))

    async def template(self, req: UpgradeRequest) -> str:
        """Render a request offline (no cluster), as ``helm template``."""
        return (await self._run(template_args(req) + self._post_render_args(req), req.values, "render")).decode()

    async def manifest(self, release: str, namespace: str) -> str:
        """The manifest of the deployed release ("" when there is none)."""
        try:
            return (await self._run(["get", "manifest", release, "--namespace", namespace], None, "get")).decode()
        except HelmError as exc:
            if "not found" in str(exc).lower():
                return ""
            raise

    async def rollback(self, req: RollbackRequest) -> None:
        await self._run(rollback_args(req, self.major), None, "rollback", kubeconfig=req.kubeconfig)

    async def test(self, req: TestRequest) -> None:
        await self._run(test_args(req), None, "test", kubeconfig=req.kubeconfig)

    async def dependency_build(self, chart: Path) -> None:
        """Fetch the dependencies a chart declares into its charts/ folder, with a helm cache of its own
        (what one chart's dependencies fetched is never what another chart's build reads)."""
        with tempfile.TemporaryDirectory(prefix="helmop-deps-") as home:
            env = helm_env(Path(home), HELM_PLUGINS=self.command.env["HELM_PLUGINS"])
            await self._run(["dependency", "build", str(chart), "--skip-refresh"], None, "dependency build", env)

    async def uninstall(self, req: UninstallRequest) -> None:
        try:
            await self._run(uninstall_args(req), None, "uninstall", kubeconfig=req.kubeconfig)
        except HelmError as exc:
            if "not found" not in str(exc).lower():
                raise
