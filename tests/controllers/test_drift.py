"""Drift checks that cost nothing when nothing changed, and stay live when something does (an operator of this
module's own: the counters asserted on are the whole operator's)."""

from __future__ import annotations

import json
import time

import pytest

from tests.controllers.conftest import ChartRepo, Operator, apply, condition, get, hr, ready, settled
from tests.tools import Run, eventually


def _helm_revisions(kube: Run, ns: str, name: str) -> int:
    return len(json.loads(kube("helm", "history", name, "-n", ns, "-o", "json").stdout))


def test_an_unchanged_release_is_looked_at_without_reading_its_objects(operator: Operator, kube: Run, ns: str,
                                                                       chart_repo: ChartRepo) -> None:
    """Once its objects were found as the release wants them and the watches of their kinds run, a look at the
    release (its interval, or a request) compares none of them: no read, no dry run. A change of one is compared
    (and found) at once, and a status update of a Deployment is no change."""
    apply(kube, ns, hr("quiet", chart_repo, driftDetection={"mode": "warn"}))
    ready(kube, ns, "quiet")

    def a_look_compares_nothing() -> bool:
        compared = operator.metric("helmop_drift_checks_total", result="compared")
        skipped = operator.metric("helmop_drift_checks_total", result="skipped")
        settled(kube, ns, "hr", "quiet")
        return (operator.metric("helmop_drift_checks_total", result="compared") == compared
                and operator.metric("helmop_drift_checks_total", result="skipped") > skipped)

    # the first looks compare (the watches of the release's kinds start after its first status)
    eventually(a_look_compares_nothing, timeout=30)
    kube("kubectl", "-n", ns, "patch", "deploy", "quiet", "--subresource=status", "--type=merge",
         "-p", '{"status":{"observedGeneration":1,"readyReplicas":1}}')
    assert a_look_compares_nothing()  # a status update: the spec did not change

    compared = operator.metric("helmop_drift_checks_total", result="compared")
    kube("kubectl", "-n", ns, "label", "svc", "quiet", "app.kubernetes.io/name=other", "--overwrite")
    drifted = eventually(lambda: (c := condition(get(kube, ns, "hr", "quiet"), "Drifted")).get("status") == "True"
                         and c)
    assert "Service/quiet: /metadata/labels/app.kubernetes.io~1name" in drifted["message"]
    assert operator.metric("helmop_drift_checks_total", result="compared") > compared


@pytest.mark.alone
def test_drift_is_reported_within_3s_and_corrected_within_6s(operator: Operator, kube: Run, ns: str,
                                                              chart_repo: ChartRepo) -> None:
    """At interval 1h, without a request: the watch of the changed object wakes its release."""
    apply(kube, ns, hr("warned", chart_repo, driftDetection={"mode": "warn"}))
    apply(kube, ns, hr("fixed", chart_repo, driftDetection={"mode": "enabled"}))
    for name in ("warned", "fixed"):
        ready(kube, ns, name)
        settled(kube, ns, "hr", name)
    revisions = _helm_revisions(kube, ns, "fixed")

    kube("kubectl", "-n", ns, "scale", "deploy/warned", "--replicas=4")
    scaled = time.monotonic()
    eventually(lambda: condition(get(kube, ns, "hr", "warned"), "Drifted").get("status") == "True", timeout=3,
               interval=0.05)
    assert time.monotonic() - scaled < 3

    kube("kubectl", "-n", ns, "scale", "deploy/fixed", "--replicas=4")
    scaled = time.monotonic()
    eventually(lambda: get(kube, ns, "deploy", "fixed")["spec"]["replicas"] == 1, timeout=6, interval=0.05)
    assert time.monotonic() - scaled < 6
    assert _helm_revisions(kube, ns, "fixed") == revisions
