"""ArtifactGenerators end to end: a git folder and an OCI folder (pushed as Flux's CLI does) composed into
ExternalArtifacts that a ConfigSync applies and a HelmRelease installs a chart from, by the operator against the
sandbox. A change in a source that an artifact does not copy leaves its revision (and its readers) alone; a
change in what it copies publishes a new one, applied in turn."""

from __future__ import annotations

from pathlib import Path

import yaml

from helmop.cli.main import main as cli_main
from tests.controllers.conftest import GITREPO, Operator, apply, condition, eventually, get, ready, settled, watched
from tests.gitserver import Repo
from tests.registry import Registry
from tests.tools import Run

GROUP = "helmop.dev/v1alpha1"


def note(name: str, value: str) -> str:
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}}}\ndata: {{value: {value}}}\n"


def test_an_artifact_generator_composes_git_and_oci_for_a_configsync_and_a_release(
        operator: Operator, kube: Run, ns: str, repo: Repo, tmp_path: Path) -> None:
    repo.commit({"deploy/app.yaml": note("from-git", "v1"), "docs/readme.md": "docs",
                 "charts/tiny/Chart.yaml": "apiVersion: v2\nname: tiny\nversion: 0.1.0\n",
                 "charts/tiny/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n"
                                                  "  name: {{ .Release.Name }}-chart\ndata: {from: ea}\n"})
    registry = Registry({})
    try:
        src = tmp_path / "oci"
        (src / "extra").mkdir(parents=True)
        (src / "extra" / "cm.yaml").write_text(note("from-oci", "v1"))
        url = f"oci://127.0.0.1:{registry.port}/charts/extra"
        assert cli_main(["push", "artifact", f"{url}:latest", "--path", str(src), "--source", "test",
                         "--revision", "r1", "--creds", "robot:pw", "--insecure-registry"]) == 0
        kube("kubectl", "-n", ns, "create", "secret", "generic", "robot", "--from-literal=username=robot",
             "--from-literal=password=pw")
        for doc in (
                {"kind": "GitRepository", "metadata": {"name": "repo"},
                 "spec": {"url": repo.url, "interval": "1h", "ref": {"branch": "main"}}},
                {"kind": "OCIRepository", "metadata": {"name": "extra"},
                 "spec": {"url": url, "insecure": True, "secretRef": {"name": "robot"}, "interval": "1h"}},
                {"kind": "ArtifactGenerator", "metadata": {"name": "bundle"}, "spec": {
                    "sources": [{"alias": "git", "kind": "GitRepository", "name": "repo"},
                                {"alias": "oci", "kind": "OCIRepository", "name": "extra"}],
                    "artifacts": [
                        {"name": "apps", "originRevision": "@git",
                         "copy": [{"from": "@git/deploy/*.yaml", "to": "@artifact/"},
                                  {"from": "@oci/extra/**", "to": "@artifact/"}]},
                        {"name": "chart", "copy": [{"from": "@git/charts/tiny", "to": "@artifact/"}]}]}},
                {"kind": "ConfigSync", "metadata": {"name": "apps"},
                 "spec": {"sourceRef": {"kind": "ExternalArtifact", "name": "apps"}, "path": "./", "interval": "1h"}},
                {"kind": "HelmRelease", "metadata": {"name": "web"},
                 "spec": {"interval": "1h", "chartRef": {"kind": "ExternalArtifact", "name": "chart"}}}):
            apply(kube, ns, yaml.safe_dump({"apiVersion": GROUP, **doc}))
        eventually(lambda: get(kube, ns, "cm", "from-git") and get(kube, ns, "cm", "from-oci"))
        ready(kube, ns, "web")
        assert get(kube, ns, "cm", "web-chart")["data"] == {"from": "ea"}  # the chart the artifact holds
        generated = get(kube, ns, "externalartifacts.helmop.dev", "apps")
        first = generated["status"]["artifact"]
        assert first["revision"] == f"latest@{first['digest']}"
        assert first["metadata"]["org.opencontainers.image.revision"].startswith("main@sha1:")
        assert generated["spec"]["sourceRef"] == {"apiVersion": GROUP, "kind": "ArtifactGenerator", "name": "bundle",
                                                  "namespace": ns}
        assert condition(get(kube, ns, "artifactgenerators.helmop.dev", "bundle"))["status"] == "True"

        repo.commit({"docs/readme.md": "new docs"})  # not copied: the artifact stays as it was
        settled(kube, ns, GITREPO, "repo")
        settled(kube, ns, "artifactgenerators.helmop.dev", "bundle")
        assert get(kube, ns, "externalartifacts.helmop.dev", "apps")["status"]["artifact"]["digest"] == \
            first["digest"]

        repo.commit({"deploy/app.yaml": note("from-git", "v2")})
        settled(kube, ns, GITREPO, "repo")
        watched(kube, ns, "cm", "from-git", lambda obj: (obj or {}).get("data") == {"value": "v2"})
        assert get(kube, ns, "externalartifacts.helmop.dev", "apps")["status"]["artifact"]["digest"] != \
            first["digest"]

        kube("kubectl", "-n", ns, "delete", "artifactgenerators.helmop.dev", "bundle")
        watched(kube, ns, "externalartifacts.helmop.dev", "apps", lambda obj: not obj)  # what it made goes too
    finally:
        registry.loop.call_soon_threadsafe(registry.loop.stop)
