"""Helm's release records, read straight from its storage Secrets (``sh.helm.release.v1.<name>.v<N>``).

Reading them through the API answers "is the release there, deployed, and ours, with this config?"
without spawning helm: the Secret labels carry name/owner/status/version plus the labels helmop
adds (``--labels``). Decoding the record itself (base64, gzip, JSON) is only needed for details.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import hashlib
import json
from dataclasses import dataclass
from typing import Any

import yaml

from helmop.api import bounded, yamlc
from helmop.api.status.helmrelease import Snapshot

from .errors import HelmError

OWNER_LABEL = "helmop.dev/owner"
DIGEST_LABEL = "helmop.dev/config-digest"


def owner_token(namespace: str, name: str, kind: str = "HelmRelease") -> str:
    """A label-safe identity of the HelmRelease that owns a release; ``kind``: its key (``api.kinds.key_of``), so
    that a Flux HelmRelease and helmop's of the same name never own each other's release."""
    who = f"{namespace}/{name}" if kind == "HelmRelease" else f"{kind}/{namespace}/{name}"
    return hashlib.sha256(who.encode()).hexdigest()[:40]


def digest_token(config_digest: str) -> str:
    """The config digest as a label value (63 characters at most)."""
    return config_digest.removeprefix("sha256:")[:40]


@dataclass(frozen=True)
class ReleaseRecord:
    name: str
    namespace: str
    revision: int
    status: str
    owner: str
    config_digest: str
    secret: dict[str, Any]


def selector(release: str) -> str:
    return f"owner=helm,name={release}"


def revision_of(secret: dict[str, Any]) -> int:
    """The revision a storage Secret's ``version`` label names (0 when it names none)."""
    version = str((secret.get("metadata", {}).get("labels") or {}).get("version", ""))
    return int(version) if version.isdigit() else 0


def latest(secrets: list[dict[str, Any]]) -> ReleaseRecord | None:
    """The newest revision among a release's storage Secrets."""
    best: ReleaseRecord | None = None
    for secret in secrets:
        labels = secret.get("metadata", {}).get("labels") or {}
        try:
            revision = int(labels.get("version", "0"))
        except ValueError:
            continue
        if best is None or revision > best.revision:
            best = ReleaseRecord(labels.get("name", ""), secret["metadata"].get("namespace", ""), revision,
                                 labels.get("status", ""), labels.get(OWNER_LABEL, ""),
                                 labels.get(DIGEST_LABEL, ""), secret)
    return best


def last_good(secrets: list[dict[str, Any]], below: int) -> int:
    """The newest revision before ``below`` that was deployed successfully (superseded since, or deployed);
    0 if none: what a rollback goes back to."""
    good = [int(labels.get("version", "0")) for s in secrets
            if (labels := s.get("metadata", {}).get("labels") or {}).get("status") in ("deployed", "superseded")
            and str(labels.get("version", "")).isdigit()]
    return max((g for g in good if g < below), default=0)


def test_result(record: dict[str, Any]) -> str:
    """How the last ``helm test`` of a release record went: "" (never run), "passed" or "failed"."""
    phases = [(hook.get("last_run") or {}).get("phase", "") for hook in record.get("hooks") or []
              if "test" in (hook.get("events") or [])]
    phases = [p for p in phases if p]
    if not phases:
        return ""
    return "passed" if all(p == "Succeeded" for p in phases) else "failed"


def manifest_objects(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The objects of a release record's manifest (what helm applied; hooks are kept apart): documents with
    an apiVersion, a kind and a name (a forged record may hold anything else, which is passed over)."""
    try:
        documents = yamlc.load_all(str(record.get("manifest") or ""))
    except yaml.YAMLError as exc:
        raise HelmError("ReleaseRecordInvalid", f"the release record's manifest does not parse: {exc}") from None
    return [d for d in documents if isinstance(d, dict) and isinstance(d.get("metadata"), dict)
            and all(isinstance(v, str) and v for v in (d.get("apiVersion"), d.get("kind"), d["metadata"].get("name")))]


# A record is at most a Secret's 1 MiB (compressed): real ones inflate about tenfold. Anyone who may write
# Secrets in a namespace can forge one, so inflating and parsing it are bounded.
MAX_RECORD = 32 << 20
MAX_RATIO = 100
MAX_RECORD_ITEMS = 1_000_000  # JSON values in a record (a few thousand in real ones)


def decode(secret: dict[str, Any]) -> dict[str, Any]:
    """The release record a storage Secret holds; ``ReleaseRecordInvalid`` if it is not one, or would
    inflate or parse beyond the bounds above."""
    name = (secret.get("metadata") or {}).get("name", "")
    try:
        raw = base64.b64decode(base64.b64decode(((secret.get("data") or {}).get("release") or ""), validate=True))
        if raw[:2] == b"\x1f\x8b":
            raw = bounded.gunzip(raw, max_size=MAX_RECORD, max_ratio=MAX_RATIO, what=f"release record {name}")
        elif len(raw) > MAX_RECORD:
            raise bounded.Bomb(f"release record {name} is larger than {bounded.describe_size(MAX_RECORD)}")
        if raw.count(b"{") + raw.count(b"[") + raw.count(b",") > MAX_RECORD_ITEMS:
            raise bounded.Bomb(f"release record {name} has more than {MAX_RECORD_ITEMS} JSON values")
        record = json.loads(raw)
        if not isinstance(record, dict):
            raise ValueError("not a JSON object")
    except (ValueError, binascii.Error) as exc:  # json, base64 and bounds errors are ValueErrors
        raise HelmError("ReleaseRecordInvalid", f"helm's storage Secret {name} does not hold a readable release "
                                                f"record: {exc}") from None
    return record


def encode(record: dict[str, Any]) -> str:
    packed = gzip.compress(json.dumps(record, separators=(",", ":")).encode())
    return base64.b64encode(base64.b64encode(packed)).decode()


def summary(record: dict[str, Any]) -> Snapshot:
    """What a HelmRelease status shows of one revision (its decoded record)."""
    info, meta = record.get("info") or {}, (record.get("chart") or {}).get("metadata") or {}
    return Snapshot(revision=int(record.get("version", 0)), chart_name=str(meta.get("name", "")),
                    chart_version=str(meta.get("version", "")), app_version=str(meta.get("appVersion", "")),
                    status=str(info.get("status", "")), first_deployed=str(info.get("first_deployed", "")),
                    last_deployed=str(info.get("last_deployed", "")), config_digest=values_digest(record.get("config")),
                    tests=test_result(record), action=action_of(record))


def values_digest(values: Any) -> str:
    """The configDigest of a revision, in Flux's form: the SHA-256 of its values (those given, not the chart's
    defaults), of no input at all when there are none. Flux digests them as go-yaml writes them, which no Python
    encoder reproduces byte for byte; canonical JSON (sorted keys) is as stable and, for large values, a small
    fraction of the memory and time of a YAML dump."""
    text = json.dumps(values, sort_keys=True, separators=(",", ":")) if values else ""
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def action_of(record: dict[str, Any]) -> str:
    """What made a revision, in Flux's words (install, upgrade, rollback, uninstall), from helm's description
    and status: helm keeps no other word of it."""
    info = record.get("info") or {}
    description, status = str(info.get("description") or ""), str(info.get("status") or "")
    if status == "uninstalled":
        return "uninstall"
    if description.startswith("Rollback"):
        return "rollback"
    if description.startswith("Install") or int(record.get("version") or 0) == 1:
        return "install"
    return "upgrade"


def unlocked(secret: dict[str, Any], why: str) -> dict[str, Any]:
    """The Secret with its release marked failed: what to write to free a release stuck pending
    (helm was killed mid-action) so the next install/upgrade can proceed, as Flux does."""
    record = decode(secret)
    record.setdefault("info", {})["status"] = "failed"
    record["info"]["description"] = why
    out: dict[str, Any] = json.loads(json.dumps(secret))
    out["data"]["release"] = encode(record)
    out["metadata"].setdefault("labels", {})["status"] = "failed"
    return out
