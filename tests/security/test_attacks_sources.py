"""Sources against tenants and hostile servers, in both tenancy modes (see conftest).

* Team A points an ExternalArtifact (whose status it may write) at team B's ArtifactGenerator, or at a generator
  of its own whose sources are team B's: a reader of it would have team B's artifact rebuilt from team B's
  repository. Every source reference goes through the tenancy policy, the ones met on the way too: under
  lockdown both are refused (CrossNamespaceRef, as any reference into another namespace) and nothing of team B's
  is applied in team A. Without lockdown flags references into other namespaces are open (Flux's default, as a
  ConfigSync naming team B's GitRepository directly): they are followed, and that is what is asserted.
* A Bucket whose server answers "truncated" forever with the same keys and token is refused (InvalidListing)
  after two requests; a listing still under way stops when the Bucket is suspended or deleted, and a deleted
  one is gone at once (not after its listing ends).
* Names that would bend a path (an include of ``..``, a generator's source namespace ``..``) are InvalidSpec or
  ValidationFailed at once."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.controllers.conftest import condition, eventually, get
from tests.s3 import Listings

from .conftest import GROUP, Target, configsync, gitrepository, refused, settled

pytestmark = pytest.mark.timeout(600)

BUCKETS = "buckets.helmop.dev"
EXTERNAL = "externalartifacts.helmop.dev"


@pytest.fixture(scope="module")
def listings() -> Iterator[Listings]:
    server = Listings(delay=0.05)  # a slow listing's pages: 1000 of them take 50 s or more
    yield server
    server.server.shutdown()
    server.server.server_close()


def note(name: str, value: str) -> str:
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}}}\ndata: {{value: {value}}}\n"


def generator(name: str, artifact: str = "bundle", source_namespace: str = "") -> dict[str, Any]:
    source = {"alias": "src", "kind": "GitRepository", "name": "private",
              **({"namespace": source_namespace} if source_namespace else {})}
    return {"apiVersion": GROUP, "kind": "ArtifactGenerator", "metadata": {"name": name},
            "spec": {"sources": [source],
                     "artifacts": [{"name": artifact, "copy": [{"from": "@src/apps/*.yaml", "to": "@artifact/"}]}]}}


def forged(target: Target, ns: str, name: str, producer: str, producer_namespace: str,
           artifact: dict[str, Any]) -> None:
    """An ExternalArtifact of ``ns`` naming ``producer`` as its ArtifactGenerator, its status written by the team
    (as a team running its own artifact producer may), with ``artifact`` as published elsewhere."""
    target.apply(ns, {"apiVersion": GROUP, "kind": "ExternalArtifact", "metadata": {"name": name},
                      "spec": {"sourceRef": {"apiVersion": GROUP, "kind": "ArtifactGenerator", "name": producer,
                                             "namespace": producer_namespace}}})
    target.kube("kubectl", "-n", ns, "patch", EXTERNAL, name, "--subresource=status", "--type=merge", "-p",
                json.dumps({"status": {"artifact": artifact}}))


def test_an_external_artifact_reaches_no_other_tenants_generator(target: Target) -> None:
    victim, attacker = target.namespace("ea-victim"), target.namespace("ea-attacker")
    marker = f"team-b-{uuid.uuid4().hex}"
    repo = target.repo(victim)
    repo.commit({"apps/data.yaml": note("team-b-data", marker)})
    target.apply(victim, gitrepository("private", repo.url), generator("gen"))
    published = eventually(lambda: ((get(target.kube, victim, EXTERNAL, "bundle").get("status") or {})
                                    .get("artifact")), timeout=90)
    # Team A: an ExternalArtifact naming team B's generator; and a generator of its own over team B's repository
    # (which composes the very same archive: the same digest), whose artifact, refused, team A writes itself
    forged(target, attacker, "bundle", "gen", victim, published)
    target.apply(attacker, generator("gen2", "loot", source_namespace=victim))
    if target.mode == "lockdown":
        refused(target, attacker, "artifactgenerators.helmop.dev", "gen2", "AccessDenied")  # its own turn
        forged(target, attacker, "loot", "gen2", attacker, published)
    # (the second prefixes what it applies: two syncs applying one ConfigMap would refuse each other's, whichever
    # came second: ObjectOwnedElsewhere)
    syncs = (("steal", "bundle", {}), ("steal2", "loot", {"namePrefix": "2-"}))
    target.apply(attacker, *(configsync(name, ea, "./", sourceRef={"kind": "ExternalArtifact", "name": ea}, **extra)
                             for name, ea, extra in syncs))
    if target.mode == "default":  # references into other namespaces are open: followed as a direct one would be
        for name in ("steal", "steal2"):  # (steal2 may first find no "loot": gen2 makes it meanwhile)
            eventually(lambda n=name: condition(get(target.kube, attacker, "csync", n)).get("status") == "True",
                       timeout=90)
        for prefix in ("", "2-"):
            assert get(target.kube, attacker, "cm", f"{prefix}team-b-data")["data"] == {"value": marker}
        return
    message = refused(target, attacker, "csync", "steal", "CrossNamespaceRef")
    assert f"ExternalArtifact {attacker}/bundle spec.sourceRef refers to namespace {victim!r}" in message, message
    assert "--no-cross-namespace-refs" in message
    message = refused(target, attacker, "csync", "steal2", "CrossNamespaceRef")
    assert f"ArtifactGenerator {attacker}/gen2 spec.sources[0] refers to namespace {victim!r}" in message, message
    assert not get(target.kube, attacker, "cm", "team-b-data"), "nothing of team B's applied in team A"
    assert marker not in json.dumps([get(target.kube, attacker, kind)["items"]
                                     for kind in ("csync", EXTERNAL, "events", "cm")])
    # team B's own reader of its own artifact is served as ever
    target.apply(victim, configsync("own", "bundle", "./", sourceRef={"kind": "ExternalArtifact", "name": "bundle"}))
    assert condition(settled(target, victim, "csync", "own"))["status"] == "True"
    assert get(target.kube, victim, "cm", "team-b-data")["data"] == {"value": marker}


def bucket(name: str, listings: Listings, bucket_name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": GROUP, "kind": "Bucket", "metadata": {"name": name},
            "spec": {"bucketName": bucket_name, "endpoint": listings.endpoint, "insecure": True, "interval": "1h",
                     **spec}}


def probed(target: Target, ns: str, listings: Listings) -> None:
    """A later point the operator has observably reached: a new Bucket of a well-behaved server listed, Ready."""
    name = f"probe-{uuid.uuid4().hex[:6]}"
    target.apply(ns, bucket(name, listings, f"ok-{uuid.uuid4().hex[:8]}"))
    obj = settled(target, ns, BUCKETS, name)
    assert condition(obj)["status"] == "True", obj["status"]


def interrupted(target: Target, ns: str, name: str, why: str) -> None:
    """The operator's Event saying it stopped the turn under way for ``name``."""
    eventually(lambda: any(e["reason"] == "ReconcileInterrupted" and e["involvedObject"]["name"] == name
                           and why in e["message"] for e in get(target.kube, ns, "events")["items"]), timeout=20)


def test_a_bucket_that_never_stops_listing_is_refused_and_stops(target: Target, listings: Listings) -> None:
    ns = target.namespace("bucket-loop")
    looping = f"loop-{uuid.uuid4().hex[:8]}"  # truncated forever: the same 1000 keys, the same token
    target.apply(ns, bucket("loop", listings, looping))
    message = refused(target, ns, BUCKETS, "loop", "InvalidListing")
    assert "page 2 lists 'k0000.yaml' again" in message, message
    assert listings.count(looping) <= 4  # two a listing (the first page, the one repeating it): was 12 000 a minute

    # a listing under way (new keys and tokens, a page every 50 ms: past 1000 pages after 50 s) stops when its
    # Bucket is suspended: no request after the Event but the one in flight, up to a later reconcile
    slow = f"slow-{uuid.uuid4().hex[:8]}"
    target.apply(ns, bucket("slow", listings, slow, timeout="10m"))
    eventually(lambda: listings.count(slow) >= 5)
    target.kube("kubectl", "-n", ns, "patch", BUCKETS, "slow", "--type=merge", "-p", '{"spec":{"suspend":true}}')
    interrupted(target, ns, "slow", "the Bucket is suspended")
    after = listings.count(slow)
    probed(target, ns, listings)
    assert listings.count(slow) <= after + 1, "the suspended Bucket's listing went on"
    assert after < 1000  # stopped, not ended by the page bound

    # deleted while listing: gone at once, its finalizer removed (not after the listing's 50 s or more)
    gone = f"slow-{uuid.uuid4().hex[:8]}"
    target.apply(ns, bucket("doomed", listings, gone, timeout="10m"))
    eventually(lambda: listings.count(gone) >= 5)
    target.kube("kubectl", "-n", ns, "delete", BUCKETS, "doomed", "--wait=false")
    eventually(lambda: not get(target.kube, ns, BUCKETS, "doomed"), timeout=20)
    interrupted(target, ns, "doomed", "the Bucket is being deleted")
    after = listings.count(gone)
    probed(target, ns, listings)
    assert listings.count(gone) <= after + 1 and after < 1000


def test_names_that_would_bend_a_path_are_refused_by_reason(target: Target) -> None:
    ns = target.namespace("source-names")
    repo = target.repo(ns)
    repo.commit({"apps/a.yaml": note("a", "1")})
    target.apply(ns, gitrepository("inc", repo.url, include=[{"repository": {"name": ".."}}]),
                 generator("gen", source_namespace=".."))
    message = refused(target, ns, "gitrepositories.helmop.dev", "inc", "InvalidSpec")
    assert "spec.include[0].repository.name: '..' is not an object name" in message, message
    message = refused(target, ns, "artifactgenerators.helmop.dev", "gen", "ValidationFailed")
    assert "spec.sources[0].namespace '..' is not a namespace name" in message, message
