"""SOPS secrets in a config repository, end to end: git on disk over loopback HTTP, the operator, real kustomize
and the sandbox. The plaintext reaches the cluster's objects and nothing else (status, Events, the operator's
log, its cache folder, in every encoding it could take there); a tampered file or one for another tenant's key
is refused by reason with nothing applied; a key gpg made decrypts what gpg wrapped for it; the operator's own
keys serve only the namespaces they are for."""

from __future__ import annotations

import base64
import json
import logging
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from helmop_sandbox import Sandbox

from helmop.api.tenancy import Tenancy
from tests.conftest import _runner
from tests.controllers.conftest import GITREPO, ChartRepo, Operator, condition, eventually, get, watched
from tests.gitserver import GitServer, Repo
from tests.sops import Sops, age_identity, gpg_keys, pgp_key
from tests.tools import Run

GROUP = "helmop.dev/v1alpha1"
FLUX_REGEX = "^(data|stringData)$"


def secret(name: str, value: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "stringData": {"password": value}}


def sync(name: str, path: str, keys: str | None) -> str:
    spec: dict[str, Any] = {"sourceRef": {"kind": "GitRepository", "name": "config"}, "path": path, "interval": "1h"}
    if keys is not None:
        spec["decryption"] = {"provider": "sops", **({"secretRef": {"name": keys}} if keys else {})}
    return yaml.safe_dump({"apiVersion": GROUP, "kind": "ConfigSync", "metadata": {"name": name}, "spec": spec})


def source(url: str) -> str:
    return yaml.safe_dump({"apiVersion": GROUP, "kind": "GitRepository", "metadata": {"name": "config"},
                           "spec": {"url": url, "interval": "1h", "ref": {"branch": "main"}}})


def outcome(kube: Run, ns: str, name: str, reason: str) -> dict[str, Any]:
    found: dict[str, Any] = eventually(lambda: (o := get(kube, ns, "csync", name))
                                       and condition(o).get("reason") == reason and o, timeout=60)
    return found


def forms(value: str) -> list[str]:
    return [value, base64.b64encode(value.encode()).decode(), json.dumps(value)[1:-1]]


def nowhere_but_the_cluster(kube: Run, ns: str, operator: Operator, logged: str, *values: str) -> None:
    """Not in any object's status, in no Event, not logged, kept in no file of the operator's cache (a build under
    way has its private copy, which goes when the build ends: one may be running as this looks)."""
    statuses = json.dumps([o.get("status") for kind in ("csync", GITREPO) for o in get(kube, ns, kind)["items"]])
    said = json.dumps(get(kube, ns, "events")["items"])
    for value in values:
        for form in forms(value):
            assert form not in statuses and form not in said and form not in logged, form
            eventually(lambda form=form: not _cached(operator, form), timeout=30)


def _cached(operator: Operator, form: str) -> list[Path]:
    """The files of the operator's cache that hold ``form``."""
    found = []
    for path in Path(operator.settings.helm.cache_dir).rglob("*"):
        try:
            if path.is_file() and form.encode() in path.read_bytes():
                found.append(path)
        except FileNotFoundError:  # a build's copy removed as it was read
            continue
    return found


def test_an_encrypted_overlay_applies_its_plaintext_and_shows_it_nowhere_else(
        operator: Operator, kube: Run, ns: str, repo: Repo, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    identity, recipient = age_identity()
    armored, cert = pgp_key()
    password, env_value, pgp_value = (f"{what}-{uuid.uuid4().hex}" for what in ("pw", "env", "pgp"))
    repo.commit({
        "age/kustomization.yaml": "resources: [secret.yaml]\nsecretGenerator:\n- {name: env, envs: [db.env]}\n",
        "age/secret.yaml": Sops(age=[recipient], regex=FLUX_REGEX).yaml(secret("db", password)),
        "age/db.env": Sops(age=[recipient]).dotenv({"DB_PASS": env_value}),
        "pgp/secret.yaml": Sops(pgp=[cert]).yaml(secret("gpg", pgp_value)),
    })
    kube("kubectl", "-n", ns, "create", "secret", "generic", "age-keys", f"--from-literal=team.agekey={identity}")
    kube("kubectl", "-n", ns, "create", "secret", "generic", "pgp-keys", f"--from-literal=key.asc={armored}")
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=source(repo.url))
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=sync("age", "age", "age-keys"))
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=sync("pgp", "pgp", "pgp-keys"))
    for name in ("age", "pgp"):
        outcome(kube, ns, name, "ReconciliationSucceeded")
    assert base64.b64decode(get(kube, ns, "secret", "db")["data"]["password"]).decode() == password
    assert base64.b64decode(get(kube, ns, "secret", "gpg")["data"]["password"]).decode() == pgp_value
    generated = next(s for s in get(kube, ns, "secret")["items"] if s["metadata"]["name"].startswith("env-"))
    assert base64.b64decode(generated["data"]["DB_PASS"]).decode() == env_value
    nowhere_but_the_cluster(kube, ns, operator, caplog.text, password, env_value, pgp_value)

    # a value changed after encryption: refused with its reason, and what was applied stays as it was
    tampered = Sops(age=[recipient], regex=FLUX_REGEX).yaml(secret("db", "a-new-password"))
    repo.commit({"age/secret.yaml": tampered.replace("name: db", "name: db2", 1)})
    kube("kubectl", "-n", ns, "annotate", "--overwrite", GITREPO, "config", f"helmop.dev/requestedAt={uuid.uuid4()}")
    refused = outcome(kube, ns, "age", "DecryptionFailed")
    assert "age/secret.yaml" in condition(refused)["message"] and "MAC does not match" in condition(refused)["message"]
    assert not get(kube, ns, "secret", "db2")
    assert base64.b64decode(get(kube, ns, "secret", "db")["data"]["password"]).decode() == password


def test_a_tenant_decrypts_only_with_its_own_keys(operator: Operator, kube: Run, ns: str, repo: Repo) -> None:
    """The same repository in another namespace, whose key Secret holds another identity: the file encrypted for
    the first tenant is refused there by reason, nothing applied; a Secret name cannot reach another namespace."""
    mine, theirs = age_identity(), age_identity()
    value = f"tenant-{uuid.uuid4().hex}"
    repo.commit({"app/secret.yaml": Sops(age=[mine[1]], regex=FLUX_REGEX).yaml(secret("db", value))})
    other = f"{ns}-other"
    kube("kubectl", "create", "namespace", other)
    for where, identity in ((ns, mine[0]), (other, theirs[0])):
        kube("kubectl", "-n", where, "create", "secret", "generic", "keys", f"--from-literal=k.agekey={identity}")
        kube("kubectl", "-n", where, "apply", "-f", "-", stdin=source(repo.url))
        kube("kubectl", "-n", where, "apply", "-f", "-", stdin=sync("app", "app", "keys"))
    outcome(kube, ns, "app", "ReconciliationSucceeded")
    refused = outcome(kube, other, "app", "DecryptionFailed")
    assert mine[1] in condition(refused)["message"] and f"Secret {other}/keys" in condition(refused)["message"]
    assert not get(kube, other, "secret", "db")
    # no spec.decryption: the encrypted Secret is refused by name rather than applied
    kube("kubectl", "-n", other, "apply", "-f", "-", stdin=sync("app", "app", None))
    watched(kube, other, "csync", "app", lambda obj: "is SOPS-encrypted: set spec.decryption" in condition(obj)
               .get("message", ""), timeout=60)


def test_objects_that_name_no_secret_use_the_operators_key_folder(operator: Operator, kube: Run, ns: str,
                                                                  repo: Repo) -> None:
    identity, recipient = age_identity()
    value = f"global-{uuid.uuid4().hex}"
    repo.commit({"app/secret.yaml": Sops(age=[recipient], regex=FLUX_REGEX).yaml(secret("db", value))})
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=source(repo.url))
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=sync("app", "app", ""))
    missing = outcome(kube, ns, "app", "DecryptionFailed")
    assert "operator's key folder" in condition(missing)["message"]
    assert operator.settings.sources.decryption_keys is not None
    # a file of the folder that is no key: its own reason, naming the file and not what it holds
    broken = operator.settings.sources.decryption_keys / "broken.asc"
    broken.write_text("-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nc2VjcmV0LXZhbHVl\n"
                      "-----END PGP PRIVATE KEY BLOCK-----\n")
    try:
        kube("kubectl", "-n", ns, "annotate", "--overwrite", "csync", "app", f"helmop.dev/requestedAt={uuid.uuid4()}")
        said = eventually(lambda: "broken.asc" in (m := condition(get(kube, ns, "csync", "app")).get("message", ""))
                          and m, timeout=60)
        assert "--decryption-keys: the operator's key folder: broken.asc: not an OpenPGP key" in said
        assert condition(get(kube, ns, "csync", "app"))["reason"] == "DecryptionFailed"
        assert "c2VjcmV0LXZhbHVl" not in said
    finally:
        broken.unlink()
    (operator.settings.sources.decryption_keys / "platform.agekey").write_text(identity + "\n")
    kube("kubectl", "-n", ns, "annotate", "--overwrite", "csync", "app", f"helmop.dev/requestedAt={uuid.uuid4()}")
    outcome(kube, ns, "app", "ReconciliationSucceeded")
    assert base64.b64decode(get(kube, ns, "secret", "db")["data"]["password"]).decode() == value


def test_a_file_gpg_wrapped_for_a_key_whose_primary_can_encrypt_applies(operator: Operator, kube: Run, ns: str,
                                                                      repo: Repo) -> None:
    """Flux's own test key's shape (gpg: a primary that can encrypt, and an encryption subkey, which gpg wraps
    the data key for), its private key exported by gpg into the key Secret."""
    value = f"gpg-{uuid.uuid4().hex}"
    with gpg_keys("primary-and-subkey") as (key,):
        repo.commit({"app/secret.yaml": Sops(gpg=[key], regex=FLUX_REGEX).yaml(secret("db", value))})
        armored = key.secret().decode()
    kube("kubectl", "-n", ns, "create", "secret", "generic", "pgp-keys", f"--from-literal=team.asc={armored}")
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=source(repo.url))
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=sync("app", "app", "pgp-keys"))
    outcome(kube, ns, "app", "ReconciliationSucceeded")
    assert base64.b64decode(get(kube, ns, "secret", "db")["data"]["password"]).decode() == value


LISTED = "platform-apps"  # the one namespace the administrator lists for the operator's keys


@pytest.fixture(scope="module")
def listing(tmp_path_factory: pytest.TempPathFactory, chart_repo: ChartRepo) -> Iterator[Operator]:
    """An operator with --no-cross-namespace-refs and --decryption-keys-namespaces platform-apps."""
    workdir = tmp_path_factory.mktemp("listing")
    with Sandbox(ready_delay=0.05) as sandbox:
        op = Operator(sandbox, "helm", workdir, chart_repo)
        op.set("tenancy", no_cross_namespace_refs=True, decryption_keys_namespaces=frozenset({LISTED}))
        op.start()
        yield op
        op.close()


def test_the_operators_keys_serve_only_the_namespaces_listed(listing: Operator, git_server: GitServer,
                                                            tmp_path: Path) -> None:
    """Under lockdown, the same file and ConfigSync (naming no key Secret) in the listed namespace and in another:
    decrypted in the first, refused in the second with its own reason, naming no other namespace."""
    kube = _runner(listing.sandbox)
    identity, recipient = age_identity()
    assert listing.settings.sources.decryption_keys is not None
    (listing.settings.sources.decryption_keys / "platform.agekey").write_text(identity + "\n")
    value = f"platform-{uuid.uuid4().hex}"
    repo = Repo(git_server, f"r-{uuid.uuid4().hex[:6]}", tmp_path / "work")
    repo.commit({"app/secret.yaml": Sops(age=[recipient], regex=FLUX_REGEX).yaml(secret("db", value))})
    other = f"team-{uuid.uuid4().hex[:5]}"
    for where in (LISTED, other):
        kube("kubectl", "create", "namespace", where)
        kube("kubectl", "-n", where, "apply", "-f", "-", stdin=source(repo.url))
        kube("kubectl", "-n", where, "apply", "-f", "-", stdin=sync("app", "app", ""))
    outcome(kube, LISTED, "app", "ReconciliationSucceeded")
    assert base64.b64decode(get(kube, LISTED, "secret", "db")["data"]["password"]).decode() == value
    refused = condition(outcome(kube, other, "app", "DecryptionKeysNotAllowed"))["message"]
    assert f"not for namespace {other}" in refused and LISTED not in refused and value not in refused
    eventually(lambda: any(e["reason"] == "DecryptionKeysNotAllowed" and e["type"] == "Warning"
                           for e in get(kube, other, "events")["items"]), timeout=15)
    assert not get(kube, other, "secret", "db")


@pytest.mark.parametrize(("tenancy", "served"), [
    (Tenancy(), True),  # no lockdown flag: every namespace (Flux's controller-wide decryption)
    (Tenancy(no_cross_namespace_refs=True), False),  # either lockdown flag: none unless listed
    (Tenancy("helmop-tenant"), False),
    (Tenancy("helmop-tenant", True, Tenancy.namespaces(["team-b, team-a", "platform"])), True),
    (Tenancy("helmop-tenant", True, Tenancy.namespaces(["team-b"])), False),
    (Tenancy("helmop-tenant", True, Tenancy.namespaces(["*"])), True),
    (Tenancy(decryption_keys_namespaces=Tenancy.namespaces([""])), False),  # '': none, without lockdown too
])
def test_which_namespaces_the_operators_keys_serve(tenancy: Tenancy, served: bool) -> None:
    assert tenancy.operator_keys_serve("team-a") is served


def test_a_listed_name_that_is_no_namespace_is_refused() -> None:
    with pytest.raises(ValueError, match="'Team_A' is not a namespace name"):
        Tenancy.namespaces(["ok,Team_A"])
    assert Tenancy.namespaces(["team-a, *", ""]) == frozenset({"team-a", "*"})
