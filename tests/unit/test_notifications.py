"""Notifications, the pure parts (specs, matching, each service's payload) and delivery against loopback receivers
(retries, Retry-After, final answers, the address policy, a dead receiver's bounded queue)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import ipaddress
import json
import socket
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from helmop.api.addresses import AddressRefused, Policy
from helmop.api.errors import SpecError
from helmop.api.notifications import Event, event_of, parse_alert, parse_provider
from helmop.api.settings import Backoff
from helmop.infra.addresses import Resolver, check_url
from helmop.infra.metrics import Metrics
from helmop.infra.serving import serve
from helmop.notifications.outbox import Connection, Outbox, Sender, Undeliverable
from helmop.notifications.payloads import PayloadError, Request, Target, build
from helmop.notifications.payloads.commits import commit_of

SHA = "5394cb7f48332b2de7c17dd8b8384bbc84b7e738"


def release_event_obj() -> dict[str, Any]:
    return {"apiVersion": "helmop.dev/v1alpha1", "kind": "HelmRelease",
            "metadata": {"name": "web", "namespace": "shop", "uid": "0c9c2e41-aaaa", "labels": {"team": "a"},
                         "annotations": {"event.toolkit.fluxcd.io/runbook": "https://wiki/web"}},
            "status": {"lastAttemptedRevision": "1.2.0"}}


def release_event(severity: str = "error", reason: str = "UpgradeFailed", **changes: Any) -> Event:
    return event_of({**release_event_obj(), **changes}, "Warning" if severity == "error" else "Normal", reason,
                    "it broke")


def sync_event(reason: str, severity: str = "info") -> Event:
    obj = {"apiVersion": "helmop.dev/v1alpha1", "kind": "ConfigSync",
           "metadata": {"name": "apps", "namespace": "ops", "uid": "u1"},
           "status": {"lastAttemptedRevision": f"main@sha1:{SHA}"}}
    return event_of(obj, "Warning" if severity == "error" else "Normal", reason, "applying")


# --- specs and matching -------------------------------------------------------------------------------------


def test_a_provider_spec_is_checked() -> None:
    with pytest.raises(SpecError, match=r"spec\.type must be one of"):
        parse_provider({"type": "carrier-pigeon"})
    with pytest.raises(SpecError, match="commitStatusExpr is only for"):
        parse_provider({"type": "slack", "commitStatusExpr": "'x'"})
    with pytest.raises(SpecError, match="http:// or https://"):
        parse_provider({"type": "generic", "address": "file:///etc/passwd"})
    assert parse_provider({"type": "github", "timeout": "30s"}).timeout == 30.0


def test_an_alert_selects_by_kind_name_namespace_labels_and_severity() -> None:
    alert = parse_alert({"providerRef": {"name": "p"}, "eventSeverity": "error",
                         "eventSources": [{"kind": "HelmRelease", "name": "*", "matchLabels": {"team": "a"}}]}, "shop")
    assert alert.accepts(release_event())
    assert not alert.accepts(release_event(severity="info", reason="UpgradeSucceeded"))  # errors only
    other = release_event(metadata={"name": "web", "namespace": "other", "uid": "x", "labels": {"team": "a"}})
    assert not alert.accepts(other)  # an event source without a namespace is the Alert's own
    assert not alert.accepts(release_event(metadata={"name": "web", "namespace": "shop", "uid": "x"}))  # labels
    flux = parse_alert({"providerRef": {"name": "p"}, "eventSources": [{"kind": "HelmRelease", "name": "*"}]}, "shop",
                       flux=True)
    assert not flux.accepts(release_event())  # Flux's Alerts see Flux's kinds, helmop's their own


def test_inclusion_and_exclusion_lists_are_re2_and_exclusion_wins() -> None:
    spec = {"providerRef": {"name": "p"}, "eventSources": [{"kind": "HelmRelease", "name": "web"}],
            "inclusionList": ["broke"], "exclusionList": ["^it"]}
    assert not parse_alert(spec, "shop").accepts(release_event())
    assert parse_alert({**spec, "exclusionList": []}, "shop").accepts(release_event())
    # a backtracking bomb for Python's re is linear for RE2 (a long message is matched at once)
    bomb = parse_alert({**spec, "inclusionList": ["(a+)+$"], "exclusionList": []}, "shop")
    started = time.monotonic()
    assert not bomb.accepts(Event(**{**release_event().__dict__, "message": "a" * 5000 + "!"}))
    assert time.monotonic() - started < 0.5
    with pytest.raises(SpecError, match=r"spec.inclusionList\[0\] is not a regular expression"):
        parse_alert({**spec, "inclusionList": ["("]}, "shop")


def test_metadata_follows_fluxs_precedence() -> None:
    alert = parse_alert({"providerRef": {"name": "p"}, "eventSources": [{"kind": "HelmRelease", "name": "*"}],
                         "eventMetadata": {"runbook": "alert's", "env": "prod", "helmop.dev/revision": "spoofed"},
                         "summary": "web down"}, "shop")
    metadata = alert.decorated(release_event()).metadata
    assert metadata == {"runbook": "alert's", "env": "prod", "summary": "web down", "helmop.dev/revision": "1.2.0"}


# --- payloads -----------------------------------------------------------------------------------------------


def only(requests: list[Request]) -> tuple[Request, Any]:
    assert len(requests) == 1
    return requests[0], json.loads(requests[0].body)


def test_generic_hmac_signs_the_body_with_the_token() -> None:
    request, body = only(build(release_event(), Target("generic-hmac", "https://hooks.example/x", token="k3y")))
    assert request.headers["X-Signature"] == "sha256=" + hmac.new(b"k3y", request.body, hashlib.sha256).hexdigest()
    assert body["involvedObject"]["kind"] == "HelmRelease" and body["severity"] == "error"
    with pytest.raises(PayloadError, match="needs a token"):
        build(release_event(), Target("generic-hmac", "https://hooks.example/x"))


def test_chat_payloads_follow_each_services_api() -> None:
    request, slack = only(build(release_event(), Target("slack", "https://slack.com/api/chat.postMessage",
                                                        channel="ops", token="xoxb-1")))
    assert request.headers["Authorization"] == "Bearer xoxb-1" and slack["channel"] == "ops"
    assert slack["attachments"][0]["color"] == "danger"
    request, discord = only(build(release_event(), Target("discord", "https://discord.com/api/webhooks/1/t",
                                                          channel="ignored")))
    assert request.url.endswith("/api/webhooks/1/t/slack") and "channel" not in discord
    _, teams = only(build(release_event(), Target("msteams", "https://prod.logic.azure.com/workflows/x")))
    card = teams["attachments"][0]
    assert card["contentType"] == "application/vnd.microsoft.card.adaptive"
    assert card["content"]["type"] == "AdaptiveCard" and card["content"]["body"][2]["type"] == "FactSet"
    _, connector = only(build(release_event(), Target("msteams", "https://acme.webhook.office.com/webhookb2/x")))
    assert connector["@type"] == "MessageCard"
    _, chat = only(build(release_event(), Target("googlechat", "https://chat.googleapis.com/v1/spaces/x")))
    widgets = chat["cardsV2"][0]["card"]["sections"][0]["widgets"]
    assert widgets[0] == {"textParagraph": {"text": "it broke"}}
    assert {"decoratedText": {"topLabel": "runbook", "text": "https://wiki/web"}} in widgets


def test_alerting_payloads_follow_each_services_api() -> None:
    request, alerts = only(build(release_event(), Target("alertmanager", "https://am/api/v2/alerts", token="t")))
    assert request.headers["Authorization"] == "Bearer t"
    labels = alerts[0]["labels"]
    assert labels["alertname"] == "HelmopHelmReleaseUpgradeFailed" and labels["helmop_dev_revision"] == "1.2.0"
    assert all(key.replace("_", "a").isalnum() for key in labels)  # valid Prometheus label names
    request, annotation = only(build(release_event(), Target("grafana", "https://g/api/annotations", username="u",
                                                             password="p")))
    assert request.headers["Authorization"] == "Basic " + base64.b64encode(b"u:p").decode()
    assert annotation["time"] > 1_600_000_000_000 and "kind: HelmRelease" in annotation["tags"]
    _, trigger = only(build(release_event(), Target("pagerduty", "https://events.pagerduty.com/x", channel="rk")))
    assert (trigger["routing_key"], trigger["event_action"], trigger["dedup_key"]) == ("rk", "trigger", "0c9c2e41-aaaa")
    assert trigger["payload"]["severity"] == "error" and trigger["payload"]["summary"] == (
        "upgrade failed: HelmRelease/web.shop")
    resolve, change = build(release_event("info", "UpgradeSucceeded"), Target("pagerduty", "https://e.pd/x",
                                                                              channel="rk"))
    assert resolve.url == "https://e.pd/v2/enqueue" and json.loads(resolve.body)["event_action"] == "resolve"
    assert change.url == "https://e.pd/v2/change/enqueue"


@pytest.mark.parametrize(("kind", "address", "url", "state"), [
    ("github", "https://github.com/org/repo", f"https://api.github.com/repos/org/repo/statuses/{SHA}", "pending"),
    ("github", "git@ghe.corp:org/repo.git", f"https://ghe.corp/api/v3/repos/org/repo/statuses/{SHA}", "pending"),
    ("gitlab", "https://gitlab.com/group/sub/repo", f"https://gitlab.com/api/v4/projects/group%2Fsub%2Frepo/statuses/"
                                                    f"{SHA}", "pending"),
    ("gitea", "ssh://git@gitea.io:2222/org/repo.git", f"https://gitea.io/api/v1/repos/org/repo/statuses/{SHA}",
     "pending"),
    ("bitbucket", "https://bitbucket.org/ws/repo", f"https://api.bitbucket.org/2.0/repositories/ws/repo/commit/{SHA}"
                                                   "/statuses/build", "INPROGRESS"),
    ("bitbucketserver", "https://bb.corp/ctx/scm/PROJ/repo.git",
     f"https://bb.corp/ctx/rest/api/latest/projects/PROJ/repos/repo/commits/{SHA}/builds", "INPROGRESS"),
])
def test_commit_statuses_follow_each_hosts_api(kind: str, address: str, url: str, state: str) -> None:
    target = Target(kind, address, token="u:app-pass" if kind.startswith("bitbucket") else "tok",
                    status_id="configsync/apps/0c9c2e41")
    request, status = only(build(sync_event("Progressing"), target))
    assert request.url == url
    assert status["state"] == state
    _, done = only(build(sync_event("ReconciliationSucceeded"), target))
    _, failed = only(build(sync_event("ApplyFailed", "error"), target))
    assert (done["state"], failed["state"]) in {("success", "failure"), ("success", "failed"),
                                                 ("SUCCESSFUL", "FAILED")}


def test_a_commit_status_needs_a_commit() -> None:
    assert build(release_event("info"), Target("github", "https://github.com/o/r", token="t")) == []
    assert commit_of(f"main@sha1:{SHA}") == SHA and commit_of(f"main/{SHA}") == SHA and commit_of("1.2.0") == ""


def test_the_commit_an_event_marks_is_fluxs_choice() -> None:
    """The object's own commit (event.toolkit.fluxcd.io/commit) first, then its origin revision: for a release,
    the revision its chart was read at, when that chart is in a GitRepository; then its revision."""
    chart = {"spec": {"chart": {"sourceRef": {"kind": "GitRepository", "name": "charts"}}}}
    origin = f"main@sha1:{SHA}"
    assert release_event(**chart).revision() == "1.2.0"
    from_git = event_of({**release_event_obj(), **chart}, "Normal", "UpgradeSucceeded", "ok", origin=origin)
    assert from_git.revision() == origin and from_git.metadata["helmop.dev/originRevision"] == origin
    from_repository = event_of(release_event_obj(), "Normal", "UpgradeSucceeded", "ok", origin=origin)
    assert "helmop.dev/originRevision" not in from_repository.metadata  # a chart repository's: no commit
    annotated = release_event_obj()
    annotated["metadata"]["annotations"]["event.toolkit.fluxcd.io/commit"] = "a" * 40
    assert event_of({**annotated, **chart}, "Normal", "X", "ok", origin=origin).revision() == "a" * 40


# --- addresses ------------------------------------------------------------------------------------------------


def test_the_policy_refuses_internal_ranges_unless_allowed() -> None:
    policy = Policy.notifications(["10.96.0.0/12"])
    for internal in ("127.0.0.1", "169.254.169.254", "10.0.0.1", "192.168.1.1", "100.64.0.1", "::1", "fd00::1",
                     "::ffff:127.0.0.1", "0.0.0.0", "224.0.0.1"):
        assert policy.problem(ipaddress.ip_address(internal)), internal
    assert not policy.problem(ipaddress.ip_address("10.96.0.10"))
    assert not policy.problem(ipaddress.ip_address("93.184.216.34"))
    with pytest.raises(AddressRefused):
        check_url(policy, "http://[::ffff:169.254.169.254]/latest")


async def test_a_name_is_checked_as_it_resolves() -> None:
    with pytest.raises(AddressRefused, match="localhost resolves to"):
        await Resolver(Policy.notifications()).resolve("localhost", 80, socket.AF_INET)
    assert await Resolver(Policy.notifications(["127.0.0.0/8"])).resolve("localhost", 80, socket.AF_INET)


# --- delivery -----------------------------------------------------------------------------------------------


@pytest.fixture
async def receiver() -> AsyncIterator[tuple[str, list[web.Request], list[web.Response]]]:
    """A loopback receiver answering with the queued responses (200 once they run out)."""
    seen: list[web.Request] = []
    answers: list[web.Response] = []

    async def handle(request: web.Request) -> web.Response:
        await request.read()
        seen.append(request)
        return answers.pop(0) if answers else web.json_response({"ok": True})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    server = await serve(app, "127.0.0.1", 0)
    yield f"http://127.0.0.1:{server.port}", seen, answers
    await server.stop()


async def test_retries_honour_retry_after_and_stop_at_a_final_answer(receiver: Any) -> None:
    url, seen, answers = receiver
    sender = Sender(Policy.notifications(["127.0.0.1/32"]), Backoff(5.0, 5.0), retry_for=30.0)
    answers += [web.Response(status=429, headers={"Retry-After": "0"}), web.Response(status=503,
                                                                                   headers={"Retry-After": "0"})]
    retries: list[int] = []
    await sender.send(Request(f"{url}/hook", b"{}"), Connection(), lambda: retries.append(1))
    assert len(seen) == 3 and len(retries) == 2  # a Retry-After of 0 is waited, not the 5 s backoff
    answers.append(web.Response(status=400, text="no such channel"))
    with pytest.raises(Undeliverable, match="answered 400: no such channel"):
        await sender.send(Request(f"{url}/hook", b"{}"), Connection())
    answers.append(web.json_response({"ok": False, "error": "channel_not_found"}))
    with pytest.raises(Undeliverable, match="channel_not_found"):
        await sender.send(Request(f"{url}/hook", b"{}"), Connection())
    answers.append(web.Response(status=302, headers={"Location": "http://127.0.0.2/elsewhere"}))
    with pytest.raises(Undeliverable, match=r"127\.0\.0\.2 is a loopback"):
        await sender.send(Request(f"{url}/hook", b"{}"), Connection())
    await sender.close()


async def test_a_redirect_to_another_origin_carries_no_credentials(receiver: Any) -> None:
    url, seen, answers = receiver
    moved: list[web.Request] = []

    async def elsewhere(request: web.Request) -> web.Response:
        moved.append(request)
        return web.json_response({"ok": True, "moved": True})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", elsewhere)
    other = await serve(app, "127.0.0.1", 0)  # another port: another origin
    sender = Sender(Policy.notifications(["127.0.0.1/32"]), Backoff(0.1, 0.1), retry_for=1.0)
    answers.append(web.Response(status=307, headers={"Location": f"http://127.0.0.1:{other.port}/moved"}))
    headers = {"Authorization": "Bearer t0k", "PRIVATE-TOKEN": "t0k", "Content-Type": "application/json"}
    try:
        answer = await sender.send(Request(f"{url}/hook", b"{}", headers), Connection())
    finally:
        await sender.close()
        await other.stop()
    assert json.loads(answer) == {"ok": True, "moved": True}  # the answer's text is handed back
    assert seen[0].headers["Authorization"] == "Bearer t0k" and moved[0].path == "/moved"
    assert "Authorization" not in moved[0].headers and "PRIVATE-TOKEN" not in moved[0].headers
    assert moved[0].headers["Content-Type"] == "application/json" and moved[0].method == "POST"


async def test_a_dead_receiver_costs_a_bounded_queue_and_nothing_else() -> None:
    with socket.socket() as probe:  # a port nobody listens on: every attempt is refused at once
        probe.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{probe.getsockname()[1]}/hook"
    sender = Sender(Policy.notifications(["127.0.0.1/32"]), Backoff(0.05, 0.2), retry_for=3600.0)
    dropped: list[int] = []
    outbox = Outbox(100, lambda: dropped.append(1))
    metrics = Metrics()
    health = await serve(metrics.app(lambda: ""), "127.0.0.1", 0)
    try:
        for i in range(1000):
            outbox.put(lambda i=i: sender.send(Request(dead, json.dumps({"n": i}).encode()), Connection()))
            if i % 100 == 0:
                await asyncio.sleep(0)
        assert len(outbox.queue) <= 100 and len(dropped) >= 899  # the oldest dropped, counted
        started = time.monotonic()
        async with aiohttp.ClientSession() as client, client.get(f"http://127.0.0.1:{health.port}/healthz") as ok:
            assert ok.status == 200
        assert time.monotonic() - started < 0.5
    finally:
        await outbox.close()
        await sender.close()
        await health.stop()


async def test_a_delivery_that_raises_loses_itself_not_the_queue_behind_it() -> None:
    done: list[int] = []

    async def broken() -> None:
        raise RuntimeError("a bug")

    async def fine() -> None:
        done.append(1)

    outbox = Outbox(10, lambda: None)
    outbox.put(broken)
    outbox.put(fine)
    for _ in range(10):
        await asyncio.sleep(0)
    assert done == [1] and not outbox.queue
