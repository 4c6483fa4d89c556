"""Per-project Jenkins and generic app kinds, end to end with real helm: the Jenkins journeys run with the
stand-in chart (tests/charts/jenkins), and again with the official chart when HELMOP_JENKINS_CHART names it."""

from __future__ import annotations

import json
import uuid
from typing import Any

import yaml

from tests.controllers.conftest import Operator, condition, eventually, get, settled, watched
from tests.tools import Run


def jenkins(name: str, project: str, **spec: Any) -> str:
    return yaml.safe_dump({"apiVersion": "apps.helmop.dev/v1alpha1", "kind": "Jenkins", "metadata": {"name": name},
                           "spec": {"project": project, "interval": "1h", **spec}})


def ready(kube: Run, ns: str, kind: str, name: str, generation: int = 1) -> dict[str, Any]:
    obj: dict[str, Any] = eventually(
        lambda: (o := get(kube, ns, kind, name)) and condition(o).get("status") == "True"
        and o["status"].get("observedGeneration") == generation and o, timeout=90)
    return obj


def reason(kube: Run, ns: str, kind: str, name: str, wanted: str) -> dict[str, Any]:
    """The object once its current generation was reconciled and said ``wanted``."""
    obj: dict[str, Any] = eventually(lambda: (o := get(kube, ns, kind, name)) and condition(o).get("reason") == wanted
                                     and (o.get("status") or {}).get("observedGeneration")
                                     == o["metadata"].get("generation") and o)
    return obj


SEED = [{"name": "build-shop", "repo": "https://git.example.com/shop.git", "branch": "release"}]


def test_jenkins_per_project(operator: Operator, kube: Run, ns: str, jenkins_chart: dict[str, Any]) -> None:
    spec = {"chart": jenkins_chart, "plugins": ["ansicolor:1.0.6", "git:5.10.1"], "seedJobs": SEED,
            "configAsCode": {"welcome": "jenkins:\n  systemMessage: hello alpha\n"},
            "ingress": {"host": "ci.alpha.example.com", "tlsSecretName": "alpha-tls"},
            "persistence": {"size": "20Gi"}, "image": "2.492.3-jdk17"}
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=jenkins("ci", "alpha", **spec))
    obj = ready(kube, ns, "jenkins", "ci")
    status = obj["status"]
    assert status["url"] == "https://ci.alpha.example.com" and status["adminSecret"] == "ci-admin"
    assert status["revision"] == 1 and status["chartVersion"] == jenkins_chart["repository"]["version"]
    table = kube("kubectl", "-n", ns, "get", "jk").stdout.splitlines()
    assert table[0].split() == ["NAME", "PROJECT", "READY", "STATUS", "URL", "AGE"]
    assert table[1].split()[:3] == ["ci", "alpha", "True"] and "Helm install succeeded" in table[1]

    sts = get(kube, ns, "sts", "ci")
    assert sts["metadata"]["labels"]["helmop.dev/project"] == "alpha"
    assert sts["spec"]["template"]["spec"]["containers"][0]["image"].endswith(":2.492.3-jdk17")
    projected = [src["secret"]["name"] for v in sts["spec"]["template"]["spec"]["volumes"]
                 for src in (v.get("projected") or {}).get("sources", []) if "secret" in src]
    assert "ci-admin" in projected
    plugins = get(kube, ns, "cm", "ci")["data"]["plugins.txt"].split()
    assert "ansicolor:1.0.6" in plugins and "git:5.10.1" in plugins and any(p.startswith("job-dsl:") for p in plugins)
    seed = get(kube, ns, "cm", "ci-jenkins-config-helmop-seed-jobs")["data"]
    assert "pipelineJob('build-shop')" in json.dumps(seed) and "*/release" in json.dumps(seed)
    assert "hello alpha" in json.dumps(get(kube, ns, "cm", "ci-jenkins-config-welcome")["data"])
    assert get(kube, ns, "ingress", "ci")["spec"]["rules"][0]["host"] == "ci.alpha.example.com"
    assert get(kube, ns, "pvc", "ci")["spec"]["resources"]["requests"]["storage"] == "20Gi"
    admin = get(kube, ns, "secret", "ci-admin")
    assert set(admin["data"]) == {"jenkins-admin-user", "jenkins-admin-password"}
    assert "jenkins-admin-password" not in json.dumps(obj["status"])

    # Same spec again: nothing to do, no helm process.
    before = len(operator.helm_actions())
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=jenkins("ci", "alpha", **spec))
    settled(kube, ns, "jenkins", "ci")
    assert len(operator.helm_actions()) == before
    # A plugin change: an upgrade.
    spec["plugins"] = ["ansicolor:1.0.5", "git:5.10.1"]
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=jenkins("ci", "alpha", **spec))
    obj = ready(kube, ns, "jenkins", "ci", generation=2)
    watched(kube, ns, "jenkins", "ci", lambda obj: obj["status"]["revision"] == 2)
    assert "ansicolor:1.0.5" in get(kube, ns, "cm", "ci")["data"]["plugins.txt"].split()

    # Deleted without retainOnDelete: everything goes, the data volume too.
    kube("kubectl", "-n", ns, "delete", "jenkins", "ci", "--timeout=90s")
    assert not get(kube, ns, "jenkins", "ci") and not get(kube, ns, "hr", "ci-jenkins")
    assert not get(kube, ns, "sts", "ci") and not get(kube, ns, "pvc", "ci")


def test_retained_volume_is_reattached(operator: Operator, kube: Run, ns: str, jenkins_chart: dict[str, Any]) -> None:
    keep = {"chart": jenkins_chart, "persistence": {"size": "5Gi", "retainOnDelete": True}}
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=jenkins("keep", "beta", **keep))
    ready(kube, ns, "jenkins", "keep")
    uid = get(kube, ns, "pvc", "keep")["metadata"]["uid"]
    kube("kubectl", "-n", ns, "delete", "jenkins", "keep", "--timeout=90s")
    assert not get(kube, ns, "sts", "keep")
    assert get(kube, ns, "pvc", "keep")["metadata"]["uid"] == uid  # kept
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=jenkins("keep", "beta", **keep))
    ready(kube, ns, "jenkins", "keep")
    assert get(kube, ns, "pvc", "keep")["metadata"]["uid"] == uid  # the same claim, re-attached
    sts = get(kube, ns, "sts", "keep")
    claims = {v["persistentVolumeClaim"]["claimName"] for v in sts["spec"]["template"]["spec"]["volumes"]
              if "persistentVolumeClaim" in v}
    assert claims == {"keep"}


def test_invalid_jenkins_specs(operator: Operator, kube: Run, ns: str) -> None:
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=jenkins("bad", "gamma", plugins=["git:latest", "x y"]))
    message = condition(reason(kube, ns, "jenkins", "bad", "InvalidPlugin"))["message"]
    assert "git:latest" in message and "pin" in message and "'x y'" in message  # every bad one, not the first
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=jenkins("bad", "gamma", plugins=["git"]))
    reason(kube, ns, "jenkins", "bad", "InvalidPlugin")
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=jenkins("bad", "gamma", ingress={"host": "not a host!"}))
    assert "not a valid DNS name" in condition(reason(kube, ns, "jenkins", "bad", "InvalidIngressHost"))["message"]
    for snippet, problem in (("- jenkins: {}\n", "must be a YAML mapping"), ("jenkins: [unclosed\n", "not valid YAML"),
                             ("", "not empty")):
        kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=jenkins("bad", "gamma", configAsCode={"main": snippet}))
        obj = reason(kube, ns, "jenkins", "bad", "InvalidConfigAsCode")
        assert problem in condition(obj)["message"] and "spec.configAsCode.main" in condition(obj)["message"]
        assert condition(obj, "Stalled").get("status") == "True"
    eventually(lambda: any(e["reason"] == "InvalidConfigAsCode" for e in get(kube, ns, "events")["items"]
                           if e["involvedObject"]["name"] == "bad"))  # the Event follows the status
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=jenkins("bad", "gamma", adminSecretRef={"name": "nope"}))
    reason(kube, ns, "jenkins", "bad", "AdminSecretNotFound")
    assert not get(kube, ns, "hr", "bad-jenkins")  # nothing was attempted
    # Creating the Secret fixes it: it is picked up without touching the Jenkins.
    kube("kubectl", "-n", ns, "create", "secret", "generic", "nope", "--from-literal=jenkins-admin-user=root",
         "--from-literal=jenkins-admin-password=pw-123456")
    ready(kube, ns, "jenkins", "bad", generation=7)
    assert get(kube, ns, "jenkins", "bad")["status"]["adminSecret"] == "nope"


def test_several_jenkins_in_several_namespaces(operator: Operator, kube: Run) -> None:
    spaces = [f"proj-{uuid.uuid4().hex[:5]}" for _ in range(2)]
    for space in spaces:
        kube("kubectl", "create", "namespace", space)
        kube("kubectl", "-n", space, "apply", "-f", "-", stdin=jenkins("ci", space))
    for space in spaces:
        obj = ready(kube, space, "jenkins", "ci")
        assert obj["status"]["url"] == f"http://ci.{space}.svc.cluster.local:8080"
        assert get(kube, space, "sts", "ci")["metadata"]["labels"]["helmop.dev/project"] == space
    kube("kubectl", "-n", spaces[0], "delete", "jenkins", "ci", "--timeout=90s")
    assert condition(get(kube, spaces[1], "jenkins", "ci"))["status"] == "True"
    assert get(kube, spaces[1], "sts", "ci")


def test_generic_app_kind(operator: Operator, kube: Run, ns: str) -> None:
    app = {"apiVersion": "demo.helmop.dev/v1alpha1", "kind": "Webapp", "metadata": {"name": "shop"},
           "spec": {"replicaCount": 2, "fullnameOverride": "shop", "service": {"type": "NodePort"}}}
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=yaml.safe_dump(app))
    ready(kube, ns, "webapp", "shop")
    assert get(kube, ns, "deploy", "shop")["spec"]["replicas"] == 2
    assert get(kube, ns, "svc", "shop")["spec"]["type"] == "ClusterIP"  # the override wins over the spec
    hr = get(kube, ns, "hr", "shop-webapp")
    assert hr["metadata"]["ownerReferences"][0]["kind"] == "Webapp" and hr["spec"]["releaseName"] == "shop"
    app["spec"]["replicaCount"] = 3
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=yaml.safe_dump(app))
    ready(kube, ns, "webapp", "shop", generation=2)
    watched(kube, ns, "webapp", "shop", lambda obj: obj["status"]["revision"] == 2)
    assert get(kube, ns, "deploy", "shop")["spec"]["replicas"] == 3
    # `helmop reconcile` works on app kinds too (found through discovery) and waits for the release's outcome
    from tests.controllers.test_cli import helmop

    done = helmop(operator, "reconcile", "webapps", "shop", "-n", ns, "--timeout", "60")
    assert done.returncode == 0 and "✔" in done.stdout, done.stdout + done.stderr
    assert helmop(operator, "get", "webapp", "-n", ns).stdout.splitlines()[1].startswith("webapp/shop")
    kube("kubectl", "-n", ns, "delete", "webapp", "shop", "--timeout=60s")
    assert "shop" not in kube("helm", "list", "-n", ns, "-q").stdout.split()
    assert not get(kube, ns, "deploy", "shop")
