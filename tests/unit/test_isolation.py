"""Pure pieces of tenant isolation: masking secrets in their transformed forms, the ConfigSync's
namespace confinement and ownership rules, and the tenancy policy."""

from __future__ import annotations

import base64
import json
import textwrap
from urllib.parse import quote, quote_plus

import pytest

from helmop.api.errors import SpecError
from helmop.api.redaction import redact
from helmop.api.tenancy import Tenancy
from helmop.decisions.sync import ADOPT, OWNER_LABEL, OWNER_UID, ObjectId, claim_problem, confinement, owned

SECRET = "S3cr3tValueXYZ42"
SYMBOLS = 'p>>?w0rd~~~~"s3cr3t>?'  # base64 with + and /, and a quote to escape


@pytest.mark.parametrize("form", [
    SECRET, SECRET.upper(), SECRET.lower(), base64.b64encode(SECRET.encode()).decode(),
    base64.urlsafe_b64encode(SYMBOLS.encode()).decode().rstrip("="), base64.b64encode(SYMBOLS.encode()).decode(),
    json.dumps(SYMBOLS), SECRET[:10], SECRET[3:12], base64.b64encode(SECRET.encode()).decode()[:9],
    SECRET[:7], SECRET[5:11], SECRET.encode().hex(), SECRET.encode().hex().upper(),
    base64.b32encode(SECRET.encode()).decode(), base64.b32encode(SECRET.encode()).decode().rstrip("="),
    quote(SYMBOLS, safe=""), quote_plus(SYMBOLS), " ".join(SECRET), "\n".join(textwrap.wrap(SECRET, 5)),
    *(base64.b64encode(prefix.encode() + SECRET.encode()).decode()[4:] for prefix in ("a:", "ab:", "abc:"))])
def test_secret_forms_are_masked(form: str) -> None:
    masked = redact(f"error: value {form} is not allowed", [SECRET, SYMBOLS])
    assert masked.startswith("error: value ") and masked.endswith(" is not allowed")
    assert "***" in masked
    for piece in (form, form.strip('"')):
        assert piece not in masked


def test_short_fragments_and_unrelated_text_are_left_alone() -> None:
    assert redact("S3cr3 is five characters", [SECRET]) == "S3cr3 is five characters"
    assert redact("nothing to see", [SECRET, "abc"]) == "nothing to see"
    assert redact("user=robot", ["robot"]) == "user=***"


def test_confinement_without_a_service_account() -> None:
    crb = ObjectId("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "", "grab")
    mine = ObjectId("v1", "ConfigMap", "team", "ok")
    theirs = ObjectId("v1", "ConfigMap", "kube-system", "planted")
    assert confinement({mine: "a.yaml:1"}, "team", set()) is None
    reason, message = confinement({crb: "a.yaml:3", mine: "a.yaml:1", theirs: "b.yaml:7"}, "team", {crb})
    assert reason == "ClusterScopedObject"
    assert "a.yaml:3: ClusterRoleBinding/grab is cluster-scoped" in message
    assert "b.yaml:7: ConfigMap/kube-system/planted is in namespace 'kube-system'" in message
    assert confinement({theirs: "b.yaml:7"}, "team", set())[0] == "ObjectOutsideNamespace"
    # Roles and RoleBindings of its own namespace would be written with the operator's rights: refused too.
    for kind in ("Role", "RoleBinding"):
        rbac = ObjectId("rbac.authorization.k8s.io/v1", kind, "team", "grab")
        reason, message = confinement({rbac: "r.yaml:1", mine: "a.yaml:1"}, "team", set())
        assert reason == "RBACObjectRefused" and f"r.yaml:1: {kind}/team/grab is an RBAC object" in message


def test_ownership_needs_the_uid_not_just_the_label() -> None:
    oid = ObjectId("v1", "ConfigMap", "team", "x")
    ours = {"metadata": {"labels": {OWNER_LABEL: "team.apps"}, "annotations": {OWNER_UID: "u1"}}}
    copied_label = {"metadata": {"labels": {OWNER_LABEL: "team.apps"}}}
    rival = {"metadata": {"annotations": {OWNER_UID: "u2"}}}
    assert claim_problem(oid, "f:1", None, "u1", "team.apps", False) == ""
    assert claim_problem(oid, "f:1", ours, "u1", "team.apps", False) == ""
    assert "not created by this ConfigSync" in claim_problem(oid, "f:1", copied_label, "u1", "team.apps", False)
    assert claim_problem(oid, "f:1", copied_label, "u1", "team.apps", True) == ""  # applied before uid marks
    assert "another ConfigSync" in claim_problem(oid, "f:1", rival, "u1", "team.apps", True)
    assert claim_problem(oid, "f:1", {"metadata": {"annotations": {ADOPT: "true"}}}, "u1", "team.apps", False) == ""
    assert not owned(rival["metadata"], "u1", "team.apps", True)


def test_tenancy_policy() -> None:
    assert Tenancy().acting_as("team", "") == ""
    assert Tenancy().acting_as("team", "deployer") == "system:serviceaccount:team:deployer"
    assert Tenancy("tenant").acting_as("team", "") == "system:serviceaccount:team:tenant"
    Tenancy().check_reference("team", "other", "spec.sourceRef")  # allowed unless locked
    Tenancy(no_cross_namespace_refs=True).check_reference("team", "team", "spec.sourceRef")
    with pytest.raises(SpecError) as refused:
        Tenancy(no_cross_namespace_refs=True).check_reference("team", "other", "spec.sourceRef")
    assert refused.value.reason == "CrossNamespaceRef"


def test_an_object_re_created_by_someone_else_is_not_taken_over() -> None:
    oid = ObjectId("v1", "ConfigMap", "team", "x")
    impostor = {"metadata": {"uid": "new", "labels": {OWNER_LABEL: "team.apps"}, "annotations": {OWNER_UID: "u1"}}}
    assert "re-created by someone else" in claim_problem(oid, "f:1", impostor, "u1", "team.apps", True, "old")
    assert claim_problem(oid, "f:1", impostor, "u1", "team.apps", True, "new") == ""


def test_what_a_flux_kustomization_applied_is_owned_by_its_inventory_and_flux_labels() -> None:
    flux = {"kustomize.toolkit.fluxcd.io/name": "apps", "kustomize.toolkit.fluxcd.io/namespace": "flux-system"}
    applied_by_flux = {"labels": dict(flux)}
    assert owned(applied_by_flux, "u1", "flux-system.apps", True, flux)
    assert not owned(applied_by_flux, "u1", "flux-system.apps", False, flux)  # not in its inventory
    assert not owned(applied_by_flux, "u1", "flux-system.apps", True)  # helmop's own kinds: no
    other = {"labels": {**flux, "kustomize.toolkit.fluxcd.io/name": "infra"}}
    assert not owned(other, "u1", "flux-system.apps", True, flux)  # another Kustomization's
    assert not owned({"labels": flux, "annotations": {OWNER_UID: "u2"}}, "u1", "flux-system.apps", True, flux)
