"""Each provider type Flux has beyond the first fourteen, sent through the real sender to a loopback receiver that
checks the request as the service's API documents it (method, path, headers, body); the change request comments
against a loopback fake of each host's comment API (one comment, then edited in place)."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

import pytest
from aiohttp import web

from helmop.api.addresses import Policy
from helmop.api.errors import SpecError
from helmop.api.notifications import REFUSED_TYPES, TYPES, Event, event_of, parse_provider
from helmop.api.settings import Backoff
from helmop.infra.serving import serve
from helmop.notifications.outbox import Connection, Sender
from helmop.notifications.payloads import BUILDERS, PayloadError, Request, Target, build, deliver
from helmop.notifications.payloads.comments import DIALOGUES
from helmop.notifications.targets import resolve
from tests.forges import Forge

SHA = "5394cb7f48332b2de7c17dd8b8384bbc84b7e738"
UID = "0c9c2e41-aaaa"
ALERT = ("ops", "deploys", "a1b2c3d4-alert")


def event(severity: str = "error", reason: str = "UpgradeFailed", kind: str = "HelmRelease",
          annotations: dict[str, str] | None = None) -> Event:
    obj = {"apiVersion": "helmop.dev/v1alpha1", "kind": kind,
           "metadata": {"name": "web", "namespace": "shop", "uid": UID,
                        "annotations": {"event.toolkit.fluxcd.io/runbook": "https://wiki/web", **(annotations or {})}},
           "status": {"lastAttemptedRevision": "1.2.0"}}
    return event_of(obj, "Warning" if severity == "error" else "Normal", reason, "it broke")


@dataclass(frozen=True)
class Seen:
    method: str
    path: str  # with its query
    headers: dict[str, str]  # names in lowercase
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@pytest.fixture
async def service() -> AsyncIterator[tuple[str, list[Seen]]]:
    """A loopback receiver recording each request; it answers as the services do when all is well."""
    seen: list[Seen] = []

    async def handle(request: web.Request) -> web.Response:
        seen.append(Seen(request.method, request.path_qs, {k.lower(): v for k, v in request.headers.items()},
                         await request.read()))
        return web.json_response({"ok": True, "id": "1"})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    server = await serve(app, "127.0.0.1", 0)
    yield f"http://127.0.0.1:{server.port}", seen
    await server.stop()


async def sent(sent_event: Event, target: Target) -> int:
    sender = Sender(Policy.notifications(["127.0.0.1/32"]), Backoff(0.1, 0.1), retry_for=1.0)
    try:
        async def send(request: Request) -> str:
            return await sender.send(request, Connection())
        return await deliver(sent_event, target, send)
    finally:
        await sender.close()


def json_post(seen: Seen, path: str) -> Any:
    assert (seen.method, seen.path, seen.headers["content-type"]) == ("POST", path, "application/json"), seen
    return seen.json()


# --- chats and messengers -----------------------------------------------------------------------------------


async def test_rocket_is_sent_slacks_message(service: Any) -> None:
    url, seen = service
    assert await sent(event(), Target("rocket", f"{url}/hooks/abc", channel="ops", username="bot")) == 1
    message = json_post(seen[0], "/hooks/abc")
    assert (message["channel"], message["username"]) == ("ops", "bot")
    attachment = message["attachments"][0]
    assert attachment["color"] == "#FF0000" and attachment["author_name"] == "helmrelease/web.shop"
    assert attachment["text"] == "it broke" and attachment["mrkdwn_in"] == ["text"]
    assert {"title": "runbook", "value": "https://wiki/web", "short": False} in attachment["fields"]


async def test_webex_posts_markdown_to_the_room(service: Any) -> None:
    url, seen = service
    await sent(event(), Target("webex", f"{url}/v1/messages", channel="room-1", token="bot-tok"))
    message = json_post(seen[0], "/v1/messages")
    assert seen[0].headers["authorization"] == "Bearer bot-tok"
    assert message["roomId"] == "room-1"
    assert message["markdown"].startswith("💣 **helmrelease/web.shop**\nit broke\n")
    assert ">**runbook**: https://wiki/web\n" in message["markdown"]


async def test_telegram_calls_send_message_in_markdown_v2(service: Any) -> None:
    url, seen = service
    await sent(event(), Target("telegram", url, channel="-1001234:7", token="123:AbC"))
    message = json_post(seen[0], "/bot123:AbC/sendMessage")
    assert (message["chat_id"], message["message_thread_id"], message["parse_mode"]) == ("-1001234", "7",
                                                                                         "MarkdownV2")
    assert message["text"] == "*🚨 helmrelease/web/shop*\nit broke\n\\- *runbook*: https://wiki/web\n" \
                              "\\- *helmop\\.dev/revision*: 1\\.2\\.0\n"
    # without an address, the Bot API's own server
    request = build(event(), Target("telegram", "", channel="@ops", token="t"))[0]
    assert request.url == "https://api.telegram.org/bott/sendMessage"
    assert "message_thread_id" not in json.loads(request.body)
    with pytest.raises(PayloadError, match=r"needs spec\.channel"):
        build(event(), Target("telegram", "", token="t"))


async def test_lark_sends_a_message_card(service: Any) -> None:
    url, seen = service
    await sent(event("info", "UpgradeSucceeded"), Target("lark", f"{url}/open-apis/bot/v2/hook/x"))
    message = json_post(seen[0], "/open-apis/bot/v2/hook/x")
    assert message["msg_type"] == "interactive"
    card = message["card"]
    assert card["config"] == {"wide_screen_mode": True}
    assert card["header"] == {"title": {"tag": "plain_text", "content": "💫 helmrelease/web.shop"},
                              "template": "turquoise"}
    text = card["elements"][0]
    assert text["tag"] == "div" and text["text"]["tag"] == "lark_md"
    assert text["text"]["content"].startswith("**it broke**\n\nrunbook: https://wiki/web\n")


async def test_matrix_puts_a_room_message(service: Any) -> None:
    url, seen = service
    await sent(event(), Target("matrix", url, channel="!room:example.org", token="syt_tok"))
    request = seen[0]
    assert request.method == "PUT" and request.headers["authorization"] == "Bearer syt_tok"
    prefix = "/_matrix/client/r0/rooms/!room:example.org/send/m.room.message/"
    assert request.path.startswith(prefix) and len(request.path.removeprefix(prefix)) == 40  # the transaction id
    assert request.json() == {"msgtype": "m.text", "body": "🚨 helmrelease/web.shop\nit broke\n- runbook: "
                                                           "https://wiki/web\n- helmop.dev/revision: 1.2.0\n"}


async def test_zulip_posts_a_stream_message_as_a_form(service: Any) -> None:
    url, seen = service
    await sent(event(), Target("zulip", f"{url}/ignored", channel="general/deploys", username="bot@zulip.example",
                               password="api-key"))
    request = seen[0]
    assert (request.method, request.path) == ("POST", "/api/v1/messages")
    assert request.headers["content-type"] == "application/x-www-form-urlencoded"
    assert request.headers["authorization"] == "Basic " + base64.b64encode(b"bot@zulip.example:api-key").decode()
    form = {k: v[0] for k, v in parse_qs(request.body.decode()).items()}
    assert (form["type"], form["to"], form["topic"]) == ("stream", "general", "deploys")
    assert form["content"] == ("## helmop Status\n\n⚠️ HelmRelease/shop/web\n\nit broke\n\nMetadata:\n"
                               "* `helmop.dev/revision`: 1.2.0\n* `runbook`: https://wiki/web\n")
    with pytest.raises(PayloadError, match="CHANNEL/TOPIC"):
        build(event(), Target("zulip", url, channel="general"))


async def test_zoom_sends_a_rich_message_with_the_verification_token(service: Any) -> None:
    url, seen = service
    await sent(event(), Target("zoom", f"{url}/chat/webhooks/incomingwebhook/x", token="verify-tok"))
    message = json_post(seen[0], "/chat/webhooks/incomingwebhook/x?format=full")
    assert seen[0].headers["authorization"] == "verify-tok"  # as it is: the connection's token, no scheme
    assert message["content"]["head"] == {"text": "helmrelease/web.shop", "sub_head": {"text": "error"}}
    assert message["content"]["body"][0] == {"type": "message", "text": "it broke"}
    assert {"key": "runbook", "value": "https://wiki/web"} in message["content"]["body"][1]["items"]
    pinned = build(event(), Target("zoom", f"{url}/hook?format=message", token="t"))[0]
    assert pinned.url.endswith("/hook?format=message")  # a format the address asks for is kept


# --- alerting and observability -----------------------------------------------------------------------------


async def test_opsgenie_creates_an_alert_with_a_stable_alias(service: Any) -> None:
    url, seen = service
    await sent(event(), Target("opsgenie", f"{url}/v2/alerts", token="genie", provider_uid="p-uid"))
    alert = json_post(seen[0], "/v2/alerts")
    assert seen[0].headers["authorization"] == "GenieKey genie"
    assert alert["message"] == "HelmRelease/web" and alert["description"] == "it broke"
    assert alert["alias"] == hashlib.sha256(b"p-uid/HelmRelease/shop/web/UpgradeFailed").hexdigest()[:64]
    assert alert["details"] == {"runbook": "https://wiki/web", "helmop.dev/revision": "1.2.0", "severity": "error"}


async def test_incident_io_fires_and_resolves_by_the_objects_uid(service: Any) -> None:
    url, seen = service
    target = Target("incident.io", f"{url}/v2/alert_events/http/src-1", token="inc-tok")
    await sent(event(), target)
    fired = json_post(seen[0], "/v2/alert_events/http/src-1")
    assert seen[0].headers["authorization"] == "Bearer inc-tok"
    assert (fired["title"], fired["status"], fired["deduplication_key"]) == (
        "helmrelease/web.shop: UpgradeFailed", "firing", UID)
    assert fired["description"] == "it broke"
    assert fired["metadata"] == {"runbook": "https://wiki/web", "helmop.dev/revision": "1.2.0", "severity": "error",
                                 "reason": "UpgradeFailed", "reportingController": "helmop"}
    await sent(event("info", "UpgradeSucceeded"), target)
    assert json_post(seen[1], "/v2/alert_events/http/src-1")["status"] == "resolved"
    assert await sent(event("info", "Progressing"), target) == 0 and len(seen) == 2  # neither: not sent


async def test_datadog_posts_an_event_to_the_sites_api(service: Any) -> None:
    url, seen = service
    await sent(event(), Target("datadog", f"{url}/ignored/path", token="dd-api-key"))
    posted = json_post(seen[0], "/api/v1/events")
    assert seen[0].headers["dd-api-key"] == "dd-api-key"
    assert posted["title"] == "Events from the HelmRelease web/shop" and posted["text"] == "it broke"
    assert (posted["alert_type"], posted["source_type_name"]) == ("error", "fluxcd")
    assert isinstance(posted["date_happened"], int) and posted["date_happened"] > 1_600_000_000
    assert set(posted["tags"]) == {"flux_reporting_controller:helmop", "flux_reason:upgradefailed",
                                   "kube_kind:helmrelease", "kube_name:web", "kube_namespace:shop",
                                   "runbook:https://wiki/web", "helmop.dev/revision:1.2.0"}


def envelope(seen: Seen) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """An envelope's header, its one item's header and the item, each checked as Sentry reads them."""
    header, item_header, item, end = seen.body.split(b"\n")
    assert end == b"" and json.loads(item_header)["length"] == len(item)
    return json.loads(header), json.loads(item_header), json.loads(item)


async def test_sentry_gets_an_error_event_or_a_transaction_in_an_envelope(service: Any) -> None:
    url, seen = service
    dsn = url.replace("http://", "http://public-key@") + "/42"
    target = Target("sentry", dsn, channel="staging")
    await sent(event(), target)
    request = seen[0]
    assert (request.method, request.path) == ("POST", "/api/42/envelope/")
    assert request.headers["content-type"] == "application/x-sentry-envelope"
    assert "sentry_key=public-key" in request.headers["x-sentry-auth"]
    assert request.headers["x-sentry-auth"].startswith("Sentry sentry_version=7")
    header, item_header, error = envelope(request)
    assert item_header["type"] == "event" and header["event_id"] == error["event_id"] and len(error["event_id"]) == 32
    assert (error["level"], error["message"], error["environment"]) == ("error", "it broke", "staging")
    assert error["transaction"] == "HelmRelease: shop/web" and error["contexts"]["metadata"]["runbook"] == (
        "https://wiki/web")
    await sent(event("info", "UpgradeSucceeded"), target)
    _, item_header, transaction = envelope(seen[1])
    assert item_header["type"] == "transaction" == transaction["type"]
    span = transaction["spans"][0]
    assert span["op"] == "event" and span["tags"]["flux_involved_object_kind"] == "HelmRelease"
    assert transaction["contexts"]["trace"] == {"trace_id": span["trace_id"], "span_id": span["span_id"],
                                                "op": "event"}
    assert transaction["start_timestamp"] == transaction["timestamp"]
    with pytest.raises(PayloadError, match="must be a DSN"):
        build(event(), Target("sentry", url))


async def test_otel_exports_one_span_over_otlp_http(service: Any) -> None:
    url, seen = service
    await sent(event(), Target("otel", f"{url}/v1/traces", token="otlp-tok", alert=ALERT))
    traces = json_post(seen[0], "/v1/traces")
    assert seen[0].headers["authorization"] == "Bearer otlp-tok"
    resource_spans = traces["resourceSpans"][0]
    attributes = {a["key"]: a["value"]["stringValue"] for a in resource_spans["resource"]["attributes"]}
    assert attributes == {"service.name": "ops/deploys", "service.namespace": "ops",
                          "service.instance.id": "a1b2c3d4-alert"}
    span = resource_spans["scopeSpans"][0]["spans"][0]
    # Flux's trace id: the Alert's uid and the revision, hashed, so a revision's events are one trace
    assert span["traceId"] == hashlib.sha256(b"a1b2c3d4-alert:1.2.0").hexdigest()[:32]
    assert len(span["spanId"]) == 16 and span["name"] == "HelmRelease: shop/web" and span["kind"] == 1
    assert int(span["endTimeUnixNano"]) >= int(span["startTimeUnixNano"]) > 1_600_000_000 * 10**9
    assert span["status"] == {"code": 2, "message": "it broke"}
    spanned = {a["key"]: a["value"]["stringValue"] for a in span["attributes"]}
    assert spanned["object.kind"] == "HelmRelease" and spanned["object.uid"] == UID
    assert spanned["runbook"] == "https://wiki/web"
    assert await sent(event(kind="HelmRepository"), Target("otel", url, alert=ALERT)) == 0  # not a span (Flux's)


# --- git hosts ------------------------------------------------------------------------------------------------


async def test_githubdispatch_sends_a_repository_dispatch(service: Any) -> None:
    url, seen = service
    await sent(event(), Target("githubdispatch", f"{url}/org/repo", token="ghp_tok"))
    dispatch = json_post(seen[0], "/api/v3/repos/org/repo/dispatches")
    assert seen[0].headers["authorization"] == "Bearer ghp_tok"
    assert seen[0].headers["accept"] == "application/vnd.github+json"
    assert dispatch["event_type"] == "HelmRelease/web.shop"
    assert dispatch["client_payload"] == event().to_json() | {"timestamp": dispatch["client_payload"]["timestamp"]}
    github = build(event(), Target("githubdispatch", "https://github.com/org/repo", token="t"))[0]
    assert github.url == "https://api.github.com/repos/org/repo/dispatches"


async def test_azuredevops_sets_a_commit_status(service: Any) -> None:
    url, seen = service
    target = Target("azuredevops", f"{url}/org/proj/_git/repo", token="pat", status_id="helmrelease/web/0c9c2e41")
    commit = {"event.toolkit.fluxcd.io/commit": SHA}  # Flux's: the object names the commit its events mark
    for reason, severity in (("Progressing", "info"), ("UpgradeSucceeded", "info"), ("UpgradeFailed", "error")):
        await sent(event(severity, reason, annotations=commit), target)
    path = f"/org/proj/_apis/git/repositories/repo/commits/{SHA}/statuses?api-version=7.1"
    statuses = [json_post(s, path) for s in seen]
    assert all(s.headers["authorization"] == "Basic " + base64.b64encode(b":pat").decode() for s in seen)
    assert [s["state"] for s in statuses] == ["pending", "succeeded", "error"]
    assert statuses[0]["context"] == {"genre": "fluxcd", "name": "helmrelease/web/0c9c2e41"}
    assert statuses[2]["description"] == "upgrade failed"
    with pytest.raises(PayloadError, match="ORGANIZATION/PROJECT/_git/REPOSITORY"):
        build(event(annotations=commit), Target("azuredevops", "https://dev.azure.com/org/repo", token="t"))


@pytest.mark.parametrize(("host", "address", "marker"), [
    ("github", "/org/repo", "flux-pr-comment-key"),
    ("gitlab", "/group/proj.git", "flux-mr-comment-key"),
    ("gitea", "/org/repo", "flux-pr-comment-key"),
])
async def test_a_pull_request_gets_one_comment_that_later_events_edit(host: str, address: str, marker: str) -> None:
    forge = Forge(host, "forge-tok")
    kind = {"github": "githubpullrequestcomment", "gitlab": "gitlabmergerequestcomment",
            "gitea": "giteapullrequestcomment"}[host]
    target = Target(kind, forge.url + address, token="forge-tok", provider_uid="prov-uid")
    key = f"<!-- {marker}:prov-uid/HelmRelease/shop/web -->"
    # someone else's comment with the same marker is not the provider's
    forge.comments.append({"id": 7, "number": 12, "author": "mallory", "body": key})
    try:
        pull = {"event.toolkit.fluxcd.io/change_request": "12"}
        assert await sent(event(annotations=pull), target) == 3  # who am I, the comments, one created
        assert await sent(event("info", "UpgradeSucceeded", annotations=pull), target) == 3  # ..., one edited
        assert await sent(event(), target) == 0  # an object that names no change request: nothing
    finally:
        forge.close()
    mine = [c for c in forge.comments if c["author"] == "helmop-bot"]
    info = "\u2139\ufe0f"  # Flux's sign of an info event
    assert len(mine) == 1 and mine[0]["body"].startswith(f"{key}\n\n## helmop Status\n\n{info} HelmRelease/shop/web")
    assert "* `runbook`: https://wiki/web" in mine[0]["body"] and "change_request" not in mine[0]["body"]
    created, edited = forge.writes()
    assert created.method == "POST" and created.body == {"body": created.body["body"]}
    assert edited.method == {"github": "PATCH", "gitlab": "PUT", "gitea": "PATCH"}[host]
    assert edited.path.endswith(f"/{mine[0]['id']}") and "UpgradeSucceeded" not in edited.body["body"]
    listed = [c.path for c in forge.calls if c.method == "GET" and "/user" not in c.path]
    assert all(("per_page=100" in p) or ("limit=100" in p) for p in listed), listed


async def test_a_change_request_number_must_be_a_number() -> None:
    target = Target("githubpullrequestcomment", "https://github.com/o/r", token="t", provider_uid="u")
    pull = {"event.toolkit.fluxcd.io/change_request": "12/../../admin"}
    with pytest.raises(PayloadError, match="is not a pull request's number"):
        await deliver(event(annotations=pull), target, _never)


async def _never(request: Request) -> str:
    raise AssertionError(request.url)


# --- what is refused ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "why"), [("nats", "NATS's own protocol"), ("googlepubsub", "Google identity"),
                                           ("azureeventhub", "AMQP")])
def test_types_of_another_protocol_are_refused_by_name(kind: str, why: str) -> None:
    with pytest.raises(SpecError, match=why) as caught:
        parse_provider({"type": kind})
    assert caught.value.reason == "UnsupportedProviderType" and repr(kind) in str(caught.value)


def test_a_service_account_is_refused_by_name() -> None:
    with pytest.raises(SpecError, match=r"spec\.serviceAccountName \(a cloud workload identity") as caught:
        parse_provider({"type": "azuredevops", "serviceAccountName": "tenant-a"})
    assert caught.value.reason == "UnsupportedField"
    assert parse_provider({"type": "azuredevops", "commitStatusExpr": "'x'"}).commit_status


def test_every_type_is_sent_or_refused_by_name() -> None:
    assert set(TYPES) == set(BUILDERS) | set(DIALOGUES) and len(TYPES) + len(REFUSED_TYPES) == 34
    assert all(parse_provider({"type": kind}).type == kind for kind in TYPES)


class _Secrets:
    """The one Secret a Provider names, as the API server gives it (values base64)."""

    def __init__(self, **data: str) -> None:
        self.data = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}

    async def get(self, path: str) -> dict[str, Any]:
        assert path == "/api/v1/namespaces/shop/secrets/creds", path
        return {"data": self.data}


async def test_a_github_apps_keys_are_refused_by_name_and_a_password_stands_for_a_token() -> None:
    spec = parse_provider({"type": "githubdispatch", "address": "https://github.com/o/r",
                           "secretRef": {"name": "creds"}})
    with pytest.raises(PayloadError, match=r"GitHub App's keys \(githubAppID"):
        await resolve(_Secrets(githubAppID="1", githubAppPrivateKey="k"), "shop", spec)  # type: ignore[arg-type]
    resolved = await resolve(_Secrets(username="u", password="ghp_pw"), "shop", spec)  # type: ignore[arg-type]
    assert build(event(), resolved.target)[0].headers["Authorization"] == "Bearer ghp_pw"
    assert resolved.secrets == ["u", "ghp_pw"]  # what a message about this delivery masks
