"""GitRepository and ConfigSync specs (helmop.dev/v1alpha1), parsed and validated. A ConfigSync takes
the fields of Flux's Kustomization that shape the kustomize build and substitute variables after it, with
Flux's names."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from typing import Any

from .decryption import Decryption, parse_decryption
from .dependencies import Dependency, dependencies
from .durations import duration_field
from .errors import SpecError
from .fields import name_in, optional_list, refuse_workload_identity, seconds
from .gitrefs import GitRef
from .helmrelease import HealthExpr, health_exprs
from .ignorerules import IgnoreRule, parse_ignore_rules
from .kubeconfigs import KubeConfigRef, parse_ref
from .names import check_references, problem
from .objects import ObjectRef
from .settings import SOURCE_INTERVAL
from .substitution import SubstitutionError, check_names

DEFAULT_INTERVAL = SOURCE_INTERVAL


@dataclass(frozen=True)
class Include:
    """spec.include: another GitRepository's artifact (of this namespace) copied into this one."""

    repository: str
    from_path: str = ""  # "" = its root
    to_path: str = ""  # "" = the repository's name

    @property
    def target(self) -> str:
        return self.to_path or self.repository


GIT_PROVIDERS = ("generic", "github")
CLOUD_PROVIDERS = ("azure", "aws", "gcp")  # their workload identities are refused by name


@dataclass(frozen=True)
class GitRepositorySpec:
    url: str
    ref: GitRef = field(default_factory=GitRef)  # spec.ref
    interval: float = DEFAULT_INTERVAL
    timeout: float = 60.0
    secret_ref: str = ""
    webhook_secret_ref: str = ""
    suspend: bool = False
    verify_mode: str = ""  # spec.verify: HEAD, Tag or TagAndHEAD ("": nothing verified)
    verify_secret_ref: str = ""  # the Secret of the trusted public keys
    ignore: str | None = None  # gitignore patterns over the artifact (None: not set, Flux's defaults apply)
    include: tuple[Include, ...] = ()
    recurse_submodules: bool = False
    sparse_checkout: tuple[str, ...] = ()  # folders, root-relative
    proxy_secret_ref: str = ""  # an HTTP(S) proxy: the Secret's address, username, password
    provider: str = "generic"  # github: a GitHub App's installation token from secretRef


PATCH_TARGET = ("group", "version", "kind", "name", "namespace", "labelSelector", "annotationSelector")
IMAGE_FIELDS = ("name", "newName", "newTag", "digest")


@dataclass(frozen=True)
class Patch:
    patch: str  # a strategic merge patch (a map) or a JSON 6902 patch (a list of operations), as YAML
    target: tuple[tuple[str, str], ...] = ()  # PATCH_TARGET selectors


@dataclass(frozen=True)
class Build:
    """What the kustomize build adds, as Flux's Kustomization says it (an overlay over spec.path)."""

    patches: tuple[Patch, ...] = ()
    images: tuple[tuple[tuple[str, str], ...], ...] = ()  # IMAGE_FIELDS of each
    name_prefix: str = ""
    name_suffix: str = ""
    components: tuple[str, ...] = ()  # relative to spec.path
    namespace: str = ""  # spec.targetNamespace, which Flux's build sets on every namespaced object
    build_metadata: tuple[str, ...] = ()  # kustomize's buildMetadata: BUILD_METADATA
    ignore_missing_components: bool = False  # components that do not exist are left out

    def __bool__(self) -> bool:
        """Whether the build adds anything to what the folder says (a kustomization of helmop's over it)."""
        return bool(self.patches or self.images or self.name_prefix or self.name_suffix or self.components
                    or self.namespace or self.build_metadata)


BUILD_METADATA = ("originAnnotations", "transformerAnnotations")


@dataclass(frozen=True)
class VariablesRef:
    kind: str  # ConfigMap | Secret
    name: str
    optional: bool = False


@dataclass(frozen=True)
class PostBuild:
    substitute: tuple[tuple[str, str], ...] = ()
    substitute_from: tuple[VariablesRef, ...] = ()
    always: bool = False  # substituteStrategy Always: even without variables (for ${var:=default})


DELETION_POLICIES = ("MirrorPrune", "Delete", "WaitForTermination", "Orphan")


# what a ConfigSync's sourceRef may name
CONFIG_SOURCES = ("GitRepository", "OCIRepository", "Bucket", "ExternalArtifact")


@dataclass(frozen=True)
class ConfigSyncSpec:
    source_name: str
    path: str
    source_namespace: str = ""  # "" = the ConfigSync's
    source_kind: str = "GitRepository"
    service_account_name: str = ""
    target_namespace: str = ""
    interval: float = DEFAULT_INTERVAL
    prune: bool = True
    suspend: bool = False
    build: Build = field(default_factory=Build)
    post_build: PostBuild = field(default_factory=PostBuild)
    common_labels: tuple[tuple[str, str], ...] = ()  # spec.commonMetadata, set on every object after the build
    common_annotations: tuple[tuple[str, str], ...] = ()
    depends_on: tuple[Dependency, ...] = ()  # what must be ready first (ConfigSyncs, or objects of any kind)
    wait: bool = False  # every applied object must become healthy (healthChecks is then ignored)
    health_checks: tuple[ObjectRef, ...] = ()
    health_check_exprs: tuple[HealthExpr, ...] = ()
    timeout: float = 0.0  # 0: the interval, as Flux
    retry_interval: float = 0.0  # 0: the failure backoff
    force: bool = False  # recreate objects whose immutable fields changed
    deletion_policy: str = "MirrorPrune"
    decryption: Decryption | None = None  # SOPS-encrypted files decrypted (spec.decryption)
    ignore: tuple[IgnoreRule, ...] = ()  # fields server-side apply leaves to others (spec.ignore)
    kube_config: KubeConfigRef | None = None  # the remote cluster applied to (None: the operator's own)

    @property
    def deadline(self) -> float:
        """Seconds any one operation may take: spec.timeout, else the interval (Flux's default)."""
        return self.timeout or self.interval

    @property
    def prunes_on_deletion(self) -> bool:
        return self.deletion_policy in ("Delete", "WaitForTermination") or (
            self.deletion_policy == "MirrorPrune" and self.prune)


def parse_git_repository(spec: dict[str, Any]) -> GitRepositorySpec:
    check_references(spec)
    url = str(spec.get("url") or "")
    if not url:
        raise SpecError("InvalidSpec", "spec.url is required")
    ref = spec.get("ref") or {}
    if not isinstance(ref, dict):
        raise SpecError("InvalidSpec", "spec.ref must be a map")
    secret = spec.get("secretRef") or {}
    webhook = spec.get("webhook")
    hook_secret = (webhook.get("secretRef") or {}) if isinstance(webhook, dict) else {}
    ignore = spec.get("ignore")
    return GitRepositorySpec(
        url=url, ref=GitRef(branch=str(ref.get("branch") or ""), tag=str(ref.get("tag") or ""),
                            semver=str(ref.get("semver") or ""), commit=str(ref.get("commit") or ""),
                            name=str(ref.get("name") or "")),
        interval=seconds(spec, "interval", DEFAULT_INTERVAL), timeout=seconds(spec, "timeout", 60.0),
        secret_ref=str(secret.get("name", "")) if isinstance(secret, dict) else "",
        webhook_secret_ref=str(hook_secret.get("name", "")) if isinstance(hook_secret, dict) else "",
        suspend=bool(spec.get("suspend", False)), ignore=None if ignore is None else str(ignore),
        include=_includes(spec.get("include")), recurse_submodules=bool(spec.get("recurseSubmodules", False)),
        sparse_checkout=tuple(relative_path(p, f"spec.sparseCheckout[{i}]", folder=True)
                              for i, p in enumerate(_string_list(spec, "sparseCheckout"))),
        proxy_secret_ref=name_in(spec, "proxySecretRef"), provider=_git_provider(spec), **_verify(spec))


def _git_provider(spec: dict[str, Any]) -> str:
    provider = str(spec.get("provider") or "generic")
    if provider in CLOUD_PROVIDERS:
        raise SpecError("UnsupportedField", f"spec.provider {provider}: the cloud's workload identity is not "
                                            "obtained by helmop; give credentials in spec.secretRef")
    if provider not in GIT_PROVIDERS:
        raise SpecError("InvalidSpec", f"spec.provider must be one of {', '.join(GIT_PROVIDERS)}")
    refuse_workload_identity(spec)
    if provider == "github" and not name_in(spec, "secretRef"):
        raise SpecError("InvalidSpec", "spec.provider github needs spec.secretRef: a Secret with the GitHub App's "
                                       "githubAppID, githubAppInstallationID and githubAppPrivateKey")
    return provider


def _includes(raw: Any) -> tuple[Include, ...]:
    out = []
    for i, item in enumerate(optional_list(raw, "spec.include")):
        repository = (item.get("repository") or {}) if isinstance(item, dict) else {}
        name = str(repository.get("name") or "") if isinstance(repository, dict) else ""
        if not name:
            raise SpecError("InvalidSpec", f"spec.include[{i}].repository.name is required")
        if problem(name):  # a name the API refuses ("..") would bend the request path, and be the mount folder
            raise SpecError("InvalidSpec", f"spec.include[{i}].repository.name: {name[:80]!r} {problem(name)}")
        include = Include(name, relative_path(item.get("fromPath"), f"spec.include[{i}].fromPath"),
                          relative_path(item.get("toPath"), f"spec.include[{i}].toPath"))
        if not include.target:
            raise SpecError("InvalidSpec", f"spec.include[{i}].toPath may not be the repository's root")
        out.append(include)
    return tuple(out)


def relative_path(raw: Any, where: str, *, folder: bool = False, reason: str = "InvalidSpec") -> str:
    """A path inside an artifact, root-relative ("" for the root); SpecError (``reason``) when it would leave it."""
    text = str(raw or "").strip()
    if text.startswith("/") or "\0" in text or "\\" in text:
        raise SpecError(reason, f"{where} must be a relative path inside the artifact")
    normal = posixpath.normpath(text or ".")
    if normal == ".." or normal.startswith("../"):
        raise SpecError(reason, f"{where} leaves the artifact")
    if folder and normal == ".":
        raise SpecError("InvalidSpec", f"{where} must name a folder, not the root")
    return "" if normal == "." else normal


def _string_list(spec: dict[str, Any], key: str) -> list[str]:
    raw = spec.get(key) or []
    if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
        raise SpecError("InvalidSpec", f"spec.{key} must be a list of strings")
    return list(raw)


def _verify(spec: dict[str, Any]) -> dict[str, str]:
    """spec.verify as the spec's fields (Flux's ``head`` is ``HEAD``)."""
    raw = spec.get("verify")
    if raw is None:
        return {}
    secret = raw.get("secretRef") if isinstance(raw, dict) else None
    if not isinstance(secret, dict) or not secret.get("name"):
        raise SpecError("InvalidSpec", "spec.verify.secretRef.name is required")
    mode = str(raw.get("mode") or "HEAD")
    mode = "HEAD" if mode == "head" else mode
    if mode not in ("HEAD", "Tag", "TagAndHEAD"):
        raise SpecError("InvalidSpec", "spec.verify.mode must be HEAD, Tag or TagAndHEAD")
    return {"verify_mode": mode, "verify_secret_ref": str(secret["name"])}


def parse_config_sync(spec: dict[str, Any], name: str = "", namespace: str = "", own_kind: str = "ConfigSync",
                      own_group: str = "") -> ConfigSyncSpec:
    """A ConfigSync's spec, or a Flux Kustomization's (``own_kind``, of API ``own_group`` when known: what a dependsOn
    entry of the same kind names)."""
    """``name`` and ``namespace``: the ConfigSync's (what dependsOn may not name, and its default namespace)."""
    check_references(spec)
    source = spec.get("sourceRef") or {}
    if not isinstance(source, dict) or not source.get("name"):
        raise SpecError("InvalidSpec", "spec.sourceRef.name is required")
    kind = str(source.get("kind") or "GitRepository")
    if kind not in CONFIG_SOURCES:
        raise SpecError("InvalidSpec", f"spec.sourceRef.kind must be one of {', '.join(CONFIG_SOURCES)}, not "
                                       f"{kind[:60]!r}")
    target_namespace = str(spec.get("targetNamespace") or "")
    metadata = _map(spec, "commonMetadata")
    policy = str(spec.get("deletionPolicy") or "MirrorPrune")
    # checked here, kept as written (Flux's "./apps"); InvalidPath as for any path that leaves a source's tree
    relative_path(spec.get("path"), "spec.path", reason="InvalidPath")
    if policy not in DELETION_POLICIES:
        raise SpecError("InvalidSpec", f"spec.deletionPolicy must be one of {', '.join(DELETION_POLICIES)}")
    return ConfigSyncSpec(source_name=str(source["name"]), path=str(spec.get("path") or ""),
                          source_namespace=str(source.get("namespace") or ""), source_kind=kind,
                          service_account_name=str(spec.get("serviceAccountName") or ""),
                          target_namespace=target_namespace,
                          interval=seconds(spec, "interval", DEFAULT_INTERVAL), prune=bool(spec.get("prune", True)),
                          suspend=bool(spec.get("suspend", False)), build=_build(spec, target_namespace),
                          post_build=_post_build(spec),
                          common_labels=_strings(metadata, "labels", "spec.commonMetadata.labels"),
                          common_annotations=_strings(metadata, "annotations", "spec.commonMetadata.annotations"),
                          depends_on=dependencies(spec.get("dependsOn"), name, namespace, own_kind, own_group),
                          wait=bool(spec.get("wait", False)),
                          health_checks=_health_checks(spec),
                          health_check_exprs=health_exprs(spec.get("healthCheckExprs")),
                          timeout=duration_field(spec, "timeout", 0.0) or 0.0,
                          retry_interval=duration_field(spec, "retryInterval", 0.0) or 0.0,
                          force=bool(spec.get("force", False)), deletion_policy=policy,
                          decryption=parse_decryption(spec), ignore=parse_ignore_rules(spec.get("ignore")),
                          kube_config=parse_ref(spec.get("kubeConfig")))


def _health_checks(spec: dict[str, Any]) -> tuple[ObjectRef, ...]:
    out = []
    for i, item in enumerate(_list(spec, "healthChecks", "spec.healthChecks")):
        if not isinstance(item, dict) or not item.get("kind") or not item.get("name"):
            raise SpecError("InvalidSpec", f"spec.healthChecks[{i}] needs kind and name")
        out.append(ObjectRef(api_version=str(item.get("apiVersion") or "v1"), kind=str(item["kind"]),
                             name=str(item["name"]), namespace=str(item.get("namespace") or "")))
    return tuple(out)


def _map(spec: dict[str, Any], key: str, where: str = "") -> dict[str, Any]:
    value = spec.get(key) or {}
    if not isinstance(value, dict):
        raise SpecError("InvalidSpec", f"{where or 'spec.' + key} must be a map")
    return value


def _list(spec: dict[str, Any], key: str, where: str) -> list[Any]:
    value = spec.get(key) or []
    if not isinstance(value, list):
        raise SpecError("InvalidSpec", f"{where} must be a list")
    return value


def _strings(spec: dict[str, Any], key: str, where: str) -> tuple[tuple[str, str], ...]:
    return tuple((str(k), str(v)) for k, v in _map(spec, key, where).items())


def _relative(path: str, where: str) -> str:
    """A path inside the repository, relative to spec.path (no URL, not absolute)."""
    if not path or path.startswith("/") or "://" in path or "\\" in path or "\0" in path:
        raise SpecError("InvalidSpec", f"{where}: {path[:200]!r} is not a relative path in the repository")
    return posixpath.normpath(path)


def _build(spec: dict[str, Any], target_namespace: str) -> Build:
    patches, images = _patches(spec), _images(spec)
    components = tuple(_relative(str(c), f"spec.components[{i}]")
                       for i, c in enumerate(_list(spec, "components", "spec.components")))
    metadata = _list(spec, "buildMetadata", "spec.buildMetadata")
    unknown = [str(m) for m in metadata if m not in BUILD_METADATA]
    if unknown:
        raise SpecError("InvalidSpec", f"spec.buildMetadata: {unknown[0][:60]!r} is not one of "
                                       f"{', '.join(BUILD_METADATA)}")
    return Build(patches=patches, images=images, name_prefix=str(spec.get("namePrefix") or ""),
                 name_suffix=str(spec.get("nameSuffix") or ""), components=components, namespace=target_namespace,
                 build_metadata=tuple(dict.fromkeys(str(m) for m in metadata)),
                 ignore_missing_components=bool(spec.get("ignoreMissingComponents", False)))


def _patches(spec: dict[str, Any]) -> tuple[Patch, ...]:
    patches = []
    for i, item in enumerate(_list(spec, "patches", "spec.patches")):
        where = f"spec.patches[{i}]"
        if not isinstance(item, dict) or not isinstance(item.get("patch"), str) or not item["patch"].strip():
            raise SpecError("InvalidSpec", f"{where}.patch must be a strategic merge or JSON 6902 patch (YAML text)")
        target = _map(item, "target", f"{where}.target")
        _known(target, PATCH_TARGET, f"{where}.target")
        patches.append(Patch(item["patch"], tuple((k, str(target[k])) for k in PATCH_TARGET if target.get(k))))
    return tuple(patches)


def _images(spec: dict[str, Any]) -> tuple[tuple[tuple[str, str], ...], ...]:
    images = []
    for i, item in enumerate(_list(spec, "images", "spec.images")):
        if not isinstance(item, dict) or not item.get("name") or not (set(item) - {"name"}):
            raise SpecError("InvalidSpec", f"spec.images[{i}] needs a name and newName, newTag or digest")
        _known(item, IMAGE_FIELDS, f"spec.images[{i}]")
        images.append(tuple((k, str(item[k])) for k in IMAGE_FIELDS if item.get(k)))
    return tuple(images)


def _known(item: dict[str, Any], fields: tuple[str, ...], where: str) -> None:
    unknown = sorted(set(item) - set(fields))
    if unknown:
        raise SpecError("InvalidSpec", f"{where}: unknown field(s) {', '.join(unknown)}")


def _post_build(spec: dict[str, Any]) -> PostBuild:
    post = _map(spec, "postBuild")
    substitute = _strings(post, "substitute", "spec.postBuild.substitute")
    try:
        check_names(dict(substitute))
    except SubstitutionError as exc:
        raise SpecError("InvalidSpec", f"spec.postBuild.substitute: {exc}") from None
    refs = []
    for i, item in enumerate(_list(post, "substituteFrom", "spec.postBuild.substituteFrom")):
        if not isinstance(item, dict) or item.get("kind") not in ("ConfigMap", "Secret") or not item.get("name"):
            raise SpecError("InvalidSpec", f"spec.postBuild.substituteFrom[{i}] needs kind (ConfigMap or Secret) "
                                           "and name")
        refs.append(VariablesRef(str(item["kind"]), str(item["name"]), bool(item.get("optional", False))))
    strategy = str(post.get("substituteStrategy") or "WithVariables")
    if strategy not in ("WithVariables", "Always"):
        raise SpecError("InvalidSpec", "spec.postBuild.substituteStrategy must be WithVariables or Always")
    return PostBuild(substitute=substitute, substitute_from=tuple(refs), always=strategy == "Always")
