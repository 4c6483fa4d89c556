"""One reconcile of a HelmChart: the chart its template names resolved from its source (a HelmRepository's index,
a GitRepository's or a Bucket's files), checked as a release would take it (its values files included), and
published with Flux's revision: the chart's version, marked ``+<generation>`` when values files are merged and,
with ``reconcileStrategy: Revision`` from a GitRepository or a Bucket, ``+<the source revision's first 12 hex>``.
A HelmRelease with ``chartRef: {kind: HelmChart}`` takes what it published; a new revision wakes it."""

from __future__ import annotations

from helmop.api.helmcharts import HelmChartSpec
from helmop.api.helmrelease import SharedRepositoryChart
from helmop.api.objects import ObjectKey
from helmop.api.status import now
from helmop.api.status.sources import HelmChartStatus
from helmop.decisions.settle import sources as settle
from helmop.helm.inputs import ChartInputs, chart_inputs

from .outcome import DONE, Outcome
from .turn import Turn


async def reconcile(turn: Turn[HelmChartSpec, HelmChartStatus]) -> Outcome:
    spec, family, namespace = turn.spec, turn.family, turn.namespace
    template = spec.chart
    source_kind = "HelmRepository" if isinstance(template, SharedRepositoryChart) else template.kind
    source = family.source(source_kind)
    source_name = template.repository if isinstance(template, SharedRepositoryChart) else template.name
    turn.refer([ObjectKey(source.key if source else source_kind, namespace, source_name)])
    chart = await chart_inputs(turn.ctx.services, namespace, template, family, interval=spec.interval)
    revision = revision_of(spec, chart, turn.generation)
    message = f"pulled '{chart.resolved.name}' chart with version '{chart.resolved.version}'"
    after = settle.helm_chart(turn.status, turn.generation, revision, chart.digest, now(), message,
                              observed_source_artifact_revision=chart.source_revision,
                              observed_chart_name=chart.resolved.name,
                              observed_values_files=chart.values_found if template.ignore_missing_values_files
                              else ())
    await turn.publish(after, message)
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
