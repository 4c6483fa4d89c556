"""The operator's own SOPS keys (--decryption-keys) against tenants, in both tenancy modes (see conftest).
Team B encrypts a Secret for those keys; team A copies the file into its own repository and syncs it with a
ConfigSync that names no key Secret. Without lockdown flags the operator's keys serve every namespace (Flux's
controller-wide decryption, as documented); under lockdown they serve only the namespaces an administrator lists
(--decryption-keys-namespaces; none by default), and the refusal names neither the other tenant nor a value."""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

import pytest

from tests.controllers.conftest import GITREPO, condition, get
from tests.sops import Sops, age_identity

from .conftest import Target, configsync, gitrepository, refused, secret_forms, settled

pytestmark = pytest.mark.timeout(600)


def encrypted_secret(recipient: str, value: str) -> str:
    return Sops(age=[recipient], regex="^(data|stringData)$").yaml(
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db"}, "stringData": {"password": value}})


def syncs(target: Target, ns: str, text: str, name: str = "apps", **decryption: Any) -> None:
    """A repository of the namespace holding ``text``, and a ConfigSync of it (naming no key Secret unless
    ``decryption`` says)."""
    repo = target.repo(ns)
    repo.commit({"apps/secret.yaml": text})
    target.apply(ns, gitrepository(name, repo.url),
                 configsync(name, name, "apps", decryption={"provider": "sops", **decryption}))


def said_about(target: Target, ns: str) -> str:
    """Everything the operator wrote where the namespace's tenant reads: statuses and Events."""
    statuses = [o.get("status") for kind in ("csync", GITREPO)
                for o in get(target.kube, ns, kind)["items"]]
    return json.dumps([statuses, get(target.kube, ns, "events")["items"]])


def test_a_tenant_cannot_open_another_tenants_file_with_the_operators_keys(target: Target) -> None:
    identity, recipient = age_identity()
    (target.work / "decryption-keys" / f"platform-{uuid.uuid4().hex[:6]}.agekey").write_text(identity + "\n")
    victim, attacker = target.namespace("sops-victim"), target.namespace("sops-attacker")
    password = f"team-b-password-{uuid.uuid4().hex}"
    stolen = encrypted_secret(recipient, password)
    syncs(target, victim, stolen)
    syncs(target, attacker, stolen)  # the same file, copied
    if target.mode == "default":  # Flux's controller-wide decryption: every namespace (docs: Multi-tenancy)
        for ns in (victim, attacker):
            obj: dict[str, Any] = settled(target, ns, "csync", "apps")
            assert condition(obj)["status"] == "True", obj["status"]
            assert base64.b64decode(get(target.kube, ns, "secret", "db")["data"]["password"]).decode() == password
        return
    for ns in (attacker, victim):  # no namespace listed by the administrator: none served
        message = refused(target, ns, "csync", "apps", "DecryptionKeysNotAllowed")
        assert "apps/secret.yaml" in message and f"namespace {ns}" in message, message
        assert "spec.decryption.secretRef" in message
        assert not get(target.kube, ns, "secret", "db")
    said = said_about(target, attacker)
    assert victim not in said, "nothing names the other tenant"
    assert not [form for form in secret_forms(password) if form in said], "no form of the value"
    assert not [form for form in secret_forms(identity) if form in said + target.log()], "nor of the key"

    # the tenant's own keys, in a Secret of its namespace, still decrypt under lockdown
    own, own_recipient = age_identity()
    target.kube("kubectl", "-n", attacker, "create", "secret", "generic", "sops-keys",
                f"--from-literal=team.agekey={own}")
    mine = f"team-a-password-{uuid.uuid4().hex}"
    syncs(target, attacker, encrypted_secret(own_recipient, mine), "own", secretRef={"name": "sops-keys"})
    obj = settled(target, attacker, "csync", "own")
    assert condition(obj)["status"] == "True", obj["status"]
    assert base64.b64decode(get(target.kube, attacker, "secret", "db")["data"]["password"]).decode() == mine
