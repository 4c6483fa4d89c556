"""kustomize builds with the real kustomize (kubectl's), over a repository's tree as the git cache reads it:
what kubectl prints for the same folder, and every way out of the repository refused before it runs."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest
import yaml

from helmop.api.sources import parse_config_sync
from helmop.sources.errors import SourceError
from helmop.sources.git import write_tree
from helmop.sources.kustomize import Kustomize, Limits
from tests.tools import tool

BASE = {
    "base/kustomization.yaml": "resources: [deploy.yaml]\nconfigMapGenerator:\n- {name: settings, literals: [a=1]}\n",
    "base/deploy.yaml": yaml.safe_dump({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "web", "image": "nginx:1",
                                     "envFrom": [{"configMapRef": {"name": "settings"}}]}]}}}}),
    "staging/kustomization.yaml": "resources: [../base]\nnamePrefix: stg-\n",
}
NOTHING = parse_config_sync({"sourceRef": {"name": "x"}}).build


def files(extra: dict[str, str] | None = None) -> dict[str, bytes]:
    return {k: v.encode() for k, v in {**BASE, **(extra or {})}.items()}


@pytest.fixture
def builder(tmp_path: Path) -> Kustomize:
    return Kustomize(tool("kubectl"), tmp_path / "work")


async def test_a_build_is_what_kubectl_kustomize_prints_for_the_folder(builder: Kustomize, tmp_path: Path) -> None:
    tree = files()
    (tmp_path / "checkout").mkdir()
    write_tree(tree, tmp_path / "checkout")
    expected = subprocess.run([tool("kubectl"), "kustomize", str(tmp_path / "checkout" / "staging")], check=True,
                              capture_output=True, text=True).stdout
    built = await builder.build(tree, "staging", NOTHING)
    assert built == expected and await builder.build(tree, "./staging/", NOTHING) == expected
    deploy = next(d for d in yaml.safe_load_all(built) if d["kind"] == "Deployment")
    assert deploy["metadata"]["name"] == "stg-web"
    assert deploy["spec"]["template"]["spec"]["containers"][0]["envFrom"][0]["configMapRef"]["name"].startswith(
        "stg-settings-")  # the generator's hashed name, followed where it is referenced
    assert not any((tmp_path / "work").iterdir()), "the private copy is removed"


async def test_the_configsyncs_own_fields_build_over_the_folder(builder: Kustomize) -> None:
    build = parse_config_sync({"sourceRef": {"name": "x"}, "namePrefix": "x-", "targetNamespace": "apps",
                               "images": [{"name": "nginx", "newTag": "2"}], "components": ["../extra"],
                               "patches": [{"patch": "- {op: replace, path: /spec/replicas, value: 3}",
                                            "target": {"kind": "Deployment"}}]}).build
    tree = files({"extra/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n"
                                              "commonLabels: {extra: 'yes'}\n"})
    objs = list(yaml.safe_load_all(await builder.build(tree, "staging", build)))
    deploy = next(d for d in objs if d["kind"] == "Deployment")
    assert deploy["metadata"]["name"] == "x-stg-web" and deploy["metadata"]["namespace"] == "apps"
    assert deploy["spec"]["replicas"] == 3 and deploy["metadata"]["labels"]["extra"] == "yes"
    assert deploy["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:2"
    # a folder of plain manifests with build fields: every YAML file under it, as Flux generates a kustomization
    plain = list(yaml.safe_load_all(await builder.build(files(), "base", parse_config_sync(
        {"sourceRef": {"name": "x"}, "nameSuffix": "-v2"}).build)))
    assert {o["metadata"]["name"] for o in plain} >= {"web-v2"}


@pytest.mark.parametrize(("extra", "folder", "reason", "said"), [
    ({"r/kustomization.yaml": "resources:\n- github.com/example/repo//base?ref=v1\n"}, "r", "RemoteBaseRefused",
     "r/kustomization.yaml: 'github.com/example/repo//base?ref=v1' is a remote base"),
    ({"r/kustomization.yaml": "resources:\n- https://example.com/all.yaml\n"}, "r", "RemoteBaseRefused", "remote"),
    ({"o/kustomization.yaml": "resources: [../../etc/hostname]\n"}, "o", "PathOutsideRepository", "outside"),
    ({"o/kustomization.yaml": "resources: [/etc/hostname]\n"}, "o", "PathOutsideRepository", "absolute"),
    ({"g/kustomization.yaml": "resources: [../base]\nconfigMapGenerator:\n- {name: x, files: [../../etc/passwd]}\n"},
     "g", "PathOutsideRepository", "outside"),
    ({"d/kustomization.yaml": "resources: [../base, ../deeper]\n",
      "deeper/kustomization.yaml": "resources: [../../../root]\n"}, "d", "PathOutsideRepository",
     "deeper/kustomization.yaml"),  # a base's own references are checked too
    ({"f/kustomization.yaml": "resources: [../base]\ntransformers: [fn.yaml]\n",
      "f/fn.yaml": "apiVersion: x/v1\nkind: Run\nmetadata:\n  name: x\n  annotations:\n"
                   "    config.kubernetes.io/function: |\n      exec: {path: /bin/sh}\n"}, "f", "FunctionRefused",
     "KRM function"),
    ({"h/kustomization.yaml": "helmCharts:\n- {name: x, repo: https://charts.example.com}\n"}, "h",
     "HelmChartRefused", "helm inflation"),
    ({"m/kustomization.yaml": "resources: [nowhere.yaml]\n"}, "m", "PathNotFound", "does not exist"),
    ({"b/kustomization.yaml": "resources: [cm.yaml]\n", "b/cm.yaml": "kind: [\n"}, "b", "BuildFailed",
     "cm.yaml"),  # kustomize's own error, with the repository's paths
])
async def test_builds_that_reach_outside_or_run_programs_are_refused(builder: Kustomize, extra: dict[str, str],
                                                                     folder: str, reason: str, said: str) -> None:
    with pytest.raises(SourceError) as refused:
        await builder.build(files(extra), folder, NOTHING)
    assert refused.value.reason == reason and said in str(refused.value), str(refused.value)
    assert "/build-" not in str(refused.value)  # the private copy's path is not shown


@pytest.mark.parametrize(("limits", "reason", "said"), [
    (Limits(timeout=0.001), "BuildTimeout", "did not finish within 0.001s"),
    (Limits(output=1000), "BuildTooLarge", "printed more than 1000 bytes"),
    (Limits(memory=16 << 20), "BuildTooLarge", "needed more than 16 MiB"),
])
async def test_a_build_is_bounded_in_time_output_and_memory(tmp_path: Path, limits: Limits, reason: str,
                                                           said: str) -> None:
    generated = "".join(f"  - key{i}={'v' * 100}\n" for i in range(50))  # a generator that makes ~6 KB
    tree = files({"big/kustomization.yaml": f"configMapGenerator:\n- name: big\n  literals:\n{generated}"})
    with pytest.raises(SourceError) as bounded:
        await Kustomize(tool("kubectl"), tmp_path, limits).build(tree, "big", NOTHING)
    assert bounded.value.reason == reason and said in str(bounded.value), str(bounded.value)


async def test_a_build_stopped_at_the_output_bound_ends_however_much_it_printed(tmp_path: Path) -> None:
    """What kustomize printed past the bound fills the pipes; the build still ends (asyncio's wait() waits for
    them to close: unread output once kept it waiting forever)."""
    literal = "v" * 40_000
    generated = "".join(f"  - key{i}={literal}\n" for i in range(60))  # ~2.4 MB of output
    tree = files({"big/kustomization.yaml": f"configMapGenerator:\n- name: big\n  literals:\n{generated}"})
    builder = Kustomize(tool("kubectl"), tmp_path, Limits(output=1 << 16))

    def in_a_thread() -> str:  # as the operator runs: its own event loop, off the main thread
        try:
            asyncio.run(asyncio.wait_for(builder.build(tree, "big", NOTHING), 30))
        except SourceError as exc:
            return exc.reason
        return "built"

    assert await asyncio.to_thread(in_a_thread) == "BuildTooLarge"
