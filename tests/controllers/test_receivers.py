"""Receivers through the real path: Flux's and helmop's, applied with kubectl; requests sent over HTTP to the
operator's webhook server at their status.webhookPath, signed as GitHub signs them, or carrying an OIDC token of
an issuer on loopback; what they ask observed on the objects (a fetch, an annotation), and what a refused request
did not ask seen at once (the annotations are written before the answer)."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import requests
import yaml
from helmop_sandbox import Sandbox

from helmop.infra.receivers import BURST
from tests.chartrepo import ChartRepo
from tests.controllers.conftest import GITREPO, Operator, apply, condition, get, watched
from tests.gitserver import Repo
from tests.oidc import Issuer, rsa_key
from tests.tools import Run, eventually

TOKEN = "receiver-token-5d1c0a"
FLUX_GIT = "gitrepositories.source.toolkit.fluxcd.io"
FLUX_RECEIVER = "receivers.notification.toolkit.fluxcd.io"
RECEIVER = "receivers.helmop.dev"
ASKED = {FLUX_GIT: "reconcile.fluxcd.io/requestedAt", GITREPO: "helmop.dev/requestedAt"}


@pytest.fixture(scope="module")
def operator(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
             chart_repo: ChartRepo) -> Iterator[Operator]:
    """This module's operator (conftest's kube, ns, repo use it): OIDC issuers on 127.0.0.1 allowed, references to
    other namespaces refused (--no-cross-namespace-refs)."""
    with Sandbox(ready_delay=0.05) as sandbox:
        op = Operator(sandbox, request.param, tmp_path_factory.mktemp("receiving"), chart_repo)
        op.set("notifications", allow_cidrs=("127.0.0.1/32",))
        op.set("tenancy", no_cross_namespace_refs=True)
        op.start()
        yield op
        op.close()


@pytest.fixture
def issuer() -> Iterator[Issuer]:
    served = Issuer()
    yield served
    served.close()


def receiver(name: str, kind: str, resources: list[dict[str, Any]], *, flux: bool = False, **spec: Any) -> str:
    api_version = "notification.toolkit.fluxcd.io/v1" if flux else "helmop.dev/v1alpha1"
    secret = {} if kind == "generic-oidc" else {"secretRef": {"name": "hook"}}
    return yaml.safe_dump({"apiVersion": api_version, "kind": "Receiver", "metadata": {"name": name},
                           "spec": {"type": kind, **secret, "resources": resources, **spec}})


def gitrepo(name: str, url: str, *, flux: bool = False, labels: dict[str, str] | None = None) -> str:
    api_version = "source.toolkit.fluxcd.io/v1" if flux else "helmop.dev/v1alpha1"
    return yaml.safe_dump({"apiVersion": api_version, "kind": "GitRepository",
                           "metadata": {"name": name, "labels": labels or {}},
                           "spec": {"url": url, "interval": "1h", "ref": {"branch": "main"}}})


def secret(kube: Run, ns: str) -> None:
    kube("kubectl", "-n", ns, "create", "secret", "generic", "hook", f"--from-literal=token={TOKEN}")


def ready_path(kube: Run, ns: str, kind: str, name: str) -> str:
    def check() -> str:
        obj = get(kube, ns, kind, name)
        ok = condition(obj).get("status") == "True" and obj["status"]["observedGeneration"] == obj["metadata"][
            "generation"]
        return str(obj["status"].get("webhookPath") or "") if ok else ""

    path: str = eventually(check, timeout=30)
    return path


def post(operator: Operator, path: str, body: bytes, headers: dict[str, str]) -> requests.Response:
    return requests.post(f"{operator.webhook_url}{path}", data=body, headers=headers, timeout=30)


def github(body: bytes, token: str = TOKEN, event: str = "push") -> dict[str, str]:
    """The headers GitHub sends with a delivery: the body's HMAC-SHA256 with the webhook's secret."""
    return {"Content-Type": "application/json", "X-GitHub-Event": event,
            "X-Hub-Signature-256": "sha256=" + hmac.new(token.encode(), body, hashlib.sha256).hexdigest()}


def asked(kube: Run, ns: str, kind: str, name: str) -> str:
    """The reconcile request on the object ("" when none)."""
    return str((get(kube, ns, kind, name)["metadata"].get("annotations") or {}).get(ASKED[kind], ""))


def revision(kube: Run, ns: str, kind: str, name: str) -> str:
    return str(((get(kube, ns, kind, name).get("status") or {}).get("artifact") or {}).get("revision", ""))


def test_a_github_push_makes_a_flux_gitrepository_fetch_at_once(operator: Operator, kube: Run, ns: str, repo: Repo,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    first = repo.commit({"a": "1"})
    secret(kube, ns)
    apply(kube, ns, gitrepo("config", repo.url, flux=True))
    eventually(lambda: revision(kube, ns, FLUX_GIT, "config") == f"main@sha1:{first}")
    apply(kube, ns, receiver("github", "github", [{"apiVersion": "source.toolkit.fluxcd.io/v1",
                                                  "kind": "GitRepository", "name": "config"}],
                             flux=True, events=["ping", "push"]))
    path = ready_path(kube, ns, FLUX_RECEIVER, "github")
    # Flux's path: what a git host's existing webhook already posts to
    assert path == "/hook/" + hashlib.sha256(f"{TOKEN}github{ns}".encode()).hexdigest()
    status = get(kube, ns, FLUX_RECEIVER, "github")["status"]
    assert condition({"status": status})["message"] == f"Receiver initialized for path: {path}"
    assert condition({"status": status})["reason"] == "Succeeded" and status["observedGeneration"] == 1

    second = repo.commit({"a": "2"})
    body = json.dumps({"ref": "refs/heads/main", "after": second}).encode()
    # signed with another secret, not signed, and signed over another body: one answer, nothing asked
    for headers, sent in ((github(body, token="wrong"), body), ({"Content-Type": "application/json",
                                                                 "X-GitHub-Event": "push"}, body),
                          (github(body), body + b" ")):
        answer = post(operator, path, sent, headers)
        assert (answer.status_code, answer.json()) == (401, {"error": "unauthorized"})
    assert asked(kube, ns, FLUX_GIT, "config") == ""
    assert revision(kube, ns, FLUX_GIT, "config") == f"main@sha1:{first}"

    started = time.monotonic()
    assert post(operator, path, body, github(body)).status_code == 200
    assert asked(kube, ns, FLUX_GIT, "config")  # Flux's annotation, as its receiver server writes it
    eventually(lambda: revision(kube, ns, FLUX_GIT, "config") == f"main@sha1:{second}", timeout=10)
    assert time.monotonic() - started < 10  # the interval is an hour
    # GitHub's ping (sent when the webhook is made) is accepted as spec.events says; an event it omits is not
    assert post(operator, path, b"{}", github(b"{}", event="ping")).status_code == 200
    assert post(operator, path, b"{}", github(b"{}", event="issues")).status_code == 400
    assert operator.metric("helmop_receiver_requests_total", receiver=f"{ns}/github", result="unauthorized") == 3
    assert "a webhook request refused (401)" in caplog.text  # the operator's log is read here
    assert TOKEN not in caplog.text and github(body)["X-Hub-Signature-256"] not in caplog.text


def test_resources_by_labels_and_a_cel_filter(operator: Operator, kube: Run, ns: str, repo: Repo) -> None:
    """helmop's Receiver over helmop's GitRepositories: every one with the labels, kept by resourceFilter (the
    request's JSON) and the entry's own filter."""
    repo.commit({"a": "1"})
    secret(kube, ns)
    for name, team in (("one", "a"), ("two", "a"), ("three", "b"), ("four", "a")):
        apply(kube, ns, gitrepo(name, repo.url, labels={"team": team}))
    apply(kube, ns, receiver("labels", "generic-hmac", [
        {"kind": "GitRepository", "name": "*", "matchLabels": {"team": "a"}, "filter": "res.metadata.name != 'four'"}],
        resourceFilter="req.repositories.exists(r, r == res.metadata.name)"))
    path = ready_path(kube, ns, RECEIVER, "labels")
    body = json.dumps({"repositories": ["two", "three", "four"]}).encode()
    signature = "sha256=" + hmac.new(TOKEN.encode(), body, hashlib.sha256).hexdigest()
    answer = post(operator, path, body, {"Content-Type": "application/json", "X-Signature": signature})
    assert answer.status_code == 200, answer.text
    assert [name for name in ("one", "two", "three", "four") if asked(kube, ns, GITREPO, name)] == ["two"]
    stamp = asked(kube, ns, GITREPO, "two")  # and the repository reconciles for it
    watched(kube, ns, GITREPO, "two", lambda obj: obj["status"].get("lastHandledReconcileAt") == stamp)


def test_generic_oidc_takes_the_issuers_tokens_and_checks_their_claims(operator: Operator, kube: Run, ns: str,
                                                                       repo: Repo, issuer: Issuer) -> None:
    repo.commit({"a": "1"})
    for name in ("app", "other"):
        apply(kube, ns, gitrepo(name, repo.url))
    apply(kube, ns, receiver("ci", "generic-oidc", [{"kind": "GitRepository", "name": "app"},
                                                     {"kind": "GitRepository", "name": "other"}],
                             resourceFilter="claims.repository.endsWith('/' + res.metadata.name)",
                             oidcProviders=[{"issuerURL": issuer.url, "variables": [
                                 {"name": "owner", "expression": "claims.repository_owner"}], "validations": [
                                 {"expression": "vars.owner == 'org'", "message": "wrong org"},
                                 {"expression": "claims.ref == 'refs/heads/main'", "message": "not main"}]}]))
    path = ready_path(kube, ns, RECEIVER, "ci")
    assert path == "/hook/" + hashlib.sha256(f"ci{ns}".encode()).hexdigest()  # no token: name and namespace

    def call(token: str) -> requests.Response:
        return post(operator, path, b"{}", {"Authorization": f"Bearer {token}", "Content-Type": "application/json"})

    claims = {"repository_owner": "org", "repository": "org/app", "ref": "refs/heads/main"}
    for token in (issuer.token(claims, key=rsa_key()), issuer.token(claims, lifetime=-60),
                  issuer.token(claims, audience="another")):  # forged, expired, for someone else
        answer = call(token)
        assert (answer.status_code, answer.json()) == (401, {"error": "unauthorized"})
    answer = call(issuer.token({**claims, "repository_owner": "evil", "ref": "refs/heads/dev"}))
    assert (answer.status_code, answer.json()) == (403, {"error": "token validation failed: wrong org; not main"})
    assert not asked(kube, ns, GITREPO, "app") and not asked(kube, ns, GITREPO, "other")
    assert call(issuer.token(claims)).status_code == 200
    assert asked(kube, ns, GITREPO, "app") and not asked(kube, ns, GITREPO, "other")  # the claims chose


def test_hostile_requests(operator: Operator, kube: Run, ns: str, repo: Repo) -> None:
    repo.commit({"a": "1"})
    secret(kube, ns)
    apply(kube, ns, gitrepo("app", repo.url))
    apply(kube, ns, receiver("hook", "generic-hmac", [{"kind": "GitRepository", "name": "app"}],
                             resourceFilter="true"))
    path = ready_path(kube, ns, RECEIVER, "hook")
    # a path no Receiver has, of any form: one answer, which says nothing of which Receivers exist
    for unknown in ("/hook/" + "0" * 64, "/hook/x", path + "0", path + "/x", "/hook/"):
        answer = post(operator, unknown, b"{}", {})
        assert (answer.status_code, answer.text) == (404, '{"error": "not found"}'), unknown
    too_large = post(operator, path, b"x" * ((3 << 20) + 1), {})
    assert too_large.status_code == 413
    deep = b"[" * 200 + b"]" * 200
    signature = "sha256=" + hmac.new(TOKEN.encode(), deep, hashlib.sha256).hexdigest()
    answer = post(operator, path, deep, {"Content-Type": "application/json", "X-Signature": signature})
    assert answer.status_code == 400 and "deeper than 64" in answer.json()["error"]
    assert not asked(kube, ns, GITREPO, "app")
    codes = [post(operator, path, b"{}", {"X-Signature": "sha256=00"}).status_code for _ in range(BURST + 5)]
    assert codes[0] == 401 and codes[-1] == 429, codes  # every request counts, authenticated or not
    kube("kubectl", "-n", ns, "patch", RECEIVER, "hook", "--type=merge", "-p", '{"spec":{"suspend":true}}')
    eventually(lambda: post(operator, path, b"{}", {}).status_code == 503, timeout=30)


def test_a_receiver_waits_for_its_secret_and_stays_in_its_namespace(operator: Operator, kube: Run, ns: str,
                                                                    repo: Repo) -> None:
    repo.commit({"a": "1"})
    apply(kube, ns, gitrepo("app", repo.url))
    apply(kube, ns, receiver("early", "github", [{"kind": "GitRepository", "name": "app"}]))
    watched(kube, ns, RECEIVER, "early", lambda obj: condition(obj).get("reason") == "TokenNotFound")
    assert not get(kube, ns, RECEIVER, "early")["status"].get("webhookPath")
    secret(kube, ns)  # its creation wakes the Receiver (not its 10m interval)
    path = ready_path(kube, ns, RECEIVER, "early")
    assert path == "/hook/" + hashlib.sha256(f"{TOKEN}early{ns}".encode()).hexdigest()

    # --no-cross-namespace-refs: a Receiver may ask only objects of its own namespace
    other = f"other-{uuid.uuid4().hex[:6]}"
    kube("kubectl", "create", "namespace", other)
    apply(kube, other, gitrepo("app", repo.url))
    apply(kube, ns, receiver("across", "github", [{"kind": "GitRepository", "name": "app", "namespace": other}]))
    watched(kube, ns, RECEIVER, "across", lambda obj: condition(obj, "Stalled").get("reason") == "CrossNamespaceRef")
    assert not asked(kube, other, GITREPO, "app")
