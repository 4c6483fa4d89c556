"""Flux's API onto helmop's model: the chart forms of Flux's HelmRelease, the fields helmop refuses by name,
and the status written in Flux's shape and read back (also as Flux's own controllers wrote it)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from helmop.api.errors import SpecError
from helmop.api.flux import crds as flux_crds
from helmop.api.flux import spec as flux_spec
from helmop.api.flux import versions
from helmop.api.flux.crds import PAIRS
from helmop.api.flux.status import inward, outward
from helmop.api.helmrelease import ArtifactChart, SharedRepositoryChart, SourceChart, parse_spec
from helmop.api.kinds import FLUX, FLUX_ALERT, FLUX_IMAGES, FLUX_PROVIDER, FLUX_RECEIVER, HELMOP
from helmop.api.repositories import Verification, parse_helm_repository, parse_oci_repository
from helmop.api.status import parse, to_json
from helmop.api.status.configsync import AppliedObject, ConfigSyncStatus
from helmop.api.status.helmrelease import HelmReleaseStatus, Snapshot
from helmop.controllers.fluxgate import renewed_by


def test_flux_chart_forms_become_the_internal_chart() -> None:
    spec = parse_spec({"chart": {"spec": {"chart": "podinfo", "version": "6.x", "sourceRef": {
        "kind": "HelmRepository", "name": "podinfo", "namespace": "flux-system"},
        "valuesFiles": ["values-prod.yaml"]}}}, "web", "apps")
    assert spec.chart == SharedRepositoryChart("podinfo", "podinfo", "6.x", "flux-system", ("values-prod.yaml",))
    star = parse_spec({"chart": {"spec": {"chart": "a", "version": "*", "sourceRef": {"kind": "HelmRepository",
                                                                                      "name": "r"}}}}, "web", "apps")
    assert isinstance(star.chart, SharedRepositoryChart) and star.chart.version == ""  # Flux's "*": the latest
    git = parse_spec({"chart": {"spec": {"chart": "./charts/app", "sourceRef": {"kind": "GitRepository",
                                                                                "name": "repo"}}}}, "web", "apps")
    assert git.chart == SourceChart("GitRepository", "repo", "charts/app", reconcile_strategy="ChartVersion")
    ref = parse_spec({"chartRef": {"kind": "OCIRepository", "name": "podinfo"}}, "web", "apps")
    assert ref.chart == ArtifactChart("podinfo")


@pytest.mark.parametrize(("spec", "reason", "named"), [
    ({"chart": {"spec": {"chart": "a", "sourceRef": {"kind": "OCIRepository", "name": "b"}}}},
     "UnsupportedSourceKind", "OCIRepository"),
    ({"chartRef": {"kind": "GitRepository", "name": "b"}}, "UnsupportedSourceKind", "GitRepository"),
    ({"chart": {"spec": {"chart": "a", "sourceRef": {"kind": "HelmRepository", "name": "r"}, "verify": {
        "provider": "cosign"}}}}, "UnsupportedField", "keyless"),
    ({"chart": {"spec": {"chart": "c", "sourceRef": {"kind": "GitRepository", "name": "g"}, "verify": {
        "provider": "cosign", "secretRef": {"name": "keys"}}}}}, "UnsupportedField", "OCI HelmRepositories only"),
    ({"chart": {"repository": {"url": "https://x", "name": "a"}}, "chartRef": {"kind": "OCIRepository", "name": "o"}},
     "InvalidSpec", "mutually exclusive"),
])
def test_chart_forms_helmop_does_not_implement_are_refused_by_name(spec: dict, reason: str, named: str) -> None:
    with pytest.raises(SpecError) as refused:
        parse_spec(spec, "web", "apps")
    assert refused.value.reason == reason and named in str(refused.value)


@pytest.mark.parametrize(("kind", "spec", "named"), [
    (FLUX.helmrelease, {"chart": {"spec": {"chart": "a", "sourceRef": {"kind": "HelmRepository", "name": "r"}}},
                        "kubeConfig": {"secretRef": {"name": "remote"}, "future": {}}}, "spec.kubeConfig.future"),
    (FLUX.helmrelease, {"chartRef": {"kind": "OCIRepository", "name": "o"}, "upgrade": {"keepValues": True}},
     "spec.upgrade.keepValues"),
    (FLUX.configsync, {"sourceRef": {"kind": "GitRepository", "name": "g"}, "path": "./", "prune": True,
                       "kubeConfig": {"secretRef": {"name": "remote"}}, "future": True}, "spec.future"),
    (FLUX.gitrepository, {"url": "https://x/y", "ref": {"branch": "main", "future": "x"}}, "spec.ref.future"),
])
def test_flux_fields_helmop_does_not_implement_are_refused_by_name(kind: object, spec: dict, named: str) -> None:
    with pytest.raises(SpecError) as refused:
        flux_spec.check(kind, spec)  # type: ignore[arg-type]
    assert refused.value.reason == "UnsupportedField" and str(refused.value).startswith(named + " ")


def test_flux_fields_helmop_implements_pass() -> None:
    flux_spec.check(FLUX.configsync, {"sourceRef": {"kind": "GitRepository", "name": "g"}, "path": "./apps",
                                      "prune": True, "interval": "10m", "dependsOn": [{"name": "infra"}],
                                      "postBuild": {"substitute": {"a": "b"}}, "patches": [{"patch": "x"}]})
    flux_spec.check(FLUX.helmrelease, {"chart": {"spec": {"chart": "a", "version": "1.x", "sourceRef": {
        "kind": "HelmRepository", "name": "r"}}}, "values": {"anything": {"goes": [1]}}, "install": {
        "remediation": {"retries": 3}, "disableOpenAPIValidation": True},
        "upgrade": {"disableOpenAPIValidation": False}})  # helm always runs without that check: either is so


def test_every_flux_kind_helmop_serves_has_its_versions_known() -> None:
    served = {(k.group, k.kind): k.served for k in versions.KINDS}
    assert served == {(theirs.group, theirs.kind): theirs.version for _, theirs in PAIRS}


def test_an_object_of_a_removed_version_is_refused_with_each_field_it_lost() -> None:
    old = {"apiVersion": "kustomize.toolkit.fluxcd.io/v1beta1", "kind": "Kustomization",
           "spec": {"patchesJson6902": [], "validation": "client", "path": "./"}}
    assert [(r.reason, r.field) for r in versions.refusals(old)] == [
        ("RemovedAPIVersion", ("apiVersion",)), ("RemovedField", ("spec", "validation")),
        ("RemovedField", ("spec", "patchesJson6902"))]
    assert versions.served("kustomize.toolkit.fluxcd.io/v1beta1", "Kustomization") == "kustomize.toolkit.fluxcd.io/v1"
    assert versions.refusals({**old, "apiVersion": "kustomize.toolkit.fluxcd.io/v1"}) == []
    assert versions.refusals({"apiVersion": "example.com/v1beta1", "kind": "Kustomization"}) == []


def test_a_flux_kind_helmop_does_not_serve_is_noted() -> None:
    assert versions.note("image.toolkit.fluxcd.io/v1", "ImagePolicy") == ""  # served since issue 50
    assert versions.note("source.toolkit.fluxcd.io/v1", "SvnRepository") == \
        "kept as it is: SvnRepository is no kind of source.toolkit.fluxcd.io helmop knows"
    assert versions.note("helm.toolkit.fluxcd.io/v2", "HelmRelease") == versions.note("v1", "Secret") == ""


def test_source_specs() -> None:
    assert parse_helm_repository({"url": "oci://ghcr.io/org/charts", "type": "oci"}).oci
    with pytest.raises(SpecError, match="provider"):
        parse_helm_repository({"url": "https://x", "provider": "aws"})
    oci = parse_oci_repository({"url": "oci://ghcr.io/org/app", "ref": {"semver": ">=1"}})
    assert (oci.tag, oci.semver, oci.digest) == ("latest", ">=1", "")
    with pytest.raises(SpecError, match="digest"):
        parse_oci_repository({"url": "oci://ghcr.io/org/app", "ref": {"digest": "sha256:short"}})


def test_keyless_verification_needs_a_trusted_root_and_sound_identities() -> None:
    def verify(**fields: object) -> Verification | None:
        return parse_oci_repository({"url": "oci://ghcr.io/org/app", "verify": {"provider": "cosign", **fields}}).verify

    identity = {"issuer": "^https://token.actions.githubusercontent.com$", "subject": "acme/.*"}
    assert verify(trustedRootSecretRef={"name": "root"}, matchOIDCIdentity=[identity]) == Verification(
        "cosign", "", "root", ((identity["issuer"], identity["subject"]),))
    assert verify(secretRef={"name": "keys"}, trustedRootSecretRef={"name": "root"}) == Verification(
        "cosign", "keys")  # keys given: the root is not what proves them
    with pytest.raises(SpecError, match="public Sigstore infrastructure") as public:
        verify(matchOIDCIdentity=[identity])
    assert public.value.reason == "UnsupportedField"
    with pytest.raises(SpecError, match=r"matchOIDCIdentity\[0\]\.subject is not a regular expression"):
        verify(trustedRootSecretRef={"name": "root"}, matchOIDCIdentity=[{"issuer": "x", "subject": "(unclosed"}])
    with pytest.raises(SpecError, match=r"matchOIDCIdentity\[0\]\.issuer is required"):
        verify(trustedRootSecretRef={"name": "root"}, matchOIDCIdentity=[{"subject": "x"}])
    with pytest.raises(SpecError, match="at most 16 identities"):
        verify(trustedRootSecretRef={"name": "root"}, matchOIDCIdentity=[identity] * 17)


def test_a_helmrelease_status_in_flux_shape_and_back() -> None:
    status = HelmReleaseStatus(release_name="web", install_failures=1, last_applied_revision="1.0.0",
                               history=(Snapshot(revision=2, chart_name="demo", chart_version="1.0.0",
                                                 status="deployed", tests="passed"),))
    body = {"metadata": {"namespace": "apps", "name": "web"}, "spec": {"targetNamespace": "prod"}}
    flux = outward("HelmRelease", to_json(status), body)
    assert flux["history"][0]["version"] == 2 and flux["history"][0]["name"] == "web"
    assert flux["history"][0]["namespace"] == "prod" and flux["storageNamespace"] == "prod"
    assert flux["failures"] == 1 and "releaseName" not in flux and "lastAppliedRevision" not in flux
    assert flux["history"][0]["testHooks"] == {"web-test": {"phase": "Succeeded"}}
    back = parse(HelmReleaseStatus, inward("HelmRelease", flux))
    assert back.history == status.history and back.release_name == "web" and back.install_failures == 1


def test_a_status_flux_wrote_is_read() -> None:
    written_by_flux = {"observedGeneration": 3, "storageNamespace": "podinfo", "helmChart": "flux-system/podinfo",
                       "lastAttemptedConfigDigest": "sha256:abc", "history": [{
                           "name": "podinfo", "namespace": "podinfo", "version": 4, "status": "deployed",
                           "chartName": "podinfo", "chartVersion": "6.5.0", "digest": "sha256:d",
                           "configDigest": "sha256:abc", "testHooks": {"t": {"phase": "Failed"}}}]}
    status = parse(HelmReleaseStatus, inward("HelmRelease", written_by_flux))
    assert status.history[0].revision == 4 and status.history[0].tests == "failed"
    assert status.release_name == "podinfo" and status.observed_generation == 3


def test_a_kustomization_inventory_in_flux_shape() -> None:
    status = ConfigSyncStatus(last_applied_revision="main@sha1:" + "a" * 40, inventory=(
        AppliedObject(api_version="apps/v1", kind="Deployment", name="web", namespace="prod", uid="u1"),
        AppliedObject(api_version="v1", kind="Namespace", name="prod")))
    flux = outward("Kustomization", to_json(status), {"metadata": {"namespace": "flux-system", "name": "apps"}})
    assert flux["inventory"]["entries"][0] == {"id": "prod_web_apps_Deployment", "v": "v1", "uid": "u1"}
    assert flux["inventory"]["entries"][1] == {"id": "_prod__Namespace", "v": "v1"}
    assert parse(ConfigSyncStatus, inward("Kustomization", flux)) == status


def test_a_source_artifact_has_the_fields_flux_requires() -> None:
    status = {"artifact": {"revision": "main@sha1:" + "b" * 40, "lastUpdateTime": "t"}, "lastFetchedAt": "t",
              "conditions": [{"type": "Ready", "status": "True", "reason": "Succeeded", "message": "m"}]}
    flux = outward("GitRepository", status, {"metadata": {"namespace": "flux-system", "name": "repo"}})
    assert flux["artifact"]["path"] == f"gitrepository/flux-system/repo/{'b' * 40}.tar.gz"
    assert flux["artifact"]["url"] == "" and "lastFetchedAt" not in flux
    assert [c["type"] for c in flux["conditions"]] == ["Ready", "ArtifactInStorage"]
    assert inward("GitRepository", flux)["conditions"] == status["conditions"]
    again = outward("GitRepository", flux, {"metadata": {"namespace": "flux-system", "name": "repo"}})
    assert again["conditions"] == flux["conditions"]  # written over its own output: one ArtifactInStorage


def test_flux_crds_are_helmops_schemas_under_fluxs_names() -> None:
    served = {(c["spec"]["group"], c["spec"]["versions"][0]["name"], c["spec"]["names"]["kind"])
              for c in flux_crds.definitions()}
    assert served == {(k.group, k.version, k.kind) for k in (FLUX.helmrelease, FLUX.gitrepository,
                                                              FLUX.helmrepository, FLUX.ocirepository,
                                                              FLUX.configsync, FLUX.bucket, FLUX.helmchart,
                                                              FLUX.externalartifact, FLUX.artifactgenerator,
                                                              FLUX_PROVIDER, FLUX_ALERT, *FLUX_IMAGES,
                                                              FLUX_RECEIVER)}


def test_flux_controllers_count_as_running_while_their_lease_is_renewed() -> None:
    now = datetime(2026, 11, 25, 12, 0, 0, tzinfo=UTC)
    lease = {"spec": {"holderIdentity": "helm-controller-1", "leaseDurationSeconds": 35,
                      "renewTime": "2026-11-25T11:59:50.123456Z"}}
    assert renewed_by(lease, now) == ("helm-controller-1", pytest.approx(9.876544))
    assert renewed_by(lease, now + timedelta(seconds=30)) is None  # lapsed: scaled to zero without a clean stop
    assert renewed_by({"spec": {**lease["spec"], "holderIdentity": ""}}, now) is None  # given up on a clean stop
    assert renewed_by({"spec": {"holderIdentity": "x", "renewTime": "garbage"}}, now) is None
    assert renewed_by({}, now) is None


def test_flux_kinds_label_what_they_apply_as_flux_does() -> None:
    assert FLUX.configsync.origin_labels("flux-system", "apps") == {
        "kustomize.toolkit.fluxcd.io/name": "apps", "kustomize.toolkit.fluxcd.io/namespace": "flux-system"}
    assert FLUX.helmrelease.origin_labels("team", "web") == {"helm.toolkit.fluxcd.io/name": "web",
                                                             "helm.toolkit.fluxcd.io/namespace": "team"}
    assert HELMOP.helmrelease.origin_labels("team", "web") == {}
    assert FLUX.helmrelease.origin_labels("team", "x" * 64) == {}  # too long for a label value
    spec = parse_spec({"chart": {"repository": {"url": "https://e.x", "name": "c"}},
                       "commonMetadata": {"labels": {"team": "a", "helm.toolkit.fluxcd.io/name": "forged"}}},
                      "web", "team", origin=FLUX.helmrelease.origin_labels("team", "web"))
    assert spec.post_render["labels"] == {"team": "a", "helm.toolkit.fluxcd.io/name": "web",
                                          "helm.toolkit.fluxcd.io/namespace": "team"}
