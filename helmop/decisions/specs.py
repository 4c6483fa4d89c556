"""Every kind's spec as the operator reads it: the model's parser, then the checks it cannot make alone (references
to other namespaces against the tenancy policy, CEL expressions compiled, semver ranges). One table, read by the
operator's turns and by the offline checks (``helmop create``, ``convert``, ``try``, ``preview``), so the two never
disagree about a spec."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from helmop.api.buckets import parse_bucket
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
from helmop.api.kinds import Kind
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

Reader = Callable[[Kind, Resource, Tenancy], Any]


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


def _helm_release(kind: Kind, this: Resource, tenancy: Tenancy) -> HelmReleaseSpec:
    spec = parse_spec(this.spec, this.name, this.namespace, origin=kind.origin_labels(this.namespace, this.name))
    source = chart_source(spec)
    if source is not None:
        tenancy.check_reference(this.namespace, source[1], source[2])
    for i, (dep_namespace, _) in enumerate(spec.depends_on):
        tenancy.check_reference(this.namespace, dep_namespace, f"spec.dependsOn[{i}]")
    for i, (_, expr) in enumerate(spec.ready_exprs):
        check_expression(expr, f"spec.dependsOn[{i}].readyExpr")
    check_exprs(spec.health_check_exprs)
    return spec


def _config_sync(_kind: Kind, this: Resource, tenancy: Tenancy) -> ConfigSyncSpec:
    spec = parse_config_sync(this.spec, this.name, this.namespace)
    tenancy.check_reference(this.namespace, spec.source_namespace, "spec.sourceRef")
    for i, dep in enumerate(spec.depends_on):
        tenancy.check_reference(this.namespace, dep.namespace, f"spec.dependsOn[{i}]")
        if dep.ready_expr:
            check_expression(dep.ready_expr, f"spec.dependsOn[{i}].readyExpr")
    check_exprs(spec.health_check_exprs)
    return spec


def _receiver(kind: Kind, this: Resource, tenancy: Tenancy) -> ReceiverSpec:
    spec = parse_receiver(this.spec, flux=kind.flux)
    for field, expression in spec.expressions():
        try:
            check_expression(expression, field)
        except SpecError as exc:
            raise SpecError("InvalidCELExpression", str(exc)) from None
    for i, target in enumerate(spec.resources):
        tenancy.check_reference(this.namespace, target.namespace, f"spec.resources[{i}].namespace")
    return spec


def _denied(read: Reader) -> Reader:
    """Image automation's and the source generator's readers: a reference refused by the tenancy policy is Flux's
    ``AccessDenied`` for those kinds."""
    def reader(kind: Kind, this: Resource, tenancy: Tenancy) -> Any:
        try:
            return read(kind, this, tenancy)
        except SpecError as exc:
            if exc.reason == "CrossNamespaceRef":
                raise SpecError("AccessDenied", str(exc)) from None
            raise

    return reader


def _image_policy(_kind: Kind, this: Resource, tenancy: Tenancy) -> ImagePolicySpec:
    spec = parse_image_policy(this.spec)
    if spec.policy == "semver":
        try:
            Constraint(spec.argument)
        except (ValueError, IndexError):
            raise SpecError("InvalidPolicy", f"spec.policy.semver.range {spec.argument[:100]!r} is not a semver "
                                             "range") from None
    tenancy.check_reference(this.namespace, spec.repository_namespace or this.namespace,
                            "spec.imageRepositoryRef.namespace")
    return spec


def _image_update_automation(_kind: Kind, this: Resource, tenancy: Tenancy) -> Any:
    spec = parse_image_update_automation(this.spec)
    tenancy.check_reference(this.namespace, spec.source_namespace or this.namespace, "spec.sourceRef.namespace")
    return spec


def _artifact_generator(_kind: Kind, this: Resource, tenancy: Tenancy) -> Any:
    spec = parse_artifact_generator(this.spec)
    for i, source in enumerate(spec.sources):
        tenancy.check_reference(this.namespace, source.namespace, f"spec.sources[{i}]")
    return spec


def _model(parse: Callable[[dict[str, Any]], Any]) -> Reader:
    """A kind whose model's parser is the whole reading."""
    return lambda _kind, this, _tenancy: parse(this.spec)


READERS: dict[str, Reader] = {
    "HelmRelease": _helm_release,
    "GitRepository": _model(parse_git_repository),
    "HelmRepository": _model(parse_helm_repository),
    "OCIRepository": _model(parse_oci_repository),
    "Bucket": _model(parse_bucket),
    "HelmChart": _model(parse_helm_chart),
    "ExternalArtifact": _model(parse_external_artifact),
    "ArtifactGenerator": _denied(_artifact_generator),
    "ConfigSync": _config_sync,
    "Kustomization": _config_sync,  # Flux's kind of the ConfigSync's model
    "Provider": _model(parse_provider),
    "Alert": lambda _kind, this, _tenancy: parse_alert(this.spec, this.namespace),
    "Receiver": _receiver,
    "ImageRepository": _model(parse_image_repository),
    "ImagePolicy": _denied(_image_policy),
    "ImageUpdateAutomation": _denied(_image_update_automation),
    "Preview": _model(parse_preview),
    "Project": lambda _kind, this, _tenancy: parse_project(this.spec, this.name),
}


def read_spec(kind: Kind, body: dict[str, Any], tenancy: Tenancy | None = None) -> Any:
    """``body``'s spec as the operator reads it (SpecError, with the reason its status says, when it is refused).
    ``kind`` is helmop's kind or Flux's of the same model (Flux's read with Flux's rules where they differ)."""
    return READERS[kind.kind](kind, Resource(body), tenancy or Tenancy())
