"""``helmop render`` (offline) and ``helmop diff`` (against the cluster): both turn HelmReleases and
app resources into helm requests exactly as the operator does (helm.apps.release_spec for the
app -> HelmRelease mapping, helm.values.compose for values, helm.request.upgrade_request for flags,
labels and identity), so what they show is what the operator would deploy."""

from __future__ import annotations

import base64
import difflib
import re
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from helmop.api import jenkins, manifests, validation, yamlc
from helmop.api.actions import Action
from helmop.api.apps import AppKind
from helmop.api.errors import SpecError
from helmop.api.helmcharts import parse_helm_chart
from helmop.api.helmrelease import ArtifactChart, HelmReleaseSpec, RepositoryChart, SharedRepositoryChart, parse_spec
from helmop.api.kinds import HELMRELEASE
from helmop.api.repositories import parse_helm_repository, parse_oci_repository
from helmop.helm import values as helm_values
from helmop.helm.apps import release_spec
from helmop.helm.engine import Engine
from helmop.helm.errors import HelmError
from helmop.helm.inputs import InputError, Readers, StandaloneReaders, archive_values, gather
from helmop.helm.releases import Gateway
from helmop.helm.request import resolved, upgrade_request
from helmop.infra.kube import Kube, KubeError
from helmop.sources import artifacts
from helmop.sources.errors import SourceError
from helmop.sources.git import GitCache
from helmop.sources.repositories import Credentials, Repositories

from .errors import Failed


@dataclass(frozen=True)
class Planned:
    """A HelmRelease as the operator would see it: from a HelmRelease manifest or an app resource."""

    origin: str  # where it was found (file#document) or "the cluster"
    namespace: str
    name: str  # the HelmRelease's name (an app's generated one: <name>-<kind>)
    spec: HelmReleaseSpec


def read_tree(roots: list[Path]) -> dict[str, bytes]:
    """YAML files under the roots (a root may be a single file), chart directories left out (templates
    are not manifests); names relative to the first root, absolute for the others."""
    files: dict[str, bytes] = {}
    for index, root in enumerate(roots):
        if root.is_file():
            files[root.name if index == 0 else str(root)] = root.read_bytes()
            continue
        if not root.is_dir():
            raise Failed(f"{root}: no such file or directory")
        charts = {p.parent for p in root.rglob("Chart.yaml")}
        for file in sorted(root.rglob("*")):
            if file.is_file() and file.suffix in (".yaml", ".yml") and not charts & set(file.parents):
                files[str(file.relative_to(root)) if index == 0 else str(file)] = file.read_bytes()
    return files


def _app_kinds(apps: list[AppKind]) -> list[AppKind]:
    # Jenkins with its pinned default chart (the operator's --jenkins-chart-* flags are not known here).
    return [jenkins.app_kind(jenkins.DEFAULT_CHART), *apps]


def planned(found: list[manifests.Manifest], apps: list[AppKind],
            default_namespace: str) -> tuple[list[Planned], list[str]]:
    """The HelmReleases that the manifests amount to, and ``origin: problem`` errors."""
    out: list[Planned] = []
    errors: list[str] = []
    for item in found:
        namespace = str((item.obj.get("metadata") or {}).get("namespace") or default_namespace)
        spec = dict(item.obj.get("spec") or {})
        try:
            if item.api_version == HELMRELEASE.api_version and item.kind == HELMRELEASE.kind:
                out.append(Planned(item.origin, namespace, item.name, parse_spec(spec, item.name, namespace)))
                continue
            kind = next((k for k in _app_kinds(apps) if (k.api_version, k.kind) == (item.api_version, item.kind)),
                        None)
            if kind is not None:
                hr_name = kind.release_object_name(item.name)
                out.append(Planned(item.origin, namespace, hr_name,
                                   parse_spec(release_spec(kind, item.name, spec), hr_name, namespace)))
        except SpecError as exc:
            errors.append(f"{item.origin}: {item.kind} {namespace}/{item.name}: {exc.reason}: {exc}")
    return out, errors


def tree_values(found: list[manifests.Manifest]) -> dict[tuple[str, str, str], dict[str, str]]:
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


async def offline_chart(spec: HelmReleaseSpec, root: Path, repos: Repositories,
                         sources: dict[tuple[str, str, str], dict[str, Any]],
                         namespace: str) -> tuple[Path, dict[str, Any]]:
    """The chart and its valuesFiles' values: from its repository (a HelmRepository or OCIRepository found in
    the tree), or from the tree for a git chart (the tree stands for the repository: paths are relative to it)."""
    chart = spec.chart
    if isinstance(chart, RepositoryChart):
        resolved = await repos.resolve(chart.url, chart.name, chart.version, Credentials(), chart.insecure)
        return await repos.fetch(resolved, chart.url, Credentials(), chart.insecure), {}
    if isinstance(chart, SharedRepositoryChart | ArtifactChart):
        kind = "HelmRepository" if isinstance(chart, SharedRepositoryChart) else chart.kind
        name = chart.repository if isinstance(chart, SharedRepositoryChart) else chart.name
        source = sources.get((kind, chart.namespace or namespace, name))
        if source is None:
            raise InputError("SourceNotFound", f"{kind} {chart.namespace or namespace}/{name} is not in the tree")
        if kind == "HelmChart":  # its template, read as the release's own chart.spec would be
            template = replace(parse_helm_chart(source.get("spec") or {}).chart, namespace=chart.namespace or namespace)
            return await offline_chart(replace(spec, chart=template), root, repos, sources, namespace)
        if isinstance(chart, ArtifactChart):
            oci = parse_oci_repository(source.get("spec") or {})
            found = await artifacts.resolve(repos, oci, Credentials())
            return (await artifacts.chart(repos, oci.url, found.digest, Credentials(), oci.insecure))[1], {}
        helm = parse_helm_repository(source.get("spec") or {})
        resolved = await repos.resolve(helm.url, chart.chart, chart.version, Credentials(), helm.insecure)
        path = await repos.fetch(resolved, helm.url, Credentials(), helm.insecure)
        return path, (await archive_values(path, chart.values_files, chart.ignore_missing_values_files))[0]
    local = (root / chart.path).resolve()
    if not (local / "Chart.yaml").exists() or root.resolve() not in local.parents:
        raise InputError("ChartNotFound", f"chart path {chart.path!r} is not a chart inside {root}")
    base: dict[str, Any] = {}
    for name in chart.values_files:
        file = (root / name).resolve()
        if root.resolve() not in file.parents or not file.is_file():
            raise InputError("ValuesFileNotFound", f"values file {name!r} is not a file inside {root}")
        base = helm_values.merge(base, helm_values.parse_values(file.read_text(), name))
    return local, base


async def render(root: Path, values_dirs: list[Path], engine: Engine, cache: Path, apps: list[AppKind],
                 output: Path | None, out: Any = sys.stdout, err: Any = sys.stderr) -> bool:
    """Render every HelmRelease (and Jenkins / app kind) under ``root`` offline; False on any error."""
    found, errors = manifests.parse(read_tree([root, *values_dirs]))
    releases, problems = planned(found, apps, "default")
    for problem in errors + problems:
        print(f"error: {problem}", file=err)
    values_of = tree_values(found)
    sources = {(item.kind, str((item.obj.get("metadata") or {}).get("namespace") or "default"), item.name): item.obj
               for item in found if item.kind in ("HelmRepository", "OCIRepository", "HelmChart")}
    repos = Repositories(cache)
    ok = not errors and not problems
    for release in releases:
        spec = release.spec
        try:
            pieces = []
            for ref in spec.values_from:
                data = values_of.get((ref.kind, release.namespace, ref.name))
                if data is None or ref.values_key not in data:
                    if ref.optional:
                        continue
                    raise InputError("ValuesFromNotFound", f"{ref.kind} {release.namespace}/{ref.name} (key "
                                                           f"{ref.values_key}) is not in the tree")
                pieces.append((ref, data[ref.values_key]))
            chart, base = await offline_chart(spec, root, repos, sources, release.namespace)
            values = helm_values.compose(pieces, spec.values, base)
            request = upgrade_request(spec, release.namespace, release.name, chart=chart, values=values, digest="",
                                      action=Action.INSTALL)
            rendered = await engine.template(request)
        except (InputError, SourceError, HelmError, ValueError) as exc:
            print(f"error: {release.origin}: HelmRelease {release.namespace}/{release.name}: {exc}", file=err)
            ok = False
            continue
        header = f"# helmop render: HelmRelease {release.namespace}/{release.name} from {release.origin}\n"
        if output is None:
            print(header + rendered, file=out)
        else:
            target = output / release.namespace / f"{release.name}.yaml"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(header + rendered)
    return ok


def _readers(kube: Kube, engine: Engine, cache: Path) -> StandaloneReaders:
    return StandaloneReaders(kube=kube, engine=engine, repos=Repositories(cache), git=GitCache(cache))


async def _diff_all(readers: StandaloneReaders, releases: list[Planned]) -> list[ReleaseDiff]:
    try:
        return [await diff_release(readers, release) for release in releases]
    finally:
        await readers.yaml.close()


@dataclass(frozen=True)
class ObjectDiff:
    """One object of a release that would change: created, updated or deleted."""

    kind: str
    namespace: str
    name: str
    change: str  # create | update | delete
    diff: str  # unified

    @property
    def title(self) -> str:
        return f"{self.kind} {self.namespace + '/' if self.namespace else ''}{self.name}"


@dataclass(frozen=True)
class ReleaseDiff:
    release: Planned
    objects: list[ObjectDiff]

    def text(self) -> str:
        """One header per changed object (as kubectl diff), then its unified diff."""
        where = f"HelmRelease {self.release.namespace}/{self.release.name}"
        return "".join(f"{o.title} ({where}: {o.change})\n{o.diff}" for o in self.objects)

    def json(self) -> dict[str, Any]:
        return {"helmRelease": {"namespace": self.release.namespace, "name": self.release.name},
                "origin": self.release.origin,
                "objects": [{"kind": o.kind, "namespace": o.namespace, "name": o.name, "change": o.change,
                             "diff": o.diff} for o in self.objects]}


_SEPARATOR = re.compile(r"^---[ \t]*(?:#.*)?$", re.M)


def manifest_objects(manifest: str, namespace: str) -> dict[tuple[str, str, str, str], str]:
    """Each object's text in a helm manifest, by (apiVersion, kind, namespace, name) (namespace
    ``namespace`` when it names none: the manifest does not say which kinds are cluster-scoped)."""
    out: dict[tuple[str, str, str, str], str] = {}
    for chunk in _SEPARATOR.split(manifest):
        if not chunk.strip():
            continue
        try:
            obj = yamlc.load(chunk)
        except yaml.YAMLError:
            continue
        if isinstance(obj, dict) and obj.get("kind"):
            meta = obj.get("metadata") or {}
            key = (str(obj.get("apiVersion", "")), str(obj["kind"]), str(meta.get("namespace") or namespace),
                   str(meta.get("name", "")))
            out[key] = chunk.strip("\n") + "\n"
    return out


async def diff_release(ctx: Readers, release: Planned) -> ReleaseDiff:
    """What changes, object by object, from the live release's manifest to what ``release`` renders now (a
    server-side dry run with the operator's flags and identity)."""
    spec = release.spec
    try:
        inputs = await gather(ctx, release.namespace, spec)
        live = await ctx.engine.manifest(spec.release_name, spec.target_namespace)
        action = Action.UPGRADE if live else Action.INSTALL
        request = upgrade_request(spec, release.namespace, release.name, chart=inputs.chart_path,
                                  values=inputs.values, digest=inputs.digest, action=action)
        state = await Gateway(ctx.kube).read(spec.release_name, spec.storage_namespace)
        wanted = await ctx.engine.rendered(resolved(request, state))
    except (SpecError, InputError, HelmError) as exc:
        raise Failed(f"HelmRelease {release.namespace}/{release.name}: {exc}") from None
    before = manifest_objects(live, spec.target_namespace)
    after = manifest_objects(wanted, spec.target_namespace)
    objects = []
    for key in sorted(before.keys() | after.keys()):
        old, new = before.get(key, ""), after.get(key, "")
        if old == new:
            continue
        api_version, kind, namespace, name = key
        namespace = namespace if await _namespaced(ctx.kube, api_version, kind) else ""
        diffed = ObjectDiff(kind, namespace, name, "create" if not old else "delete" if not new else "update", "")
        lines = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                     fromfile=f"{diffed.title} (live)", tofile=f"{diffed.title} ({release.origin})")
        objects.append(replace(diffed, diff="".join(lines)))
    return ReleaseDiff(release, objects)


async def _namespaced(kube: Kube, api_version: str, kind: str) -> bool:
    """Whether the cluster serves ``kind`` namespaced (a kind it does not serve yet, such as one of the
    chart's own CRDs, counts as namespaced)."""
    try:
        return (await kube.resource(api_version, kind))[1]
    except KubeError:
        return True


async def diff_live(kube: Kube, engine: Engine, cache: Path, namespace: str, name: str) -> list[ReleaseDiff]:
    """The diff of a HelmRelease in the cluster (its spec against its release)."""
    obj = await kube.get(HELMRELEASE.path(namespace, name))
    if obj is None:
        raise Failed(f"HelmRelease {namespace}/{name} not found")
    try:
        spec = parse_spec(obj.get("spec") or {}, name, namespace)
    except SpecError as exc:
        raise Failed(f"HelmRelease {namespace}/{name}: {exc}") from None
    return await _diff_all(_readers(kube, engine, cache), [Planned("spec", namespace, name, spec)])


async def diff_files(kube: Kube, engine: Engine, cache: Path, paths: list[Path], apps: list[AppKind],
                     default_namespace: str, built: list[manifests.Manifest] | None = None) -> list[ReleaseDiff]:
    """The diffs of the HelmReleases (and app resources) in local manifests, and in what kustomize overlays
    ``built``, against the live releases, valuesFrom read from the cluster: a change previewed before it is
    applied. The files are checked against the CRD schemas first (strict, as kubectl apply): a misspelt field
    is an error, not ignored."""
    tree = read_tree(paths) if paths else {}
    invalid = validation.tree(tree)
    if invalid:
        raise Failed("; ".join(invalid))
    found, errors = manifests.parse(tree)
    releases, problems = planned([*found, *(built or [])], apps, default_namespace)
    if errors or problems:
        raise Failed("; ".join(errors + problems))
    if not releases:
        raise Failed(f"no HelmRelease or app resource in {', '.join(map(str, paths)) or 'the build'}")
    return await _diff_all(_readers(kube, engine, cache), releases)
