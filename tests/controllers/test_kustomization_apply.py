"""A ConfigSync (Flux's Kustomization) builds and applies as kustomize-controller does: Flux's generated
kustomization for a folder without one (the `flux bootstrap` layout), the whole set dry-run before anything is
applied, spec.ignore's fields left to others, the per-object `kustomize.toolkit.fluxcd.io/ssa` marks, and
buildMetadata with ignoreMissingComponents."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.controllers.conftest import GITREPO, Operator, condition, events, eventually, get, settled, watched
from tests.controllers.test_gitops import setup_source
from tests.controllers.test_kustomize import configsync, deployment
from tests.gitserver import Repo
from tests.tools import Run, tool

SOURCE, KUSTOMIZE = "source.toolkit.fluxcd.io/v1", "kustomize.toolkit.fluxcd.io/v1"
FLUX_KS = "kustomizations.kustomize.toolkit.fluxcd.io"


def cm(name: str, **fields: Any) -> str:
    meta = {"name": name, **fields.pop("meta", {})}
    return yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, **fields})


def kustomize_build(repo: Repo, tmp_path: Path, files: dict[str, str]) -> list[dict[str, Any]]:
    """What `kubectl kustomize` prints for a copy of the repository with ``files`` written over it."""
    checkout = tmp_path / "checkout"
    shutil.copytree(repo.work, checkout, ignore=shutil.ignore_patterns(".git"))
    for rel, text in files.items():
        (checkout / rel).write_text(text)
    folder = Path(next(iter(files))).parent
    out = subprocess.run([tool("kubectl"), "kustomize", str(checkout / folder)], check=True, capture_output=True,
                         text=True).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def bootstrapped(ns: str, url: str) -> dict[str, str]:
    """A repository as `flux bootstrap` leaves it, then grown as Flux's guides grow it: clusters/staging holds
    flux-system/ (its own kustomization.yaml: Flux's components and the sync objects) beside the Kustomizations of
    the infrastructure and the apps; a folder without a kustomization.yaml at any level."""
    def kustomization(name: str, path: str, **spec: Any) -> dict[str, Any]:
        return {"apiVersion": KUSTOMIZE, "kind": "Kustomization", "metadata": {"name": name, "namespace": ns},
                "spec": {"interval": "1h", "path": path, "prune": True,
                         "sourceRef": {"kind": "GitRepository", "name": "flux-system"}, **spec}}

    sync = [{"apiVersion": SOURCE, "kind": "GitRepository", "metadata": {"name": "flux-system", "namespace": ns},
             "spec": {"interval": "1h", "url": url, "ref": {"branch": "main"}}},
            kustomization("flux-system", "./clusters/staging")]
    return {
        "clusters/staging/flux-system/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\n"
                                                           "kind: Kustomization\n"
                                                           "resources: [gotk-components.yaml, gotk-sync.yaml]\n",
        "clusters/staging/flux-system/gotk-components.yaml": cm("gotk-components", meta={"namespace": ns}),
        "clusters/staging/flux-system/gotk-sync.yaml": yaml.safe_dump_all(sync),
        "clusters/staging/infrastructure.yaml": yaml.safe_dump(kustomization("infrastructure", "./infrastructure")),
        "clusters/staging/apps.yaml": yaml.safe_dump(kustomization("apps", "./apps/staging",
                                                                     dependsOn=[{"name": "infrastructure"}])),
        "clusters/staging/README.md": "not a manifest\n",
        # a folder holding a kustomization is built as it says (its namePrefix), not looked into
        "infrastructure/controllers/kustomization.yaml": "resources: [settings.yaml]\nnamePrefix: ctl-\n",
        "infrastructure/controllers/settings.yaml": cm("settings", meta={"namespace": ns}),
        "infrastructure/controllers/unlisted.yaml": cm("unlisted", meta={"namespace": ns}),
        # one without is descended into; only .yaml and .yml files count
        "infrastructure/configs/nested/cluster.yml": cm("cluster", meta={"namespace": ns}),
        "infrastructure/configs/values.json": '{"apiVersion": "v1", "kind": "ConfigMap"}',
        "infrastructure/configs/UPPER.YAML": "not: [valid\n",
        "apps/staging/app.yaml": cm("app", meta={"namespace": ns}),
    }


def flux_id(obj: dict[str, Any]) -> str:
    """An object's id in a Flux inventory: namespace_name_group_kind."""
    group = obj["apiVersion"].rpartition("/")[0]
    return f"{obj['metadata'].get('namespace', '')}_{obj['metadata']['name']}_{group}_{obj['kind']}"


def flux_ready(kube: Run, ns: str, name: str) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        obj = get(kube, ns, FLUX_KS, name)
        return obj if condition(obj).get("status") == "True" else None
    found: dict[str, Any] = eventually(check, timeout=90)
    return found


def test_a_flux_bootstrap_repository_builds_as_flux_builds_it(operator: Operator, kube: Run, ns: str, repo: Repo,
                                                              tmp_path: Path) -> None:
    repo.commit(bootstrapped(ns, repo.url))
    # what `flux bootstrap` applies by hand: gotk-sync.yaml, whose Kustomization then applies itself too
    kube("kubectl", "apply", "-f", "-", stdin=(repo.work / "clusters/staging/flux-system/gotk-sync.yaml").read_text())
    top = flux_ready(kube, ns, "flux-system")["status"]
    # the kustomization Flux generates for clusters/staging, built by kustomize itself
    flux = kustomize_build(repo, tmp_path, {"clusters/staging/kustomization.yaml":
                                            "resources: [apps.yaml, flux-system, infrastructure.yaml]\n"})
    assert {e["id"] for e in top["inventory"]["entries"]} == set(map(flux_id, flux))
    infrastructure = flux_ready(kube, ns, "infrastructure")["status"]
    assert {e["id"] for e in infrastructure["inventory"]["entries"]} == {f"{ns}_ctl-settings__ConfigMap",
                                                                         f"{ns}_cluster__ConfigMap"}
    assert not get(kube, ns, "cm", "unlisted") and not get(kube, ns, "cm", "settings")
    flux_ready(kube, ns, "apps")
    assert get(kube, ns, "cm", "app")


def test_a_folder_with_nothing_to_apply_is_fine_and_a_broken_manifest_is_named(operator: Operator, kube: Run,
                                                                              ns: str, repo: Repo) -> None:
    repo.commit({"empty/README.md": "nothing to apply yet\n", "empty/data.json": "{}",
                 "apps/good.yaml": cm("good"), "apps/nested/broken.yml": "apiVersion: v1\nkind: ConfigMap\n",
                 "apps/base/kustomization.yaml": "resources: [cm.yaml]\n", "apps/base/cm.yaml": cm("base")})
    setup_source(kube, ns, repo)
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=configsync("empty", "empty"))
    ready = eventually(lambda: (c := condition(get(kube, ns, "csync", "empty"))).get("status") == "True" and c)
    assert "0 object(s)" in ready["message"]
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=configsync("apps", "apps"))
    said = eventually(lambda: (c := condition(get(kube, ns, "csync", "apps"))).get("reason") == "ManifestInvalid"
                      and c)
    assert "apps/nested/broken.yml:1: missing metadata.name" in said["message"]
    assert not get(kube, ns, "cm", "good") and not get(kube, ns, "cm", "base")
    # the Event follows the status
    eventually(lambda: any(e["reason"] == "ManifestInvalid" and e["type"] == "Warning"
                           for e in events(kube, ns, "apps")))


def test_one_refused_object_leaves_its_stage_unapplied_naming_every_refusal(operator: Operator, kube: Run, ns: str,
                                                                           repo: Repo) -> None:
    invalid = yaml.safe_dump({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "bad"},
                              "spec": {"template": {"spec": {"containers": []}}}})
    unknown = "apiVersion: example.com/v1\nkind: Nothing\nmetadata: {name: x}\n"
    staged = f"{ns}-staged"
    repo.commit({"apps/a.yaml": cm("a"), "apps/z.yaml": cm("z"), "apps/bad.yaml": invalid,
                 "apps/unknown.yaml": unknown, "apps/namespace.yaml": f"apiVersion: v1\nkind: Namespace\n"
                                                                      f"metadata: {{name: {staged}}}\n"})
    setup_source(kube, ns, repo)
    kube("kubectl", "-n", ns, "create", "serviceaccount", "deployer")
    kube("kubectl", "create", "clusterrolebinding", f"{ns}-deployer", "--clusterrole=cluster-admin",
         f"--serviceaccount={ns}:deployer")
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=configsync("apps", "apps", serviceAccountName="deployer"))
    said = eventually(lambda: (c := condition(get(kube, ns, "csync", "apps"))).get("reason") == "ApplyFailed" and c)
    message = said["message"]
    assert f"Deployment/{ns}/bad dry-run failed (Invalid): " in message and "apiVersion apps/v1" in message
    assert f"Nothing/{ns}/x dry-run failed (NotFound): " in message and "apiVersion example.com/v1" in message
    assert not get(kube, ns, "cm", "a") and not get(kube, ns, "cm", "z")  # nothing of the refused stage
    assert get(kube, "", "namespace", staged)  # the Namespaces' stage came before, as Flux's
    # the Event follows the status
    eventually(lambda: any(e["reason"] == "ApplyFailed" and e["type"] == "Warning" for e in events(kube, ns, "apps")))

    repo.commit({"apps/bad.yaml": None, "apps/unknown.yaml": None})
    kube("kubectl", "-n", ns, "annotate", GITREPO, "config", "helmop.dev/requestedAt=1", "--overwrite")
    watched(kube, ns, "csync", "apps", lambda obj: condition(obj).get("status") == "True")
    before = get(kube, ns, "cm", "a")["metadata"]["resourceVersion"]
    settled(kube, ns, "csync", "apps")  # a sync at the same revision: an object equal to its dry run is left alone
    assert get(kube, ns, "cm", "a")["metadata"]["resourceVersion"] == before


def scale_as(kube: Run, ns: str, name: str, replicas: int, manager: str) -> None:
    """What an autoscaler does: server-side apply of spec.replicas alone, under a field manager of its own."""
    kube("kubectl", "-n", ns, "apply", "--server-side", f"--field-manager={manager}", "--force-conflicts", "-f", "-",
         stdin=yaml.safe_dump({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
                               "spec": {"replicas": replicas}}))


def replicas_appliers(kube: Run, ns: str, name: str) -> set[str]:
    """The managers that own a Deployment's spec.replicas by server-side apply."""
    found = json.loads(kube("kubectl", "-n", ns, "get", "deploy", name, "-o", "json", "--show-managed-fields").stdout)
    return {m["manager"] for m in found["metadata"]["managedFields"]
            if "f:replicas" in m.get("fieldsV1", {}).get("f:spec", {}) and m["operation"] == "Apply"}


def image_of(kube: Run, ns: str, name: str) -> str:
    return str(get(kube, ns, "deploy", name)["spec"]["template"]["spec"]["containers"][0]["image"])


def test_an_ignore_rule_keeps_replicas_someone_else_set(operator: Operator, kube: Run, ns: str, repo: Repo) -> None:
    def files(image: str) -> dict[str, str | None]:
        out: dict[str, str | None] = {}
        for name in ("web", "wide", "other"):
            body = yaml.safe_load(deployment(name))
            body["spec"]["replicas"] = 1
            body["spec"]["template"]["spec"]["containers"][0]["image"] = image
            out[f"apps/{name}.yaml"] = yaml.safe_dump(body)
        return out

    def new_revision(image: str) -> None:
        repo.commit(files(image))
        kube("kubectl", "-n", ns, "annotate", GITREPO, "config", f"helmop.dev/requestedAt={image}", "--overwrite")
        eventually(lambda: all(image_of(kube, ns, name) == image for name in ("web", "wide", "other")))

    repo.commit(files("nginx:1"))
    setup_source(kube, ns, repo)
    rule = {"paths": ["/spec/replicas"], "target": {"kind": "Deployment", "name": "w.*"}}
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=configsync("apps", "apps", ignore=[rule]))
    watched(kube, ns, "csync", "apps", lambda obj: condition(obj).get("status") == "True")
    for name in ("web", "other"):
        scale_as(kube, ns, name, 5, "autoscaler")
    before = get(kube, ns, "deploy", "web")["metadata"]["resourceVersion"]
    settled(kube, ns, "csync", "apps")
    web = get(kube, ns, "deploy", "web")
    assert web["spec"]["replicas"] == 5 and web["metadata"]["resourceVersion"] == before  # not even applied
    assert get(kube, ns, "deploy", "other")["spec"]["replicas"] == 1  # no rule selects it: drift undone

    # a new revision applies the Deployments again: the autoscaler's field is left out of the apply, and stays its;
    # replicas a plain update set (kubectl scale) are applied with their live value
    kube("kubectl", "-n", ns, "scale", "deploy", "wide", "--replicas=7")
    new_revision("nginx:2")
    web, wide = get(kube, ns, "deploy", "web"), get(kube, ns, "deploy", "wide")
    assert web["spec"]["replicas"] == 5 and wide["spec"]["replicas"] == 7
    assert replicas_appliers(kube, ns, "web") == {"autoscaler"}
    assert "helmop-configsync" in replicas_appliers(kube, ns, "wide")  # the field stays the sync's


def password(kube: Run, ns: str, name: str) -> str:
    return base64.b64decode(get(kube, ns, "secret", name)["data"]["password"]).decode()


def test_the_ssa_marks_say_what_is_applied(operator: Operator, kube: Run, ns: str, repo: Repo) -> None:
    def files(value: str) -> dict[str, str | None]:
        ssa = "kustomize.toolkit.fluxcd.io/ssa"
        once = {"name": "once", "annotations": {ssa: "IfNotPresent"}}
        return {"apps/once.yaml": yaml.safe_dump({"apiVersion": "v1", "kind": "Secret", "metadata": once,
                                                  "stringData": {"password": f"from-git-{value}"}}),
                "apps/never.yaml": cm("never", meta={"labels": {ssa: "ignore"}}, data={"a": value}),
                "apps/merged.yaml": cm("merged", meta={"annotations": {ssa: "Merge"}}, data={"a": value}),
                "apps/plain.yaml": cm("plain", data={"a": value})}

    repo.commit(files("1"))
    setup_source(kube, ns, repo)
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=configsync("apps", "apps"))
    watched(kube, ns, "csync", "apps", lambda obj: condition(obj).get("status") == "True")
    assert not get(kube, ns, "cm", "never")  # Ignore: never applied
    assert {i["name"] for i in get(kube, ns, "csync", "apps")["status"]["inventory"]} == {"once", "merged", "plain"}
    kube("kubectl", "-n", ns, "patch", "secret", "once", "-p", '{"stringData": {"password": "by-hand"}}')
    for name in ("merged", "plain"):
        kube("kubectl", "-n", ns, "label", "cm", name, "extra=by-hand")

    repo.commit(files("2"))
    kube("kubectl", "-n", ns, "annotate", GITREPO, "config", "helmop.dev/requestedAt=2", "--overwrite")
    watched(kube, ns, "cm", "plain", lambda obj: obj["data"] == {"a": "2"})
    assert "extra" not in get(kube, ns, "cm", "plain")["metadata"]["labels"]  # kubectl's field taken over: gone
    merged = get(kube, ns, "cm", "merged")
    assert merged["data"] == {"a": "2"} and merged["metadata"]["labels"]["extra"] == "by-hand"  # Merge keeps it
    assert password(kube, ns, "once") == "by-hand"  # IfNotPresent never updates what exists

    kube("kubectl", "-n", ns, "delete", "secret", "once")
    settled(kube, ns, "csync", "apps")
    assert password(kube, ns, "once") == "from-git-2"  # created again when it is missing


def test_build_metadata_and_missing_components(operator: Operator, kube: Run, ns: str, repo: Repo,
                                               tmp_path: Path) -> None:
    repo.commit({"app/settings.yaml": cm("settings", data={"a": "1"}),
                 "comp/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n"
                                            "commonLabels: {component: 'yes'}\n"})
    setup_source(kube, ns, repo)
    spec = {"namePrefix": "p-", "components": ["../comp", "../absent"], "ignoreMissingComponents": True,
            "buildMetadata": ["originAnnotations", "transformerAnnotations"]}
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=configsync("app", "app", **spec))
    watched(kube, ns, "csync", "app", lambda obj: condition(obj).get("status") == "True")
    live = get(kube, ns, "cm", "p-settings")["metadata"]
    assert live["labels"]["component"] == "yes"  # the component that exists; the absent one left out
    # the annotations kustomize writes when the spec's fields are in the folder's kustomization, as Flux puts them
    flux = kustomize_build(repo, tmp_path, {"app/kustomization.yaml": yaml.safe_dump({
        "resources": ["settings.yaml"], "namePrefix": "p-", "components": ["../comp"],
        "buildMetadata": ["originAnnotations", "transformerAnnotations"]})})
    built = flux[0]["metadata"]["annotations"]
    for key in ("config.kubernetes.io/origin", "alpha.config.kubernetes.io/transformations"):
        assert yaml.safe_load(live["annotations"][key]) == yaml.safe_load(built[key]), key
    assert yaml.safe_load(live["annotations"]["config.kubernetes.io/origin"]) == {"path": "settings.yaml"}
