"""``helmop render`` (offline) and ``helmop diff`` (against the cluster): both turn HelmReleases and
app resources into helm requests exactly as the operator does (helm.apps.release_spec for the
app -> HelmRelease mapping, helm.values.compose for values, helm.request.upgrade_request for flags,
labels and identity), so what they show is what the operator would deploy."""

from __future__ import annotations

import difflib
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from helmop.api import manifests, validation
from helmop.api.actions import Action
from helmop.api.apps import AppKind
from helmop.api.errors import SpecError
from helmop.api.helmrelease import HelmReleaseSpec, parse_spec
from helmop.api.kinds import HELMRELEASE
from helmop.api.redaction import redact
from helmop.helm.engine import Engine
from helmop.helm.errors import HelmError
from helmop.helm.inputs import InputError, Readers, StandaloneReaders, gather
from helmop.helm.offline import Planned, chart_and_values, manifest_objects, planned, tree_values
from helmop.helm.releases import Gateway
from helmop.helm.request import resolved, upgrade_request
from helmop.infra.kube import Kube, KubeError
from helmop.sources.decryption.keys import KeyInvalid, Keys
from helmop.sources.errors import SourceError
from helmop.sources.git import GitCache
from helmop.sources.repositories import Repositories
from helmop.sources.secrets import secret_entries

from .errors import Failed


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


async def render(root: Path, values_dirs: list[Path], engine: Engine, cache: Path, apps: list[AppKind],
                 output: Path | None, out: Any = None, err: Any = None) -> bool:
    """Render every HelmRelease (and Jenkins / app kind) under ``root`` offline; False on any error."""
    err = err or sys.stderr  # the stream of the moment (not of import time)
    out = out or sys.stdout  # the stream of the moment (not of import time)
    tree = read_tree([root, *values_dirs])  # values files of a release's GitRepository read from it too
    found, errors = manifests.parse(tree)
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
            chart, values = await chart_and_values(release, root, values_of, sources, repos, files=tree)
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


async def diff_release(ctx: Readers, release: Planned) -> ReleaseDiff:
    """What changes, object by object, from the live release's manifest to what ``release`` renders now (a
    server-side dry run with the operator's flags and identity)."""
    spec = release.spec
    try:
        inputs = await gather(ctx, release.namespace, spec, keys=await _keys(ctx.kube, release.namespace, spec))
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
        objects.append(replace(diffed, diff=redact("".join(lines), inputs.secrets)))
    return ReleaseDiff(release, objects)


async def _keys(kube: Kube, namespace: str, spec: HelmReleaseSpec) -> Keys | None:
    """spec.decryption's keys, read with the caller's rights (what they decrypt is masked in the diff)."""
    if spec.decryption is None:
        return None
    if not spec.decryption.secret_ref:
        raise Failed(f"spec.decryption names the operator's own key folder: {namespace}'s values cannot be "
                     "decrypted here")
    try:
        entries = await secret_entries(kube, namespace, spec.decryption.secret_ref, "spec.decryption.secretRef")
        return Keys.of_entries(entries, f"Secret {namespace}/{spec.decryption.secret_ref}")
    except (SourceError, KeyInvalid) as exc:
        raise Failed(str(exc)) from None


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
