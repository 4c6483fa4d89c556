"""Receivers, the pure parts (the spec as Flux's CRD and controller check it, the webhook path, each type's check of
a request, OIDC tokens) and the issuer's keys fetched over loopback through the address policy."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Iterator
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from jwt.algorithms import ECAlgorithm

from helmop.api.addresses import Policy
from helmop.api.bounded import json_within
from helmop.api.errors import SpecError
from helmop.api.hookchecks import Delivery, Refused, check, gcr_payload, google_identity, hmac_valid, is_json
from helmop.api.jwts import TokenRefused, UnknownKey, algorithms, bearer, unverified_issuer, verify
from helmop.api.receivers import parse_receiver, requested_annotation, webhook_path
from helmop.api.tenancy import Tenancy
from helmop.infra.hooktargets import request_reconciles
from helmop.infra.oidc import Issuers, IssuerUnavailable
from helmop.infra.receivers import BURST, Bucket
from helmop.infra.worker import Worker
from tests.oidc import Issuer, rsa_key

TOKEN = b"tok"
BODY = b"a body"
# `printf 'a body' | openssl dgst -sha1|-sha256|-sha512 -hmac tok`
SIGNED = {"sha1": "05509eeb98dbd0189d91d43590a859b1da31d95d",
          "sha256": "535b8c6e3822cd4cc967efdfbeac6b48ad96320891875437a60d3c26c9a063f0",
          "sha512": "d3ceb228708140699a1d6ba0cb58bdc4433544cf87e82e8a09652bba1474c4e646c361051dfe781e407cf869338573"
                    "4071d2da2fc48e8b77c161cc542e25dfec"}


def spec(**fields: Any) -> dict[str, Any]:
    return {"type": "github", "secretRef": {"name": "hook"},
            "resources": [{"kind": "GitRepository", "name": "app"}], **fields}


def refused(kind: str, headers: dict[str, str], body: bytes = BODY) -> int:
    with pytest.raises(Refused) as caught:
        check(kind, Delivery(headers, body), TOKEN)
    return caught.value.status


def test_the_webhook_path_is_fluxs() -> None:
    # `printf '%s' 0123456789abcdefgithub-receiverflux-system | sha256sum`, and with no token (generic-oidc)
    assert webhook_path(b"0123456789abcdef", "github-receiver", "flux-system") == \
        "/hook/a178c38b2b5b4bcc7c98759d498ee869842c7284fb52ff288f53b6b4e16521a4"
    assert webhook_path(b"", "generic-oidc-receiver", "default") == \
        "/hook/4399e88762a0abe9a87e588d0c42b27f13ac7a4fb04bb1ed28be8cb4b2fb4f31"


def test_hmac_signatures_in_go_githubs_prefix_form() -> None:
    for name, hexed in SIGNED.items():
        assert hmac_valid(f"{name}={hexed}", BODY, TOKEN)
        assert hmac_valid(f"{name}={hexed.upper()}", BODY, TOKEN)
        assert not hmac_valid(f"{name}={hexed}", BODY + b"!", TOKEN)
        assert not hmac_valid(f"{name}={hexed}", BODY, b"other")
    for bad in ("", SIGNED["sha256"], f"md5={SIGNED['sha1']}", f"sha256={SIGNED['sha256'][:-1]}",
                f"sha256={SIGNED['sha256'][:-2]} 00", "sha256=zz"):
        assert not hmac_valid(bad, BODY, TOKEN), bad


def test_github_checks_the_signature_then_reads_the_payload() -> None:
    json_type = {"Content-Type": "application/json", "X-GitHub-Event": "push"}
    accepted = check("github", Delivery({**json_type, "X-Hub-Signature-256": f"sha256={SIGNED['sha256']}"}, BODY),
                     TOKEN)
    assert (accepted.event, accepted.payload) == ("push", BODY)
    # the older header when the newer is absent; the newer wins when both are there
    assert check("github", Delivery({**json_type, "X-Hub-Signature": f"sha1={SIGNED['sha1']}"}, BODY), TOKEN)
    assert refused("github", {**json_type, "X-Hub-Signature-256": "sha256=00", "X-Hub-Signature":
                              f"sha1={SIGNED['sha1']}"}) == 401
    assert refused("github", json_type) == 401  # no signature at all, whatever the token
    # form-encoded: the signature is over the raw body, the payload is its payload field
    form = b"payload=%7B%22ref%22%3A%22main%22%7D"
    signature = "sha256=" + hmac.new(TOKEN, form, hashlib.sha256).hexdigest()
    accepted = check("github", Delivery({"Content-Type": "application/x-www-form-urlencoded",
                                         "X-Hub-Signature-256": signature}, form), TOKEN)
    assert accepted.payload == b'{"ref":"main"}'
    # a content type GitHub does not send: refused once authenticated, saying so
    assert refused("github", {"Content-Type": "text/plain", "X-Hub-Signature-256": f"sha256={SIGNED['sha256']}"}) \
        == 400


def test_tokens_and_signatures_of_the_other_types() -> None:
    ok = {"gitlab": {"X-Gitlab-Token": "tok", "X-Gitlab-Event": "Push Hook"}, "harbor": {"Authorization": "tok"},
          "bitbucket": {"X-Hub-Signature": f"sha256={SIGNED['sha256']}", "Content-Type": "application/json",
                        "X-Event-Key": "repo:refs_changed"},
          "generic-hmac": {"X-Signature": f"sha512={SIGNED['sha512']}"}}
    for kind, headers in ok.items():
        check(kind, Delivery(headers, BODY), TOKEN)
        assert refused(kind, {}) == 401, kind
    assert check("gitlab", Delivery(ok["gitlab"], BODY), TOKEN).event == "Push Hook"
    assert check("bitbucket", Delivery(ok["bitbucket"], BODY), TOKEN).event == "repo:refs_changed"
    assert refused("gitlab", {"X-Gitlab-Token": "tok2"}) == 401
    assert refused("harbor", {"Authorization": "Bearer tok"}) == 401
    assert check("generic", Delivery({}, BODY), TOKEN).payload == BODY  # no check at all (Flux's generic)


def test_nexus_and_the_registries_payloads() -> None:
    nexus = b'{"action":"CREATED","repositoryName":"docker-hosted"}'
    signature = hmac.new(TOKEN, nexus, hashlib.sha1).hexdigest()
    check("nexus", Delivery({"X-Nexus-Webhook-Signature": signature}, nexus), TOKEN)
    assert refused("nexus", {"X-Nexus-Webhook-Signature": signature}, nexus + b" ") == 401
    assert refused("nexus", {"X-Nexus-Webhook-Signature": hmac.new(TOKEN, b"[]", hashlib.sha1).hexdigest()},
                   b"[]") == 400  # signed, but not Nexus's payload
    good = {"dockerhub": {"push_data": {"tag": "1.0"}, "repository": {"repo_url": "https://hub.docker.com/r/x"}},
            "quay": {"docker_url": "quay.io/x/y", "updated_tags": ["1.0"]},
            "acr": {"action": "push", "target": {"repository": "x", "tag": "1.0"}}}
    for kind, payload in good.items():
        check(kind, Delivery({}, json.dumps(payload).encode()), b"")
        assert refused(kind, {}, b"not json") == 400
    assert refused("quay", {}, b'{"updated_tags": "1.0"}') == 400  # a string where Quay sends a list
    assert refused("acr", {}, b'{"target": []}') == 400


def test_cdevents_are_read_by_their_context() -> None:
    event = {"context": {"version": "0.4.1", "id": "1", "source": "/ci", "type": "dev.cdevents.change.merged.0.2.0",
                         "timestamp": "2025-01-01T00:00:00Z"}, "subject": {"id": "pr-1", "content": {}}}
    accepted = check("cdevents", Delivery({"Ce-Type": "dev.cdevents.change.merged.0.2.0"},
                                          json.dumps(event).encode()), b"")
    assert accepted.event == "dev.cdevents.change.merged.0.2.0"
    wrong = {**event, "context": {**event["context"], "type": "com.example.thing"}}
    assert refused("cdevents", {}, json.dumps(wrong).encode()) == 400
    assert refused("cdevents", {}, json.dumps({"context": event["context"]}).encode()) == 400


def test_json_bodies_nest_only_so_deep() -> None:
    assert json_within(b'{"a": "[[[[[[", "b": [[1]]}', max_depth=3, what="x") == {"a": "[[[[[[", "b": [[1]]}
    with pytest.raises(ValueError, match="deeper than 64"):
        json_within(b"[" * 10_000 + b"]" * 10_000, max_depth=64, what="the body")
    assert refused("dockerhub", {}, b'{"push_data":' * 100 + b"1" + b"}" * 100) == 400
    assert is_json("application/json; charset=utf-8") and not is_json("text/plain")


def test_gcr_reads_the_pubsub_message_and_googles_identity() -> None:
    data = base64.b64encode(b'{"action":"INSERT","digest":"d@sha256:1","tag":"eu.gcr.io/p/app:1.0"}').decode()
    payload = gcr_payload(json.dumps({"message": {"data": data, "messageId": "1"}}).encode())
    assert json.loads(payload) == {"action": "INSERT", "digest": "d@sha256:1", "tag": "eu.gcr.io/p/app:1.0"}
    with pytest.raises(Refused):
        gcr_payload(b'{"message": {"data": "not base64!"}}')
    claims = {"iss": "https://accounts.google.com", "email": "pusher@p.iam.gserviceaccount.com",
              "email_verified": True}
    google_identity(claims, "pusher@p.iam.gserviceaccount.com")
    for wrong in ({**claims, "email_verified": False}, {**claims, "email": "other@x"}, {**claims, "iss": "x"}):
        with pytest.raises(Refused):
            google_identity(wrong, "pusher@p.iam.gserviceaccount.com")


def test_the_spec_as_fluxs_crd_and_controller_check_it() -> None:
    parsed = parse_receiver(spec(events=["ping", "push"], interval="1h"), flux=True)
    assert parsed.resources[0].api_version == "source.toolkit.fluxcd.io/v1"  # Flux's default for the kind
    assert parsed.interval == 3600 and parsed.handles("PUSH") and not parsed.handles("issues")
    assert parse_receiver(spec(type="harbor", events=["x"]), flux=True).handles("anything")  # harbor has no events
    assert parse_receiver(spec(), flux=False).resources[0].api_version == "helmop.dev/v1alpha1"
    oidc = {"type": "generic-oidc", "resources": [{"kind": "GitRepository", "name": "app"}],
            "oidcProviders": [{"issuerURL": "https://token.actions.githubusercontent.com",
                               "validations": [{"expression": "claims.repository_owner == 'org'", "message": "org"}],
                               "variables": [{"name": "owner", "expression": "claims.repository_owner"}]}]}
    issuer = parse_receiver(oidc, flux=True).issuers[0]
    assert issuer.audience == "notification-controller" and issuer.variables[0].name == "owner"
    bad = {"secretRef cannot be set": {**oidc, "secretRef": {"name": "x"}},
           "secretRef is required": spec(secretRef=None),
           "at least one oidcProvider": {**oidc, "oidcProviders": []},
           "only be set when type is generic-oidc": spec(oidcProviders=oidc["oidcProviders"]),
           "at least one validation": {**oidc, "oidcProviders": [{"issuerURL": "https://x", "validations": []}]},
           "must start with http": {**oidc, "oidcProviders": [{**oidc["oidcProviders"][0], "issuerURL": "x"}]},
           "duplicate issuerURL": {**oidc, "oidcProviders": oidc["oidcProviders"] * 2},
           "not a CEL identifier": {**oidc, "oidcProviders": [{**oidc["oidcProviders"][0], "variables": [
               {"name": "a-b", "expression": "1"}]}]},
           "matchLabels must be set": spec(resources=[{"kind": "GitRepository", "name": "*"}]),
           "apiVersion must be specified": spec(resources=[{"kind": "Kustomization", "name": "apps"}]),
           "must be one of Bucket": spec(resources=[{"kind": "ConfigMap", "name": "x", "apiVersion": "v1"}]),
           "not an API version": spec(resources=[{"kind": "GitRepository", "name": "x", "apiVersion": "../v1"}]),
           "spec.type must be one of": spec(type="gitea")}
    for message, body in bad.items():
        with pytest.raises(SpecError, match=message):
            parse_receiver({k: v for k, v in body.items() if v is not None}, flux=True)


def test_targets_are_asked_with_their_familys_annotation() -> None:
    assert requested_annotation("source.toolkit.fluxcd.io/v1") == "reconcile.fluxcd.io/requestedAt"
    assert requested_annotation("image.toolkit.fluxcd.io/v1") == "reconcile.fluxcd.io/requestedAt"
    assert requested_annotation("helmop.dev/v1alpha1") == "helmop.dev/requestedAt"
    assert requested_annotation("apps.helmop.dev/v1alpha1") == "helmop.dev/requestedAt"


def test_a_receivers_requests_are_rate_limited() -> None:
    bucket = Bucket()
    assert all(bucket.take(100.0) for _ in range(BURST)) and not bucket.take(100.0)
    assert bucket.take(101.0) and not bucket.take(101.0)  # one more a second


@pytest.fixture
def issuer() -> Iterator[Issuer]:
    served = Issuer()
    yield served
    served.close()


def _verified(issuer: Issuer, token: str, audience: str = "notification-controller") -> dict[str, Any]:
    return verify(token, issuer.jwks(), issuers=(issuer.url,), audience=audience, allowed=("RS256",), now=time.time())


def test_tokens_are_verified_with_the_issuers_keys(issuer: Issuer) -> None:
    token = issuer.token({"repository": "org/app"})
    assert bearer(f"Bearer {token}") == token and unverified_issuer(token) == issuer.url
    assert _verified(issuer, token)["repository"] == "org/app"
    refusals = {"expired": issuer.token({}, lifetime=-5), "forged": issuer.token({}, key=rsa_key()),
                "another audience": issuer.token({}, audience="someone-else"),
                "another issuer": issuer.token({}, issuer="https://elsewhere.example.com"),
                "not valid yet": jwt.encode({"iss": issuer.url, "aud": "notification-controller",
                                             "exp": time.time() + 600, "nbf": time.time() + 300}, issuer.key,
                                            algorithm="RS256", headers={"kid": issuer.kid}),
                "HMAC": jwt.encode({"iss": issuer.url, "aud": "notification-controller", "exp": time.time() + 60},
                                   "s" * 32, algorithm="HS256", headers={"kid": issuer.kid}),
                "unsigned": jwt.encode({"iss": issuer.url}, None, algorithm="none")}
    for what, bad in refusals.items():
        with pytest.raises(TokenRefused):
            _verified(issuer, bad)
            pytest.fail(what)
    with pytest.raises(UnknownKey):
        _verified(issuer, issuer.token({}, kid="rotated"))
    for header in ("", "bearer x", "Basic x", "Bearer "):
        with pytest.raises(TokenRefused):
            bearer(header)


def test_an_issuer_that_signs_with_ec_keys() -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    jwks = {"keys": [{**json.loads(ECAlgorithm.to_jwk(key.public_key())), "kid": "e"}]}
    token = jwt.encode({"iss": "https://i", "aud": "a", "exp": time.time() + 60}, key, algorithm="ES256",
                       headers={"kid": "e"})
    allowed = algorithms(["ES256", "HS256", "none"])
    assert allowed == ("ES256",) and algorithms(None) == ("RS256",)
    assert verify(token, jwks, issuers=("https://i",), audience="a", allowed=allowed, now=time.time())["iss"]
    with pytest.raises(TokenRefused):  # an algorithm the issuer does not say it uses
        verify(token, jwks, issuers=("https://i",), audience="a", allowed=("RS256",), now=time.time())


async def test_issuer_keys_by_discovery_through_the_address_policy(issuer: Issuer) -> None:
    keys = await Issuers(Policy.notifications(["127.0.0.1/32"])).keys(issuer.url)
    assert keys.keys == issuer.jwks() and keys.algorithms == ("RS256",)
    assert issuer.paths == ["/.well-known/openid-configuration", "/keys"]
    with pytest.raises(IssuerUnavailable, match="loopback"):  # the cluster's own network, unless allowed
        await Issuers(Policy.notifications()).keys(issuer.url)
    with pytest.raises(IssuerUnavailable, match="names another issuer"):  # the document must be the issuer's own
        await Issuers(Policy.notifications(["127.0.0.1/32"])).keys(issuer.url + "/")


async def test_keys_are_fetched_again_after_a_rotation_but_not_at_every_token(issuer: Issuer) -> None:
    issuers = Issuers(Policy.notifications(["127.0.0.1/32"]))
    await issuers.keys(issuer.url)
    await issuers.keys(issuer.url)
    assert len(issuer.paths) == 2  # kept
    await issuers.keys(issuer.url, rotated=True)
    assert len(issuer.paths) == 2  # fetched just now: not again at once


async def test_filters_and_validations_run_in_the_worker() -> None:
    worker = Worker()
    try:
        objects = [{"metadata": {"name": n}} for n in ("app", "api", "web")]
        kept = await worker.each(["req.tag.contains(res.metadata.name)", "res.metadata.name != 'api'"],
                                 {"req": {"tag": "eu.gcr.io/p/api-and-app:1"}}, "res", objects)
        assert kept == [True, False, False]
        assert await worker.each(["res.nope == 1"], {}, "res", objects[:1]) == [False]  # failing: false
        variables = [("owner", "claims.repository_owner"), ("allowed", "[vars.owner + '/a', vars.owner + '/b']")]
        checks = ["vars.owner == 'org'", "claims.repository in vars.allowed", "claims.absent == 1"]
        assert await worker.validations(variables, checks, {"repository_owner": "org", "repository": "org/b"}) == \
            [True, True, False]
        assert await worker.validations([("x", "claims.absent")], ["true"], {}) is None  # a variable that fails
    finally:
        await worker.close()


class _Kube:
    """What request_reconciles asks of the API: discovery, and the annotations it writes."""

    def __init__(self) -> None:
        self.patched: list[tuple[str, dict[str, Any]]] = []

    async def resource(self, _api_version: str, _kind: str) -> tuple[str, bool]:
        return "gitrepositories", True

    async def merge_patch(self, path: str, patch: dict[str, Any]) -> dict[str, Any]:
        self.patched.append((path, patch))
        return {}


async def test_under_lockdown_no_request_reaches_another_namespace() -> None:
    """Whatever the status says (a spec changed since it was written), the request itself is confined."""
    kube = _Kube()
    receiver = parse_receiver(spec(resources=[{"kind": "GitRepository", "name": "app", "namespace": "other"},
                                              {"kind": "GitRepository", "name": "app"}]), flux=True)
    locked = Tenancy(no_cross_namespace_refs=True)
    asked, problems = await request_reconciles(kube, Worker(), locked, "team", receiver, {})  # type: ignore[arg-type]
    assert asked == 1 and len(problems) == 1, problems
    assert "refers to namespace 'other': references to other namespaces are disabled" in problems[0]
    (path, patch), = kube.patched
    assert path == "/apis/source.toolkit.fluxcd.io/v1/namespaces/team/gitrepositories/app"
    assert set(patch["metadata"]["annotations"]) == {"reconcile.fluxcd.io/requestedAt"}
