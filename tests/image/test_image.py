"""The operator's image as users run it: built by the install docs' command (scripts/build-image), started with
podman as the chart starts it (uid 65532, a read-only root filesystem, the cache and /tmp on volumes of their own,
`--install-crds`) against a sandbox on this machine, reached over the host's network; a chart served on loopback,
a config repository fetched with the image's git and built with its kubectl. scripts/test-image runs this tier
(minutes of building: outside scripts/test)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from helmop_sandbox import Sandbox

from tests.chartrepo import ChartRepo, tiny_chart
from tests.docs import block
from tests.gitserver import GitServer, Repo
from tests.image.conftest import BUILT
from tests.tools import ROOT, Run, eventually, tool

# The first test waits for the image's build (the base, the packages, PyPI): minutes.
pytestmark = pytest.mark.timeout(1200)
KUBECONFIG = "/etc/helmop/kubeconfig"
# How the chart runs it (deploy/helmop/templates/deployment.yaml): nothing but the volumes is writable; /tmp as an
# emptyDir is (writable by all, executables allowed: helm runs helmop's post-renderer from there).
RESTRICTED = ["--user", "65532:65532", "--read-only", "--read-only-tmpfs=false", "--network", "host",
              "--tmpfs", "/tmp:exec"]


def podman(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """The project's podman (scripts/podman: the storage the image was built into)."""
    return subprocess.run([str(ROOT / "scripts" / "podman"), *args], capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def image(pytestconfig: pytest.Config) -> str:
    """The image, built as the install docs say; its tag."""
    if not shutil.which("podman") and (os.geteuid() != 0 or not shutil.which("apt-get")):
        pytest.skip("no podman, and not root with apt-get to install it (Debian's podman, runc and mmdebstrap)")
    commands = block("operations/install.md", "build-image")
    tag = re.fullmatch(r"scripts/build-image (\S+)\n", commands)
    assert tag is not None, commands
    built = subprocess.run(["bash", "-c", "set -euo pipefail\n" + commands], cwd=ROOT, capture_output=True,
                           text=True, timeout=1100)
    assert built.returncode == 0, built.stdout + built.stderr[-4000:]
    pytestconfig.stash[BUILT] = built.stdout  # each step's duration, and the size: in the tier's report
    return tag.group(1)


@pytest.fixture(scope="module")
def kubeconfig(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sandbox's kubeconfig (127.0.0.1: the container shares the host's network), readable by uid 65532."""
    path = tmp_path_factory.mktemp("image") / "kubeconfig"
    shutil.copy(sandbox.kubeconfig, path)
    path.chmod(0o644)
    return path


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The operator's cache volume: a directory of uid 65532's, as an emptyDir is with the chart's fsGroup."""
    path = tmp_path_factory.mktemp("cache")
    os.chown(path, 65532, 65532)
    return path


@pytest.fixture(scope="module")
def operator(image: str, kubeconfig: Path, cache: Path) -> Iterator[str]:
    """The operator in its image, running; its container's name."""
    name = f"helmop-image-test-{uuid.uuid4().hex[:8]}"
    started = podman("run", "--detach", "--name", name, *RESTRICTED, "--volume", f"{cache}:/var/cache/helmop",
                     "--volume", f"{kubeconfig}:{KUBECONFIG}:ro", image, "--kubeconfig", KUBECONFIG, "--install-crds")
    assert started.returncode == 0, started.stderr
    try:
        yield name
    finally:
        podman("rm", "--force", "--time", "5", name)


def logs(container: str) -> str:
    return podman("logs", container).stderr[-4000:]


def ready(run: Run, namespace: str, kind: str, name: str) -> bool:
    got = run("kubectl", "-n", namespace, "get", kind, name, "-o", "json", check=False)
    if got.returncode != 0:
        return False
    conditions = (json.loads(got.stdout).get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def test_a_helmrelease_becomes_ready(operator: str, cache: Path, run: Run, namespace: str, tmp_path: Path) -> None:
    source = tiny_chart(tmp_path / "src", "greeting: hello\n", "  greeting: {{ .Values.greeting | quote }}\n")
    charts = ChartRepo(tmp_path, source, tool("helm"))
    try:
        charts.publish("tiny", "0.1.0")
        release = {"apiVersion": "helmop.dev/v1alpha1", "kind": "HelmRelease",
                   "metadata": {"name": "web", "namespace": namespace},
                   "spec": {"interval": "10m", "values": {"greeting": "from the image"},
                            "chart": {"repository": {"url": charts.url, "name": "tiny", "version": "0.1.0"}}}}
        # the CRDs are the operator's to install (--install-crds): applied once they are served
        eventually(lambda: run("kubectl", "apply", "-f", "-", stdin=json.dumps(release), check=False).returncode == 0,
                   timeout=60)
        try:
            eventually(lambda: ready(run, namespace, "hr", "web"), timeout=120)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{logs(operator)}") from None
        made = json.loads(run("kubectl", "-n", namespace, "get", "configmap", "web", "-o", "json").stdout)
        assert made["data"] == {"greeting": "from the image"}  # installed by the image's helm
        assert len(list(cache.glob("charts/*/*.tgz"))) == 1  # the chart's archive, kept on the volume
    finally:
        charts.close()


def test_a_config_repository_is_fetched_and_built(operator: str, run: Run, namespace: str, tmp_path: Path) -> None:
    # git without perl and without its servers, and kubectl's kustomize, as the image has them
    (tmp_path / "served").mkdir()
    server = GitServer(tmp_path / "served")
    try:
        repo = Repo(server, "config", tmp_path / "work")
        commit = repo.commit({"apps/kustomization.yaml": "configMapGenerator:\n- name: settings\n"
                                                        "  literals: [mode=image]\n"})
        eventually(lambda: run("kubectl", "get", "crd", "configsyncs.helmop.dev", check=False).returncode == 0,
                   timeout=60)
        objects = [{"apiVersion": "helmop.dev/v1alpha1", "kind": "GitRepository", "metadata": {"name": "config"},
                    "spec": {"url": repo.url, "interval": "1h", "ref": {"branch": "main"}}},
                   {"apiVersion": "helmop.dev/v1alpha1", "kind": "ConfigSync", "metadata": {"name": "apps"},
                    "spec": {"sourceRef": {"kind": "GitRepository", "name": "config"}, "path": "apps",
                             "interval": "1h"}}]
        run("kubectl", "-n", namespace, "apply", "-f", "-", stdin=yaml.safe_dump_all(objects))
        try:
            eventually(lambda: ready(run, namespace, "csync", "apps"), timeout=120)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{logs(operator)}") from None
        source = json.loads(run("kubectl", "-n", namespace, "get", "gitrepository", "config", "-o", "json").stdout)
        assert source["status"]["artifact"]["revision"] == f"main@sha1:{commit}"
        listed = json.loads(run("kubectl", "-n", namespace, "get", "configmap", "-o", "json").stdout)["items"]
        generated = [c for c in listed if c["metadata"]["name"].startswith("settings-")]  # kustomize's hashed name
        assert [c["data"] for c in generated] == [{"mode": "image"}]
    finally:
        server.close()


def test_the_operator_runs_as_uid_65532_on_a_read_only_root(operator: str) -> None:
    status = podman("exec", operator, "cat", "/proc/1/status").stdout
    uids = next(line.split()[1:] for line in status.splitlines() if line.startswith("Uid:"))
    assert uids == ["65532"] * 4, status  # real, effective, saved, filesystem
    assert podman("exec", operator, "cat", "/proc/1/cmdline").stdout.split("\0")[1:3] == [
        "/opt/helmop/bin/helmop", "run"]
    # even root in the container cannot write there: the filesystem is read-only, not just not ours
    written = podman("exec", "--user", "0", operator, "touch", "/opt/helmop/probe")
    assert written.returncode != 0 and "Read-only file system" in written.stderr, written
    # the operator's image carries no sandbox (it is a distribution of its own, for tests and the demo)
    found = podman("exec", operator, "python3", "-c",
                   "import importlib.util as u; print(u.find_spec('helmop_sandbox'))")
    assert found.stdout.strip() == "None", found


def test_the_tools_the_image_keeps_work_without_what_it_leaves_out(operator: str) -> None:
    # ssh-keygen signs automations' commits in git's namespace (helmop/images/signing.py), as uid 65532
    signed = podman("exec", "--workdir", "/tmp", operator, "sh", "-c",
                    "ssh-keygen -q -t ed25519 -N '' -f key && echo tree > commit "
                    "&& ssh-keygen -q -Y sign -n git -f key commit && head -n 1 commit.sig")
    assert signed.stdout == "-----BEGIN SSH SIGNATURE-----\n", signed
    # CEL compiles and evaluates with its command line (typer, rich, prompt_toolkit, Pygments) left out
    evaluated = podman("exec", operator, "python3", "-c",
                       "import sys, cel; print(cel.evaluate('[1, 2].size()'), 'typer' in sys.modules)")
    assert evaluated.stdout.split() == ["2", "False"], evaluated


def test_an_unwritable_cache_ends_the_operator_with_one_clear_line(image: str, kubeconfig: Path) -> None:
    # The cache volume forgotten (the image's VOLUME ignored, as Kubernetes does): /var/cache/helmop is then the
    # read-only root filesystem's.
    done = podman("run", "--rm", *RESTRICTED, "--image-volume", "ignore", "--volume",
                  f"{kubeconfig}:{KUBECONFIG}:ro", image, "--kubeconfig", KUBECONFIG, "--install-crds")
    assert done.returncode == 2, done
    assert done.stderr.splitlines() == [
        "helmop: the cache directory /var/cache/helmop is not writable (Read-only file system): it must be, for helm, "
        "charts and git mirrors (--cache-dir, or mount a volume there: an emptyDir in Kubernetes)"]


def test_the_image_weighs_what_the_install_docs_say(image: str) -> None:
    stated = re.search(r"The image weighs (\d+) MiB", (ROOT / "docs" / "operations" / "install.md").read_text())
    assert stated is not None, "docs/operations/install.md no longer says what the image weighs"
    size = int(podman("image", "inspect", "--format", "{{.Size}}", image).stdout) / 2**20
    # dependencies move a little between builds (pip takes their newest releases); more is a change to say
    assert abs(size - int(stated.group(1))) <= 10, f"the image weighs {size:.0f} MiB, the docs say {stated.group(1)}"
