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

from tests.controllers.conftest import (
    GITREPO,
    ChartRepo,
    Operator,
    condition,
    events,
    eventually,
    get,
    settled,
    watched,
)
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
        watched(kube, ns, "csync", "staging", lambda obj: condition(obj).get("status") == "True")
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
    watched(kube, ns, "csync", "own", lambda obj: condition(obj).get("status") == "True")
    deploy = get(kube, ns, "deploy", "x-web")
    labels = deploy["metadata"]["labels"]
    assert deploy["spec"]["replicas"] == 3 and labels["app"] == "web" and labels["team"] == "shop"
    assert deploy["spec"]["template"]["spec"]["containers"][0]["env"][0]["value"] == "us-east-1"
    # the same revision built again at the next reconcile: kustomize's output of the first build is reused
    hits = operator.metric("helmop_cache_requests_total", cache="kustomize-builds", result="hit")
    settled(kube, ns, "csync", "own")
    assert operator.metric("helmop_cache_requests_total", cache="kustomize-builds", result="hit") > hits
    assert condition(get(kube, ns, "csync", "own")).get("status") == "True"


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
    ({"bad/kustomization.yaml": "resources: [../base]\n"}, "BuildTimeout", "did not finish within 0.001s"),
    # a generator that turns 4 MiB of repository into over 32 MiB of objects (or 512 MiB of kustomize's memory)
    ({"bad/big.txt": "x" * (4 << 20), "bad/kustomization.yaml": "configMapGenerator:\n- name: big\n  files:\n"
      + "".join(f"  - k{i}=big.txt\n" for i in range(9))}, "BuildTooLarge", "the kustomize build "),
])
def test_a_hostile_build_is_refused_with_its_reason_and_nothing_applied(operator: Operator, kube: Run, ns: str,
                                                                       repo: Repo, extra: dict[str, str], reason: str,
                                                                       said: str) -> None:
    repo.commit({**REPOSITORY, **extra})
    setup_source(kube, ns, repo)
    # (a build past its time: the spec's timeout bounds it, as it bounds every step of a sync)
    timeout = {"timeout": "1ms"} if reason == "BuildTimeout" else {}
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=configsync("bad", "bad", **timeout))
    ready = eventually(lambda: (c := condition(get(kube, ns, "csync", "bad"))).get("reason") == reason and c)
    assert ready["status"] == "False" and said in ready["message"], ready["message"]
    assert condition(get(kube, ns, "csync", "bad"), "Stalled").get("status") == "True"
    # the Event follows the status
    eventually(lambda: any(e["reason"] == reason and e["type"] == "Warning" for e in events(kube, ns, "bad")))
    assert not get(kube, ns, "deploy", "web") and not (get(kube, ns, "csync", "bad")["status"].get("inventory"))


def deployment(name: str, *, selector: str = "v1", **annotations: str) -> str:
    return yaml.safe_dump({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "annotations": annotations},
        "spec": {"selector": {"matchLabels": {"app": name, "sel": selector}}, "template": {
            "metadata": {"labels": {"app": name, "sel": selector}},
            "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}}}})


def ordered_events(kube: Run, ns: str) -> list[tuple[str, str]]:
    """(object, reason) of the namespace's Events, in the order they were written."""
    items = get(kube, ns, "events")["items"]
    return [(e["involvedObject"]["name"], e["reason"])
            for e in sorted(items, key=lambda e: int(e["metadata"]["resourceVersion"]))]


def test_depends_on_waits_for_ready_and_wait_judges_what_was_applied(operator: Operator, kube: Run, ns: str,
                                                                    repo: Repo) -> None:
    repo.commit({"infra/db.yaml": deployment("db", **{"sandbox.helmop.dev/ready-delay": "3"}),
                 "apps/app.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\ndata: {a: '1'}\n",
                 "stuck/web.yaml": deployment("stuck", **{"sandbox.helmop.dev/simulate": "fail"})})
    setup_source(kube, ns, repo)
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=configsync("infra", "infra", wait=True, timeout="60s"))
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=configsync("apps", "apps", dependsOn=[{"name": "infra"}]))
    watched(kube, ns, "csync", "apps", lambda obj: condition(obj).get("status") == "True")
    assert condition(get(kube, ns, "csync", "infra")).get("status") == "True"
    said = eventually(lambda: (s := ordered_events(kube, ns)) and ("apps", "ReconciliationSucceeded") in s and s)
    # apps waited (a Normal Event, not a warning), and applied only after infra's Deployment was ready
    assert ("apps", "DependencyNotReady") in said
    assert said.index(("infra", "ReconciliationSucceeded")) < said.index(("apps", "ReconciliationSucceeded"))
    assert all(e["type"] == "Normal" for e in events(kube, ns, "apps"))
    # wait over a Deployment that never becomes ready: Ready=False after the timeout, naming it
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=configsync("stuck", "stuck", wait=True, timeout="3s"))
    ready = eventually(lambda: (c := condition(get(kube, ns, "csync", "stuck"))).get("reason") == "Timeout" and c)
    assert ready["status"] == "False" and "Deployment/stuck" in ready["message"], ready


def test_a_ready_expression_decides_when_a_dependency_is_ready(operator: Operator, kube: Run, ns: str,
                                                               repo: Repo) -> None:
    repo.commit({"a/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
                 "b/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n"})
    setup_source(kube, ns, repo)
    expr = "dep.metadata.labels['release'] == self.metadata.labels['release']"
    body = yaml.safe_load(configsync("b", "b", dependsOn=[{"name": "a", "readyExpr": expr}]))
    body["metadata"]["labels"] = {"release": "v2"}
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=yaml.safe_dump(body))
    a = yaml.safe_load(configsync("a", "a"))
    a["metadata"]["labels"] = {"release": "v1"}
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=yaml.safe_dump(a))
    watched(kube, ns, "csync", "a", lambda obj: condition(obj).get("status") == "True")
    waiting = eventually(lambda: (c := condition(get(kube, ns, "csync", "b"))).get("reason") == "DependencyNotReady"
                         and c)
    assert f"{ns}/a" in waiting["message"] and not get(kube, ns, "cm", "b")  # a is Ready, but not at release v2
    kube("kubectl", "-n", ns, "label", "csync", "a", "release=v2", "--overwrite")
    watched(kube, ns, "csync", "b", lambda obj: condition(obj).get("status") == "True")
    assert get(kube, ns, "cm", "b")


def test_force_recreates_an_object_whose_immutable_field_changed(operator: Operator, kube: Run, ns: str,
                                                                 repo: Repo) -> None:
    repo.commit({"app/web.yaml": deployment("web")})
    setup_source(kube, ns, repo)
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=configsync("app", "app"))
    watched(kube, ns, "csync", "app", lambda obj: condition(obj).get("status") == "True")
    first = get(kube, ns, "deploy", "web")["metadata"]["uid"]
    repo.commit({"app/web.yaml": deployment("web", selector="v2")})
    kube("kubectl", "-n", ns, "annotate", GITREPO, "config", "helmop.dev/requestedAt=1", "--overwrite")
    refused = eventually(lambda: (c := condition(get(kube, ns, "csync", "app"))).get("reason") == "ApplyFailed" and c)
    assert "immutable" in refused["message"] and get(kube, ns, "deploy", "web")["metadata"]["uid"] == first
    kube("kubectl", "-n", ns, "patch", "csync", "app", "--type=merge", "-p", '{"spec": {"force": true}}')
    watched(kube, ns, "csync", "app", lambda obj: condition(obj).get("status") == "True")
    recreated = get(kube, ns, "deploy", "web")
    assert recreated["metadata"]["uid"] != first and recreated["spec"]["selector"]["matchLabels"]["sel"] == "v2"


@pytest.mark.parametrize(("policy", "kept"), [("Orphan", True), ("Delete", False), ("WaitForTermination", False)])
def test_the_deletion_policy_says_what_deleting_a_configsync_does(operator: Operator, kube: Run, ns: str, repo: Repo,
                                                                  policy: str, kept: bool) -> None:
    repo.commit({"app/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: kept}\n",
                 "app/off.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: protected\n  annotations:\n"
                                 "    kustomize.toolkit.fluxcd.io/prune: disabled\n"})
    setup_source(kube, ns, repo)
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=configsync("app", "app", deletionPolicy=policy, prune=False))
    watched(kube, ns, "csync", "app", lambda obj: condition(obj).get("status") == "True")
    kube("kubectl", "-n", ns, "delete", "csync", "app", "--timeout=60s")
    assert bool(get(kube, ns, "cm", "kept")) is kept
    assert get(kube, ns, "cm", "protected")  # prune: disabled, whatever the policy


def test_wait_for_termination_holds_the_configsync_until_its_objects_are_gone(operator: Operator, kube: Run, ns: str,
                                                                              repo: Repo) -> None:
    repo.commit({"app/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: held\n"
                                "  finalizers: [example.com/hold]\n"})
    setup_source(kube, ns, repo)
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=configsync("app", "app", deletionPolicy="WaitForTermination"))
    watched(kube, ns, "csync", "app", lambda obj: condition(obj).get("status") == "True")
    kube("kubectl", "-n", ns, "delete", "csync", "app", "--wait=false")
    # its clean-up deleted the ConfigMap, and waits for it while a finalizer holds it: the ConfigSync stays
    waiting = eventually(lambda: [e for e in events(kube, ns, "app") if e["reason"] == "WaitingForTermination"])
    assert f"ConfigMap/{ns}/held" in waiting[0]["message"] and get(kube, ns, "csync", "app")
    assert get(kube, ns, "cm", "held")["metadata"].get("deletionTimestamp")
    kube("kubectl", "-n", ns, "patch", "cm", "held", "--type=json", "-p",
         '[{"op": "remove", "path": "/metadata/finalizers"}]')
    watched(kube, ns, "csync", "app", lambda obj: not obj)


def flux_like_repository(ns: str, charts: str) -> dict[str, str]:
    """Laid out as Flux's example repositories are: a cluster folder whose ConfigSyncs sync the infrastructure,
    then the apps (dependsOn), each a base with an overlay per environment patching the HelmRelease values."""

    def release(name: str, namespace: str) -> str:
        return yaml.safe_dump({"apiVersion": "helmop.dev/v1alpha1", "kind": "HelmRelease",
                               "metadata": {"name": name, "namespace": namespace},
                               "spec": {"interval": "1h", "chart": {"repository": {
                                   "url": charts, "name": "demo", "version": "0.1.0"}},
                                   "values": {"fullnameOverride": name, "replicaCount": 1}}})

    def sync(name: str, path: str, **spec: Any) -> dict[str, Any]:
        return {"apiVersion": "helmop.dev/v1alpha1", "kind": "ConfigSync", "metadata": {"name": name},
                "spec": {"sourceRef": {"name": "config"}, "path": path, "interval": "1h",
                         "serviceAccountName": "deployer", **spec}}

    infra, apps = f"{ns}-infra", f"{ns}-apps"

    def values(name: str, replicas: int) -> str:
        return yaml.safe_dump({"apiVersion": "helmop.dev/v1alpha1", "kind": "HelmRelease",
                               "metadata": {"name": name, "namespace": apps},
                               "spec": {"values": {"replicaCount": replicas}}})

    out = {"clusters/staging/infrastructure.yaml": yaml.safe_dump(sync("infrastructure", "infrastructure/staging",
                                                                         wait=True, timeout="2m")),
           "clusters/staging/apps.yaml": yaml.safe_dump(sync("apps", "apps/staging",
                                                               dependsOn=[{"name": "infrastructure"}]))}
    for env, replicas in (("staging", 2), ("production", 3)):
        out[f"infrastructure/{env}/kustomization.yaml"] = "resources: [../base/monitoring]\n"
        out[f"apps/{env}/kustomization.yaml"] = "resources: [../base/podinfo]\npatches:\n- path: podinfo-values.yaml\n"
        out[f"apps/{env}/podinfo-values.yaml"] = values("podinfo", replicas)
    out["infrastructure/base/monitoring/kustomization.yaml"] = ("resources: [namespace.yaml, release.yaml, crd.yaml, "
                                                                "probe.yaml]\n")
    # a CRD and an object of it in one sync: the object is applied once the CRD is Established
    group = f"{ns}.example.com"
    out["infrastructure/base/monitoring/crd.yaml"] = yaml.safe_dump({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"probes.{group}"},
        "spec": {"group": group, "scope": "Namespaced", "names": {"plural": "probes", "kind": "Probe"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                     "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}})
    out["infrastructure/base/monitoring/probe.yaml"] = yaml.safe_dump({
        "apiVersion": f"{group}/v1", "kind": "Probe", "metadata": {"name": "web", "namespace": infra},
        "spec": {"target": "http://web"}})
    namespace = "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {}}}\n"
    out["infrastructure/base/monitoring/namespace.yaml"] = namespace.format(infra)
    out["infrastructure/base/monitoring/release.yaml"] = release("monitoring", infra)
    out["apps/base/podinfo/kustomization.yaml"] = "resources: [namespace.yaml, release.yaml]\n"
    out["apps/base/podinfo/namespace.yaml"] = namespace.format(apps)
    out["apps/base/podinfo/release.yaml"] = release("podinfo", apps)
    return out


def test_a_repository_laid_out_as_flux_examples_converges(operator: Operator, kube: Run, ns: str, repo: Repo,
                                                          chart_repo: ChartRepo) -> None:
    repo.commit(flux_like_repository(ns, chart_repo.url))
    setup_source(kube, ns, repo)
    kube("kubectl", "-n", ns, "create", "serviceaccount", "deployer")
    kube("kubectl", "create", "clusterrolebinding", f"{ns}-deployer", "--clusterrole=cluster-admin",
         f"--serviceaccount={ns}:deployer")
    # the one object applied by hand, as `flux bootstrap` leaves it: the cluster folder's ConfigSync
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=configsync("cluster", "clusters/staging",
                                                                    serviceAccountName="deployer"))
    for name in ("cluster", "infrastructure", "apps"):
        eventually(lambda name=name: condition(get(kube, ns, "csync", name)).get("status") == "True", timeout=120)
    infra, apps = f"{ns}-infra", f"{ns}-apps"
    assert condition(get(kube, infra, "hr", "monitoring")).get("status") == "True"  # infrastructure waited for it
    assert get(kube, infra, f"probes.{ns}.example.com", "web")["spec"] == {"target": "http://web"}
    watched(kube, apps, "hr", "podinfo", lambda obj: condition(obj).get("status") == "True")
    assert get(kube, apps, "deploy", "podinfo")["spec"]["replicas"] == 2  # the staging overlay's values
    said = eventually(lambda: (s := ordered_events(kube, ns)) and ("apps", "ReconciliationSucceeded") in s and s)
    assert said.index(("infrastructure", "ReconciliationSucceeded")) < said.index(("apps", "ReconciliationSucceeded"))
