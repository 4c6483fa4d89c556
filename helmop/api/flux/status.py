"""Status in Flux's shape: the second serialization of helmop's typed status, for Flux's kinds (--flux-api).

helmop's status types already use Flux's field and condition names; what differs is converted here, both
ways (a status Flux's controllers wrote is read as helmop's): a HelmRelease's history snapshots (``version``,
the release's ``name`` and ``namespace``), its ``storageNamespace`` and ``failures``; a source's artifact
(``path`` and ``url`` are required by Flux's schema; helmop serves no artifact files, so ``url`` is empty) and
its ``ArtifactInStorage`` condition; a Kustomization's inventory (``entries`` of ``id`` and ``v``). Fields only
helmop has, which Flux's schema would prune, are left out.
"""

from __future__ import annotations

from typing import Any

from helmop.api.objects import flux_id, from_flux_id

# Kinds whose artifact helmop writes in Flux's shape (an ExternalArtifact's is written by its maker)
SOURCES = ("GitRepository", "HelmRepository", "OCIRepository", "Bucket", "HelmChart")  # an artifact in Flux's shape
# Fields of helmop's status that Flux's schema for the kind does not have.
_ONLY_HELMOP = {
    "HelmRelease": ("readinessCheck", "releaseName", "lastAppliedRevision", "cluster"),
    "Kustomization": ("cluster",),
    "GitRepository": ("lastFetchedAt", "webhookPath"),
}


def outward(kind: str, status: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    """helmop's status JSON for the object ``body`` as Flux writes it."""
    out = {k: v for k, v in status.items() if k not in _ONLY_HELMOP.get(kind, ())}
    if kind == "HelmRelease":
        out.update(_release_out(status, body))
    elif kind in SOURCES and status.get("artifact"):
        out.update(_artifact_out(kind, status, body.get("metadata") or {}))
    elif kind == "Kustomization" and "inventory" in status:
        out["inventory"] = {"entries": [_entry_out(e) for e in status["inventory"]]}
    return out


def _release_out(status: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    """A HelmRelease's storageNamespace, history snapshots and failures as Flux writes them."""
    spec, meta = body.get("spec") or {}, body.get("metadata") or {}
    target = str(spec.get("targetNamespace") or meta.get("namespace") or "")
    out: dict[str, Any] = {"storageNamespace": str(spec.get("storageNamespace") or target)}
    release = str(status.get("releaseName") or "")
    if status.get("history"):
        out["history"] = [_snapshot_out(s, release, target) for s in status["history"]]
    failures = int(status.get("installFailures") or 0) + int(status.get("upgradeFailures") or 0)
    if failures:
        out["failures"] = failures
    return out


def _artifact_out(kind: str, status: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
    """A source's artifact (with Flux's required path and url) and its ArtifactInStorage condition."""
    artifact = dict(status["artifact"])
    name = artifact["revision"].rpartition(":")[2][:64]
    artifact.setdefault("path", f"{kind.lower()}/{meta.get('namespace')}/{meta.get('name')}/{name}.tar.gz")
    artifact.setdefault("url", "")
    out: dict[str, Any] = {"artifact": artifact}
    conditions = [c for c in status.get("conditions") or [] if c.get("type") != "ArtifactInStorage"]
    ready = next((c for c in conditions if c.get("type") == "Ready"), None)
    if ready is not None:  # one ArtifactInStorage, whatever the status it was made from already had
        stored = {**ready, "type": "ArtifactInStorage", "status": "True", "reason": "Succeeded",
                  "message": f"stored artifact for revision '{artifact['revision']}'"}
        out["conditions"] = [*conditions, stored]
    return out


def inward(kind: str, status: dict[str, Any] | None) -> dict[str, Any] | None:
    """A status in Flux's shape (written by Flux's controllers, or by :func:`outward`) as helmop's JSON."""
    if not isinstance(status, dict):
        return status
    out = dict(status)
    if kind == "HelmRelease" and isinstance(status.get("history"), list):
        out["history"] = [_snapshot_in(s) for s in status["history"] if isinstance(s, dict)]
        first = status["history"][0] if status["history"] else {}
        if isinstance(first, dict) and first.get("name"):
            out["releaseName"] = str(first["name"])
    if kind in SOURCES:
        out["conditions"] = [c for c in status.get("conditions") or [] if c.get("type") != "ArtifactInStorage"]
    if kind == "Kustomization" and isinstance(status.get("inventory"), dict):
        entries = status["inventory"].get("entries") or []
        out["inventory"] = [e for e in (_entry_in(x) for x in entries if isinstance(x, dict)) if e is not None]
    return out


def _snapshot_out(snapshot: dict[str, Any], release: str, namespace: str) -> dict[str, Any]:
    out = {k: v for k, v in snapshot.items() if k not in ("revision", "tests")}
    out.update(name=release, namespace=namespace, version=snapshot.get("revision", 0))
    if snapshot.get("tests"):
        out["testHooks"] = {f"{release}-test": {"phase": "Succeeded" if snapshot["tests"] == "passed" else "Failed"}}
    return out


def _snapshot_in(snapshot: dict[str, Any]) -> dict[str, Any]:
    keep = ("chartName", "chartVersion", "appVersion", "configDigest", "status", "firstDeployed", "lastDeployed",
            "action")
    out: dict[str, Any] = {k: snapshot[k] for k in keep if k in snapshot}
    out["revision"] = int(snapshot.get("version") or 0)
    phases = [str((h or {}).get("phase", "")) for h in (snapshot.get("testHooks") or {}).values()]
    if phases:
        out["tests"] = "failed" if "Failed" in phases else "passed"
    return out


def _entry_out(entry: dict[str, Any]) -> dict[str, Any]:
    group, _, version = str(entry.get("apiVersion", "")).rpartition("/")
    out = {"id": flux_id(str(entry.get("namespace") or ""), str(entry.get("name", "")), group,
                         str(entry.get("kind", ""))), "v": version}
    if entry.get("uid"):
        out["uid"] = entry["uid"]  # helmop's own guard (an object re-created by someone else is not pruned)
    return out


def _entry_in(entry: dict[str, Any]) -> dict[str, Any] | None:
    parts = from_flux_id(str(entry.get("id", "")))
    if parts is None:
        return None
    namespace, name, group, kind = parts
    version = str(entry.get("v") or "v1")
    out = {"apiVersion": f"{group}/{version}" if group else version, "kind": kind, "name": name}
    if namespace:
        out["namespace"] = namespace
    if entry.get("uid"):
        out["uid"] = entry["uid"]
    return out
