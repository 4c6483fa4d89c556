"""A HelmChart's spec (helmop.dev/v1alpha1, and Flux's source.toolkit.fluxcd.io/v1): a chart from a HelmRepository,
a GitRepository or a Bucket as an object of its own, that HelmReleases take by ``chartRef``. Its fields are
those of a HelmRelease's ``chart.spec`` template (Flux's), with the source in the same namespace."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .durations import duration_field
from .errors import SpecError
from .helmrelease import SharedRepositoryChart, SourceChart, chart_template
from .names import check_references
from .settings import SOURCE_INTERVAL


@dataclass(frozen=True)
class HelmChartSpec:
    chart: SharedRepositoryChart | SourceChart
    interval: float = SOURCE_INTERVAL
    suspend: bool = False

    @property
    def values_files(self) -> tuple[str, ...]:
        return self.chart.values_files


def parse_helm_chart(spec: dict[str, Any]) -> HelmChartSpec:
    check_references(spec)
    source = spec.get("sourceRef") or {}
    if isinstance(source, dict) and source.get("namespace"):
        raise SpecError("InvalidSpec", "spec.sourceRef of a HelmChart is in its own namespace (no namespace field)")
    template = {k: v for k, v in spec.items() if k not in ("interval", "suspend")}
    chart = chart_template(template, "spec")
    if not isinstance(chart, SharedRepositoryChart | SourceChart):
        raise SpecError("InvalidSpec", "spec.sourceRef must name a HelmRepository, a GitRepository or a Bucket")
    return HelmChartSpec(chart, duration_field(spec, "interval", SOURCE_INTERVAL) or SOURCE_INTERVAL,
                         bool(spec.get("suspend", False)))
