"""spec.valuesFiles driven by turns with real helm and a git repository on disk: the files' values reach the rendered
objects, in order, under spec.values; a commit that changes a values file upgrades once, one that changes another
file of the repository wakes the release and upgrades nothing; a missing file is refused unless optional, and a
path or a link that would leave the artifact is refused."""

from __future__ import annotations

import json
import logging
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from helmop_sandbox import Sandbox

from helmop.api.kinds import HELMOP
from helmop.api.objects import ObjectKey
from tests.chartrepo import ChartRepo
from tests.clirun import run_cli
from tests.conftest import _runner
from tests.controllers.conftest import condition, hr
from tests.controllers.turns import Turns
from tests.gitserver import GitServer, Repo
from tests.sops import Sops, age_identity
from tests.tools import TOOLS, Run


@pytest.fixture(scope="module")
def kube(turns_sandbox: Sandbox) -> Run:
    return _runner(turns_sandbox)


def _source(kube: Run, ns: str, repo: Repo) -> None:
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=yaml.safe_dump(
        {"apiVersion": "helmop.dev/v1alpha1", "kind": "GitRepository", "metadata": {"name": "config"},
         "spec": {"url": repo.url, "interval": "1h", "ref": {"branch": "main"}}}))


def _release(kube: Run, ns: str, name: str, chart_repo: ChartRepo, *files: dict[str, Any], **spec: Any) -> None:
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=hr(name, chart_repo, version="0.1.0", **spec, valuesFiles=[
        {"sourceRef": {"kind": "GitRepository", "name": "config"}, **file} for file in files]))


def _history(kube: Run, ns: str, name: str) -> list[dict[str, Any]]:
    return json.loads(kube("helm", "history", name, "-n", ns, "-o", "json").stdout)


def _deployment(kube: Run, ns: str, name: str) -> dict[str, Any]:
    return json.loads(kube("kubectl", "-n", ns, "get", "deploy", name, "-o", "json").stdout)


def _published(turns: Turns, ns: str) -> str:
    return str(turns.turn("GitRepository", ns, "config")["status"]["artifact"]["revision"])


def test_a_commit_upgrades_once_when_it_changes_a_values_file_and_never_otherwise(
        turns: Turns, kube: Run, ns: str, git_server: GitServer, tmp_path: Path, chart_repo: ChartRepo) -> None:
    repo = Repo(git_server, f"vf-{ns}", tmp_path / "work")
    repo.commit({"web/base.yaml": "replicaCount: 2\npodAnnotations: {tier: base, owner: base}\n",
                 "web/prod.yaml": "podAnnotations: {tier: prod}\n", "README.md": "one\n"})
    _source(kube, ns, repo)
    _release(kube, ns, "web", chart_repo, {"path": "web/base.yaml"}, {"path": "./web/prod.yaml"},
             values={"podAnnotations": {"owner": "spec"}})
    _published(turns, ns)
    installed = turns.turn("HelmRelease", ns, "web")
    assert condition(installed)["reason"] == "InstallSucceeded", condition(installed)
    deployment = _deployment(kube, ns, "web")
    assert deployment["spec"]["replicas"] == 2  # base.yaml's
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert (annotations["tier"], annotations["owner"]) == ("prod", "spec")  # prod.yaml over base.yaml, values over all
    # a new artifact of the source wakes the release (it refers to it)
    referrers = turns.dispatcher.ctx.memory.references.of(ObjectKey(HELMOP.gitrepository.key, ns, "config"))
    assert ObjectKey(HELMOP.helmrelease.key, ns, "web") in referrers

    other = repo.commit({"README.md": "two\n"})  # not a values file
    assert _published(turns, ns).endswith(other)
    unchanged = turns.turn("HelmRelease", ns, "web")
    assert condition(unchanged)["status"] == "True" and len(_history(kube, ns, "web")) == 1

    repo.commit({"web/prod.yaml": "podAnnotations: {tier: canary}\n"})
    _published(turns, ns)
    upgraded = turns.turn("HelmRelease", ns, "web")
    assert condition(upgraded)["reason"] == "UpgradeSucceeded", condition(upgraded)
    assert _deployment(kube, ns, "web")["spec"]["template"]["metadata"]["annotations"]["tier"] == "canary"
    turns.turn("HelmRelease", ns, "web")  # once: the next turn finds it up to date
    assert len(_history(kube, ns, "web")) == 2


def test_a_missing_file_is_refused_unless_optional_and_nothing_leaves_the_artifact(
        turns: Turns, kube: Run, ns: str, git_server: GitServer, tmp_path: Path, chart_repo: ChartRepo) -> None:
    repo = Repo(git_server, f"vf-missing-{ns}", tmp_path / "work")
    (tmp_path / "work" / "web").mkdir(parents=True)
    (tmp_path / "work" / "web" / "out.yaml").symlink_to("../../outside.yaml")  # a link out of the repository
    revision = repo.commit({"web/base.yaml": "replicaCount: 1\n"})
    _source(kube, ns, repo)
    _published(turns, ns)

    _release(kube, ns, "app", chart_repo, {"path": "web/base.yaml"}, {"path": "web/absent.yaml"})
    refused = turns.turn("HelmRelease", ns, "app")
    assert condition(refused)["reason"] == "ValuesFileNotFound", condition(refused)
    assert (f"spec.valuesFiles[1]: 'web/absent.yaml' of GitRepository {ns}/config does not exist at revision "
            f"main@sha1:{revision}") in condition(refused)["message"]
    assert condition(refused, "Stalled")["status"] == "True"
    assert "app" not in kube("helm", "list", "-n", ns, "-q").stdout.split()

    _release(kube, ns, "app", chart_repo, {"path": "web/base.yaml"}, {"path": "web/absent.yaml", "optional": True})
    assert condition(turns.turn("HelmRelease", ns, "app"))["reason"] == "InstallSucceeded"

    _release(kube, ns, "up", chart_repo, {"path": "web/../../secrets.yaml"})
    climbing = condition(turns.turn("HelmRelease", ns, "up"))
    assert (climbing["reason"], climbing["status"]) == ("InvalidSpec", "False"), climbing
    assert "spec.valuesFiles[0].path 'web/../../secrets.yaml' must be the relative path of a file inside" in (
        climbing["message"])

    _release(kube, ns, "linked", chart_repo, {"path": "web/out.yaml"})
    linked = condition(turns.turn("HelmRelease", ns, "linked"))
    assert linked["reason"] == "InvalidPath" and "web/out.yaml is a symlink pointing outside" in linked["message"]
    assert "up" not in kube("helm", "list", "-n", ns, "-q").stdout.split()
    assert "linked" not in kube("helm", "list", "-n", ns, "-q").stdout.split()


def test_sops_values_are_decrypted_for_helm_and_shown_nowhere(
        turns: Turns, kube: Run, ns: str, git_server: GitServer, tmp_path: Path, chart_repo: ChartRepo,
        caplog: pytest.LogCaptureFixture, turns_sandbox: Sandbox) -> None:
    """Two values files (one plain, one age-encrypted SOPS document) and a valuesFrom Secret holding a SOPS
    document: the release renders the decrypted values; a commit of the plain file alone upgrades once; no status,
    Event or log line holds a decrypted value; a value moved to another key does not decrypt."""
    caplog.set_level(logging.DEBUG)
    identity, recipient = age_identity()
    token, password = (f"{what}-{uuid.uuid4().hex}" for what in ("token", "pw"))
    repo = Repo(git_server, f"vf-sops-{ns}", tmp_path / "work")
    repo.commit({"web/plain.yaml": "replicaCount: 2\n",
                 "web/secret.yaml": Sops(age=[recipient]).yaml({"podAnnotations": {"token": token}})})
    kube("kubectl", "-n", ns, "create", "secret", "generic", "keys", f"--from-literal=team.agekey={identity}")
    kube("kubectl", "-n", ns, "create", "secret", "generic", "db",
         f"--from-literal=values.yaml={Sops(age=[recipient]).yaml({'podLabels': {'pw': password}})}")
    _source(kube, ns, repo)
    _published(turns, ns)
    spec = {"decryption": {"provider": "sops", "secretRef": {"name": "keys"}},
            "valuesFrom": [{"kind": "Secret", "name": "db"}]}
    _release(kube, ns, "web", chart_repo, {"path": "web/plain.yaml"}, {"path": "web/secret.yaml"}, **spec)
    installed = turns.turn("HelmRelease", ns, "web")
    assert condition(installed)["reason"] == "InstallSucceeded", condition(installed)
    template = _deployment(kube, ns, "web")["spec"]["template"]
    assert template["metadata"]["annotations"]["token"] == token and template["metadata"]["labels"]["pw"] == password

    repo.commit({"web/plain.yaml": "replicaCount: 3\n"})
    _published(turns, ns)
    assert condition(turns.turn("HelmRelease", ns, "web"))["reason"] == "UpgradeSucceeded"
    turns.turn("HelmRelease", ns, "web")
    assert len(_history(kube, ns, "web")) == 2

    # `helmop diff` decrypts with the caller's rights and masks what it decrypted
    rotated = f"token-{uuid.uuid4().hex}"
    repo.commit({"web/secret.yaml": Sops(age=[recipient]).yaml({"podAnnotations": {"token": rotated}})})
    _published(turns, ns)
    diff = run_cli(["diff", "hr", "web", "-n", ns], {"KUBECONFIG": str(turns_sandbox.kubeconfig),
                                                     "HELMOP_HELM": str(TOOLS / "helm")})
    assert diff.returncode == 1 and "Deployment" in diff.stdout and "+        token: ***" in diff.stdout, diff
    assert rotated not in diff.stdout + diff.stderr and token not in diff.stdout + diff.stderr

    forged = Sops(age=[recipient]).yaml({"podAnnotations": {"token": token}}).replace("token:", "tokem:", 1)
    repo.commit({"web/secret.yaml": forged})
    _published(turns, ns)
    refused = condition(turns.turn("HelmRelease", ns, "web"))
    assert refused["reason"] == "DecryptionFailed" and "not decrypted: a value does not decrypt" in refused["message"]
    assert "spec.valuesFiles[1]" in refused["message"]
    said = json.dumps([kube("kubectl", "-n", ns, "get", kind, "-o", "json").stdout for kind in ("hr", "events")])
    for value in (token, password, rotated):
        assert value not in said and value not in caplog.text, value


def test_an_encrypted_values_document_without_keys_is_refused(
        turns: Turns, kube: Run, ns: str, git_server: GitServer, tmp_path: Path, chart_repo: ChartRepo) -> None:
    _, recipient = age_identity()
    repo = Repo(git_server, f"vf-nokeys-{ns}", tmp_path / "work")
    repo.commit({"web/secret.yaml": Sops(age=[recipient]).yaml({"replicaCount": 2})})
    _source(kube, ns, repo)
    _published(turns, ns)
    _release(kube, ns, "bare", chart_repo, {"path": "web/secret.yaml"})
    refused = condition(turns.turn("HelmRelease", ns, "bare"))
    assert refused["reason"] == "DecryptionFailed" and "is SOPS-encrypted: set spec.decryption" in refused["message"]
