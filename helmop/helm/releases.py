"""The release gateway: the one place outside the engine that knows how helm keeps a release.

helm stores each revision in a Secret of type ``helm.sh/release.v1`` labelled ``owner=helm``,
``name``, ``status`` and ``version`` (helmop adds its owner and config-digest labels through
``--labels``); it applies objects under the field manager ``helm`` and stamps them with
``app.kubernetes.io/managed-by: Helm`` and the ``meta.helm.sh/release-*`` annotations. Everything
that reads or writes any of that goes through here: a :class:`ReleaseState` is read with one API list
per action and answers every question about the release (latest revision, history, objects,
inventory, tests); the writes (unlocking a stuck release, re-applying objects as helm would) are
methods of :class:`Gateway`.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from helmop.api.objects import flux_id, from_flux_id
from helmop.api.status.helmrelease import Inventory, InventoryEntry, Snapshot
from helmop.infra.kube import Kube, KubeError

from . import storage

SECRET_TYPE = "helm.sh/release.v1"
NOT_STORAGE = f"type!={SECRET_TYPE}"  # a field selector for the Secrets that are not helm's records
FIELD_MANAGER = "helm"  # helm's own field manager; drift is corrected under it, so helm owns the fields again
# what applies of these own is the release's, not another's: helm's, and helm-controller's (a release Flux
# installed: the helm CLI has no field-manager setting, so its fields pass to helm as releases are upgraded)
FIELD_MANAGERS = (FIELD_MANAGER, "helmop-drift", "helm-controller")
HISTORY_KEPT = 5  # revisions shown in status.history

LiveObject = tuple[str, str, str, str]  # (apiVersion, namespace, kind, name) of an object a release deployed


def owner_token(namespace: str, name: str, kind: str = "HelmRelease") -> str:
    """The label value that says which HelmRelease (of kind key ``kind``) a release belongs to."""
    return storage.owner_token(namespace, name, kind)


def digest_token(config_digest: str) -> str:
    """The config digest in its label form (what a release's record carries)."""
    return storage.digest_token(config_digest)


class Manifests:
    """Parsed manifests by release record (its Secret's uid and resourceVersion: a record never changes under
    one version), so a release looked at again is not decoded and parsed again. Kept as JSON text (compact,
    and each caller gets objects of its own to change); the ``size`` most recently used."""

    def __init__(self, size: int = 256) -> None:
        self.size = size
        self._parsed: OrderedDict[tuple[str, str], str] = OrderedDict()

    def objects(self, secret: dict[str, Any], parse: Callable[[], list[dict[str, Any]]]) -> list[dict[str, Any]]:
        meta = secret.get("metadata") or {}
        key = (str(meta.get("uid") or ""), str(meta.get("resourceVersion") or ""))
        if not all(key):
            return list(parse())
        text = self._parsed.get(key)
        if text is None:
            parsed = parse()
            try:
                text = json.dumps(parsed, separators=(",", ":"))
            except (TypeError, ValueError):  # a forged record's YAML with no JSON form (!!set): not kept
                return parsed
            self._parsed[key] = text
            while len(self._parsed) > self.size:
                self._parsed.popitem(last=False)
        else:
            self._parsed.move_to_end(key)
        return list(json.loads(text))


@dataclass(frozen=True)
class ReleaseState:
    """One release as helm's storage has it, read once: every revision's Secret."""

    name: str
    namespace: str  # where helm keeps the records (the storage namespace)
    secrets: tuple[dict[str, Any], ...] = ()
    manifests: Manifests | None = field(default=None, compare=False, repr=False)
    _decoded: dict[str, dict[str, Any]] = field(default_factory=dict, compare=False, repr=False)

    @property
    def latest(self) -> storage.ReleaseRecord | None:
        return storage.latest(list(self.secrets))

    @property
    def exists(self) -> bool:
        return self.latest is not None

    @property
    def version(self) -> tuple[str, str]:
        """The latest record's identity (its Secret's uid and resourceVersion; empty when there is none): any
        new revision, or a change of the latest one's status, gives another."""
        latest = self.latest
        meta = (latest.secret.get("metadata") or {}) if latest else {}
        return (str(meta.get("uid") or ""), str(meta.get("resourceVersion") or ""))

    def last_good(self) -> int:
        """The newest revision before the latest that was deployed successfully (0: none)."""
        latest = self.latest
        return storage.last_good(list(self.secrets), below=latest.revision) if latest else 0

    def record(self, secret: dict[str, Any]) -> dict[str, Any]:
        """A revision's decoded record (decoded once per state)."""
        name = str((secret.get("metadata") or {}).get("name", ""))
        if name not in self._decoded:
            self._decoded[name] = storage.decode(secret)
        return self._decoded[name]

    def tests(self) -> str:
        """How the last ``helm test`` of the deployed latest revision went: "", "passed" or "failed"."""
        latest = self.latest
        if latest is None or latest.status != "deployed":
            return ""
        return storage.test_result(self.record(latest.secret))

    def server_side(self, revision: int = 0) -> str:
        """helm 4's --server-side for an action after ``revision`` (0: the latest), as "auto" would resolve it:
        "true" when that revision was applied server-side, "false" when client-side (or by helm 3, which
        records no method); "true" without a record (an install)."""
        found = [s for s in self.secrets if storage.revision_of(s) == revision] if revision else \
            ([self.latest.secret] if self.latest else [])
        if not found:
            return "true"
        return "true" if self.record(found[0]).get("apply_method") == "ssa" else "false"

    def chart_name(self) -> str:
        """The name of the latest revision's chart ("" when there is none)."""
        latest = self.latest
        return str(((self.record(latest.secret).get("chart") or {}).get("metadata") or {}).get("name") or "") \
            if latest else ""

    def history(self) -> tuple[Snapshot, ...]:
        """Snapshots of the newest revisions (chart, digest, status, deployed times, tests)."""
        ordered = sorted(self.secrets, key=storage.revision_of, reverse=True)
        return tuple(storage.summary(self.record(s)) for s in ordered[:HISTORY_KEPT])  # the latest decoded once

    def manifest(self) -> list[dict[str, Any]]:
        """The objects of the latest revision's manifest (hooks are not part of it); [] when uninstalled."""
        latest = self.latest
        if latest is None or latest.status == "uninstalled":
            return []
        if self.manifests is None:
            return storage.manifest_objects(self.record(latest.secret))
        return self.manifests.objects(latest.secret, lambda: storage.manifest_objects(self.record(latest.secret)))


def inventory(objects: list[dict[str, Any]]) -> Inventory:
    """The objects as Flux records them: ``entries`` of ``{id: <namespace>_<name>_<group>_<kind>, v: <version>}``."""
    entries = set()
    for obj in objects:
        group, _, version = str(obj["apiVersion"]).rpartition("/")
        meta = obj["metadata"]
        entries.add((flux_id(str(meta.get("namespace", "")), meta["name"], group, obj["kind"]), version))
    return Inventory(entries=tuple(InventoryEntry(id=i, v=v) for i, v in sorted(entries)))


def inventory_objects(recorded: Inventory | None) -> list[LiveObject]:
    """(apiVersion, namespace, kind, name) of each entry of an inventory (none of an id's parts can contain
    an underscore); malformed entries are passed over."""
    out = []
    for entry in recorded.entries if recorded else ():
        parts = from_flux_id(entry.id)
        if parts is not None:
            namespace, name, group, kind = parts
            out.append((f"{group}/{entry.v}" if group else entry.v, namespace, kind, name))
    return out


async def located(state: ReleaseState, kube: Kube, target_namespace: str) -> list[tuple[str, dict[str, Any]]]:
    """(REST path, object) for each object of the latest manifest, namespaced ones with their namespace
    filled in (``kube``: the identity the release acts as, which resolves the kinds)."""
    out = []
    for obj in state.manifest():
        api_version, kind = str(obj.get("apiVersion", "")), str(obj.get("kind", ""))
        meta = obj.setdefault("metadata", {})
        try:
            if (await kube.resource(api_version, kind))[1]:
                meta.setdefault("namespace", target_namespace)
            out.append((await kube.path_of(api_version, kind, meta.get("namespace", ""), meta["name"]), obj))
        except KubeError:
            continue  # a kind the cluster does not serve (any more)
    return out


_RELEASE_NAME, _RELEASE_NAMESPACE = "meta.helm.sh/release-name", "meta.helm.sh/release-namespace"


def as_helm_applies(obj: dict[str, Any], release: str, namespace: str) -> dict[str, Any]:
    """``obj`` with what helm adds to everything it applies (and does not record in the manifest)."""
    meta = obj.setdefault("metadata", {})
    meta.setdefault("labels", {})["app.kubernetes.io/managed-by"] = "Helm"
    meta.setdefault("annotations", {}).update({_RELEASE_NAME: release, _RELEASE_NAMESPACE: namespace})
    return obj


def release_of(obj: dict[str, Any]) -> tuple[str, str] | None:
    """(namespace, name) of the helm release that applied ``obj``, from the annotations helm stamps."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    name, namespace = annotations.get(_RELEASE_NAME), annotations.get(_RELEASE_NAMESPACE)
    return (str(namespace), str(name)) if name and namespace else None


class Gateway:
    """Reads and writes helm's storage through the API (no helm process)."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self.manifests = Manifests()

    async def read(self, release: str, namespace: str) -> ReleaseState:
        """Every revision of ``release`` in ``namespace``: one API list."""
        secrets = await self.kube.list(f"/api/v1/namespaces/{namespace}/secrets", storage.selector(release))
        return ReleaseState(release, namespace, tuple(secrets), self.manifests)

    async def unlock(self, state: ReleaseState, why: str) -> bool:
        """Record the newest revision as failed in helm's own storage, as Flux does for a release stuck
        ``pending-*`` (or one helmop judged unhealthy); False when there is none."""
        latest = state.latest
        if latest is None:
            return False
        secret = storage.unlocked(latest.secret, why)
        meta = secret["metadata"]
        await self.kube.request("PUT", f"/api/v1/namespaces/{meta['namespace']}/secrets/{meta['name']}", secret)
        return True

