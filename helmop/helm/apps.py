"""App resources as HelmRelease specs: the one mapping the operator, ``helmop render`` and
``helmop diff`` share. Here rather than in ``api`` because it composes values with Helm's merge.

A generic app's ``.spec`` are its chart's values, with the kind's ``overrideValues`` over them (and the kind's
``valuesFiles`` under them); a Jenkins' spec is mapped onto the Jenkins chart's values, with ``spec.values`` over
them.
"""

from __future__ import annotations

from typing import Any

from helmop.api import jenkins
from helmop.api.apps import AppKind
from helmop.api.kinds import JENKINS

from .values import merge


def is_jenkins(kind: AppKind) -> bool:
    return kind.resource == JENKINS


def release_spec(kind: AppKind, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    """The spec of the HelmRelease that an app resource ``name`` with ``spec`` maps to; SpecError when
    the app's spec is invalid."""
    if is_jenkins(kind):
        values = merge(jenkins.jenkins_values(name, spec), spec.get("values") or {})
        return {"releaseName": name, "chart": spec.get("chart") or kind.chart, "values": values,
                "interval": str(spec.get("interval") or kind.interval), "suspend": bool(spec.get("suspend", False))}
    files = {"valuesFiles": list(kind.values_files)} if kind.values_files else {}
    return {"releaseName": name, "chart": kind.chart, "values": merge(dict(spec), kind.override_values),
            "interval": kind.interval, "suspend": False, **files}
