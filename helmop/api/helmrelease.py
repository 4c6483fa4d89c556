"""The HelmRelease spec (helmop.dev/v1alpha1): parsed into typed, validated values.

Field names follow Flux's helm-controller where it has one. The CRD's schema already rejects
wrong types; this module adds what a schema cannot say (exactly one chart source, durations,
release-name rules) and fills in defaults, raising :class:`SpecError` with the field at fault.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from . import yamlc
from .decryption import Decryption, parse_decryption
from .dependencies import Dependency, dependencies
from .durations import duration_field
from .errors import SpecError
from .fields import flag, text
from .kubeconfigs import KubeConfigRef, parse_ref
from .names import check_references
from .repositories import Verification, parse_verification
from .selectors import Selector, parse_selector
from .settings import RELEASE_INTERVAL

DEFAULT_INTERVAL = RELEASE_INTERVAL  # 10m
DEFAULT_TIMEOUT = 300.0  # 5m, as helm
DEFAULT_MAX_HISTORY = 5
_RELEASE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


@dataclass(frozen=True)
class RepositoryChart:
    """A chart from an HTTP(S) Helm repository (``url`` + ``name``) or an ``oci://`` reference."""

    url: str
    name: str
    version: str  # an exact version or a constraint ("^1.2", ">=1.0 <2.0"); "" = latest stable
    secret_ref: str = ""
    insecure: bool = False  # OCI over plain HTTP / HTTPS without verification (local registries)


@dataclass(frozen=True)
class SourceChart:
    """A chart at ``path`` in a source (a GitRepository or a Bucket), resolved by the sources layer."""

    kind: str
    name: str
    path: str
    values_files: tuple[str, ...] = ()
    namespace: str = ""  # of the source; "" = the HelmRelease's
    # Revision: any change of the chart's files deploys; ChartVersion (Flux's default for chart.spec): only a
    # new version in Chart.yaml (or new values files) does
    reconcile_strategy: str = "Revision"
    ignore_missing_values_files: bool = False


@dataclass(frozen=True)
class SharedRepositoryChart:
    """spec.chart.spec with a HelmRepository: a chart by name and version from a repository declared once and
    fetched once per interval for every release that names it."""

    repository: str  # the HelmRepository's name
    chart: str
    version: str = ""  # an exact version or a constraint; "" = the latest stable
    namespace: str = ""  # of the HelmRepository; "" = the HelmRelease's
    values_files: tuple[str, ...] = ()  # files of the chart archive, merged in order under spec.values
    ignore_missing_values_files: bool = False
    verify: Verification | None = None  # its signature, from an OCI HelmRepository


@dataclass(frozen=True)
class ArtifactChart:
    """spec.chartRef: the chart a source object resolved: an OCIRepository's artifact, a HelmChart's."""

    name: str
    namespace: str = ""  # of the source; "" = the HelmRelease's
    kind: str = "OCIRepository"  # CHART_REFS


Chart = RepositoryChart | SourceChart | SharedRepositoryChart | ArtifactChart


@dataclass(frozen=True)
class ValuesReference:
    kind: str  # ConfigMap | Secret
    name: str
    values_key: str = "values.yaml"
    target_path: str = ""
    optional: bool = False
    literal: bool = False  # the value at target_path is the string as it is (helm's --set-literal)


VALUES_FILE_SOURCES = ("GitRepository", "OCIRepository", "Bucket", "ExternalArtifact")  # what spec.valuesFiles reads
MAX_VALUES_FILES = 16


@dataclass(frozen=True)
class ValuesFile:
    """spec.valuesFiles[]: a values file of a source's artifact, read at the revision the source published."""

    kind: str  # VALUES_FILE_SOURCES
    name: str
    path: str  # relative to the artifact's root, inside it
    namespace: str = ""  # of the source; "" = the HelmRelease's
    optional: bool = False  # a missing file is skipped rather than refused (ValuesFileNotFound)

    def describe(self, namespace: str) -> str:
        """The file as a message names it: ``path`` of ``kind namespace/name``."""
        return f"{self.path!r} of {self.kind} {self.namespace or namespace}/{self.name}"


CRD_POLICIES = ("Skip", "Create", "CreateReplace")
PROPAGATIONS = ("background", "foreground", "orphan")


DEFAULT_RETRY_INTERVAL = 300.0  # 5m, Flux's spec.<action>.strategy.retryInterval


@dataclass(frozen=True)
class Remediation:
    """What happens when an install or upgrade fails (Flux's field names and defaults): remediated
    (RemediateOnFailure, spec.<action>.remediation), or tried again as it is (RetryOnFailure)."""

    retries: int = 0  # retries of a failed action with the same configuration; negative: forever
    ignore_test_failures: bool = False
    remediate_last_failure: bool = False  # also remediate once the retries are used up
    strategy: str = "rollback"  # upgrades only: rollback | uninstall
    retry: bool = False  # spec.<action>.strategy.name RetryOnFailure: no remediation, another try, never stalled
    retry_interval: float = DEFAULT_RETRY_INTERVAL

    def exhausted(self, failures: int) -> bool:
        return self.retries >= 0 and failures > self.retries


# One type per action, with the fields the CRD gives that action (spec.install, .upgrade, .rollback,
# .uninstall): a rollback has no CRD policy, an uninstall no remediation. What several actions have is
# declared once, in a base (ActionOptions, ReplaceOptions).


SSA_MODES = ("enabled", "disabled", "auto")  # spec.upgrade/rollback.serverSideApply (Flux's words, not booleans)
NAME_CHANGE_STRATEGIES = ("Reinstall", "InPlaceUpdate")


@dataclass(frozen=True)
class ActionOptions:
    """The fields of the actions that render and apply a chart: install, upgrade and rollback."""

    disable_hooks: bool = False
    disable_wait: bool = False
    disable_wait_for_jobs: bool = False
    timeout: float | None = None


@dataclass(frozen=True)
class InstallOptions(ActionOptions):
    create_namespace: bool = False
    remediation: Remediation = Remediation()
    crds: str = "Create"  # Skip | Create | CreateReplace
    server_side_apply: str = "enabled"  # enabled | disabled (helm 4; helm 3 applies client-side)
    take_ownership: bool = True  # Flux's default: objects without the release's ownership are adopted
    schema_validation: bool = True


@dataclass(frozen=True)
class ReplaceOptions(ActionOptions):
    """The fields of the actions that replace a release's objects by another revision's: upgrade and rollback."""

    force: bool = False
    cleanup_on_fail: bool = False


@dataclass(frozen=True)
class UpgradeOptions(ReplaceOptions):
    remediation: Remediation = Remediation()
    crds: str = "Skip"  # Skip | Create | CreateReplace
    server_side_apply: str = "auto"  # SSA_MODES; auto: as the release's last revision was applied
    take_ownership: bool = True
    schema_validation: bool = True
    preserve_values: bool = False  # helm's --reuse-values: the last release's values, spec values merged over
    chart_name_change: str = "Reinstall"  # NAME_CHANGE_STRATEGIES


@dataclass(frozen=True)
class RollbackOptions(ReplaceOptions):
    server_side_apply: str = "auto"
    recreate: bool = False  # helm 3's --recreate-pods (helm 4 has none: said in status)


@dataclass(frozen=True)
class UninstallOptions:
    disable_hooks: bool = False
    disable_wait: bool = False
    timeout: float | None = None
    keep_history: bool = False
    deletion_propagation: str = "background"  # background | foreground | orphan


@dataclass(frozen=True)
class TestOptions:
    enable: bool = False
    timeout: float | None = None
    ignore_failures: bool = False
    filters: tuple[tuple[str, bool], ...] = ()  # (test name, exclude)


@dataclass(frozen=True)
class HealthExpr:
    """spec.healthCheckExprs[]: CEL expressions over ``self`` (the object) for one apiVersion/kind."""

    api_version: str
    kind: str
    current: str = ""
    in_progress: str = ""
    failed: str = ""


@dataclass(frozen=True)
class HelmReleaseSpec:
    chart: Chart
    release_name: str
    target_namespace: str
    storage_namespace: str
    values: dict[str, Any] = field(default_factory=dict)
    values_from: tuple[ValuesReference, ...] = ()
    # merged after the chart's values (and its spec.chart.spec.valuesFiles), before valuesFrom and values
    values_files: tuple[ValuesFile, ...] = ()
    interval: float = DEFAULT_INTERVAL
    suspend: bool = False
    timeout: float = DEFAULT_TIMEOUT
    max_history: int = DEFAULT_MAX_HISTORY
    install: InstallOptions = InstallOptions()
    upgrade: UpgradeOptions = UpgradeOptions()
    uninstall: UninstallOptions = UninstallOptions()
    rollback: RollbackOptions = RollbackOptions()
    test: TestOptions = TestOptions()
    service_account_name: str = ""
    depends_on: tuple[Dependency, ...] = ()  # what must be ready first (HelmReleases, or objects of any kind)
    health_check_exprs: tuple[HealthExpr, ...] = ()
    # commonMetadata and postRenderers, as helmop's post-renderer takes them ({} when there are none):
    # {"labels": {...}, "annotations": {...}, "patches": [{"target": {...}, "patch": "<yaml>"}]}
    post_render: dict[str, Any] = field(default_factory=dict)
    drift_mode: str = "disabled"  # enabled | warn | disabled
    drift_ignore: tuple[tuple[tuple[str, ...], Selector], ...] = ()  # (JSON pointers, target)
    wait_strategy: str = "poller"  # poller: helmop judges readiness (kstatus, healthCheckExprs); legacy: helm's wait
    # fields that mean something with one helm major only: (field, major), said in status with the other
    helm_major_fields: tuple[tuple[str, int], ...] = ()
    kube_config: KubeConfigRef | None = None  # the remote cluster released to (None: the operator's own)
    decryption: Decryption | None = None  # SOPS-encrypted values files and valuesFrom entries decrypted


def default_release_name(name: str, target_namespace: str, namespace: str) -> str:
    """Flux's rule: ``[<targetNamespace>-]<name>``, and past 53 characters (helm's limit) the first
    40 characters, a dash and 12 hex characters of the full name's SHA-256."""
    full = f"{target_namespace}-{name}" if target_namespace and target_namespace != namespace else name
    if len(full) <= 53:
        return full
    return f"{full[:40]}-{hashlib.sha256(full.encode()).hexdigest()[:12]}"


def _remediation(raw: dict[str, Any], strategy: Any, where: str, tests_ignored: bool, upgrade: bool) -> Remediation:
    retries = int(raw.get("retries", 0))
    kind = str(raw.get("strategy") or "rollback")
    if upgrade and kind not in ("rollback", "uninstall"):
        raise SpecError("InvalidSpec", f"{where}.remediation.strategy must be rollback or uninstall, not {kind!r}")
    last = raw.get("remediateLastFailure")
    ignore = raw.get("ignoreTestFailures")
    retry, interval = _strategy(strategy, f"{where}.strategy")
    return Remediation(retries=retries, strategy=kind, retry=retry, retry_interval=interval,
                       # Flux: remediate the last failure too, unless no retries were asked for
                       remediate_last_failure=bool(last) if last is not None else retries > 0,
                       ignore_test_failures=bool(ignore) if ignore is not None else tests_ignored)


def _strategy(raw: Any, where: str) -> tuple[bool, float]:
    """spec.<action>.strategy: (retry on failure, its interval)."""
    raw = raw or {}
    name = str(raw.get("name") or "RemediateOnFailure")
    if name not in ("RemediateOnFailure", "RetryOnFailure"):
        raise SpecError("InvalidSpec", f"{where}.name must be RemediateOnFailure or RetryOnFailure, not {name[:60]!r}")
    if name == "RemediateOnFailure" and raw.get("retryInterval"):
        raise SpecError("InvalidSpec", f"{where}.retryInterval can only be set when {where}.name is 'RetryOnFailure'")
    interval = duration_field(raw, "retryInterval", DEFAULT_RETRY_INTERVAL, where) or DEFAULT_RETRY_INTERVAL
    return name == "RetryOnFailure", interval


def _crds(raw: dict[str, Any], where: str, default: str) -> str:
    policy = str(raw.get("crds") or default)
    if policy not in CRD_POLICIES:
        raise SpecError("InvalidSpec", f"{where}.crds must be one of {', '.join(CRD_POLICIES)}, not {policy!r}")
    return policy


def _ssa(raw: dict[str, Any], where: str) -> str:
    mode = str(raw.get("serverSideApply") or "auto")
    if mode not in SSA_MODES:
        raise SpecError("InvalidSpec", f"{where}.serverSideApply must be one of {', '.join(SSA_MODES)}, not "
                                       f"{mode[:60]!r}")
    return mode


def _common(raw: dict[str, Any], where: str) -> dict[str, Any]:
    """The fields every action has."""
    return {"disable_hooks": bool(raw.get("disableHooks", False)), "disable_wait": bool(raw.get("disableWait", False)),
            "timeout": duration_field(raw, "timeout", None, where)}


def _changes(raw: dict[str, Any]) -> dict[str, Any]:
    """The fields install and upgrade share with each other (and rollback, its wait for Jobs)."""
    return {"disable_wait_for_jobs": bool(raw.get("disableWaitForJobs", False)),
            "take_ownership": not raw.get("disableTakeOwnership", False),
            "schema_validation": not raw.get("disableSchemaValidation", False)}


def _replacing(raw: dict[str, Any]) -> dict[str, Any]:
    """The fields upgrade and rollback share with each other."""
    return {"force": flag(raw, "force"), "cleanup_on_fail": flag(raw, "cleanupOnFail")}


def _install(raw: Any, tests_ignored: bool) -> InstallOptions:
    raw, where = raw or {}, "spec.install"
    ssa = raw.get("serverSideApply")
    # skipCRDs: Flux's deprecated spelling of crds: Skip (which wins when both are given)
    crds = _crds(raw, where, "Skip" if raw.get("skipCRDs") else "Create")
    return InstallOptions(**_common(raw, where), **_changes(raw), create_namespace=bool(raw.get("createNamespace")),
                          remediation=_remediation(raw.get("remediation") or {}, raw.get("strategy"), where,
                                                   tests_ignored, upgrade=False),
                          crds=crds, server_side_apply="disabled" if ssa is False else "enabled")


def _upgrade(raw: Any, tests_ignored: bool) -> UpgradeOptions:
    raw, where = raw or {}, "spec.upgrade"
    change = str(raw.get("chartNameChangeStrategy") or "Reinstall")
    if change not in NAME_CHANGE_STRATEGIES:
        raise SpecError("InvalidSpec", f"{where}.chartNameChangeStrategy must be Reinstall or InPlaceUpdate")
    return UpgradeOptions(**_common(raw, where), **_changes(raw), **_replacing(raw),
                          remediation=_remediation(raw.get("remediation") or {}, raw.get("strategy"), where,
                                                   tests_ignored, upgrade=True),
                          crds=_crds(raw, where, "Skip"), server_side_apply=_ssa(raw, where),
                          preserve_values=bool(raw.get("preserveValues", False)), chart_name_change=change)


def _rollback(raw: Any) -> RollbackOptions:
    raw, where = raw or {}, "spec.rollback"
    return RollbackOptions(**_common(raw, where), **_replacing(raw),
                           disable_wait_for_jobs=bool(raw.get("disableWaitForJobs", False)),
                           server_side_apply=_ssa(raw, where), recreate=bool(raw.get("recreate", False)))


def _uninstall(raw: Any) -> UninstallOptions:
    raw = raw or {}
    propagation = str(raw.get("deletionPropagation") or "background")
    if propagation not in PROPAGATIONS:
        raise SpecError("InvalidSpec", f"spec.uninstall.deletionPropagation must be one of {', '.join(PROPAGATIONS)}, "
                                       f"not {propagation!r}")
    return UninstallOptions(**_common(raw, "spec.uninstall"), keep_history=bool(raw.get("keepHistory", False)),
                            deletion_propagation=propagation)


def _tests(raw: Any) -> TestOptions:
    raw = raw or {}
    filters = tuple((str(f.get("name") or ""), bool(f.get("exclude", False))) for f in raw.get("filters") or [])
    if any(not name for name, _ in filters):
        raise SpecError("InvalidSpec", "spec.test.filters[].name is required")
    return TestOptions(enable=bool(raw.get("enable", False)), timeout=duration_field(raw, "timeout", None, "spec.test"),
                       ignore_failures=bool(raw.get("ignoreFailures", False)), filters=filters)


def _chart(raw: Any, chart_ref: Any) -> Chart:
    if chart_ref:
        if raw:
            raise SpecError("InvalidSpec", "spec.chart and spec.chartRef are mutually exclusive")
        return _chart_ref(chart_ref)
    if not isinstance(raw, dict):
        raise SpecError("InvalidSpec", "spec.chart is required (or spec.chartRef)")
    if "spec" in raw:
        if set(raw) - {"spec", "metadata"}:  # metadata: of Flux's HelmChart object, which helmop does not make
            raise SpecError("InvalidSpec", "spec.chart.spec takes no sibling fields other than metadata")
        return chart_template(raw["spec"])
    repo: dict[str, Any] = raw.get("repository") or {}
    source: dict[str, Any] = raw.get("sourceRef") or {}
    if bool(repo) == bool(source):
        raise SpecError("InvalidSpec", "spec.chart needs exactly one source: spec, repository or sourceRef")
    if source:
        path = str(raw.get("path") or "")
        if not path:
            raise SpecError("InvalidSpec", "spec.chart.path is required with spec.chart.sourceRef")
        return SourceChart(kind=str(source.get("kind", "GitRepository")), name=str(source.get("name", "")),
                           namespace=str(source.get("namespace") or ""),
                           path=path, values_files=tuple(raw.get("valuesFiles") or ()))
    return _repository_chart(repo)


def _repository_chart(repo: dict[str, Any]) -> RepositoryChart:
    """spec.chart.repository: a chart by URL, without a HelmRepository."""
    url = str(repo.get("url") or "").rstrip("/")
    if not re.match(r"^(https?|oci)://[^\s/]+", url):
        raise SpecError("InvalidSpec", f"spec.chart.repository.url {url!r} must be an http(s):// or oci:// URL")
    name = str(repo.get("name") or "")
    if url.startswith("oci://"):
        name = name or url.rsplit("/", 1)[-1]
    elif not name:
        raise SpecError("InvalidSpec", "spec.chart.repository.name is required for an HTTP(S) repository")
    secret = (repo.get("secretRef") or {}).get("name", "")
    return RepositoryChart(url=url, name=name, version=str(repo.get("version") or "").strip(),
                           secret_ref=str(secret), insecure=bool(repo.get("insecure", False)))


# Fields of Flux's chart template this release does not implement: refused by name, never ignored.
STRATEGIES = ("ChartVersion", "Revision")


def chart_template(raw: Any, where: str = "spec.chart.spec") -> Chart:
    """spec.chart.spec, Flux's chart template (and a HelmChart's spec, ``where`` "spec"): a chart from a
    HelmRepository by name and version, or from a GitRepository or a Bucket by path."""
    if not isinstance(raw, dict):
        raise SpecError("InvalidSpec", f"{where} must be a map")
    chart = text(raw, "chart")
    source = raw.get("sourceRef") or {}
    if not chart or not isinstance(source, dict) or not source.get("name"):
        raise SpecError("InvalidSpec", f"{where} needs chart and sourceRef.name")
    kind = text(source, "kind")
    strategy = text(raw, "reconcileStrategy", "ChartVersion")
    if strategy not in STRATEGIES:
        raise SpecError("InvalidSpec", f"{where}.reconcileStrategy must be ChartVersion or Revision, not {strategy!r}")
    values_files = _values_files(raw)
    ignore_missing = flag(raw, "ignoreMissingValuesFiles")
    namespace = text(source, "namespace")
    version = text(raw, "version").strip()
    if kind == "HelmRepository":
        return SharedRepositoryChart(repository=str(source["name"]), chart=chart,
                                     version="" if version == "*" else version, namespace=namespace,
                                     values_files=values_files, ignore_missing_values_files=ignore_missing,
                                     verify=parse_verification(raw.get("verify"), f"{where}.verify", keyless=False))
    if raw.get("verify"):
        raise SpecError("UnsupportedField", f"{where}.verify is for charts from OCI HelmRepositories only (a "
                                            f"{kind or 'source'} chart has no signature to verify)")
    if kind in ("GitRepository", "Bucket"):
        return SourceChart(kind=kind, name=str(source["name"]), path=chart.removeprefix("./") or ".",
                           namespace=namespace, values_files=values_files, reconcile_strategy=strategy,
                           ignore_missing_values_files=ignore_missing)
    raise SpecError("UnsupportedSourceKind", f"{where}.sourceRef.kind {kind[:60]!r} is not supported: a chart "
                                             "comes from a HelmRepository, a GitRepository or a Bucket")

def _values_files(raw: dict[str, Any]) -> tuple[str, ...]:
    files = list(raw.get("valuesFiles") or [])
    if raw.get("valuesFile"):  # Flux's deprecated single file, placed before the list as Flux does
        files.insert(0, str(raw["valuesFile"]))
    return tuple(str(f) for f in files)


CHART_REFS = ("OCIRepository", "HelmChart", "ExternalArtifact")  # what spec.chartRef may name


def _chart_ref(raw: Any) -> ArtifactChart:
    if not isinstance(raw, dict) or not raw.get("name"):
        raise SpecError("InvalidSpec", "spec.chartRef needs kind and name")
    kind = str(raw.get("kind") or "")
    if kind not in CHART_REFS:
        raise SpecError("UnsupportedSourceKind", f"spec.chartRef.kind {kind[:60]!r} is not supported: helmop takes "
                                                 f"charts by reference from {' or '.join(CHART_REFS)}")
    return ArtifactChart(name=str(raw["name"]), namespace=str(raw.get("namespace") or ""), kind=kind)


def _values_from(raw: Any) -> tuple[ValuesReference, ...]:
    out = []
    for i, ref in enumerate(raw or []):
        kind = ref.get("kind")
        if kind not in ("ConfigMap", "Secret"):
            raise SpecError("InvalidSpec", f"spec.valuesFrom[{i}].kind must be ConfigMap or Secret, not {kind!r}")
        if not ref.get("name"):
            raise SpecError("InvalidSpec", f"spec.valuesFrom[{i}].name is required")
        out.append(ValuesReference(kind=kind, name=ref["name"], values_key=ref.get("valuesKey") or "values.yaml",
                                   target_path=ref.get("targetPath") or "", optional=bool(ref.get("optional")),
                                   literal=bool(ref.get("literal"))))
    return tuple(out)


def source_values_files(raw: Any) -> tuple[ValuesFile, ...]:
    """spec.valuesFiles: at most :data:`MAX_VALUES_FILES`, each a file of a source's artifact by a path that stays
    inside it (the tree readers refuse a link out of it when the file is read)."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise SpecError("InvalidSpec", "spec.valuesFiles must be a list")
    if len(raw) > MAX_VALUES_FILES:
        raise SpecError("InvalidSpec", f"spec.valuesFiles lists {len(raw)} files, more than {MAX_VALUES_FILES}")
    return tuple(_values_file(entry, f"spec.valuesFiles[{i}]") for i, entry in enumerate(raw))


def _values_file(raw: Any, where: str) -> ValuesFile:
    source = raw.get("sourceRef") if isinstance(raw, dict) else None
    if not isinstance(source, dict) or not source.get("name"):
        raise SpecError("InvalidSpec", f"{where} needs sourceRef.kind, sourceRef.name and path")
    kind = text(source, "kind")
    if kind not in VALUES_FILE_SOURCES:
        raise SpecError("UnsupportedSourceKind", f"{where}.sourceRef.kind {kind[:60]!r} is not supported: values "
                                                 f"files are read from {', '.join(VALUES_FILE_SOURCES)}")
    return ValuesFile(kind=kind, name=text(source, "name"), namespace=text(source, "namespace"),
                      path=_inside(text(raw, "path"), f"{where}.path"), optional=flag(raw, "optional"))


def _inside(path: str, where: str) -> str:
    """A file's path relative to an artifact's root (a leading ``./`` dropped); InvalidSpec for one that could
    name anything else: absolute, with a ``..`` or an empty segment, a folder."""
    path = path.removeprefix("./")
    parts = path.split("/")
    if not path or path.startswith("/") or "\\" in path or "\0" in path or len(path) > 1024 or any(
            part in ("", ".", "..") for part in parts):
        raise SpecError("InvalidSpec", f"{where} {path[:80]!r} must be the relative path of a file inside the "
                                       "source's artifact (no leading '/', no '..' or '.' segment, no trailing '/')")
    return path


def parse_spec(spec: dict[str, Any], name: str, namespace: str, *,
               origin: dict[str, str] | None = None, group: str = "") -> HelmReleaseSpec:
    """``origin``: labels every object of the release carries (``Kind.origin_labels``: Flux's, on a Flux
    HelmRelease's objects), after spec.commonMetadata's, as Flux's post-renderer sets them. ``group``: the
    HelmRelease's API group, when known (a dependsOn entry naming it is of the same kind)."""
    check_references(spec)
    target = str(spec.get("targetNamespace") or namespace)
    release = str(spec.get("releaseName") or default_release_name(name, target, namespace))
    if len(release) > 53 or not _RELEASE_NAME.match(release):
        raise SpecError("InvalidSpec", f"spec.releaseName {release!r} is not a valid Helm release name (lowercase "
                                       "letters, digits, '-' and '.', at most 53 characters)")
    values = spec.get("values") or {}
    if not isinstance(values, dict):
        raise SpecError("InvalidSpec", "spec.values must be a map")
    storage = str(spec.get("storageNamespace") or target)
    if storage != target:
        # The helm CLI keeps release records in the namespace it installs into.
        raise SpecError("InvalidSpec", "spec.storageNamespace must equal the target namespace: the helm CLI "
                                       "stores releases where it installs them")
    max_history = int(spec.get("maxHistory", DEFAULT_MAX_HISTORY))
    tests = _tests(spec.get("test"))
    return HelmReleaseSpec(
        chart=_chart(spec.get("chart"), spec.get("chartRef")),
        release_name=release,
        target_namespace=target,
        storage_namespace=storage,
        values=values,
        values_from=_values_from(spec.get("valuesFrom")),
        values_files=source_values_files(spec.get("valuesFiles")),
        interval=duration_field(spec, "interval", DEFAULT_INTERVAL) or DEFAULT_INTERVAL,
        suspend=bool(spec.get("suspend", False)),
        timeout=duration_field(spec, "timeout", DEFAULT_TIMEOUT) or DEFAULT_TIMEOUT,
        max_history=max_history,
        install=_install(spec.get("install"), tests.ignore_failures),
        upgrade=_upgrade(spec.get("upgrade"), tests.ignore_failures),
        uninstall=_uninstall(spec.get("uninstall")),
        rollback=_rollback(spec.get("rollback")),
        test=tests,
        service_account_name=str(spec.get("serviceAccountName") or ""),
        depends_on=dependencies(spec.get("dependsOn"), name, namespace, "HelmRelease", group),
        health_check_exprs=health_exprs(spec.get("healthCheckExprs")),
        post_render=_post_render(spec.get("commonMetadata"), spec.get("postRenderers"), origin or {},
                                 spec.get("postRenderStrategy")),
        **_drift(spec.get("driftDetection")),
        wait_strategy=_wait_strategy(spec.get("waitStrategy")),
        helm_major_fields=_helm_major_fields(spec),
        kube_config=parse_ref(spec.get("kubeConfig")),
        decryption=parse_decryption(spec),
    )


def _wait_strategy(raw: Any) -> str:
    name = str((raw or {}).get("name") or "poller")
    if name not in ("poller", "legacy"):
        raise SpecError("InvalidSpec", f"spec.waitStrategy.name must be poller or legacy, not {name[:60]!r}")
    return name


def _helm_major_fields(spec: dict[str, Any]) -> tuple[tuple[str, int], ...]:
    """Fields set that mean something with one helm major only: server-side apply is helm 4's, a rollback's
    recreation of pods and post-rendered hooks (combined, separate) helm 3's and helm 4's respectively."""
    out = []
    for action in ("install", "upgrade", "rollback"):
        ssa = (spec.get(action) or {}).get("serverSideApply")
        if ssa is True or ssa == "enabled":
            out.append((f"spec.{action}.serverSideApply", 4))
    if (spec.get("rollback") or {}).get("recreate"):
        out.append(("spec.rollback.recreate", 3))
    if spec.get("postRenderStrategy") in ("combined", "separate"):
        out.append((f"spec.postRenderStrategy {spec['postRenderStrategy']}", 4))
    return tuple(out)


def _drift(raw: Any) -> dict[str, Any]:
    raw = raw or {}
    mode = str(raw.get("mode") or "disabled")
    if mode not in ("enabled", "warn", "disabled"):
        raise SpecError("InvalidSpec", f"spec.driftDetection.mode must be enabled, warn or disabled, not {mode!r}")
    rules = []
    for i, rule in enumerate(raw.get("ignore") or []):
        paths = tuple(str(p) for p in (rule or {}).get("paths") or [])
        if not paths or any(not p.startswith("/") for p in paths):
            raise SpecError("InvalidSpec", f"spec.driftDetection.ignore[{i}].paths must be JSON pointers (/spec/...)")
        rules.append((paths, parse_selector((rule or {}).get("target"), f"spec.driftDetection.ignore[{i}].target")))
    return {"drift_mode": mode, "drift_ignore": tuple(rules)}


POST_RENDER_STRATEGIES = ("nohooks", "combined", "separate")


def _post_render(common: Any, renderers: Any, origin: dict[str, str], strategy: Any) -> dict[str, Any]:
    out = _common_metadata(common, origin) | _kustomize(renderers)
    if strategy is not None and strategy not in POST_RENDER_STRATEGIES:
        raise SpecError("InvalidSpec", f"spec.postRenderStrategy must be one of {', '.join(POST_RENDER_STRATEGIES)}")
    if strategy == "nohooks" and out:  # combined and separate mean the same to helmop's per-object renderer
        out["strategy"] = strategy
    return out


def _common_metadata(common: Any, origin: dict[str, str]) -> dict[str, Any]:
    """spec.commonMetadata's labels (the origin's labels over them) and annotations, each left out when empty."""
    out: dict[str, Any] = {}
    for part in ("labels", "annotations"):
        found = (common or {}).get(part) or {}
        if not isinstance(found, dict):
            raise SpecError("InvalidSpec", f"spec.commonMetadata.{part} must be a map of strings")
        merged = {str(k): str(v) for k, v in found.items()} | (origin if part == "labels" else {})
        if merged:
            out[part] = merged
    return out


def _kustomize(renderers: Any) -> dict[str, Any]:
    """The patches and images of every spec.postRenderers[].kustomize, in order, each left out when empty."""
    patches, images = [], []
    for i, renderer in enumerate(renderers or []):
        kustomize = (renderer or {}).get("kustomize") or {}
        for j, patch in enumerate(kustomize.get("patches") or []):
            patches.append(_patch(patch, f"spec.postRenderers[{i}].kustomize.patches[{j}]"))
        for j, image in enumerate(kustomize.get("images") or []):
            images.append(_image(image, f"spec.postRenderers[{i}].kustomize.images[{j}]"))
    return {key: found for key, found in (("patches", patches), ("images", images)) if found}


def _patch(patch: Any, where: str) -> dict[str, Any]:
    written = str((patch or {}).get("patch") or "")
    try:
        body = yamlc.load(written)
    except yaml.YAMLError:
        raise SpecError("InvalidPostRenderer", f"{where}.patch is not valid YAML") from None
    if not isinstance(body, list | dict):
        raise SpecError("InvalidPostRenderer", f"{where}.patch must be a strategic-merge patch (a map) or "
                                               "a JSON6902 patch (a list of operations)")
    target = (patch or {}).get("target")
    parse_selector(target, f"{where}.target")  # refused here, with where it stands, rather than in helm's run
    if not target and isinstance(body, list):
        raise SpecError("InvalidPostRenderer", f"{where}.target is required for a JSON6902 patch (as kustomize "
                                               "requires it)")
    if not target and not (isinstance(body, dict) and body.get("kind") and (body.get("metadata") or {}).get("name")):
        raise SpecError("InvalidPostRenderer", f"{where}: a strategic-merge patch without a target names the object "
                                               "it patches: kind and metadata.name (as kustomize requires)")
    return {"target": dict(target or {}), "patch": written}


def _image(image: Any, where: str) -> dict[str, str]:
    """A kustomize image rule: ``name`` (required) and what replaces it (newName, newTag or digest)."""
    if not isinstance(image, dict) or not image.get("name"):
        raise SpecError("InvalidPostRenderer", f"{where}.name is required")
    return {k: str(image[k]) for k in ("name", "newName", "newTag", "digest") if image.get(k)}


def health_exprs(raw: Any) -> tuple[HealthExpr, ...]:
    out = []
    for i, entry in enumerate(raw or []):
        if not isinstance(entry, dict) or not entry.get("apiVersion") or not entry.get("kind"):
            raise SpecError("InvalidSpec", f"spec.healthCheckExprs[{i}] needs apiVersion and kind")
        if not entry.get("current"):
            raise SpecError("InvalidSpec", f"spec.healthCheckExprs[{i}].current is required")
        out.append(HealthExpr(str(entry["apiVersion"]), str(entry["kind"]), str(entry.get("current") or ""),
                              str(entry.get("inProgress") or ""), str(entry.get("failed") or "")))
    return tuple(out)
