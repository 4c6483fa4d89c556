"""App kinds: custom resources whose ``.spec`` are the values of one chart (Operator SDK's
helm-operator style), declared in an apps file given to ``helmop run --apps``.

    apps:
    - group: demo.helmop.dev       # the kind's CRD is installed by you
      version: v1alpha1
      kind: Webapp
      plural: webapps               # default: lowercase kind + "s"
      chart:                        # the same forms as HelmRelease.spec.chart
        repository: {url: https://charts.example.com, name: webapp, version: "^1.0"}
      overrideValues: {ingress: {enabled: false}}   # win over the resource's spec
      valuesFiles:                  # as HelmRelease.spec.valuesFiles: under the resource's spec
      - {sourceRef: {kind: GitRepository, name: config}, path: webapp/values.yaml}
      interval: 10m

Each resource gets a HelmRelease of its own (named ``<name>-<kind>``, owned by the resource), with
release name = resource name in the resource's namespace: one lifecycle, one set of conditions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from . import yamlc
from .errors import SpecError
from .helmrelease import parse_spec
from .kinds import Kind

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


@dataclass(frozen=True)
class AppKind:
    """A kind whose objects each become a HelmRelease of ``chart`` (Jenkins, or one of --apps)."""

    resource: Kind
    chart: dict[str, Any]
    override_values: dict[str, Any] = field(default_factory=dict)
    interval: str = "10m"
    # spec.valuesFiles of every resource's HelmRelease, as written (a source named without a namespace is of the
    # resource's)
    values_files: tuple[dict[str, Any], ...] = ()

    @property
    def kind(self) -> str:
        return self.resource.kind

    def release_object_name(self, name: str) -> str:
        return f"{name}-{self.kind.lower()}"


def parse_apps(text: str, where: str = "apps file") -> list[AppKind]:
    try:
        raw = yamlc.load(text) or {}
    except yaml.YAMLError as exc:
        raise SpecError("InvalidApps", f"{where} is not valid YAML: {exc}") from None
    entries = raw.get("apps") if isinstance(raw, dict) else None
    if not isinstance(entries, list):
        raise SpecError("InvalidApps", f"{where} must be a map with a list under 'apps'")
    out = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise SpecError("InvalidApps", f"{where}: apps[{i}] must be a map")
        missing = [k for k in ("group", "version", "kind", "chart") if not entry.get(k)]
        if missing:
            raise SpecError("InvalidApps", f"{where}: apps[{i}] lacks {', '.join(missing)}")
        if not _NAME.match(str(entry["group"])) or "." not in str(entry["group"]):
            raise SpecError("InvalidApps", f"{where}: apps[{i}].group {entry['group']!r} must be a DNS name")
        # The chart reference and the values files take the exact same checks as a HelmRelease's.
        files = entry.get("valuesFiles") or []
        parse_spec({"chart": entry["chart"], "valuesFiles": files}, "probe", "default")
        kind = str(entry["kind"])
        plural = str(entry.get("plural") or kind.lower() + "s")
        resource = Kind(kind, str(entry["group"]), str(entry["version"]), plural)
        out.append(AppKind(resource, chart=entry["chart"],
                           override_values=dict(entry.get("overrideValues") or {}),
                           values_files=tuple(files),
                           interval=str(entry.get("interval") or "10m")))
    return out
