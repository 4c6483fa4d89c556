"""The day-to-day verbs: get, reconcile, suspend, resume, diff (against a cluster) and render
(offline). Each returns an exit code: 0 ok, 1 failed (usage errors exit 2 through argparse)."""

from __future__ import annotations

import asyncio
import base64
import difflib
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from helmop.api import jenkins, manifests
from helmop.api.apps import AppKind
from helmop.api.helmrelease import HelmReleaseSpec, RepositoryChart, SpecError, parse_spec
from helmop.controllers.context import Context
from helmop.controllers.events import Recorder
from helmop.controllers.inputs import InputError, gather
from helmop.controllers.kube import Connection, Kube, KubeError
from helmop.helm import values as helm_values
from helmop.helm.engine import Engine, HelmError, UpgradeRequest
from helmop.sources.errors import SourceError
from helmop.sources.git import GitCache
from helmop.sources.repositories import Credentials, Repositories

REQUESTED_AT = "helmop.dev/requestedAt"


@dataclass(frozen=True)
class Kind:
    kind: str
    group: str
    version: str
    plural: str

    def path(self, namespace: str | None, name: str = "") -> str:
        base = f"/apis/{self.group}/{self.version}"
        where = f"{base}/namespaces/{namespace}/{self.plural}" if namespace else f"{base}/{self.plural}"
        return f"{where}/{name}" if name else where


KINDS = {
    "hr": Kind("HelmRelease", "helmop.dev", "v1alpha1", "helmreleases"),
    "gitrepo": Kind("GitRepository", "helmop.dev", "v1alpha1", "gitrepositories"),
    "csync": Kind("ConfigSync", "helmop.dev", "v1alpha1", "configsyncs"),
    "jenkins": Kind("Jenkins", "apps.helmop.dev", "v1alpha1", "jenkins"),
}
ALIASES = {"hr": "hr", "helmrelease": "hr", "helmreleases": "hr", "gitrepo": "gitrepo", "gitrepository": "gitrepo",
           "gitrepositories": "gitrepo", "csync": "csync", "configsync": "csync", "configsyncs": "csync",
           "jenkins": "jenkins", "jk": "jenkins"}


class Failed(Exception):
    """A verb could not do what was asked; the message is for the user."""


def kind_of(text: str) -> Kind:
    key = ALIASES.get(text.lower())
    if key is None:
        raise Failed(f"unknown kind {text!r}: use one of hr, gitrepo, csync, jenkins")
    return KINDS[key]


def _ready(obj: dict[str, Any]) -> dict[str, Any]:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"), {})


def _revision(obj: dict[str, Any]) -> str:
    status = obj.get("status") or {}
    return str(status.get("lastAppliedRevision") or (status.get("artifact") or {}).get("revision")
               or status.get("chartVersion") or "")


async def get(kube: Kube, kinds: list[Kind], namespace: str | None) -> str:
    rows = []
    for kind in kinds:
        try:
            items = await kube.list(kind.path(namespace))
        except KubeError as exc:
            if exc.status == 404:
                continue  # the CRD is not installed
            raise
        for obj in items:
            meta, ready = obj["metadata"], _ready(obj)
            row = [f"{kind.kind.lower()}/{meta['name']}", _revision(obj),
                   str(bool((obj.get("spec") or {}).get("suspend"))), ready.get("status", "Unknown"),
                   ready.get("message", "")]
            rows.append(([meta.get("namespace", "")] if namespace is None else []) + row)
    header = (["NAMESPACE"] if namespace is None else []) + ["NAME", "REVISION", "SUSPENDED", "READY", "MESSAGE"]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header) - 1)]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(r[:-1], widths, strict=True)) + "  " + r[-1]
                     for r in [header, *rows])


async def reconcile(kube: Kube, kind: Kind, namespace: str, name: str, *, with_source: bool, timeout: float,
                    out: Any = sys.stdout) -> bool:
    """Ask for a reconcile now and wait for it; True when it ended Ready."""
    obj = await kube.get(kind.path(namespace, name))
    if obj is None:
        raise Failed(f"{kind.kind} {namespace}/{name} not found")
    if (obj.get("spec") or {}).get("suspend"):
        raise Failed(f"{kind.kind} {namespace}/{name} is suspended; resume it first")
    spec = obj.get("spec") or {}
    source = (spec.get("chart") or {}).get("sourceRef") or spec.get("sourceRef")
    if with_source and source and not await reconcile(kube, KINDS["gitrepo"], namespace, source["name"],
                                                      with_source=False, timeout=timeout, out=out):
        return False
    stamp = datetime.now(UTC).isoformat()
    await kube.merge_patch(kind.path(namespace, name), {"metadata": {"annotations": {REQUESTED_AT: stamp}}})
    print(f"► annotating {kind.kind} {namespace}/{name}; waiting for the reconcile", file=out, flush=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        obj = await kube.get(kind.path(namespace, name)) or {}
        if (obj.get("status") or {}).get("lastHandledReconcileAt") == stamp:
            ready = _ready(obj)
            mark = "✔" if ready.get("status") == "True" else "✗"
            print(f"{mark} {ready.get('reason', '')}: {ready.get('message', '')}", file=out, flush=True)
            return ready.get("status") == "True"
        await asyncio.sleep(0.5)
    raise Failed(f"{kind.kind} {namespace}/{name} was not reconciled within {timeout:.0f}s")


async def set_suspended(kube: Kube, kind: Kind, namespace: str, name: str, suspended: bool) -> str:
    patch: dict[str, Any] = {"spec": {"suspend": suspended}}
    if not suspended:  # resuming asks for a reconcile at once
        patch["metadata"] = {"annotations": {REQUESTED_AT: datetime.now(UTC).isoformat()}}
    try:
        await kube.merge_patch(kind.path(namespace, name), patch)
    except KubeError as exc:
        raise Failed(exc.message) from None
    return f"✔ {kind.kind} {namespace}/{name} {'suspended' if suspended else 'resumed'}"


def _request(spec: HelmReleaseSpec, chart: Path, values: dict[str, Any]) -> UpgradeRequest:
    return UpgradeRequest(release=spec.release_name, namespace=spec.target_namespace, chart=chart, values=values,
                          timeout=spec.timeout, wait=False, create_namespace=spec.install.create_namespace)


async def diff(kube: Kube, engine: Engine, namespace: str, name: str, cache: Path) -> str:
    """Unified diff from the live release manifest to what the current spec renders."""
    obj = await kube.get(KINDS["hr"].path(namespace, name))
    if obj is None:
        raise Failed(f"HelmRelease {namespace}/{name} not found")
    try:
        spec = parse_spec(obj.get("spec") or {}, name, namespace)
        ctx = Context(kube=kube, engine=engine, repos=Repositories(cache), git=GitCache(cache),
                      events=Recorder(kube), slots=asyncio.Semaphore(1))
        inputs = await gather(ctx, namespace, spec)
        live = await engine.manifest(spec.release_name, spec.target_namespace)
        wanted = await engine.rendered(_request(spec, inputs.chart_path, inputs.values))
    except (SpecError, InputError, HelmError) as exc:
        raise Failed(f"{namespace}/{name}: {exc}") from None
    # helm ends the two manifests differently; only their content matters
    live, wanted = live.strip() + "\n", wanted.strip() + "\n"
    lines = difflib.unified_diff(live.splitlines(keepends=True), wanted.splitlines(keepends=True),
                                 fromfile=f"{spec.release_name} (live)", tofile=f"{spec.release_name} (spec)")
    return "".join(lines)


def _tree_values(found: list[manifests.Manifest]) -> dict[tuple[str, str, str], dict[str, str]]:
    """ConfigMaps and Secrets of the tree: (kind, namespace, name) -> data (strings)."""
    out: dict[tuple[str, str, str], dict[str, str]] = {}
    for item in found:
        if item.kind not in ("ConfigMap", "Secret") or item.api_version != "v1":
            continue
        meta = item.obj.get("metadata") or {}
        data = {k: str(v) for k, v in (item.obj.get("data") or {}).items()}
        if item.kind == "Secret":
            data = {k: base64.b64decode(v).decode(errors="replace") for k, v in data.items()}
            data.update({k: str(v) for k, v in (item.obj.get("stringData") or {}).items()})
        out[(item.kind, str(meta.get("namespace") or "default"), item.name)] = data
    return out


def _read_tree(roots: list[Path]) -> dict[str, bytes]:
    """YAML files under the roots, chart directories left out (templates are not manifests); names
    relative to the first root, absolute for the others."""
    files: dict[str, bytes] = {}
    for index, root in enumerate(roots):
        charts = {p.parent for p in root.rglob("Chart.yaml")}
        for file in sorted(root.rglob("*")):
            if file.is_file() and file.suffix in (".yaml", ".yml") and not charts & set(file.parents):
                files[str(file.relative_to(root)) if index == 0 else str(file)] = file.read_bytes()
    return files


async def render(root: Path, values_dirs: list[Path], engine: Engine, cache: Path, apps: list[AppKind],
                 output: Path | None, out: Any = sys.stdout, err: Any = sys.stderr) -> bool:
    """Render every HelmRelease (and Jenkins / app kind) under ``root`` offline; False on any error."""
    files = _read_tree([root, *values_dirs])
    found, errors = manifests.parse(files)
    for problem in errors:
        print(f"error: {problem}", file=err)
    values_of = _tree_values(found)
    repos = Repositories(cache)
    ok = not errors
    for item in found:
        release = _as_release(item, apps)
        if release is None:
            continue
        meta = item.obj.get("metadata") or {}
        namespace = str(meta.get("namespace") or "default")
        try:
            spec = parse_spec(release, item.name, namespace)
            values: dict[str, Any] = {}
            for ref in spec.values_from:
                data = values_of.get((ref.kind, namespace, ref.name))
                if data is None or ref.values_key not in data:
                    if ref.optional:
                        continue
                    raise InputError("ValuesFromNotFound", f"{ref.kind} {namespace}/{ref.name} (key "
                                                           f"{ref.values_key}) is not in the tree")
                text = data[ref.values_key]
                values = (helm_values.set_path(values, ref.target_path, text) if ref.target_path else
                          helm_values.merge(values, helm_values.parse_values(text, f"{ref.kind} {ref.name}")))
            values = helm_values.merge(values, spec.values)
            chart = await _chart_for(spec, root, repos)
            rendered = await engine.template(spec.release_name, spec.target_namespace, chart, values)
        except (SpecError, InputError, SourceError, HelmError, ValueError) as exc:
            print(f"error: {item.origin}: {item.kind} {namespace}/{item.name}: {exc}", file=err)
            ok = False
            continue
        header = f"# helmop render: {item.kind} {namespace}/{item.name} from {item.origin}\n"
        if output is None:
            print(header + rendered, file=out)
        else:
            target = output / namespace / f"{item.name}.yaml"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(header + rendered)
    return ok


def _as_release(item: manifests.Manifest, apps: list[AppKind]) -> dict[str, Any] | None:
    """The HelmRelease spec of a manifest: a HelmRelease itself, a Jenkins, or an app kind."""
    spec = dict(item.obj.get("spec") or {})
    if item.api_version.startswith("helmop.dev/") and item.kind == "HelmRelease":
        return spec
    if item.api_version.startswith("apps.helmop.dev/") and item.kind == "Jenkins":
        values = jenkins.jenkins_values(item.name, spec, f"{item.name}-admin", "jenkins-admin-user",
                                        "jenkins-admin-password")
        return {"releaseName": item.name, "chart": spec.get("chart") or jenkins.DEFAULT_CHART,
                "values": helm_values.merge(values, spec.get("values") or {})}
    for kind in apps:
        if item.api_version == kind.api_version and item.kind == kind.kind:
            return {"releaseName": item.name, "chart": kind.chart,
                    "values": helm_values.merge(spec, kind.override_values)}
    return None


async def _chart_for(spec: HelmReleaseSpec, root: Path, repos: Repositories) -> Path:
    if isinstance(spec.chart, RepositoryChart):
        resolved = await repos.resolve(spec.chart.url, spec.chart.name, spec.chart.version, Credentials(),
                                       spec.chart.insecure)
        return await repos.fetch(resolved, spec.chart.url, Credentials(), spec.chart.insecure)
    local = (root / spec.chart.path).resolve()
    if not (local / "Chart.yaml").exists() or root.resolve() not in local.parents:
        raise InputError("ChartNotFound", f"chart path {spec.chart.path!r} is not a chart inside {root}")
    return local


def connect(kubeconfig: str | None) -> Kube:
    try:
        return Kube(Connection.from_kubeconfig(kubeconfig))
    except Exception as exc:  # no kubeconfig, no in-cluster account: say so plainly
        raise Failed(f"cannot load a kubeconfig: {exc}") from None


def temp_cache() -> Path:
    return Path(tempfile.mkdtemp(prefix="helmop-cli-"))
