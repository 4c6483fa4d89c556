"""HelmRepository and OCIRepository specs (helmop.dev/v1alpha1, and Flux's source.toolkit.fluxcd.io/v1):
chart sources declared once and shared by the HelmReleases that name them. Field names are Flux's."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import SpecError
from .fields import flag, optional_text, refuse_workload_identity, seconds, text
from .names import check_references
from .patterns import compile_pattern
from .settings import SOURCE_INTERVAL

HELM_CHART_MEDIA_TYPE = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
FLUX_CONTENT_MEDIA_TYPE = "application/vnd.cncf.flux.content.v1.tar+gzip"  # `flux push artifact`'s one layer
FLUX_CONFIG_MEDIA_TYPE = "application/vnd.cncf.flux.config.v1+json"
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_URL = re.compile(r"^(https?|oci)://[^\s/]+")
_IDENTITIES = 16  # matchOIDCIdentity entries


@dataclass(frozen=True)
class Verification:
    """spec.verify of an OCI source (OCIRepository, a HelmRelease's chart from an OCI HelmRepository): the
    signatures of a provider, checked with the keys (cosign) or trust policy and store (notation) of a Secret."""

    provider: str  # cosign | notation
    secret_ref: str  # the keys (cosign), or trust policy and store (notation); "" for keyless cosign
    trusted_root_ref: str = ""  # keyless cosign: a Secret holding a Sigstore trusted_root.json
    identities: tuple[tuple[str, str], ...] = ()  # keyless cosign: (issuer, subject) regexes; none: any

    @property
    def secret(self) -> tuple[str, str]:
        """(field, name) of the Secret the check reads: the keys or trust policy, else the trusted root."""
        return ("secretRef", self.secret_ref) if self.secret_ref else ("trustedRootSecretRef", self.trusted_root_ref)


def parse_verification(raw: Any, where: str, *, keyless: bool = True) -> Verification | None:
    """``where``.verify. Keyless cosign (no secretRef) is verified against a trusted root in a Secret
    (``trustedRootSecretRef``), never against the public Sigstore infrastructure, which needs the network:
    without one it is refused by name (so is keyless where Flux's API has no root to give, ``keyless``
    false)."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise SpecError("InvalidSpec", f"{where} must be a map")
    provider = str(raw.get("provider") or "cosign")
    if provider not in ("cosign", "notation"):
        raise SpecError("InvalidSpec", f"{where}.provider must be cosign or notation")
    secret, root = ref_name(raw, "secretRef"), ref_name(raw, "trustedRootSecretRef") if keyless else ""
    identities = _identities(raw.get("matchOIDCIdentity"), f"{where}.matchOIDCIdentity")
    if provider == "notation" and not secret:
        raise SpecError("InvalidSpec", f"{where}.secretRef is required for notation (trustpolicy.json and "
                                       "certificates)")
    if provider == "cosign" and not secret and not root:
        raise SpecError("UnsupportedField", f"{where}: keyless cosign verification against the public Sigstore "
                                            "infrastructure needs its root and logs from the network, which helmop "
                                            "does not reach; give public keys in secretRef, or a trusted root in "
                                            "trustedRootSecretRef")
    return Verification(provider, secret, "" if secret else root, identities)


def _identities(raw: Any, where: str) -> tuple[tuple[str, str], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or len(raw) > _IDENTITIES:
        raise SpecError("InvalidSpec", f"{where} must be a list of at most {_IDENTITIES} identities")
    out = []
    for i, identity in enumerate(raw):
        if not isinstance(identity, dict):
            raise SpecError("InvalidSpec", f"{where}[{i}] must be a map with an issuer and a subject")
        for field in ("issuer", "subject"):  # required by Flux's schema: an empty one would match anything
            if not identity.get(field):
                raise SpecError("InvalidSpec", f"{where}[{i}].{field} is required")
            compile_pattern(identity[field], f"{where}[{i}].{field}")
        out.append((str(identity["issuer"]), str(identity["subject"])))
    return tuple(out)


@dataclass(frozen=True)
class HelmRepositorySpec:
    url: str
    oci: bool = False  # spec.type oci: a registry (no index; each chart's tags are listed)
    secret_ref: str = ""  # username/password (and ca.crt)
    cert_secret_ref: str = ""  # ca.crt
    interval: float = SOURCE_INTERVAL
    timeout: float = 60.0
    insecure: bool = False  # plain HTTP for an OCI registry
    suspend: bool = False
    pass_credentials: bool = False  # the credentials also go to chart URLs on another host than the index's
    # accessFrom: the namespaces (label selectors, any one) whose objects may name it; None: not set (checked by
    # every reader of a source: helmop.sources.readers.referenced)
    access_from: tuple[tuple[tuple[str, str], ...], ...] | None = None


@dataclass(frozen=True)
class OCIRepositorySpec:
    url: str
    tag: str = "latest"
    semver: str = ""
    digest: str = ""  # sha256:<hex>; wins over semver and tag
    semver_filter: str = ""  # an RE2 regex the tags must match before semver chooses (unanchored, as Go's)
    media_type: str = ""  # the layer taken from the artifact (spec.layerSelector); "": the first
    operation: str = "extract"  # extract (unpacked, ignore rules applied) or copy (the layer as it is)
    ignore: str | None = None  # gitignore patterns over an extracted layer
    secret_ref: str = ""
    cert_secret_ref: str = ""
    proxy_secret_ref: str = ""
    interval: float = SOURCE_INTERVAL
    timeout: float = 60.0
    insecure: bool = False
    suspend: bool = False
    verify: Verification | None = None


def ref_name(spec: Mapping[str, Any], key: str) -> str:
    ref = spec.get(key) or {}
    if not isinstance(ref, dict):
        raise SpecError("InvalidSpec", f"spec.{key} must be a map with a name")
    return str(ref.get("name") or "")


def generic_identity_only(spec: dict[str, Any]) -> None:
    """spec.provider and spec.serviceAccountName (cloud workload identities): refused by name unless generic."""
    provider = str(spec.get("provider") or "generic")
    if provider != "generic":
        raise SpecError("UnsupportedField", f"spec.provider {provider!r} is not implemented by helmop (cloud workload "
                                            "identities); give credentials in spec.secretRef")
    refuse_workload_identity(spec)


def parse_helm_repository(spec: dict[str, Any]) -> HelmRepositorySpec:
    check_references(spec)
    generic_identity_only(spec)
    url = str(spec.get("url") or "").rstrip("/")
    kind = str(spec.get("type") or "default")
    if kind not in ("default", "oci"):
        raise SpecError("InvalidSpec", f"spec.type must be default or oci, not {kind!r}")
    if kind == "oci" and not url.startswith("oci://"):
        raise SpecError("InvalidSpec", f"spec.url {url!r} must be an oci:// URL with type oci")
    if kind == "default" and not re.match(r"^https?://[^\s/]+", url):
        raise SpecError("InvalidSpec", f"spec.url {url!r} must be an http(s):// URL (or set type: oci)")
    return HelmRepositorySpec(url=url, oci=kind == "oci", secret_ref=ref_name(spec, "secretRef"),
                              cert_secret_ref=ref_name(spec, "certSecretRef"),
                              interval=seconds(spec, "interval", SOURCE_INTERVAL),
                              timeout=seconds(spec, "timeout", 60.0), insecure=flag(spec, "insecure"),
                              suspend=flag(spec, "suspend"), pass_credentials=flag(spec, "passCredentials"),
                              access_from=access_from_selectors(spec.get("accessFrom")))


def grants(selectors: tuple[tuple[tuple[str, str], ...], ...], labels: Mapping[str, str]) -> bool:
    """Whether spec.accessFrom's ``selectors`` let a namespace with ``labels`` name an object (an empty one: any)."""
    return any(all(labels.get(k) == v for k, v in selector) for selector in selectors)


def access_from_selectors(raw: Any) -> tuple[tuple[tuple[str, str], ...], ...] | None:
    if raw is None:
        return None
    selectors = raw.get("namespaceSelectors") if isinstance(raw, dict) else None
    if not isinstance(selectors, list) or len(selectors) > 100:
        raise SpecError("InvalidSpec", "spec.accessFrom.namespaceSelectors must be a list of at most 100 selectors")
    out = []
    for i, selector in enumerate(selectors):
        labels = (selector or {}).get("matchLabels") or {} if isinstance(selector, dict) else None
        if not isinstance(labels, dict):
            raise SpecError("InvalidSpec", f"spec.accessFrom.namespaceSelectors[{i}].matchLabels must be a map")
        out.append(tuple(sorted((str(k), str(v)) for k, v in labels.items())))
    return tuple(out)


def parse_oci_repository(spec: dict[str, Any]) -> OCIRepositorySpec:
    check_references(spec)
    generic_identity_only(spec)
    url = text(spec, "url").rstrip("/")
    if not url.startswith("oci://") or not _URL.match(url):
        raise SpecError("InvalidSpec", f"spec.url {url!r} must be an oci:// URL")
    ref = _oci_ref(spec)
    selector = _layer_selector(spec)
    semver_filter = text(ref, "semverFilter")
    if semver_filter:
        compile_pattern(semver_filter, "spec.ref.semverFilter")
    return OCIRepositorySpec(url=url, tag=text(ref, "tag", "latest"), semver=text(ref, "semver"),
                             digest=text(ref, "digest"), semver_filter=semver_filter,
                             media_type=text(selector, "mediaType"), operation=text(selector, "operation", "extract"),
                             ignore=optional_text(spec, "ignore"),
                             secret_ref=ref_name(spec, "secretRef"), cert_secret_ref=ref_name(spec, "certSecretRef"),
                             proxy_secret_ref=ref_name(spec, "proxySecretRef"),
                             interval=seconds(spec, "interval", SOURCE_INTERVAL),
                             timeout=seconds(spec, "timeout", 60.0), insecure=flag(spec, "insecure"),
                             suspend=flag(spec, "suspend"),
                             verify=parse_verification(spec.get("verify"), "spec.verify"))


def _oci_ref(spec: dict[str, Any]) -> dict[str, Any]:
    """spec.ref, its digest checked."""
    ref = spec.get("ref") or {}
    if not isinstance(ref, dict):
        raise SpecError("InvalidSpec", "spec.ref must be a map")
    digest = text(ref, "digest")
    if digest and not _DIGEST.match(digest):
        raise SpecError("InvalidSpec", f"spec.ref.digest {digest[:80]!r} must be sha256:<64 hex characters>")
    return ref


def _layer_selector(spec: dict[str, Any]) -> dict[str, Any]:
    """spec.layerSelector, its operation checked."""
    selector = spec.get("layerSelector") or {}
    if not isinstance(selector, dict):
        raise SpecError("InvalidSpec", "spec.layerSelector must be a map")
    operation = text(selector, "operation", "extract")
    if operation not in ("copy", "extract"):
        raise SpecError("InvalidSpec", f"spec.layerSelector.operation must be copy or extract, not {operation!r}")
    return selector
