"""One reconcile of a HelmChart: the chart its template names resolved from its source (a HelmRepository's index,
a GitRepository's or a Bucket's files), checked as a release would take it (its values files included), and
published with Flux's revision: the chart's version, marked ``+<generation>`` when values files are merged and,
with ``reconcileStrategy: Revision`` from a GitRepository or a Bucket, ``+<the source revision's first 12 hex>``.
A HelmRelease with ``chartRef: {kind: HelmChart}`` takes what it published; a new revision wakes it."""

from __future__ import annotations

from typing import Any

from helmop.api.errors import HelmopError, SpecError
from helmop.api.helmcharts import HelmChartSpec, parse_helm_chart
from helmop.api.helmrelease import SharedRepositoryChart
from helmop.api.kinds import Family
from helmop.api.objects import Resource
from helmop.api.status import now
from helmop.api.status.sources import HelmChartStatus
from helmop.decisions.settle import sources as settle
from helmop.helm.inputs import ChartInputs, chart_inputs

from .context import Context
from .outcome import DONE, FAILED, Outcome
from .status import published, read_status, report


async def reconcile(ctx: Context, family: Family, body: dict[str, Any]) -> Outcome:
    kind = family.helmchart
    this = Resource(body)
    status = read_status(kind, HelmChartStatus, body)
    try:
        spec = parse_helm_chart(body.get("spec") or {})
    except SpecError as exc:
        await report(ctx, kind, body, status, False, exc.reason, str(exc), stalled=True)
        return DONE
    if spec.suspend:
        return DONE
    template = spec.chart
    source_kind = "HelmRepository" if isinstance(template, SharedRepositoryChart) else template.kind
    source = family.source(source_kind)
    source_name = template.repository if isinstance(template, SharedRepositoryChart) else template.name
    ctx.memory.refer((kind.key, this.namespace, this.name), [(this.namespace, source.key if source else source_kind,
                                                               source_name)])
    try:
        chart = await chart_inputs(ctx.services, this.namespace, template, family, interval=spec.interval)
    except HelmopError as exc:
        await report(ctx, kind, body, status, False, exc.reason, str(exc), stalled=not exc.transient)
        return FAILED if exc.transient else DONE
    revision = revision_of(spec, chart, this.generation)
    message = f"pulled '{chart.resolved.name}' chart with version '{chart.resolved.version}'"
    after = settle.helm_chart(status, this.generation, revision, chart.digest, now(), message,
                              observed_source_artifact_revision=chart.source_revision,
                              observed_chart_name=chart.resolved.name,
                              observed_values_files=chart.values_found if template.ignore_missing_values_files
                              else ())
    await published(ctx, kind, body, status, after, message)
    return DONE


def revision_of(spec: HelmChartSpec, chart: ChartInputs, generation: int) -> str:
    """Flux's revision of a HelmChart: the chart's version, its build metadata replaced by the source revision's
    first 12 hex characters (Revision strategy, from files) and the generation (values files merged)."""
    version = chart.resolved.version
    marks = []
    template = spec.chart
    if not isinstance(template, SharedRepositoryChart) and template.reconcile_strategy == "Revision":
        marks.append(chart.source_revision.rpartition(":")[2][:12])
    if spec.values_files:
        marks.append(str(generation))
    return f"{version.split('+', 1)[0]}+{'.'.join(marks)}" if marks else version


async def finalize(ctx: Context, family: Family, body: dict[str, Any]) -> Outcome:
    """Nothing is kept per HelmChart but what the operator remembers of it (charts are cached by content)."""
    this = Resource(body)
    ctx.memory.drop((family.helmchart.key, this.namespace, this.name))
    return DONE
