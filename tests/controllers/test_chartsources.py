"""Shared chart sources: a HelmRepository whose index is fetched once per interval for every release that
names it (counted at the repository), releases that follow its new revisions, and an OCIRepository whose
chart releases take by chartRef (a loopback registry with token auth)."""

from __future__ import annotations

import hashlib
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from helmop.api.repositories import HELM_CHART_MEDIA_TYPE
from helmop.cli.main import main as cli_main
from tests.chartrepo import ChartRepo
from tests.controllers.conftest import Operator, apply, condition, failing, get, ready, settled, watched
from tests.gitserver import GitServer, Repo
from tests.registry import Registry
from tests.signing import NotationCA, cosign_key, cosign_sign, trust_policy
from tests.sigstore import GITHUB, WORKFLOW, Sigstore
from tests.tools import Run, eventually, tool


def release(name: str, chart_spec: dict[str, object] | None = None, **spec: object) -> str:
    chart = {"chart": {"spec": chart_spec}} if chart_spec else {}
    return yaml.safe_dump({"apiVersion": "helmop.dev/v1alpha1", "kind": "HelmRelease", "metadata": {"name": name},
                           "spec": {"interval": "1h", **chart, **spec,
                                    "values": {"fullnameOverride": name}}})


def source_ready(kube: Run, ns: str, kind: str, name: str) -> dict[str, object]:
    def check() -> dict[str, object] | None:
        obj = get(kube, ns, kind, name)
        return obj if condition(obj).get("status") == "True" else None
    found: dict[str, object] = eventually(check)
    return found


def test_one_helmrepository_index_fetch_serves_every_release(operator: Operator, kube: Run, ns: str,
                                                             own_repo: ChartRepo) -> None:
    apply(kube, ns, yaml.safe_dump({"apiVersion": "helmop.dev/v1alpha1", "kind": "HelmRepository",
                                    "metadata": {"name": "charts"}, "spec": {"url": own_repo.url, "interval": "1h"}}))
    names = [f"app{i}" for i in range(4)]
    for name in names:
        apply(kube, ns, release(name, {"chart": "demo", "version": "0.x", "sourceRef": {
            "kind": "HelmRepository", "name": "charts"}, "valuesFiles": ["values-prod.yaml"]}))
    for name in names:
        status = ready(kube, ns, name)["status"]
        assert status["history"][0]["chartVersion"] == "0.1.0"
    assert get(kube, ns, "deployment", "app0")["spec"]["replicas"] == 2  # the chart's values-prod.yaml
    repository = source_ready(kube, ns, "helmrepositories.helmop.dev", "charts")["status"]
    served = hashlib.sha256((own_repo.dir / "index.yaml").read_bytes()).hexdigest()
    assert repository["artifact"]["revision"] == f"sha256:{served}"  # type: ignore[index]
    assert own_repo.paths.count("/index.yaml") == 1  # four releases and the repository: one fetch

    # a new version, seen at the repository's next turn (asked for now)
    own_repo.publish("demo", "0.2.0", files={"values-prod.yaml": "replicaCount: 2\n"})
    kube("kubectl", "-n", ns, "annotate", "helmrepositories.helmop.dev", "charts", "helmop.dev/requestedAt=now",
         "--overwrite")
    for name in names:  # woken by the new revision: no release waits for its own interval
        eventually(lambda name=name: get(kube, ns, "hr", name)["status"]["history"][0]["chartVersion"] == "0.2.0")
    assert own_repo.paths.count("/index.yaml") == 2


def test_releases_take_an_ocirepository_chart_by_reference(operator: Operator, kube: Run, ns: str,
                                                           tmp_path: Path) -> None:
    subprocess.run([tool("helm"), "create", str(tmp_path / "app")], check=True, capture_output=True)
    charts = {}
    for version in ("1.0.0", "1.1.0", "2.0.0"):
        subprocess.run([tool("helm"), "package", str(tmp_path / "app"), "--version", version, "-d",
                        str(tmp_path / version)], check=True, capture_output=True)
        charts[version] = next((tmp_path / version).glob("*.tgz")).read_bytes()
    registry = Registry(charts)
    try:
        kube("kubectl", "-n", ns, "create", "secret", "generic", "robot", "--from-literal=username=robot",
             "--from-literal=password=pw")
        apply(kube, ns, yaml.safe_dump({"apiVersion": "helmop.dev/v1alpha1", "kind": "OCIRepository",
                                        "metadata": {"name": "app"}, "spec": {
                                            "url": f"oci://127.0.0.1:{registry.port}/charts/app", "insecure": True,
                                            "ref": {"semver": "^1.0"}, "secretRef": {"name": "robot"},
                                            "layerSelector": {"mediaType": HELM_CHART_MEDIA_TYPE,
                                                              "operation": "copy"}}}))
        status = source_ready(kube, ns, "ocirepositories.helmop.dev", "app")["status"]
        manifest = hashlib.sha256(registry.manifests["1.1.0"]).hexdigest()
        assert status["artifact"]["revision"] == f"1.1.0@sha256:{manifest}"  # type: ignore[index]
        layer = hashlib.sha256(charts["1.1.0"]).hexdigest()
        assert status["artifact"]["digest"] == f"sha256:{layer}"  # type: ignore[index]  # copied: the layer
        apply(kube, ns, release("web", chartRef={"kind": "OCIRepository", "name": "app"}))
        assert ready(kube, ns, "web")["status"]["history"][0]["chartVersion"] == "1.1.0"
    finally:
        registry.loop.call_soon_threadsafe(registry.loop.stop)


@pytest.mark.parametrize("group", ["helmop.dev/v1alpha1", "source.toolkit.fluxcd.io/v1"])
def test_an_oci_helmrepository_holds_charts_by_name(operator: Operator, kube: Run, ns: str, tmp_path: Path,
                                                   group: str) -> None:
    """type: oci names a registry path: a release's chart is the repository of that name under it, as Flux reads
    it (oci://HOST/charts + app -> oci://HOST/charts/app:VERSION)."""
    subprocess.run([tool("helm"), "create", str(tmp_path / "app")], check=True, capture_output=True)
    subprocess.run([tool("helm"), "package", str(tmp_path / "app"), "--version", "1.2.0", "-d", str(tmp_path)],
                   check=True, capture_output=True)
    registry = Registry({"1.2.0": next(tmp_path.glob("*.tgz")).read_bytes()})
    try:
        kube("kubectl", "-n", ns, "create", "secret", "generic", "robot", "--from-literal=username=robot",
             "--from-literal=password=pw")
        apply(kube, ns, yaml.safe_dump({"apiVersion": group, "kind": "HelmRepository", "metadata": {"name": "oci"},
                                        "spec": {"url": f"oci://127.0.0.1:{registry.port}/charts", "type": "oci",
                                                 "insecure": True, "interval": "1h", "secretRef": {"name": "robot"}}}))
        chart = {"chart": "app", "version": "1.x", "sourceRef": {"kind": "HelmRepository", "name": "oci"}}
        if group.startswith("helmop"):
            apply(kube, ns, release("web", chart))
            history = ready(kube, ns, "web")["status"]["history"][0]
        else:
            apply(kube, ns, yaml.safe_dump({"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
                                            "metadata": {"name": "web"},
                                            "spec": {"interval": "1h", "chart": {"spec": chart},
                                                     "values": {"fullnameOverride": "web"}}}))
            history = eventually(lambda: (o := get(kube, ns, "helmreleases.helm.toolkit.fluxcd.io", "web"))
                                 and condition(o).get("status") == "True" and o["status"]["history"][0], 120)
        assert history["chartName"] == "app" and history["chartVersion"] == "1.2.0"
    finally:
        registry.loop.call_soon_threadsafe(registry.loop.stop)


def packaged_app(tmp_path: Path, *versions: str) -> dict[str, bytes]:
    subprocess.run([tool("helm"), "create", str(tmp_path / "app")], check=True, capture_output=True)
    for version in versions:
        subprocess.run([tool("helm"), "package", str(tmp_path / "app"), "--version", version, "-d",
                        str(tmp_path / version)], check=True, capture_output=True)
    return {version: next((tmp_path / version).glob("*.tgz")).read_bytes() for version in versions}


def test_an_ocirepository_publishes_only_what_its_keys_signed(operator: Operator, kube: Run, ns: str,
                                                              tmp_path: Path) -> None:
    """spec.verify with cosign: 1.0.0, signed with the trusted key, is published (SourceVerified names the key)
    and installed; 1.1.0, signed by another key, is not: the release stays on 1.0.0, the reason in Ready."""
    registry = Registry(packaged_app(tmp_path, "1.0.0", "1.1.0"))
    try:
        reference = f"127.0.0.1:{registry.port}/charts/app"
        trusted, public = cosign_key()
        stranger, _ = cosign_key()
        cosign_sign(registry, reference, registry.digest_of("1.0.0"), trusted)
        cosign_sign(registry, reference, registry.digest_of("1.1.0"), stranger)
        kube("kubectl", "-n", ns, "create", "secret", "generic", "robot", "--from-literal=username=robot",
             "--from-literal=password=pw")
        kube("kubectl", "-n", ns, "create", "secret", "generic", "cosign",
             "--from-literal=cosign.pub=" + public.decode())

        def source(version: str) -> str:
            return yaml.safe_dump({"apiVersion": "helmop.dev/v1alpha1", "kind": "OCIRepository",
                                   "metadata": {"name": "app"},
                                   "spec": {"url": f"oci://{reference}", "insecure": True, "ref": {"tag": version},
                                            "secretRef": {"name": "robot"},
                                            "verify": {"provider": "cosign", "secretRef": {"name": "cosign"}}}})

        apply(kube, ns, source("1.0.0"))
        verified = condition(source_ready(kube, ns, "ocirepositories.helmop.dev", "app"), "SourceVerified")
        assert verified["message"] == f"verified signature of {reference}@{registry.digest_of('1.0.0')} with key " \
                                      "cosign.pub"
        apply(kube, ns, release("web", chartRef={"kind": "OCIRepository", "name": "app"}))
        assert ready(kube, ns, "web")["status"]["history"][0]["chartVersion"] == "1.0.0"
        apply(kube, ns, source("1.1.0"))
        refused = eventually(lambda: (o := get(kube, ns, "ocirepositories.helmop.dev", "app"))
                             and condition(o).get("reason") == "VerificationError" and o)
        assert "no matching signatures" in condition(refused)["message"]
        assert condition(refused, "SourceVerified")["status"] == "False"
        assert refused["status"]["artifact"]["revision"].startswith("1.0.0@")  # the readers keep 1.0.0
        assert get(kube, ns, "hr", "web")["status"]["history"][0]["chartVersion"] == "1.0.0"
    finally:
        registry.loop.call_soon_threadsafe(registry.loop.stop)


def test_an_ocirepository_verifies_keyless_signatures_against_its_trusted_root(operator: Operator, kube: Run, ns: str,
                                                                              tmp_path: Path) -> None:
    """Keyless cosign: trustedRootSecretRef's trusted_root.json proves the signer of 1.0.0 (SourceVerified names
    the identity); 1.1.0, signed by an identity matchOIDCIdentity does not ask for, is refused by reason."""
    registry = Registry(packaged_app(tmp_path, "1.0.0", "1.1.0"))
    try:
        reference = f"127.0.0.1:{registry.port}/charts/app"
        sigstore = Sigstore()
        sigstore.sign(registry, reference, registry.digest_of("1.0.0"))
        sigstore.sign(registry, reference, registry.digest_of("1.1.0"), subject="https://github.com/evil/fork")
        kube("kubectl", "-n", ns, "create", "secret", "generic", "robot", "--from-literal=username=robot",
             "--from-literal=password=pw")
        kube("kubectl", "-n", ns, "create", "secret", "generic", "sigstore",
             "--from-literal=trusted_root.json=" + sigstore.trusted_root().decode())

        def source(version: str) -> str:
            return yaml.safe_dump({"apiVersion": "helmop.dev/v1alpha1", "kind": "OCIRepository",
                                   "metadata": {"name": "app"},
                                   "spec": {"url": f"oci://{reference}", "insecure": True, "ref": {"tag": version},
                                            "secretRef": {"name": "robot"},
                                            "verify": {"provider": "cosign",
                                                       "trustedRootSecretRef": {"name": "sigstore"},
                                                       "matchOIDCIdentity": [{"issuer": "token.actions",
                                                                              "subject": "^https://github.com/acme/"}]}}})

        apply(kube, ns, source("1.0.0"))
        verified = condition(source_ready(kube, ns, "ocirepositories.helmop.dev", "app"), "SourceVerified")
        assert verified["message"].endswith(f"@{registry.digest_of('1.0.0')} by {GITHUB} {WORKFLOW}")
        apply(kube, ns, source("1.1.0"))
        refused = eventually(lambda: (o := get(kube, ns, "ocirepositories.helmop.dev", "app"))
                             and condition(o).get("reason") == "VerificationError" and o)
        assert "https://github.com/evil/fork" in condition(refused)["message"]
        assert "matchOIDCIdentity" in condition(refused)["message"]
    finally:
        registry.loop.call_soon_threadsafe(registry.loop.stop)


def test_a_release_installs_a_chart_only_once_its_notation_signature_verifies(operator: Operator, kube: Run,
                                                                             ns: str, tmp_path: Path) -> None:
    """chart.spec.verify with notation, from an OCI HelmRepository: unsigned, the release is refused by reason
    (nothing installed); once a trusted CA's leaf signs the chart's manifest, it installs."""
    registry = Registry(packaged_app(tmp_path, "1.0.0"))
    try:
        ca = NotationCA.make("release-signer")
        kube("kubectl", "-n", ns, "create", "secret", "generic", "robot", "--from-literal=username=robot",
             "--from-literal=password=pw")
        kube("kubectl", "-n", ns, "create", "secret", "generic", "notation",
             "--from-literal=trustpolicy.json=" + trust_policy().decode(),
             "--from-literal=ca.crt=" + ca.root_pem().decode())
        apply(kube, ns, yaml.safe_dump({"apiVersion": "helmop.dev/v1alpha1", "kind": "HelmRepository",
                                        "metadata": {"name": "oci"},
                                        "spec": {"url": f"oci://127.0.0.1:{registry.port}/charts", "type": "oci",
                                                 "insecure": True, "interval": "1h", "secretRef": {"name": "robot"}}}))
        apply(kube, ns, release("web", {"chart": "app", "version": "1.0.0", "sourceRef": {
            "kind": "HelmRepository", "name": "oci"}, "verify": {"provider": "notation",
                                                                 "secretRef": {"name": "notation"}}}))
        refused = failing(kube, ns, "web", "VerificationError")
        assert "no signature is associated" in condition(refused)["message"]
        assert not get(kube, ns, "deployment", "web")
        ca.sign(registry, registry.digest_of("1.0.0"), len(registry.manifests["1.0.0"]))
        kube("kubectl", "-n", ns, "annotate", "--overwrite", "hr", "web", "helmop.dev/requestedAt=signed")
        assert ready(kube, ns, "web")["status"]["history"][0]["chartVersion"] == "1.0.0"
    finally:
        registry.loop.call_soon_threadsafe(registry.loop.stop)


def test_releases_applied_with_their_source_wait_for_it_and_act_once(operator: Operator, kube: Run, ns: str,
                                                                      tmp_path: Path) -> None:
    """Releases that retried as soon as the source's first artifact was written are not stopped by the news of
    that artifact (each would install twice)."""
    subprocess.run([tool("helm"), "create", str(tmp_path / "app")], check=True, capture_output=True)
    subprocess.run([tool("helm"), "package", str(tmp_path / "app"), "--version", "1.0.0", "-d", str(tmp_path)],
                   check=True, capture_output=True)
    registry = Registry({"1.0.0": next(tmp_path.glob("*.tgz")).read_bytes()})
    try:
        names = [f"web{i}" for i in range(6)]
        apply(kube, ns, "---\n".join([
            yaml.safe_dump({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "robot"},
                            "stringData": {"username": "robot", "password": "pw"}}),
            yaml.safe_dump({"apiVersion": "helmop.dev/v1alpha1", "kind": "OCIRepository", "metadata": {"name": "app"},
                            "spec": {"url": f"oci://127.0.0.1:{registry.port}/charts/app", "insecure": True,
                                     "ref": {"semver": "1.x"}, "secretRef": {"name": "robot"}}}),
            *(release(name, chartRef={"kind": "OCIRepository", "name": "app"}) for name in names)]))
        for name in names:
            assert ready(kube, ns, name)["status"]["history"][0]["chartVersion"] == "1.0.0"
        cancelled = kube("kubectl", "-n", ns, "get", "events", "--field-selector", "reason=ActionCancelled",
                         "-o", "name")
        assert cancelled.stdout.strip() == "" and registry.listed == 1
    finally:
        registry.loop.call_soon_threadsafe(registry.loop.stop)


def test_a_missing_helmrepository_is_waited_for(operator: Operator, kube: Run, ns: str, chart_repo: ChartRepo) -> None:
    apply(kube, ns, release("web", {"chart": "demo", "sourceRef": {"kind": "HelmRepository", "name": "later"}}))
    assert "HelmRepository" in condition(failing(kube, ns, "web", "SourceNotFound"))["message"]
    apply(kube, ns, yaml.safe_dump({"apiVersion": "helmop.dev/v1alpha1", "kind": "HelmRepository",
                                    "metadata": {"name": "later"}, "spec": {"url": chart_repo.url}}))
    assert ready(kube, ns, "web")["status"]["history"][0]["chartVersion"] == "1.0.0"


def test_a_configsync_applies_an_oci_artifact_and_follows_its_new_pushes(operator: Operator, kube: Run, ns: str,
                                                                        tmp_path: Path) -> None:
    """Config pushed by `helmop push artifact` (Flux's format) to a loopback registry: an OCIRepository publishes
    it (the manifest's annotations as its metadata), a ConfigSync applies it; a new push of the same tag,
    once the OCIRepository looks again, is applied in turn."""
    registry = Registry({})
    src = tmp_path / "config"
    url = f"oci://127.0.0.1:{registry.port}/charts/config"

    def push(value: str, revision: str) -> None:
        (src / "apps").mkdir(parents=True, exist_ok=True)
        (src / "apps" / "note.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: pushed}\n"
                                                f"data: {{value: {value}}}\n")
        assert cli_main(["push", "artifact", f"{url}:latest", "--path", str(src), "--source", "https://git/config",
                         "--revision", revision, "--creds", "robot:pw", "--insecure-registry"]) == 0

    try:
        push("v1", "main@sha1:1111")
        kube("kubectl", "-n", ns, "create", "secret", "generic", "robot", "--from-literal=username=robot",
             "--from-literal=password=pw")
        apply(kube, ns, yaml.safe_dump({"apiVersion": "helmop.dev/v1alpha1", "kind": "OCIRepository",
                                        "metadata": {"name": "config"},
                                        "spec": {"url": url, "insecure": True, "secretRef": {"name": "robot"},
                                                 "interval": "1h"}}))
        apply(kube, ns, yaml.safe_dump({"apiVersion": "helmop.dev/v1alpha1", "kind": "ConfigSync",
                                        "metadata": {"name": "apps"},
                                        "spec": {"sourceRef": {"kind": "OCIRepository", "name": "config"},
                                                 "path": "apps", "interval": "1h"}}))
        watched(kube, ns, "cm", "pushed", lambda obj: (obj or {}).get("data") == {"value": "v1"})
        status = get(kube, ns, "ocirepositories.helmop.dev", "config")["status"]
        assert status["artifact"]["metadata"]["org.opencontainers.image.revision"] == "main@sha1:1111"
        push("v2", "main@sha1:2222")
        kube("kubectl", "-n", ns, "annotate", "--overwrite", "ocirepositories.helmop.dev", "config",
             f"helmop.dev/requestedAt={time.time()}")
        watched(kube, ns, "cm", "pushed", lambda obj: (obj or {}).get("data") == {"value": "v2"})
    finally:
        registry.loop.call_soon_threadsafe(registry.loop.stop)


def test_a_release_takes_a_helmchart_by_reference(operator: Operator, kube: Run, ns: str, own_repo: ChartRepo,
                                                  git_server: GitServer, tmp_path: Path) -> None:
    """A HelmChart from a HelmRepository with values files publishes <version>+<generation> and a release with
    chartRef HelmChart installs that version with those values; its new version, once the HelmChart publishes
    it, upgrades the release. A HelmChart from a GitRepository with reconcileStrategy Revision publishes
    <version>+<12 hex of the commit>."""
    apply(kube, ns, yaml.safe_dump({"apiVersion": "helmop.dev/v1alpha1", "kind": "HelmRepository",
                                    "metadata": {"name": "charts"}, "spec": {"url": own_repo.url, "interval": "1h"}}))
    apply(kube, ns, yaml.safe_dump({"apiVersion": "helmop.dev/v1alpha1", "kind": "HelmChart",
                                    "metadata": {"name": "demo"},
                                    "spec": {"chart": "demo", "version": "0.x", "interval": "1h",
                                             "sourceRef": {"kind": "HelmRepository", "name": "charts"},
                                             "valuesFiles": ["values-prod.yaml"]}}))
    chart = source_ready(kube, ns, "helmcharts.helmop.dev", "demo")["status"]
    assert chart["artifact"]["revision"] == "0.1.0+1" and chart["observedChartName"] == "demo"  # type: ignore[index]
    apply(kube, ns, release("web", chartRef={"kind": "HelmChart", "name": "demo"}))
    assert ready(kube, ns, "web")["status"]["history"][0]["chartVersion"] == "0.1.0"
    assert get(kube, ns, "deployment", "web")["spec"]["replicas"] == 2  # the HelmChart's values file
    own_repo.publish("demo", "0.2.0", files={"values-prod.yaml": "replicaCount: 3\n"})
    settled(kube, ns, "helmrepositories.helmop.dev", "charts")
    settled(kube, ns, "helmcharts.helmop.dev", "demo")
    watched(kube, ns, "hr", "web", lambda obj: obj["status"]["history"][0]["chartVersion"] == "0.2.0")
    assert get(kube, ns, "deployment", "web")["spec"]["replicas"] == 3

    repo = Repo(git_server, f"charts-{ns[-6:]}", tmp_path / "work")
    (repo.work / "charts").mkdir()
    subprocess.run([tool("helm"), "create", str(repo.work / "charts" / "app")], check=True, capture_output=True)
    head = repo.commit({})
    apply(kube, ns, yaml.safe_dump({"apiVersion": "helmop.dev/v1alpha1", "kind": "GitRepository",
                                    "metadata": {"name": "git"}, "spec": {"url": repo.url, "interval": "1h",
                                                                         "ref": {"branch": "main"}}}))
    apply(kube, ns, yaml.safe_dump({"apiVersion": "helmop.dev/v1alpha1", "kind": "HelmChart",
                                    "metadata": {"name": "fromgit"},
                                    "spec": {"chart": "./charts/app", "reconcileStrategy": "Revision",
                                             "sourceRef": {"kind": "GitRepository", "name": "git"},
                                             "interval": "1h"}}))
    fromgit = source_ready(kube, ns, "helmcharts.helmop.dev", "fromgit")["status"]
    assert fromgit["artifact"]["revision"] == f"0.1.0+{head[:12]}"  # type: ignore[index]
    assert fromgit["observedSourceArtifactRevision"] == f"main@sha1:{head}"


def test_a_helmrepository_grants_other_namespaces_by_access_from(operator: Operator, kube: Run, ns: str,
                                                                 own_repo: ChartRepo) -> None:
    """spec.accessFrom: a release of another namespace may take the repository's charts only once that namespace's
    labels match a selector (AccessDenied before)."""
    other = f"{ns}-b"
    kube("kubectl", "create", "namespace", other)
    apply(kube, ns, yaml.safe_dump({"apiVersion": "helmop.dev/v1alpha1", "kind": "HelmRepository",
                                    "metadata": {"name": "charts"},
                                    "spec": {"url": own_repo.url, "interval": "1h", "accessFrom": {
                                        "namespaceSelectors": [{"matchLabels": {"team": "payments"}}]}}}))
    apply(kube, other, release("web", {"chart": "demo", "sourceRef": {"kind": "HelmRepository", "name": "charts",
                                                                       "namespace": ns}}))
    refused = condition(failing(kube, other, "web", "AccessDenied"))
    assert f"namespace {other}" in refused["message"] and "accessFrom" in refused["message"]
    kube("kubectl", "label", "namespace", other, "team=payments")
    kube("kubectl", "-n", other, "annotate", "hr", "web", "helmop.dev/requestedAt=granted", "--overwrite")
    assert ready(kube, other, "web")["status"]["history"][0]["chartVersion"] == "0.1.0"
