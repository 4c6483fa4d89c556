"""Config repositories as people write them: a ConfigSync over a kustomize overlay converges to what
`kubectl kustomize` prints for the same folder, with Flux's post-build variables, and a hostile build is
refused with its reason before anything is applied."""

from __future__ import annotations

import base64
import logging
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.controllers.conftest import Operator, condition, events, eventually, get
from tests.controllers.test_gitops import setup_source
from tests.gitserver import Repo
from tests.tools import Run, tool

SECRET = "pa55-w0rd-from-a-secret"
REPOSITORY = {
    "base/kustomization.yaml": """resources: [deploy.yaml, service.yaml]
configMapGenerator:
- name: settings
  literals: [mode=base]
""",
    "base/deploy.yaml": yaml.safe_dump({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}}, "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "web", "image": "nginx:1.25",
                                     "env": [{"name": "REGION", "value": "${region}"}],
                                     "envFrom": [{"configMapRef": {"name": "settings"}}]}]}}}}),
    "base/service.yaml": yaml.safe_dump({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
                                         "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}}),
    "components/monitoring/kustomization.yaml": """apiVersion: kustomize.config.k8s.io/v1alpha1
kind: Component
commonAnnotations: {monitoring: enabled}
""",
    "staging/kustomization.yaml": """resources: [../base, credentials.yaml]
namePrefix: stg-
components: [../components/monitoring]
images:
- {name: nginx, newTag: "1.27"}
configMapGenerator:
- name: settings
  behavior: merge
  literals: [mode=staging]
patches:
- path: replicas.yaml
- target: {kind: Service}
  patch: |
    - {op: add, path: /metadata/labels, value: {exposed: "yes"}}
""",
    "staging/replicas.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 2}\n",
    "staging/credentials.yaml": "apiVersion: v1\nkind: Secret\nmetadata: {name: credentials}\n"
                                "stringData: {password: '${password}', region: '${region:=nowhere}'}\n",
}


def configsync(name: str, path: str, **spec: Any) -> str:
    return yaml.safe_dump({"apiVersion": "helmop.dev/v1alpha1", "kind": "ConfigSync", "metadata": {"name": name},
                           "spec": {"sourceRef": {"name": "config"}, "path": path, "interval": "1h", **spec}})


def _contains(live: Any, built: Any) -> bool:
    """Whether ``live`` holds everything ``built`` says (the API server adds defaults of its own)."""
    if isinstance(built, dict):
        return isinstance(live, dict) and all(k in live and _contains(live[k], v) for k, v in built.items())
    if isinstance(built, list):
        return isinstance(live, list) and len(live) == len(built) and all(map(_contains, live, built))
    return bool(live == built)


def built_by_kubectl(tmp_path: Path, folder: str) -> list[dict[str, Any]]:
    checkout = tmp_path / "checkout"
    for rel, text in REPOSITORY.items():
        (checkout / rel).parent.mkdir(parents=True, exist_ok=True)
        (checkout / rel).write_text(text)
    out = subprocess.run([tool("kubectl"), "kustomize", str(checkout / folder)], check=True, capture_output=True,
                         text=True).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def test_an_overlay_converges_to_what_kubectl_kustomize_prints(operator: Operator, kube: Run, ns: str, repo: Repo,
                                                                tmp_path: Path,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    repo.commit(REPOSITORY)
    setup_source(kube, ns, repo)
    kube("kubectl", "-n", ns, "create", "configmap", "cluster-vars", "--from-literal=region=eu-central-1")
    kube("kubectl", "-n", ns, "create", "secret", "generic", "cluster-secrets", f"--from-literal=password={SECRET}")
    post_build = {"substituteFrom": [{"kind": "ConfigMap", "name": "cluster-vars"},
                                     {"kind": "Secret", "name": "cluster-secrets"},
                                     {"kind": "ConfigMap", "name": "absent", "optional": True}]}
    with caplog.at_level(logging.DEBUG):
        kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=configsync("staging", "staging", postBuild=post_build))
        eventually(lambda: condition(get(kube, ns, "csync", "staging")).get("status") == "True")
    applied = {(i["kind"], i["name"]) for i in get(kube, ns, "csync", "staging")["status"]["inventory"]}
    expected = built_by_kubectl(tmp_path, "staging")
    assert applied == {(o["kind"], o["metadata"]["name"]) for o in expected}
    for wanted in expected:
        live = get(kube, ns, wanted["kind"].lower(), wanted["metadata"]["name"])
        assert live, wanted["metadata"]["name"]
        for key in ("spec", "data", "stringData"):
            if key in wanted and wanted["kind"] != "Secret":  # what kustomize built, variables substituted after it
                built = yaml.safe_load(yaml.safe_dump(wanted[key]).replace("${region}", "eu-central-1"))
                assert _contains(live[key], built), (wanted["metadata"]["name"], key, live[key], built)
        assert (live["metadata"].get("annotations") or {}).get("monitoring") == "enabled"  # the component
    deploy = get(kube, ns, "deploy", "stg-web")
    container = deploy["spec"]["template"]["spec"]["containers"][0]
    assert deploy["spec"]["replicas"] == 2 and container["image"] == "nginx:1.27"  # a patch file, images
    assert container["env"] == [{"name": "REGION", "value": "eu-central-1"}]  # from the ConfigMap
    settings = container["envFrom"][0]["configMapRef"]["name"]
    assert settings.startswith("stg-settings-") and get(kube, ns, "cm", settings)["data"] == {"mode": "staging"}
    assert get(kube, ns, "svc", "stg-web")["metadata"]["labels"]["exposed"] == "yes"  # an inline JSON 6902 patch
    secret = get(kube, ns, "secret", "stg-credentials")["data"]
    assert base64.b64decode(secret["password"]).decode() == SECRET  # from the Secret
    assert base64.b64decode(secret["region"]).decode() == "eu-central-1"  # set: the default is not used
    # The Secret's value lands where it is used, and nowhere helmop reports
    said = yaml.safe_dump(get(kube, ns, "csync", "staging")) + yaml.safe_dump(events(kube, ns, "staging"))
    assert SECRET not in said and SECRET not in caplog.text


def test_the_configsyncs_own_build_fields_and_common_metadata(operator: Operator, kube: Run, ns: str,
                                                              repo: Repo) -> None:
    repo.commit(REPOSITORY)
    setup_source(kube, ns, repo)
    spec = {"namePrefix": "x-", "commonMetadata": {"labels": {"team": "shop"}},
            "patches": [{"patch": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: any}\n"
                                  "spec: {replicas: 3}\n", "target": {"kind": "Deployment"}}],
            "postBuild": {"substitute": {"region": "us-east-1", "password": "unused"}}}
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=configsync("own", "base", **spec))
    eventually(lambda: condition(get(kube, ns, "csync", "own")).get("status") == "True")
    deploy = get(kube, ns, "deploy", "x-web")
    labels = deploy["metadata"]["labels"]
    assert deploy["spec"]["replicas"] == 3 and labels["app"] == "web" and labels["team"] == "shop"
    assert deploy["spec"]["template"]["spec"]["containers"][0]["env"][0]["value"] == "us-east-1"


@pytest.mark.parametrize(("extra", "reason", "said"), [
    ({"bad/kustomization.yaml": "resources:\n- github.com/example/config//base?ref=main\n"}, "RemoteBaseRefused",
     "bad/kustomization.yaml: 'github.com/example/config//base?ref=main' is a remote base"),
    ({"bad/kustomization.yaml": "resources: [../../../etc]\n"}, "PathOutsideRepository", "outside the repository"),
    ({"bad/kustomization.yaml": "resources: [../base]\ngenerators: [fn.yaml]\n",
      "bad/fn.yaml": "apiVersion: x/v1\nkind: Gen\nmetadata:\n  name: g\n  annotations:\n"
                     "    config.kubernetes.io/function: |\n      container: {image: evil:1}\n"},
     "FunctionRefused", "KRM function"),
    ({"bad/kustomization.yaml": "resources: [../base]\npatches:\n- path: nowhere.yaml\n"}, "PathNotFound",
     "bad/nowhere.yaml"),
])
def test_a_hostile_build_is_refused_with_its_reason_and_nothing_applied(operator: Operator, kube: Run, ns: str,
                                                                       repo: Repo, extra: dict[str, str], reason: str,
                                                                       said: str) -> None:
    repo.commit({**REPOSITORY, **extra})
    setup_source(kube, ns, repo)
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=configsync("bad", "bad"))
    ready = eventually(lambda: (c := condition(get(kube, ns, "csync", "bad"))).get("reason") == reason and c)
    assert ready["status"] == "False" and said in ready["message"], ready["message"]
    assert condition(get(kube, ns, "csync", "bad"), "Stalled").get("status") == "True"
    assert any(e["reason"] == reason and e["type"] == "Warning" for e in events(kube, ns, "bad"))
    assert not get(kube, ns, "deploy", "web") and not (get(kube, ns, "csync", "bad")["status"].get("inventory"))
