"""Notifications through the real path: Providers and Alerts applied with kubectl, releases and config repositories
reconciled with real helm and git, and loopback receivers that check each request against the receiving service's
documented API (method, path, headers, JSON shape; the HMAC verified as a receiver verifies it)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from helmop_sandbox import Sandbox

from helmop.api.settings import Backoff
from tests.chartrepo import ChartRepo
from tests.controllers.conftest import (
    Operator,
    apply,
    condition,
    events,
    failing,
    get,
    helmop,
    hr,
    ready,
    settled,
    watched,
)
from tests.gitserver import Repo
from tests.receiver import Received, Receiver
from tests.tools import Run, eventually

TOKEN = "hmac-key-7f3a9c"
PASSWORD = "s3cr3t-Pa55word-91"  # what a chart is given from a Secret, and must never be sent


@pytest.fixture(scope="module")
def operator(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
             chart_repo: ChartRepo) -> Iterator[Operator]:
    """This module's operator (conftest's kube, ns, repo use it): allowed to notify 127.0.0.1 only (the receivers);
    retries 0.2 s apart at first."""
    with Sandbox(ready_delay=0.05) as sandbox:
        op = Operator(sandbox, request.param, tmp_path_factory.mktemp("notifying"), chart_repo)
        op.set("notifications", allow_cidrs=("127.0.0.1/32",))
        op.set("notifications", backoff=Backoff(0.2, 1.0), retry_for=120.0)
        op.start()
        yield op
        op.close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def provider(name: str, kind: str, *, address: str = "", secret: str = "", **spec: Any) -> str:
    return yaml.safe_dump({"apiVersion": "helmop.dev/v1alpha1", "kind": "Provider", "metadata": {"name": name},
                           "spec": {"type": kind, **({"address": address} if address else {}),
                                    **({"secretRef": {"name": secret}} if secret else {}), **spec}})


def alert(name: str, provider_name: str, kind: str, *, severity: str = "info", **spec: Any) -> str:
    return yaml.safe_dump({"apiVersion": "helmop.dev/v1alpha1", "kind": "Alert", "metadata": {"name": name},
                           "spec": {"providerRef": {"name": provider_name}, "eventSeverity": severity,
                                    "eventSources": [{"kind": kind, "name": "*"}], **spec}})


def ready_object(kube: Run, ns: str, kind: str, name: str) -> None:
    watched(kube, ns, kind, name, lambda obj: condition(obj).get("status") == "True", 30)


def flux_event(r: Received) -> dict[str, Any]:
    """A generic webhook's request checked as Flux documents it; its event."""
    assert r.method == "POST" and r.headers["content-type"] == "application/json", r
    assert r.headers["gotk-component"] == "helmop"
    event: dict[str, Any] = r.json()
    assert set(event) >= {"involvedObject", "severity", "timestamp", "message", "reason", "metadata",
                          "reportingController"}, event
    assert set(event["involvedObject"]) >= {"apiVersion", "kind", "namespace", "name", "uid"}
    return event


def test_a_failing_release_notifies_each_matching_alert_once(operator: Operator, kube: Run, ns: str,
                                                             receiver: Receiver, chart_repo: ChartRepo) -> None:
    kube("kubectl", "-n", ns, "create", "secret", "generic", "hmac", f"--from-literal=token={TOKEN}")
    kube("kubectl", "-n", ns, "create", "secret", "generic", "slack",
         f"--from-literal=address={receiver.url('/slack')}")
    apply(kube, ns, provider("signed", "generic-hmac", address=receiver.url("/hmac"), secret="hmac"))
    apply(kube, ns, provider("chat", "slack", secret="slack", channel="ops", username="helmop-bot"))
    apply(kube, ns, alert("oncall", "signed", "HelmRelease", severity="error"))
    apply(kube, ns, alert("team", "chat", "HelmRelease", severity="error", eventMetadata={"cluster": "prod"}))
    # an Alert whose exclusionList matches the failure sends nothing
    apply(kube, ns, alert("quiet", "chat", "HelmRelease", severity="error", exclusionList=["deliberately"]))
    for kind, name in (("providers.helmop.dev", "signed"), ("providers.helmop.dev", "chat"),
                       ("alerts.helmop.dev", "oncall"), ("alerts.helmop.dev", "team"), ("alerts.helmop.dev", "quiet")):
        ready_object(kube, ns, kind, name)

    apply(kube, ns, hr("bad", chart_repo, chart="broken", version="0.1.0"))
    failed = failing(kube, ns, "bad", "RenderFailed")
    seen = time.monotonic()
    signed = eventually(lambda: receiver.at("/hmac"), 10)
    chat = eventually(lambda: receiver.at("/slack"), 10)
    assert signed[0].at - seen <= 2.0 and chat[0].at - seen <= 2.0

    # generic-hmac: the body is Flux's event, signed with the Secret's token (verified as a receiver does)
    expected = hmac.new(TOKEN.encode(), signed[0].body, hashlib.sha256).hexdigest()
    assert signed[0].headers["x-signature"] == f"sha256={expected}"
    event = flux_event(signed[0])
    assert event["severity"] == "error" and event["reason"] == "RenderFailed"
    assert event["involvedObject"] == {"apiVersion": "helmop.dev/v1alpha1", "kind": "HelmRelease", "namespace": ns,
                                       "name": "bad", "uid": failed["metadata"]["uid"],
                                       "resourceVersion": event["involvedObject"]["resourceVersion"]}
    assert event["metadata"] == {"helmop.dev/revision": "0.1.0"}
    assert "deliberately broken" in event["message"]
    # slack: an attachment with the object as author and the metadata as fields, to the channel, as the username
    message = chat[0].json()
    assert message["channel"] == "ops" and message["username"] == "helmop-bot"
    attachment = message["attachments"][0]
    assert attachment["color"] == "danger" and attachment["author_name"] == f"HelmRelease/bad.{ns}"
    assert {f["title"]: f["value"] for f in attachment["fields"]} == {"cluster": "prod",
                                                                     "helmop.dev/revision": "0.1.0"}

    # The release then stalls (no retries left): said once more (also through "quiet": its exclusionList does not
    # match that message), and nothing is sent twice, however often the stall is looked at within the rate limit.
    eventually(lambda: len(receiver.at("/slack")) == 3, 10)
    settled(kube, ns, "hr", "bad")
    eventually(lambda: [e for e in events(kube, ns, "chat") if e["reason"] == "NotificationSent"], 10)
    assert [flux_event(r)["reason"] for r in receiver.at("/hmac")] == ["RenderFailed", "RetriesExceeded"]
    slack = [r.json()["attachments"][0] for r in receiver.at("/slack")]
    assert sum("deliberately broken" in a["text"] for a in slack) == 1  # "quiet" excluded the failure itself
    assert sum("cluster" in {f["title"] for f in a["fields"]} for a in slack) == 2  # "team" sent both


def test_a_successful_upgrade_sends_an_info_event(kube: Run, ns: str, receiver: Receiver,
                                                  chart_repo: ChartRepo) -> None:
    apply(kube, ns, provider("hook", "generic", address=receiver.url("/events")))
    apply(kube, ns, alert("deploys", "hook", "HelmRelease", inclusionList=["upgrade succeeded"]))
    ready_object(kube, ns, "alerts.helmop.dev", "deploys")
    apply(kube, ns, hr("web", chart_repo, version="0.1.0"))
    ready(kube, ns, "web")
    apply(kube, ns, hr("web", chart_repo, version="0.2.0"))
    ready(kube, ns, "web", generation=2)
    sent = eventually(lambda: receiver.at("/events"), 10)
    event = flux_event(sent[0])
    assert (event["severity"], event["reason"]) == ("info", "UpgradeSucceeded"), event
    assert event["metadata"]["helmop.dev/revision"] == "0.2.0"
    # the install's own event did not match the inclusionList: one request only
    assert [flux_event(r)["reason"] for r in receiver.at("/events")] == ["UpgradeSucceeded"]


def gitrepo(name: str, url: str) -> str:
    return yaml.safe_dump({"apiVersion": "helmop.dev/v1alpha1", "kind": "GitRepository", "metadata": {"name": name},
                           "spec": {"url": url, "interval": "1h", "ref": {"branch": "main"}}})


def configsync(name: str, source: str) -> str:
    return yaml.safe_dump({"apiVersion": "helmop.dev/v1alpha1", "kind": "ConfigSync", "metadata": {"name": name},
                           "spec": {"sourceRef": {"kind": "GitRepository", "name": source}, "path": "apps",
                                    "interval": "1h"}})


def test_a_config_repository_marks_its_commit_pending_then_successful(kube: Run, ns: str, receiver: Receiver,
                                                                      repo: Repo) -> None:
    commit = repo.commit({"apps/cm.yaml": yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap",
                                                          "metadata": {"name": "settings"}, "data": {"a": "1"}})})
    kube("kubectl", "-n", ns, "create", "secret", "generic", "forge", "--from-literal=token=forge-token-123")
    apply(kube, ns, provider("github", "github", address=receiver.url("/org/config"), secret="forge"))
    apply(kube, ns, provider("gitlab", "gitlab", address=receiver.url("/group/sub/config.git"), secret="forge",
                             commitStatusExpr="'helmop/' + event.involvedObject.name"))
    apply(kube, ns, alert("github", "github", "ConfigSync"))
    apply(kube, ns, alert("gitlab", "gitlab", "ConfigSync"))
    for name in ("github", "gitlab"):
        ready_object(kube, ns, "alerts.helmop.dev", name)
    apply(kube, ns, gitrepo("config", repo.url))
    apply(kube, ns, configsync("apps", "config"))
    watched(kube, ns, "csync", "apps", lambda obj: condition(obj).get("status") == "True")

    github = eventually(lambda: len(receiver.at("/api/v3/")) >= 2 and receiver.at("/api/v3/"), 10)
    assert [r.path for r in github] == [f"/api/v3/repos/org/config/statuses/{commit}"] * 2
    assert all(r.headers["authorization"] == "Bearer forge-token-123" for r in github)
    assert all(r.headers["accept"] == "application/vnd.github+json" for r in github)
    statuses = [r.json() for r in github]
    assert [s["state"] for s in statuses] == ["pending", "success"]
    uid = get(kube, ns, "providers.helmop.dev", "github")["metadata"]["uid"]
    assert {s["context"] for s in statuses} == {f"configsync/apps/{uid[:8]}"}

    gitlab = eventually(lambda: len(receiver.at("/api/v4/")) >= 2 and receiver.at("/api/v4/"), 10)
    assert [r.path for r in gitlab] == [f"/api/v4/projects/group%2Fsub%2Fconfig/statuses/{commit}"] * 2
    assert all(r.headers["private-token"] == "forge-token-123" for r in gitlab)
    assert [(s["state"], s["name"]) for s in (r.json() for r in gitlab)] == [("pending", "helmop/apps"),
                                                                              ("success", "helmop/apps")]


def test_a_receiver_down_gets_the_event_once_it_is_back(operator: Operator, kube: Run, ns: str,
                                                        receiver: Receiver, chart_repo: ChartRepo) -> None:
    apply(kube, ns, provider("hook", "generic", address=receiver.url("/down")))
    apply(kube, ns, alert("all", "hook", "HelmRelease", severity="error"))
    ready_object(kube, ns, "alerts.helmop.dev", "all")
    receiver.down()
    apply(kube, ns, hr("bad", chart_repo, chart="broken", version="0.1.0"))
    failing(kube, ns, "bad", "RenderFailed")
    retried = operator.metric("helmop_notifications_total", result="retried")
    # refused, again and again, while down
    eventually(lambda: operator.metric("helmop_notifications_total", result="retried") >= retried + 5, 30)
    receiver.up()
    # what was queued meanwhile arrives once each, in order (the stall that followed the failure after it)
    arrived = eventually(lambda: len(receiver.at("/down")) >= 2 and receiver.at("/down"), 15)
    assert [flux_event(r)["reason"] for r in arrived] == ["RenderFailed", "RetriesExceeded"]
    eventually(lambda: [e for e in events(kube, ns, "hook") if e["reason"] == "NotificationSent"], 10)


def test_a_secret_given_to_the_chart_is_in_no_payload(kube: Run, ns: str, receiver: Receiver,
                                                      chart_repo: ChartRepo) -> None:
    kube("kubectl", "-n", ns, "create", "secret", "generic", "db", f"--from-literal=password={PASSWORD}")
    for kind in ("generic", "slack", "msteams", "googlechat", "alertmanager", "grafana", "pagerduty"):
        apply(kube, ns, provider(kind, kind, address=receiver.url(f"/{kind}"), channel="routing-key"))
        apply(kube, ns, alert(kind, kind, "HelmRelease", severity="error"))
        ready_object(kube, ns, "alerts.helmop.dev", kind)
    body = yaml.safe_load(hr("leaky", chart_repo, chart="secretive", version="0.1.0"))
    body["spec"]["valuesFrom"] = [{"kind": "Secret", "name": "db", "valuesKey": "password", "targetPath": "password"}]
    apply(kube, ns, yaml.safe_dump(body))
    failing(kube, ns, "leaky", "RenderFailed")
    eventually(lambda: {r.path.split("/")[1] for r in receiver.received} >= {
        "generic", "slack", "msteams", "googlechat", "alertmanager", "grafana", "v2"}, 15)
    forms = [PASSWORD, base64.b64encode(PASSWORD.encode()).decode(), PASSWORD.encode().hex(), PASSWORD[:8]]
    for r in receiver.received:
        text = r.body.decode()
        assert not any(form in text for form in forms), (r.path, text)
    # the failure itself reached every type, masked (PagerDuty's trigger too, in its custom details)
    masked = {r.path.split("/")[1] for r in receiver.received if "bad password ***" in r.body.decode()}
    assert masked == {"generic", "slack", "msteams", "googlechat", "alertmanager", "grafana", "v2"}, masked


def test_addresses_inside_the_cluster_are_refused(operator: Operator, kube: Run, ns: str,
                                                  receiver: Receiver, chart_repo: ChartRepo) -> None:
    # a literal address in a refused range: the Provider is refused, with the reason in its status and an Event
    apply(kube, ns, provider("metadata", "generic", address="http://169.254.169.254/latest/meta-data"))
    refused = eventually(lambda: condition(get(kube, ns, "providers.helmop.dev", "metadata")).get("reason")
                         == "AddressRefused" and get(kube, ns, "providers.helmop.dev", "metadata"), 30)
    assert "--allow-notify-cidr" in condition(refused)["message"]
    assert eventually(lambda: [e["type"] for e in events(kube, ns, "metadata") if e["reason"] == "AddressRefused"],
                      15) == ["Warning"]  # the Event is posted after the status is written
    # an allowed receiver that redirects into a refused range: not followed, said on the Provider
    receiver.status, receiver.extra_headers = 307, {"Location": "http://169.254.169.254/latest/meta-data"}
    apply(kube, ns, provider("redirecting", "generic", address=receiver.url("/redirect")))
    apply(kube, ns, alert("all", "redirecting", "HelmRelease", severity="error"))
    ready_object(kube, ns, "alerts.helmop.dev", "all")
    failed_before = operator.metric("helmop_notifications_total", result="failed")
    apply(kube, ns, hr("bad", chart_repo, chart="broken", version="0.1.0"))
    said = eventually(lambda: [e for e in events(kube, ns, "redirecting") if e["reason"] == "NotificationFailed"], 15)
    assert "169.254.169.254" in said[0]["message"] and said[0]["type"] == "Warning"
    assert receiver.at("/redirect")  # asked, and its redirect not followed (the metadata endpoint is not a server here)
    assert operator.metric("helmop_notifications_total", result="failed") > failed_before
    assert json.dumps(said[0]).count("meta-data") == 0  # the address's path is not repeated


NOTIFICATION = "notification.toolkit.fluxcd.io/v1beta3"


def test_fluxs_alerts_send_what_helmop_does_with_fluxs_kinds(operator: Operator, kube: Run, ns: str,
                                                            receiver: Receiver, chart_repo: ChartRepo) -> None:
    """Flux's Provider and Alert, unchanged, select the events of Flux's HelmRelease; helmop's CLI lists and
    shows them like its own."""
    kube("kubectl", "-n", ns, "create", "secret", "generic", "hook", f"--from-literal=address={receiver.url('/flux')}")
    apply(kube, ns, yaml.safe_dump_all([
        {"apiVersion": NOTIFICATION, "kind": "Provider", "metadata": {"name": "hook"},
         "spec": {"type": "generic", "secretRef": {"name": "hook"}}},
        {"apiVersion": NOTIFICATION, "kind": "Alert", "metadata": {"name": "releases"},
         "spec": {"providerRef": {"name": "hook"}, "eventSeverity": "info",
                  "eventSources": [{"kind": "HelmRelease", "name": "*"}], "eventMetadata": {"env": "prod"}}},
        {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "HelmRepository", "metadata": {"name": "charts"},
         "spec": {"interval": "1h", "url": chart_repo.url}},
        {"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease", "metadata": {"name": "web"},
         "spec": {"interval": "1h", "chart": {"spec": {"chart": "demo", "version": "0.1.0",
                                                      "sourceRef": {"kind": "HelmRepository", "name": "charts"}}},
                  "values": {"fullnameOverride": "web"}}}]))
    sent = eventually(lambda: receiver.at("/flux"), 60)
    event = flux_event(sent[0])
    assert event["involvedObject"]["apiVersion"] == "helm.toolkit.fluxcd.io/v2", event
    assert (event["severity"], event["reason"]) == ("info", "InstallSucceeded")
    assert event["metadata"] == {"env": "prod", "helm.toolkit.fluxcd.io/revision": "0.1.0"}
    # helmop's own HelmRelease of the same name is not Flux's Alert's to see
    apply(kube, ns, hr("web", chart_repo, version="0.1.0", releaseName="web-helmop"))
    ready(kube, ns, "web")
    settled(kube, ns, "hr", "web")
    assert all(flux_event(r)["involvedObject"]["apiVersion"] == "helm.toolkit.fluxcd.io/v2"
               for r in receiver.at("/flux"))

    listed = helmop(operator, "get", "provider,alert", "-n", ns)
    assert listed.returncode == 0, listed.stderr
    assert "hook" not in listed.stdout  # helmop's kinds by default, as `get hr` lists helmop's HelmReleases
    apply(kube, ns, provider("chat", "slack", address=receiver.url("/slack")))
    apply(kube, ns, alert("chat", "chat", "HelmRelease"))
    ready_object(kube, ns, "alerts.helmop.dev", "chat")
    listed = helmop(operator, "get", "provider,alert", "-n", ns)
    assert listed.returncode == 0, listed.stderr
    rows = {line.split()[0]: line.split() for line in listed.stdout.splitlines()[1:]}  # as `flux get`'s columns
    assert set(rows) == {"provider/chat", "alert/chat"}, listed.stdout
    assert all(row[1:3] == ["False", "True"] for row in rows.values()), listed.stdout  # not suspended, Ready
    shown = helmop(operator, "events", "providers.notification.toolkit.fluxcd.io", "hook", "-n", ns)
    assert shown.returncode == 0 and "NotificationSent" in shown.stdout, shown.stdout + shown.stderr
