"""Every kind's spec as the operator reads it: the model's parser, then the checks it cannot make alone (references
to other namespaces against the tenancy policy, CEL expressions compiled, semver ranges). One table, read by the
operator's turns and by the offline checks (``helmop create``, ``convert``, ``try``, ``preview``), so the two never
disagree about a spec."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from helmop.api.buckets import parse_bucket
from helmop.api.decryption import DECRYPTION_SECRET, Decryption
from helmop.api.dependencies import Dependency
from helmop.api.errors import SpecError
from helmop.api.generators import parse_artifact_generator, parse_external_artifact
from helmop.api.helmcharts import parse_helm_chart
from helmop.api.helmrelease import (
    ArtifactChart,
    HelmReleaseSpec,
    SharedRepositoryChart,
    SourceChart,
    parse_spec,
)
from helmop.api.images import (
    ImagePolicySpec,
    parse_image_policy,
    parse_image_repository,
    parse_image_update_automation,
)
from helmop.api.kinds import Kind, is_object_name
from helmop.api.notifications import parse_alert, parse_provider
from helmop.api.objects import Resource
from helmop.api.previews import parse_preview
from helmop.api.projects import parse_project
from helmop.api.receivers import ReceiverSpec, parse_receiver
from helmop.api.repositories import parse_helm_repository, parse_oci_repository
from helmop.api.semver import Constraint
from helmop.api.sources import ConfigSyncSpec, parse_config_sync, parse_git_repository
from helmop.api.tenancy import Tenancy

from .health import check_expression, check_exprs

Parse = Callable[[Kind, Resource], Any]  # the model's parser: SpecError for a spec it cannot read
Check = Callable[[Any, Resource, Tenancy], None]  # what the operator's rules refuse of a spec the model reads


@dataclass(frozen=True)
class Reader:
    """How one kind's spec is read: its model's parser, then the operator's checks (a reference to another
    namespace under the tenancy policy, CEL expressions compiled, semver ranges). A clean-up reads with the model
    only: what an object made under other rules still goes with it."""

    parse: Parse
    check: Check | None = None
    denied: str = ""  # the reason a refused reference to another namespace is said with ("": CrossNamespaceRef)

    def __call__(self, kind: Kind, this: Resource, tenancy: Tenancy | None) -> Any:
        """``this``'s spec; ``tenancy`` None: the model's reading alone."""
        spec = self.parse(kind, this)
        if self.check is None or tenancy is None:
            return spec
        try:
            self.check(spec, this, tenancy)
        except SpecError as exc:
            if self.denied and exc.reason == "CrossNamespaceRef":
                raise SpecError(self.denied, str(exc)) from None
            raise
        return spec


def chart_source(spec: HelmReleaseSpec) -> tuple[str, str, str, str] | None:
    """(kind, namespace, the field naming it, name) of the source object a release's chart comes from, if any."""
    chart = spec.chart
    if isinstance(chart, SourceChart):
        return (chart.kind, chart.namespace, "spec.chart.sourceRef", chart.name)
    if isinstance(chart, SharedRepositoryChart):
        return ("HelmRepository", chart.namespace, "spec.chart.spec.sourceRef", chart.repository)
    if isinstance(chart, ArtifactChart):
        return (chart.kind, chart.namespace, "spec.chartRef", chart.name)
    return None


def _helm_release(kind: Kind, this: Resource) -> HelmReleaseSpec:
    spec = parse_spec(this.spec, this.name, this.namespace, origin=kind.origin_labels(this.namespace, this.name),
                      group=kind.group)
    keys = this.annotation(DECRYPTION_SECRET)
    if kind.flux and keys:  # Flux's schema has no spec.decryption for a HelmRelease: an annotation names the keys
        if not is_object_name(keys):
            raise SpecError("InvalidSpec", f"annotation {DECRYPTION_SECRET} must name a Secret, not {keys[:60]!r}")
        spec = replace(spec, decryption=Decryption(secret_ref=keys))
    return spec


def _check_helm_release(spec: HelmReleaseSpec, this: Resource, tenancy: Tenancy) -> None:
    source = chart_source(spec)
    if source is not None:
        tenancy.check_reference(this.namespace, source[1], source[2])
    for i, values_file in enumerate(spec.values_files):
        tenancy.check_reference(this.namespace, values_file.namespace, f"spec.valuesFiles[{i}].sourceRef")
    _check_dependencies(spec.depends_on, this.namespace, tenancy)
    check_exprs(spec.health_check_exprs)


def _check_config_sync(spec: ConfigSyncSpec, this: Resource, tenancy: Tenancy) -> None:
    tenancy.check_reference(this.namespace, spec.source_namespace, "spec.sourceRef")
    _check_dependencies(spec.depends_on, this.namespace, tenancy)
    check_exprs(spec.health_check_exprs)


def _check_dependencies(deps: tuple[Dependency, ...], namespace: str, tenancy: Tenancy | None) -> None:
    """Cross-namespace entries follow --no-cross-namespace-refs as sourceRefs do (``tenancy``); readyExprs
    compile."""
    for i, dep in enumerate(deps):
        if tenancy is not None:
            tenancy.check_reference(namespace, dep.namespace, f"spec.dependsOn[{i}]")
        if dep.ready_expr:
            check_expression(dep.ready_expr, f"spec.dependsOn[{i}].readyExpr")


def _check_receiver(spec: ReceiverSpec, this: Resource, tenancy: Tenancy) -> None:
    for field, expression in spec.expressions():
        try:
            check_expression(expression, field)
        except SpecError as exc:
            raise SpecError("InvalidCELExpression", str(exc)) from None
    for i, target in enumerate(spec.resources):
        tenancy.check_reference(this.namespace, target.namespace, f"spec.resources[{i}].namespace")


def _check_image_policy(spec: ImagePolicySpec, this: Resource, tenancy: Tenancy) -> None:
    if spec.policy == "semver":
        try:
            Constraint(spec.argument)
        except (ValueError, IndexError):
            raise SpecError("InvalidPolicy", f"spec.policy.semver.range {spec.argument[:100]!r} is not a semver "
                                             "range") from None
    tenancy.check_reference(this.namespace, spec.repository_namespace or this.namespace,
                            "spec.imageRepositoryRef.namespace")


def _check_image_update_automation(spec: Any, this: Resource, tenancy: Tenancy) -> None:
    tenancy.check_reference(this.namespace, spec.source_namespace or this.namespace, "spec.sourceRef.namespace")


def _check_artifact_generator(spec: Any, this: Resource, tenancy: Tenancy) -> None:
    for i, source in enumerate(spec.sources):
        tenancy.check_reference(this.namespace, source.namespace, f"spec.sources[{i}]")


def _of_spec(parse: Callable[[dict[str, Any]], Any]) -> Parse:
    """A model's parser that reads the spec alone."""
    return lambda _kind, this: parse(this.spec)


_CONFIG_SYNC = Reader(lambda kind, this: parse_config_sync(this.spec, this.name, this.namespace, kind.kind, kind.group),
                      _check_config_sync)
READERS: dict[str, Reader] = {
    "HelmRelease": Reader(_helm_release, _check_helm_release),
    "GitRepository": Reader(_of_spec(parse_git_repository)),
    "HelmRepository": Reader(_of_spec(parse_helm_repository)),
    "OCIRepository": Reader(_of_spec(parse_oci_repository)),
    "Bucket": Reader(_of_spec(parse_bucket)),
    "HelmChart": Reader(_of_spec(parse_helm_chart)),
    "ExternalArtifact": Reader(_of_spec(parse_external_artifact)),
    # image automation and the source generator say Flux's AccessDenied for a reference the tenancy refuses
    "ArtifactGenerator": Reader(_of_spec(parse_artifact_generator), _check_artifact_generator, "AccessDenied"),
    "ConfigSync": _CONFIG_SYNC,
    "Kustomization": _CONFIG_SYNC,  # Flux's kind of the ConfigSync's model
    "Provider": Reader(_of_spec(parse_provider)),
    "Alert": Reader(lambda _kind, this: parse_alert(this.spec, this.namespace)),
    "Receiver": Reader(lambda kind, this: parse_receiver(this.spec, flux=kind.flux), _check_receiver),
    "ImageRepository": Reader(_of_spec(parse_image_repository)),
    "ImagePolicy": Reader(_of_spec(parse_image_policy), _check_image_policy, "AccessDenied"),
    "ImageUpdateAutomation": Reader(_of_spec(parse_image_update_automation), _check_image_update_automation,
                                    "AccessDenied"),
    "Preview": Reader(_of_spec(parse_preview)),
    "Project": Reader(lambda _kind, this: parse_project(this.spec, this.name),
                      # (a Project is the cluster admin's, not a tenant's: any namespace may be named)
                      lambda spec, this, tenancy: _check_dependencies(spec.depends_on, "", None)),
}


def read_spec(kind: Kind, body: dict[str, Any], tenancy: Tenancy | None = None) -> Any:
    """``body``'s spec as the operator reads it, under ``tenancy`` (default: the operator's default policy):
    SpecError, with the reason its status says, when it is refused. ``kind`` is helmop's kind or Flux's of the
    same model (Flux's read with Flux's rules where they differ)."""
    return READERS[kind.kind](kind, Resource(body), tenancy or Tenancy())
