"""kustomize builds with the real kustomize (kubectl's), over a repository's tree as the git cache reads it:
what kubectl prints for the same folder, and every way out of the repository refused before it runs."""

from __future__ import annotations

import asyncio
import base64
import socket
import subprocess
import uuid
from pathlib import Path

import pytest
import yaml

from helmop.api.sources import parse_config_sync
from helmop.sources import kustomize
from helmop.sources.buildcache import BuildOutputs, key_of
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
    # kustomize reads keys in any case (Go's JSON decoding), so the checks do too
    ({"c/kustomization.yaml": "RESOURCES: [../../etc/hostname]\n"}, "c", "PathOutsideRepository", "outside"),
    ({"c/kustomization.yaml": "ConfigMapGenerator:\n- {name: x, FILES: [token=/var/run/secrets/token]}\n"}, "c",
     "PathOutsideRepository", "absolute"),
    ({"c/kustomization.yaml": "secretGenerator:\n- {name: x, Envs: [/etc/os-release]}\n"}, "c",
     "PathOutsideRepository", "absolute"),
    ({"c/kustomization.yaml": "Patches:\n- {Path: /etc/hostname}\n"}, "c", "PathOutsideRepository", "absolute"),
    ({"c/kustomization.yaml": "resources: [../base]\nHelmCharts:\n- {name: x}\n"}, "c", "HelmChartRefused",
     "helm inflation"),
    ({"b/kustomization.yaml": "resources: [cm.yaml]\n", "b/cm.yaml": "kind: [\n"}, "b", "BuildFailed",
     "cm.yaml"),  # kustomize's own error, with the repository's paths
])
async def test_builds_that_reach_outside_or_run_programs_are_refused(builder: Kustomize, extra: dict[str, str],
                                                                     folder: str, reason: str, said: str) -> None:
    with pytest.raises(SourceError) as refused:
        await builder.build(files(extra), folder, NOTHING)
    assert refused.value.reason == reason and said in str(refused.value), str(refused.value)
    assert "/build-" not in str(refused.value)  # the private copy's path is not shown


# Every spelling of a remote base or resource kustomize accepts (its repospec and HTTP loader): none is a file or
# folder of the repository, so each is refused however it is written.
REMOTE = ["github.com/example/repo//base?ref=v1", "https://example.com/all.yaml", "http://127.0.0.1:1/x.yaml",
          "git@github.com:example/repo.git//base", "ssh://git@github.com/example/repo//base?ref=main",
          "git::https://github.com/example/repo//base?ref=v1", "https://github.com/example/repo.git//base",
          "gitlab.com/example/repo//base?ref=v1", "file:///etc/kubernetes", "example.com/org/repo//x?version=v2",
          "git::file:///srv/repo//base", "https://github.com/example/repo/archive/v1.tar.gz//base"]


@pytest.mark.parametrize("key", ["resources", "Resources", "components", "BASES"])
@pytest.mark.parametrize("remote", REMOTE)
async def test_every_spelling_of_a_remote_base_is_refused(builder: Kustomize, key: str, remote: str) -> None:
    with pytest.raises(SourceError) as refused:
        await builder.build(files({"r/kustomization.yaml": f"{key}:\n- {remote!r}\n"}), "r", NOTHING)
    assert refused.value.reason == "RemoteBaseRefused" and "r/kustomization.yaml" in str(refused.value)


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


# The confinement alone, with the checks of the kustomizations' text switched off: a host file named in any way
# the checks might miss is not read, no connection is attempted and no program is started. The same builds
# without the confinement do each of these, so every case can fail.
@pytest.fixture
def unchecked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kustomize, "check", lambda files, folder: None)


HOST_READS = [
    "resources: [../../../../host/secret.yaml]\n",
    "configMapGenerator:\n- {name: leak, files: [HOST/secret.yaml]}\n",
    "secretGenerator:\n- {name: leak, envs: [HOST/secret.env]}\n",
    "resources: [cm.yaml]\npatches:\n- {path: HOST/secret.yaml}\n",
]


@pytest.mark.usefixtures("unchecked")
@pytest.mark.parametrize("kustomization", HOST_READS)
async def test_a_build_reads_no_host_file_however_it_is_named(tmp_path: Path, kustomization: str) -> None:
    host = tmp_path / "host"
    host.mkdir()
    secret = uuid.uuid4().hex
    (host / "secret.yaml").write_text(f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: x}}\n"
                                      f"data: {{t: {secret}}}\n")
    (host / "secret.env").write_text(f"TOKEN={secret}\n")
    tree = files({"o/kustomization.yaml": kustomization.replace("HOST", str(host)),
                  "o/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"})
    with pytest.raises(SourceError) as refused:
        await Kustomize(tool("kubectl"), tmp_path / "work").build(tree, "o", NOTHING)
    assert refused.value.reason == "BuildFailed" and "permission denied" in str(refused.value)
    assert secret not in str(refused.value)
    leaked = await Kustomize(tool("kubectl"), tmp_path / "work", confined=False).build(tree, "o", NOTHING)
    assert secret in leaked or secret in base64.b64decode(yaml.safe_load(leaked)["data"]["TOKEN"]).decode()


@pytest.mark.usefixtures("unchecked")
async def test_a_build_attempts_no_connection(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.setblocking(False)
        tree = files({"n/kustomization.yaml": f"resources: ['http://127.0.0.1:{server.getsockname()[1]}/x.yaml']\n"})
        for confined in (True, False):
            with pytest.raises(SourceError):
                await Kustomize(tool("kubectl"), tmp_path, Limits(timeout=10), confined=confined).build(
                    tree, "n", NOTHING)
            try:
                server.accept()[0].close()
                connected = True
            except BlockingIOError:
                connected = False
            assert connected is not confined, "confined" if confined else "the unconfined build did not connect"


@pytest.mark.usefixtures("unchecked")
async def test_a_build_starts_no_git_even_when_one_is_on_its_path(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir, marker = tmp_path / "bin", tmp_path / "git-ran"
    bin_dir.mkdir()
    (bin_dir / "git").write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
    (bin_dir / "git").chmod(0o755)
    monkeypatch.setattr(kustomize, "_ENV", {**kustomize._ENV, "PATH": f"{bin_dir}:/usr/bin:/bin"})
    tree = files({"g/kustomization.yaml": "resources: ['ssh://git@github.com/example/repo//base?ref=main']\n"})
    with pytest.raises(SourceError):
        await Kustomize(tool("kubectl"), tmp_path / "work").build(tree, "g", NOTHING)
    assert not marker.exists(), "the confined build started git"
    with pytest.raises(SourceError):
        await Kustomize(tool("kubectl"), tmp_path / "work", confined=False).build(tree, "g", NOTHING)
    assert marker.exists(), "the unconfined build did not start git: this test proves nothing"


# Kept builds: kustomize runs once for the same inputs and scope, and again for anything else.
@pytest.fixture
def counted(tmp_path: Path) -> tuple[str, Path]:
    """A kubectl that appends a line to a file each time it runs (run unconfined: the confinement executes no
    program but kubectl itself)."""
    runs = tmp_path / "runs"
    runs.touch()
    wrapper = tmp_path / "kubectl"
    wrapper.write_text(f"#!/bin/sh\necho run >> {runs}\nexec {tool('kubectl')} \"$@\"\n")
    wrapper.chmod(0o755)
    return str(wrapper), runs


def runs_of(runs: Path) -> int:
    return len(runs.read_text().splitlines())


async def test_the_same_build_in_the_same_namespace_runs_kustomize_once(counted: tuple[str, Path],
                                                                        tmp_path: Path) -> None:
    wrapper, runs = counted
    builder = Kustomize(wrapper, tmp_path / "work", confined=False, outputs=BuildOutputs())
    prefixed = parse_config_sync({"sourceRef": {"name": "x"}, "namePrefix": "p-"}).build
    first = await builder.build(files(), "staging", prefixed, scope="team-a")
    assert await builder.build(files(), "./staging", prefixed, scope="team-a") == first
    assert runs_of(runs) == 1 and builder.outputs is not None
    assert (builder.outputs.hits, builder.outputs.misses) == (1, 1)
    # anything the output depends on, and another namespace, builds again
    again = [(files(), "staging", prefixed, "team-b"),
             (files({"base/deploy.yaml": BASE["base/deploy.yaml"].replace("nginx:1", "nginx:2")}), "staging",
              prefixed, "team-a"),
             (files({"unread.txt": "a file no kustomization names"}), "staging", prefixed, "team-a"),
             (files(), "base", prefixed, "team-a"),
             (files(), "staging", NOTHING, "team-a")]
    for tree, folder, build, scope in again:
        await builder.build(tree, folder, build, scope=scope)
    assert runs_of(runs) == 1 + len(again)
    assert "nginx:2" in await builder.build(again[1][0], "staging", prefixed, scope="team-a")
    assert runs_of(runs) == 1 + len(again)
    # no scope (a decrypted tree): built every time, never kept
    for _ in range(2):
        await builder.build(files(), "staging", prefixed)
    assert runs_of(runs) == 3 + len(again)


async def test_a_failed_build_is_not_kept(counted: tuple[str, Path], tmp_path: Path) -> None:
    wrapper, runs = counted
    builder = Kustomize(wrapper, tmp_path / "work", confined=False, outputs=BuildOutputs())
    broken = files({"b/kustomization.yaml": "resources: [cm.yaml]\n", "b/cm.yaml": "kind: [unclosed\n"})
    for _ in range(2):
        with pytest.raises(SourceError, match="kustomize build failed"):
            await builder.build(broken, "b", NOTHING, scope="team-a")
    assert runs_of(runs) == 2


async def test_builds_asked_for_at_once_run_once(counted: tuple[str, Path], tmp_path: Path) -> None:
    wrapper, runs = counted
    builder = Kustomize(wrapper, tmp_path / "work", confined=False, outputs=BuildOutputs())
    prefixed = parse_config_sync({"sourceRef": {"name": "x"}, "namePrefix": "p-"}).build
    built = await asyncio.gather(*(builder.build(files(), "staging", prefixed, scope="team-a") for _ in range(5)))
    assert len(set(built)) == 1 and "p-stg-web" in built[0] and runs_of(runs) == 1


async def test_kept_outputs_are_bounded_by_bytes_least_recently_used_first() -> None:
    outputs, made = BuildOutputs(budget=10, largest=6), []

    async def keep(key: str, text: str) -> str:
        async def build() -> str:
            made.append(key)
            return text
        return await outputs.built(key, build)

    for key in ("a", "b", "a", "c", "a", "b", "huge", "huge"):  # a used again, so b is the one dropped for c
        await keep(key, "x" * 7 if key == "huge" else key * 4)
    assert made == ["a", "b", "c", "b", "huge", "huge"]


def test_a_build_key_tells_apart_what_concatenation_would_not() -> None:
    assert key_of("ab", "k", "f", "", {}) != key_of("a", "bk", "f", "", {})
    assert key_of("s", "k", "f", "", {"a": b"bc"}) != key_of("s", "k", "f", "", {"ab": b"c"})
