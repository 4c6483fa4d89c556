"""The web UI's kinds and the views' typed statuses, without a cluster: the kind registry from a discovery document
(helmop's and Flux's kinds at the versions helmop serves, app kinds by the ``helmop`` category, a kind that
appears later followed by the feed), each kind's page name, a Flux object's status read in Flux's shape, and the
graph's references kept within a family."""

from __future__ import annotations

import asyncio
from typing import Any

from helmop.api.flux.crds import PAIRS
from helmop.api.kinds import BUILTIN, FLUX, HELMOP, Kind
from helmop.api.status.helmrelease import HelmReleaseStatus
from helmop.ui import graph
from helmop.ui.kinds import Registry, _aggregated, families, page_of, shown
from helmop.views.cells import revision
from helmop.views.statuses import MODELS, read, status_of
from helmop.views.tree import children

WEBAPP = {"resource": "webapps", "responseKind": {"kind": "Webapp"}, "scope": "Namespaced",
          "categories": ["helmop"]}


def discovery(*groups: tuple[str, str, list[dict[str, Any]]]) -> dict[str, Any]:
    """An aggregated discovery document (apidiscovery.k8s.io/v2) of (group, version, resources)."""
    return {"kind": "APIGroupDiscoveryList", "items": [
        {"metadata": {"name": group}, "versions": [{"version": version, "resources": resources}]}
        for group, version, resources in groups]}


def served(kinds: tuple[Kind, ...]) -> list[tuple[str, str, list[dict[str, Any]]]]:
    return [(k.group, k.version, [{"resource": k.plural, "responseKind": {"kind": k.kind}, "scope": "Namespaced"}])
            for k in kinds]


def test_the_registry_is_what_the_server_serves() -> None:
    flux = tuple(f for _, f in PAIRS)
    doc = discovery(*served(BUILTIN), *served(flux), ("demo.helmop.dev", "v1alpha1", [WEBAPP]),
                    ("cert-manager.io", "v1", [{"resource": "certificates", "responseKind": {"kind": "Certificate"},
                                               "scope": "Namespaced"}]),
                    # Flux's Provider at a version helmop does not serve is not shown
                    ("notification.toolkit.fluxcd.io", "v1beta2", [{"resource": "providers", "categories": ["flux"],
                                                                    "responseKind": {"kind": "Provider"}}]))
    kinds = shown(_aggregated(doc))
    assert list(kinds.values()) == [*BUILTIN, *flux, Kind("Webapp", "demo.helmop.dev", "v1alpha1", "webapps")]
    assert kinds["helmreleases"] is HELMOP.helmrelease
    assert kinds["helmreleases.helm.toolkit.fluxcd.io"] == FLUX.helmrelease
    assert kinds["webapps.demo.helmop.dev"].namespaced
    assert [label for label, _ in families(kinds)] == ["helmop", "Flux", "Apps"]
    # without --flux-api (no Flux CRDs): helmop's kinds only, under no other heading
    assert [label for label, _ in families(shown(_aggregated(discovery(*served(BUILTIN)))))] == ["helmop"]


def test_a_kind_installed_later_is_shown_and_watched() -> None:
    answers = [discovery(*served(BUILTIN)), discovery(*served(BUILTIN), ("demo.helmop.dev", "v1alpha1", [WEBAPP]))]
    followed: list[list[str]] = []

    class Kube:
        async def request(self, method: str, path: str, **_: Any) -> dict[str, Any]:
            assert (method, path) == ("GET", "/apis")
            return answers[0] if len(followed) < 1 else answers[1]

    async def main() -> None:
        registry = Registry(Kube(), lambda kinds: followed.append([page_of(k) for k in kinds]))  # type: ignore
        assert "webapps.demo.helmop.dev" not in await registry.kinds()
        await registry.kinds()  # within FRESH: not asked again
        registry._read_at -= 60
        assert "webapps.demo.helmop.dev" in await registry.kinds()

    asyncio.run(main())
    assert len(followed) == 2 and followed[1][-1] == "webapps.demo.helmop.dev"


FLUX_RELEASE = {
    "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease", "metadata": {"name": "web", "namespace": "a"},
    "spec": {"chart": {"spec": {"chart": "demo", "sourceRef": {"kind": "HelmRepository", "name": "charts"}}}},
    "status": {"history": [{"name": "web", "namespace": "a", "version": 3, "chartName": "demo",
                            "chartVersion": "0.2.0", "status": "deployed"}],
               "conditions": [{"type": "Ready", "status": "True", "reason": "UpgradeSucceeded"}]}}


def test_a_flux_status_is_read_in_fluxs_shape() -> None:
    status = read(HelmReleaseStatus, FLUX_RELEASE)
    assert status.history[0].revision == 3 and status.release_name == "web" and status.is_true("Ready")
    assert revision(FLUX_RELEASE) == "0.2.0"  # Flux's status has no lastAppliedRevision: its last snapshot's chart
    kustomization = {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
                     "metadata": {"name": "site", "namespace": "a"},
                     "status": {"inventory": {"entries": [{"id": "a_cfg__ConfigMap", "v": "v1"}]},
                                "lastAppliedRevision": "main@sha1:abc"}}
    assert revision(kustomization) == "main@sha1:abc"
    ref = ("kustomize.toolkit.fluxcd.io/v1", "Kustomization", "a", "site")
    found = asyncio.run(children(None, ref, kustomization))  # type: ignore[arg-type]  # no reads: no client
    assert found == [("v1", "ConfigMap", "a", "cfg")]
    assert status_of({"apiVersion": "apps/v1", "kind": "Deployment", "status": {"replicas": 1}}) is None
    assert set(MODELS) >= {k.kind for k in BUILTIN} - {"Jenkins", "Provider", "Alert"}  # a new kind needs a model


def test_the_graph_keeps_references_within_a_family() -> None:
    """A Flux HelmRelease's chart source is Flux's HelmRepository, not helmop's of the same name."""
    ours = {"apiVersion": "helmop.dev/v1alpha1", "kind": "HelmRepository", "metadata": {"name": "charts",
                                                                                       "namespace": "a"}}
    theirs = {**ours, "apiVersion": "source.toolkit.fluxcd.io/v1"}
    drawn = graph.layout([(FLUX.helmrelease, FLUX_RELEASE), (HELMOP.helmrepository, ours),
                          (FLUX.helmrepository, theirs)])
    assert len(drawn.boxes) == 3 and len(drawn.arrows) == 1
    needed = next(b for b in drawn.boxes if b.key[2] == "charts" and b.kind is FLUX.helmrepository)
    assert (drawn.arrows[0].x1, drawn.arrows[0].y1) == (needed.x + graph.BOX_W, needed.y + graph.BOX_H // 2)
    assert page_of(FLUX.helmrepository) == "helmrepositories.source.toolkit.fluxcd.io"


def test_the_graph_draws_dependencies_on_other_kinds() -> None:
    """A HelmRelease depending on a ConfigSync (and on a ConfigMap, which the graph does not draw): one arrow, from
    the ConfigSync to the HelmRelease."""
    sync = {"apiVersion": "helmop.dev/v1alpha1", "kind": "ConfigSync", "metadata": {"name": "infra", "namespace": "a"},
            "spec": {"sourceRef": {"name": "gone"}, "path": "."}}
    release = {"apiVersion": "helmop.dev/v1alpha1", "kind": "HelmRelease",
               "metadata": {"name": "app", "namespace": "a"},
               "spec": {"dependsOn": [{"apiVersion": "helmop.dev/v1alpha1", "kind": "ConfigSync", "name": "infra"},
                                      {"apiVersion": "v1", "kind": "ConfigMap", "name": "flag"}]}}
    drawn = graph.layout([(HELMOP.configsync, sync), (HELMOP.helmrelease, release)])
    assert [arrow.why for arrow in drawn.arrows] == ["dependsOn"]
    needed = next(b for b in drawn.boxes if b.key[2] == "infra")
    assert (drawn.arrows[0].x1, drawn.arrows[0].y1) == (needed.x + graph.BOX_W, needed.y + graph.BOX_H // 2)
