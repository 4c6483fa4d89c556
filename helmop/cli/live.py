"""``helmop preview --cluster``: the cluster's side of a preview, in place of a base revision. Each object the head
renders is read from the cluster the kubeconfig names and compared as a server-side dry run would see it (the head's
object as the server answers a dry run of it; the live object cut to the fields the head sets and those its appliers
own: :func:`helmop.api.rendered.live_view`), so defaults and other managers' fields do not show.

An object the cluster holds but the head does not render shows as removed only when its applier would remove it:
when it is in the inventory of a ConfigSync (or Flux Kustomization) of the cluster that applies the same folder, or
in the manifest of the live release of a HelmRelease the head renders (or removes). Anything else in the cluster
is not the head's to judge, and is not shown."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from helmop.api import yamlc
from helmop.api.errors import SpecError
from helmop.api.flux.status import inward
from helmop.api.helmrelease import parse_spec
from helmop.api.kinds import FLUX, HELMOP
from helmop.api.rendered import Rendering, as_yaml, built_folder, comparable, dumped, label, live_view, server_view
from helmop.api.status import parse
from helmop.api.status.configsync import ConfigSyncStatus
from helmop.helm.releases import FIELD_MANAGERS, Gateway
from helmop.infra.kube import Kube, KubeError
from helmop.sources.kustomize import folder_of

PREVIEW_MANAGER = "helmop-preview"  # the dry runs' field manager (a dry run writes nothing, owns nothing)
Ref = dict[str, Any]  # apiVersion, kind, metadata.namespace and name


@dataclass(frozen=True)
class Sync:
    """A ConfigSync or Kustomization of the cluster: the folder it applies, where objects without a namespace go,
    and what it applied."""

    path: str
    namespace: str
    inventory: list[Ref]


@dataclass
class Sides:
    """The cluster's side and the head's, as the cluster names each object."""

    kube: Kube
    namespace: str  # where an object without one goes, when no ConfigSync of its folder says
    salt: bytes
    base: Rendering = field(default_factory=Rendering)
    head: Rendering = field(default_factory=Rendering)


async def sides(kube: Kube, rendered: Rendering, namespace: str, salt: bytes) -> tuple[Rendering, Rendering]:
    """(what the cluster holds, what the head renders), object by object, for :func:`helmop.api.changes.compare`."""
    out = Sides(kube, namespace, salt)
    out.head.secrets = out.base.secrets = list(rendered.secrets)
    out.head.unrendered, out.head.api_versions = dict(rendered.unrendered), dict(rendered.api_versions)
    syncs = await _syncs(kube)
    for group, texts in sorted(rendered.groups.items()):
        path = built_folder(group)
        if path is not None:
            folder = folder_of(path)
            applying = [s for s in syncs if s.path == folder]
            where = applying[0].namespace if applying else namespace
            await _group(out, group, texts, where, [ref for s in applying for ref in s.inventory])
            continue
        release, storage, target = rendered.stored[group]
        state = await Gateway(kube).read(release, storage)
        await _group(out, group, texts, target, state.manifest())
        out.head.releases[group] = rendered.releases[group]
        if state.exists:  # a release the cluster lacks shows as added
            out.base.releases[group] = rendered.releases[group]
    for group in [g for g in out.base.groups if built_folder(g) is not None]:
        await _removed_releases(out, group)
    return out.base, out.head


async def _syncs(kube: Kube) -> list[Sync]:
    """helmop's ConfigSyncs and Flux's Kustomizations (where the cluster serves them), by namespace and name."""
    found = []
    for kind in (HELMOP.configsync, FLUX.configsync):
        try:
            items = await kube.list(kind.path())
        except KubeError as exc:
            if exc.status == 404:
                continue
            raise
        for item in items:
            spec, meta = item.get("spec") or {}, item.get("metadata") or {}
            raw = item.get("status")
            status = parse(ConfigSyncStatus, inward(kind.kind, raw) if kind.flux else raw)
            namespace = str(spec.get("targetNamespace") or meta.get("namespace") or "")
            refs = [{"apiVersion": o.api_version, "kind": o.kind, "metadata": {"namespace": o.namespace,
                                                                               "name": o.name}}
                    for o in status.inventory]
            found.append((str(meta.get("namespace")), str(meta.get("name")),
                          Sync(folder_of(str(spec.get("path") or "")), namespace, refs)))
    return [sync for _, _, sync in sorted(found, key=lambda f: (f[0], f[1]))]


async def _group(out: Sides, group: str, texts: dict[str, str], namespace: str, applied: list[Ref]) -> None:
    """One group's objects on both sides; what ``applied`` holds and the head does not, as removed."""
    base: dict[str, str] = {}
    head: dict[str, str] = {}
    for text in texts.values():
        obj = yamlc.load(text)
        if not isinstance(obj, dict):
            continue
        await _placed(out.kube, obj, namespace)
        live = await _get(out.kube, obj)
        head[label(obj)] = dumped(comparable(await _as_served(out.kube, obj, live)), canonical=True)
        if live is not None:
            base[label(obj)] = as_yaml(live_view(live, obj, _appliers(live)), out.base.secrets, out.salt,
                                       canonical=True)
    for ref in applied:
        await _placed(out.kube, ref, namespace)
        if label(ref) not in head:
            live = await _get(out.kube, ref)
            if live is not None:
                base[label(ref)] = as_yaml(comparable(live), out.base.secrets, out.salt, canonical=True)
    out.base.groups[group], out.head.groups[group] = base, head


async def _removed_releases(out: Sides, group: str) -> None:
    """The objects of the live releases of the HelmReleases a ConfigSync group removes: removed too."""
    removed = set(out.base.groups[group]) - set(out.head.groups[group])
    for name in sorted(removed):
        obj = yamlc.load(out.base.groups[group][name])
        if not isinstance(obj, dict) or (obj.get("apiVersion"), obj.get("kind")) != (HELMOP.helmrelease.api_version,
                                                                                     "HelmRelease"):
            continue
        meta = obj.get("metadata") or {}
        try:
            spec = parse_spec(dict(obj.get("spec") or {}), str(meta.get("name")), str(meta.get("namespace")))
        except SpecError:
            continue
        state = await Gateway(out.kube).read(spec.release_name, spec.storage_namespace)
        released = f"HelmRelease {meta.get('namespace')}/{meta.get('name')}"
        if released not in out.head.groups and state.exists:
            await _group(out, released, {}, spec.target_namespace, state.manifest())
            out.base.releases[released] = ("", "")


def _appliers(live: dict[str, Any]) -> set[str]:
    """The field managers that applied ``live``: server-side appliers (ConfigSyncs, Flux, helm 4) and helm's."""
    entries = (live.get("metadata") or {}).get("managedFields") or []
    return {str(e.get("manager")) for e in entries if isinstance(e, dict) and e.get("operation") == "Apply"} | set(
        FIELD_MANAGERS)


async def _placed(kube: Kube, obj: dict[str, Any], namespace: str) -> None:
    """``obj`` in ``namespace`` when its kind is namespaced and it names none; without one when cluster-scoped (a
    kind the cluster does not serve counts as namespaced: its CRD comes with it)."""
    meta = obj.setdefault("metadata", {})
    try:
        namespaced = (await kube.resource(str(obj.get("apiVersion", "")), str(obj.get("kind", ""))))[1]
    except KubeError:
        namespaced = True
    if not namespaced:
        meta.pop("namespace", None)
    elif not meta.get("namespace"):
        meta["namespace"] = namespace


async def _get(kube: Kube, obj: dict[str, Any]) -> dict[str, Any] | None:
    meta = obj.get("metadata") or {}
    try:
        path = await kube.path_of(str(obj.get("apiVersion", "")), str(obj.get("kind", "")),
                                  str(meta.get("namespace") or ""), str(meta.get("name", "")))
        return await kube.get(path)
    except KubeError as exc:
        if exc.status == 404:  # a kind the cluster does not serve: nothing of it is there
            return None
        raise


async def _as_served(kube: Kube, obj: dict[str, Any], live: dict[str, Any] | None) -> dict[str, Any]:
    """The head's object as the server would keep it (a server-side dry run, forced, that writes nothing), where the
    object exists and the server takes the dry run; else as rendered. A Secret is compared masked, as rendered."""
    if live is None or obj.get("kind") == "Secret":
        return obj
    meta = obj.get("metadata") or {}
    try:
        path = await kube.path_of(str(obj["apiVersion"]), str(obj["kind"]), str(meta.get("namespace") or ""),
                                  str(meta.get("name", "")))
        return server_view(await kube.apply(path, obj, PREVIEW_MANAGER, dry_run=True), obj)
    except (KubeError, KeyError):
        return obj
