"""Image automation end to end on loopback: a registry serving an image's tags (the OCI chart tests' registry), a
git repository with a Deployment and a kustomization.yaml carrying setter markers, a ConfigSync applying it, and
the operator's ImageRepository, ImagePolicy and ImageUpdateAutomation - helmop's, and Flux's manifests unchanged
(image.toolkit.fluxcd.io/v1). Each new tag in range becomes a signed commit with the templated message, which the
ConfigSync applies; an excluded tag and one outside the range are never chosen; nothing outside update.path is
written; two automations on one branch keep each other's commits."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pysequoia
import pytest
import yaml
from helmop_sandbox import Sandbox

from tests.controllers.conftest import ChartRepo, Operator, apply, condition, events, eventually, get, helmop, watched
from tests.gitserver import Repo
from tests.receiver import Receiver
from tests.registry import Registry
from tests.tools import Run

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web  # the shop's front end
spec:
  selector:
    matchLabels: {{app: web}}
  template:
    metadata:
      labels: {{app: web}}
    spec:
      containers:
      - name: web
        image: {image}:1.0.0 # {{"$imagepolicy": "{ns}:web"}}
"""
KUSTOMIZATION = """\
resources: [deployment.yaml]
images:
- name: {image}
  newTag: 1.0.0 # {{"$imagepolicy": "{ns}:web:tag"}}
"""
OUTSIDE = 'image: {image}:1.0.0 # {{"$imagepolicy": "{ns}:web"}}\n'
TEMPLATE = "Move {{ .AutomationObject.Name }}{{ range .Changed.Changes }} {{ .OldValue }} -> {{ .NewValue }}{{ end }}"


@pytest.fixture(scope="module")
def operator(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
             chart_repo: ChartRepo) -> Iterator[Operator]:
    """This module's operator: allowed to notify 127.0.0.1 (the receiver of an Alert on ImagePolicies)."""
    with Sandbox(ready_delay=0.05) as sandbox:
        op = Operator(sandbox, request.param, tmp_path_factory.mktemp("images"), chart_repo)
        op.set("notifications", allow_cidrs=("127.0.0.1/32",))
        op.start()
        yield op
        op.close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


@pytest.fixture(scope="module")
def registry() -> Iterator[Registry]:
    reg = Registry({})
    reg.page = 2  # a few tags per page: the scan follows the Link header
    yield reg


def pull_secret(kube: Run, ns: str, registry: Registry) -> None:
    auth = {"auths": {f"127.0.0.1:{registry.port}": {"username": "robot", "password": "pull-secret"}}}
    kube("kubectl", "-n", ns, "create", "secret", "generic", "regcred", "--type=kubernetes.io/dockerconfigjson",
         f"--from-literal=.dockerconfigjson={json.dumps(auth)}")


def objects(image: str, group: str = "helmop.dev/v1alpha1", *, name: str = "web", path: str = "apps",
            **automation: Any) -> list[dict[str, Any]]:
    return [
        {"apiVersion": group, "kind": "ImageRepository",
         "metadata": {"name": "web"},
         "spec": {"image": image, "interval": "1h", "insecure": True, "secretRef": {"name": "regcred"},
                  "exclusionList": ["^.*\\.sig$", "-rc"]}},
        {"apiVersion": group, "kind": "ImagePolicy", "metadata": {"name": "web"},
         "spec": {"imageRepositoryRef": {"name": "web"}, "policy": {"semver": {"range": ">=1.0.0-0 <2.0.0"}}}},
        {"apiVersion": group, "kind": "ImageUpdateAutomation", "metadata": {"name": name},
         "spec": {"interval": "1h", "sourceRef": {"kind": "GitRepository", "name": "config"},
                  "git": {"checkout": {"ref": {"branch": "main"}},
                          "commit": {"author": {"name": "helmop", "email": "bot@example.com"},
                                     "messageTemplate": TEMPLATE, **automation.pop("commit", {})},
                          "push": {"branch": "main"}},
                  "update": {"path": path, "strategy": "Setters"}, **automation}},
    ]


def gpg_key(kube: Run, ns: str) -> pysequoia.Tsk:
    key = pysequoia.Tsk.generate("Bot <bot@example.com>")
    kube("kubectl", "-n", ns, "create", "secret", "generic", "signing", f"--from-literal=git.asc={key}")
    return key


def git_log(repo: Repo, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo.bare), "log", *args, "main"], capture_output=True, text=True,
                          check=True).stdout


def shown(repo: Repo, path: str) -> str:
    return subprocess.run(["git", "-C", str(repo.bare), "show", f"main:{path}"], capture_output=True, text=True,
                          check=True).stdout


def deployed_image(kube: Run, ns: str) -> str:
    found = get(kube, ns, "deployment", "web")
    return str(((found.get("spec") or {}).get("template") or {}).get("spec", {}).get("containers", [{}])[0]
               .get("image", "")) if found else ""


def test_new_tags_become_signed_commits_the_configsync_applies(operator: Operator, kube: Run, ns: str, repo: Repo,
                                                                registry: Registry, receiver: Receiver,
                                                                tmp_path: Path) -> None:
    image = f"127.0.0.1:{registry.port}/charts/web"
    registry.tags = ["1.0.0", "1.2.0", "1.9.0-rc.1", "2.0.0"]  # the -rc is excluded, 2.0.0 out of range
    marks = {"image": image, "ns": ns}
    repo.commit({"apps/deployment.yaml": DEPLOYMENT.format(**marks),
                 "apps/kustomization.yaml": KUSTOMIZATION.format(**marks),
                 "outside/image.yaml": OUTSIDE.format(**marks)})
    pull_secret(kube, ns, registry)
    key = gpg_key(kube, ns)
    apply(kube, ns, yaml.safe_dump_all([
        {"apiVersion": "helmop.dev/v1alpha1", "kind": "GitRepository", "metadata": {"name": "config"},
         "spec": {"url": repo.url, "ref": {"branch": "main"}, "interval": "1h"}},
        {"apiVersion": "helmop.dev/v1alpha1", "kind": "ConfigSync", "metadata": {"name": "apps"},
         "spec": {"sourceRef": {"kind": "GitRepository", "name": "config"}, "path": "apps", "interval": "1h"}},
        *objects(image, commit={"signingKey": {"secretRef": {"name": "signing"}}}),
        {"apiVersion": "helmop.dev/v1alpha1", "kind": "Provider", "metadata": {"name": "hook"},
         "spec": {"type": "generic", "address": receiver.url("/images")}},
        {"apiVersion": "helmop.dev/v1alpha1", "kind": "Alert", "metadata": {"name": "images"},
         "spec": {"providerRef": {"name": "hook"}, "eventSources": [{"kind": "ImagePolicy", "name": "*"}]}}]))

    eventually(lambda: deployed_image(kube, ns) == f"{image}:1.2.0", timeout=90)
    policy = get(kube, ns, "imagepolicies.helmop.dev", "web")["status"]
    assert policy["latestRef"] == {"name": image, "tag": "1.2.0"}
    scanned = get(kube, ns, "imagerepositories.helmop.dev", "web")["status"]
    assert scanned["lastScanResult"]["tagCount"] == 3 and scanned["canonicalImageName"] == image

    registry.tags.append("1.3.0")  # a new release is pushed; scanned now, as Flux's CLI asks
    asked = helmop(operator, "reconcile", "image", "repository", "web", "-n", ns)
    assert asked.returncode == 0, asked.stderr
    eventually(lambda: deployed_image(kube, ns) == f"{image}:1.3.0", timeout=90)
    assert git_log(repo, "-2", "--format=%s").splitlines() == [
        f"Move web {image}:1.2.0 -> {image}:1.3.0 1.2.0 -> 1.3.0", f"Move web {image}:1.0.0 -> {image}:1.2.0 "
                                                                  "1.0.0 -> 1.2.0"]
    assert shown(repo, "outside/image.yaml") == OUTSIDE.format(**marks)  # outside update.path: untouched
    status = get(kube, ns, "imageupdateautomations.helmop.dev", "web")["status"]
    head = git_log(repo, "-1", "--format=%H").strip()
    assert status["lastPushCommit"] == head and status["observedPolicies"]["web"]["tag"] == "1.3.0"
    assert condition(get(kube, ns, "imageupdateautomations.helmop.dev", "web"))["status"] == "True"
    home = tmp_path / "gnupg"
    home.mkdir(mode=0o700)
    env = {**os.environ, "GNUPGHOME": str(home)}
    subprocess.run(["gpg", "--batch", "--import"], input=str(key.extract_certificate()).encode(), env=env, check=True,
                   capture_output=True)
    verified = subprocess.run(["git", "-C", str(repo.bare), "verify-commit", head], env=env, capture_output=True)
    assert verified.returncode == 0, verified.stderr
    # the Event follows the status
    eventually(lambda: any(e["reason"] == "ImageUpdated" for e in events(kube, ns, "web")))
    sent = eventually(lambda: [r.json() for r in receiver.at("/images") if r.json()["reason"] == "ImageUpdated"])
    assert sent[-1]["involvedObject"]["kind"] == "ImagePolicy" and sent[-1]["message"].endswith(f"{image}:1.3.0")
    shown_images = helmop(operator, "get", "images", "-n", ns)
    assert shown_images.returncode == 0 and "1.3.0" in shown_images.stdout, shown_images.stderr


def test_two_automations_on_one_branch_keep_each_others_commits(kube: Run, ns: str, repo: Repo,
                                                                 registry: Registry) -> None:
    image = f"127.0.0.1:{registry.port}/charts/web"
    registry.tags = ["1.0.0", "1.4.0"]
    marks = {"image": image, "ns": ns}
    repo.commit({"a/deployment.yaml": DEPLOYMENT.format(**marks), "b/deployment.yaml": DEPLOYMENT.format(**marks)})
    pull_secret(kube, ns, registry)
    first, second = objects(image, name="a", path="a"), objects(image, name="b", path="b")
    apply(kube, ns, yaml.safe_dump_all([
        {"apiVersion": "helmop.dev/v1alpha1", "kind": "GitRepository", "metadata": {"name": "config"},
         "spec": {"url": repo.url, "ref": {"branch": "main"}, "interval": "1h"}}, *first, second[2]]))
    eventually(lambda: "1.4.0" in shown(repo, "a/deployment.yaml") and "1.4.0" in shown(repo, "b/deployment.yaml"),
               timeout=90)
    assert sorted(git_log(repo, "-2", "--format=%s").splitlines()) == [
        f"Move {name} {image}:1.0.0 -> {image}:1.4.0" for name in "ab"]


def test_fluxs_manifests_work_unchanged(kube: Run, ns: str, repo: Repo, registry: Registry) -> None:
    image = f"127.0.0.1:{registry.port}/charts/web"
    registry.tags = ["1.0.0", "1.5.0"]
    marks = {"image": image, "ns": ns}
    repo.commit({"apps/deployment.yaml": DEPLOYMENT.format(**marks)})
    pull_secret(kube, ns, registry)
    flux = "image.toolkit.fluxcd.io/v1"
    apply(kube, ns, yaml.safe_dump_all([
        {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository", "metadata": {"name": "config"},
         "spec": {"url": repo.url, "ref": {"branch": "main"}, "interval": "1h"}},
        {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization", "metadata": {"name": "apps"},
         "spec": {"sourceRef": {"kind": "GitRepository", "name": "config"}, "path": "./apps", "prune": True,
                  "targetNamespace": ns, "interval": "1h"}},
        *_flux(objects(image, flux))]))
    eventually(lambda: "1.5.0" in shown(repo, "apps/deployment.yaml"), timeout=90)
    eventually(lambda: deployed_image(kube, ns) == f"{image}:1.5.0", timeout=90)  # Flux's Kustomization applies it
    automation = get(kube, ns, f"imageupdateautomations.{flux.split('/')[0]}", "web")
    assert condition(automation)["status"] == "True" and automation["status"]["lastPushCommit"]
    refused = {**_flux(objects(image, flux))[0], "metadata": {"name": "cloud"}}
    refused["spec"] = {**refused["spec"], "provider": "aws"}
    apply(kube, ns, yaml.safe_dump(refused))
    watched(kube, ns, f"imagerepositories.{flux.split('/')[0]}", "cloud",
            lambda obj: "spec.provider" in condition(obj).get("message", ""))


def _flux(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """helmop's objects as Flux writes them: its kinds' own spec, with Flux's defaults written out."""
    items[0]["spec"]["provider"] = "generic"
    return items


def test_a_policy_reads_another_namespace_only_as_its_access_from_grants(kube: Run, ns: str,
                                                                         registry: Registry) -> None:
    image = f"127.0.0.1:{registry.port}/charts/web"
    registry.tags = ["1.0.0", "1.6.0"]
    shared = f"{ns}-registry"
    kube("kubectl", "create", "namespace", shared)
    pull_secret(kube, shared, registry)
    for name, grants in (("open", {"namespaceSelectors": [{"matchLabels": {}}]}), ("closed", None)):
        repository = objects(image)[0]
        repository["metadata"]["name"] = name
        apply(kube, shared, yaml.safe_dump({**repository, "spec": {**repository["spec"], "accessFrom": grants}}))
        policy = objects(image)[1]
        policy["metadata"]["name"] = name
        policy["spec"]["imageRepositoryRef"] = {"name": name, "namespace": shared}
        apply(kube, ns, yaml.safe_dump(policy))
    chosen = watched(kube, ns, "imagepolicies.helmop.dev", "open", lambda obj: (obj.get("status") or {})
                        .get("latestRef"))
    assert chosen == {"name": image, "tag": "1.6.0"}
    refused = eventually(lambda: condition(get(kube, ns, "imagepolicies.helmop.dev", "closed")).get("reason")
                         == "AccessDenied" and condition(get(kube, ns, "imagepolicies.helmop.dev", "closed")))
    assert f"does not grant namespace {ns}" in refused["message"]
