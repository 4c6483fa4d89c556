"""The helmop command where no cluster is involved (or the kubeconfig is wrong): --version, clear
kubeconfig errors, `render --validate` against the CRD schemas, where `run --sandbox` listens, and `logs`
reading the operator's pods (the two API calls it makes, answered as the API server answers them: the
sandbox runs no containers)."""

from __future__ import annotations

import http.server
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from pathlib import Path
from typing import ClassVar

import yaml

from helmop.api import validation
from tests.clirun import run_cli
from tests.sops import Sops, age_identity
from tests.tools import TOOLS, eventually, tool


def helmop(*args: str, env: dict[str, str] | None = None, timeout: float = 120,
           stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """The helmop command: in-process (:mod:`tests.clirun`), but `helmop run`, whose process is the point (it sets
    up the process's logging and signals)."""
    env = {"HELMOP_HELM": str(TOOLS / "helm"), **(env or {})}
    if args[:1] != ("run",):
        return run_cli(list(args), env, stdin)
    return subprocess.run([sys.executable, "-m", "helmop.cli", *args], capture_output=True, text=True, input=stdin,
                          timeout=timeout, env={**os.environ, **env})


def test_version() -> None:
    done = helmop("--version")
    assert done.returncode == 0 and done.stdout.strip() == "helmop 0.1.0"


def test_a_missing_kubeconfig_is_named() -> None:
    for args, env in ((["get", "--kubeconfig", "/nonexistent/kc"], {}), (["get"], {"KUBECONFIG": "/nonexistent/kc"}),
                      (["run", "--kubeconfig", "/nonexistent/kc"], {})):
        done = helmop(*args, env=env)
        assert done.returncode == 2, (args, done.stderr)
        assert "/nonexistent/kc" in done.stderr and "does not exist" in done.stderr, (args, done.stderr)
        assert "Traceback" not in done.stderr



def test_a_missing_helm_kubectl_or_git_is_one_line_and_exit_2(tmp_path: Path) -> None:
    """Whichever verb starts it, a program that is not there is named with the verb, never a traceback."""
    repo = tmp_path / "repo"
    (repo / "overlay").mkdir(parents=True)
    (repo / "overlay" / "kustomization.yaml").write_text("resources: [cm.yaml]\n")
    (repo / "overlay" / "cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n")
    subprocess.run([tool("helm"), "create", str(repo / "web")], check=True, capture_output=True)
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["-c", "user.name=a", "-c", "user.email=a@x", "commit",
                                                               "-qm", "one"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)
    only = tmp_path / "bin"  # a PATH with git alone, or helm alone
    only.mkdir()
    (only / "git").symlink_to(subprocess.run(["which", "git"], capture_output=True, text=True).stdout.strip())
    no_helm = {"PATH": str(only), "HELMOP_HELM": ""}
    cases = [(["render", str(repo / "web")], no_helm, "helmop render needs helm: helm is not on the PATH"),
             (["render", str(repo / "overlay")], no_helm, "helmop render needs kubectl: kubectl is not on the PATH"),
             (["render", str(repo / "web")], {"HELMOP_HELM": str(tmp_path / "nothing")},
              f"helmop render needs helm: $HELMOP_HELM names {tmp_path / 'nothing'}, which does not exist"),
             (["preview", "--repo", str(repo), "--base", "main", "--head", "main"], no_helm,
              "helmop preview needs helm: helm is not on the PATH"),
             (["preview", "--repo", str(repo), "--base", "main", "--head", "main"], {"PATH": str(TOOLS)},
              "helmop preview needs git: git is not on the PATH")]
    for args, env, said in cases:
        done = helmop(*args, env=env)
        assert (done.returncode, done.stderr.strip()) == (2, f"✗ {said} (scripts/setup puts helm and kubectl in "
                                                              ".tools/bin)"), (args, done.stderr)


def _release(spec: dict[str, object]) -> dict[str, object]:
    return {"apiVersion": "helmop.dev/v1alpha1", "kind": "HelmRelease",
            "metadata": {"name": "web", "namespace": "shop"}, "spec": spec}


def test_render_validate_names_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "charts").mkdir()
    subprocess.run([tool("helm"), "create", str(tmp_path / "charts" / "web")], check=True, capture_output=True)
    good = {"chart": {"sourceRef": {"name": "config"}, "path": "charts/web"}, "interval": "5m",
            "values": {"replicaCount": 2}}
    (tmp_path / "apps").mkdir()
    (tmp_path / "apps" / "web.yaml").write_text(yaml.safe_dump(_release(good), sort_keys=False))
    done = helmop("render", "--validate", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "replicas: 2" in done.stdout

    typo = "\n".join(["apiVersion: helmop.dev/v1alpha1", "kind: HelmRelease", "metadata: {name: web, namespace: shop}",
                      "spec:", "  chart:", "    sourceRef: {name: config}", "    path: charts/web",
                      "  intervall: 5m", "  install:", "    createNamespace: 'yes'", ""])
    (tmp_path / "apps" / "web.yaml").write_text(typo)
    failed = helmop("render", "--validate", str(tmp_path))
    assert failed.returncode == 1
    assert "error: apps/web.yaml:8: HelmRelease shop/web: spec.intervall: unknown field" in failed.stderr
    assert "error: apps/web.yaml:10: HelmRelease shop/web: spec.install.createNamespace: 'yes' is not of type " \
           "'boolean'" in failed.stderr
    # Without --validate the typo would be pruned by the API server, silently: render goes ahead.
    assert helmop("render", str(tmp_path)).returncode == 0
    # A value helmop cannot use at all: the same file:line message, with or without --validate, no traceback.
    (tmp_path / "apps" / "web.yaml").write_text(typo.replace("  intervall: 5m", "  maxHistory: three"))
    for args in (["render"], ["render", "--validate"]):
        broken = helmop(*args, str(tmp_path))
        assert broken.returncode == 1 and "Traceback" not in broken.stderr, broken.stderr
        assert "error: apps/web.yaml:8: HelmRelease shop/web: spec.maxHistory: 'three' is not of type 'integer'" \
            in broken.stderr, broken.stderr


def _listening(port: int) -> set[str]:
    """Addresses with a socket listening on ``port`` (from /proc/net/tcp)."""
    found = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        address, hex_port = local.split(":")
        if state == "0A" and int(hex_port, 16) == port:
            found.add(socket.inet_ntoa(bytes.fromhex(address)[::-1]))
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_run_sandbox_listens_on_loopback_only(tmp_path: Path) -> None:
    hooks, probes = _free_port(), _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "helmop.cli", "run", "--sandbox", "--kubeconfig",
                             str(tmp_path / "kc"), "--cache-dir", str(tmp_path / "cache"), "--webhook-port", str(hooks),
                             "--metrics-port", str(probes)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "HELMOP_HELM": str(TOOLS / "helm")})
    try:
        eventually(lambda: _listening(hooks) and _listening(probes))
        assert _listening(hooks) == {"127.0.0.1"} and _listening(probes) == {"127.0.0.1"}
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


def test_run_stops_at_once_on_a_cache_directory_it_cannot_write(tmp_path: Path) -> None:
    # A directory under a regular file cannot be made, by root either (the image tier runs the operator with a
    # read-only one). Without the check, helm's first run there ends the operator with a traceback.
    (tmp_path / "file").write_text("")
    cache = tmp_path / "file" / "cache"
    done = helmop("run", "--sandbox", "--kubeconfig", str(tmp_path / "kc"), "--cache-dir", str(cache))
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        f"helmop: the cache directory {cache} is not writable (Not a directory): it must be, for helm, charts and "
        "git mirrors (--cache-dir, or mount a volume there: an emptyDir in Kubernetes)"]


class _OperatorPods(http.server.BaseHTTPRequestHandler):
    """The two API calls `helmop logs` makes in a cluster, as the API server answers them: the operator's pods
    by label, and a container's log (followed: lines as they come, the response kept open)."""

    pods: ClassVar[list[dict[str, object]]] = [
        {"metadata": {"name": f"helmop-{i}", "namespace": "helmop-system"}} for i in (1, 2)]
    lines: ClassVar[dict[str, list[str]]] = {
        "helmop-1": ['{"time": "t1", "level": "INFO", "kind": "HelmRelease", "namespace": "shop", "name": "web", '
                     '"message": "shop/web InstallSucceeded: done"}',
                     '{"time": "t2", "level": "INFO", "message": "unrelated"}'],
        "helmop-2": ["2026-11-24 10:00:00 WARNING helmop: shop/web ActionCancelled (text format)",
                     "2026-11-24 10:00:01 INFO helmop: shop/web2 InstallSucceeded (another release)"]}

    def do_GET(self) -> None:
        url = urllib.parse.urlparse(self.path)
        query = urllib.parse.parse_qs(url.query)
        if url.path in ("/api/v1/pods", "/api/v1/namespaces/helmop-system/pods"):
            assert query["labelSelector"] == ["app.kubernetes.io/name=helmop"]
            self._send(json.dumps({"kind": "PodList", "items": self.pods}).encode() + b"\n")
        elif url.path.endswith("/log"):
            assert query["container"] == ["helmop"]
            name = url.path.split("/")[-2]
            self._send("".join(f"{line}\n" for line in self.lines[name]).encode(), hold="follow" in query)
        else:
            self.send_error(404)

    def _send(self, body: bytes, hold: bool = False) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()
        if hold:
            time.sleep(30)  # a followed log stays open

    def log_message(self, *_: object) -> None:
        pass


def test_logs_read_the_operator_pods(tmp_path: Path) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _OperatorPods)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{server.server_address[1]}"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    try:
        env = {"KUBECONFIG": str(kubeconfig), "HELMOP_LOG_FILE": ""}
        about = helmop("logs", "hr", "web", "-n", "shop", env=env)
        assert about.returncode == 0, about.stderr
        assert sorted(about.stdout.splitlines()) == [  # a JSON line made readable; a text line as it is
            "2026-11-24 10:00:00 WARNING helmop: shop/web ActionCancelled (text format)",
            "t1 INFO HelmRelease shop/web: shop/web InstallSucceeded: done"]
        assert "unrelated" in helmop("logs", env=env).stdout
        assert "unrelated" in helmop("logs", "--operator-namespace", "helmop-system", env=env).stdout
        assert helmop("logs", "--operator-namespace", "elsewhere", env=env).returncode == 2  # no pods there
        follow = subprocess.Popen([sys.executable, "-m", "helmop.cli", "logs", "hr", "web", "-n", "shop", "-f"],
                                  stdout=subprocess.PIPE, text=True, env={**os.environ, **env})
        try:
            assert follow.stdout is not None
            seen = {follow.stdout.readline().strip() for _ in range(2)}  # both pods' lines, while still open
            assert any("InstallSucceeded" in line for line in seen) and any("ActionCancelled" in s for s in seen)
        finally:
            follow.send_signal(signal.SIGINT)
            assert follow.wait(20) == 0
    finally:
        server.shutdown()


def test_render_builds_an_overlay_as_a_configsync_would(tmp_path: Path) -> None:
    """`helmop render OVERLAY` (flux build kustomization): the same build and variables as the operator's."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "base").mkdir()
    (tmp_path / "staging").mkdir()
    (tmp_path / "base" / "kustomization.yaml").write_text("resources: [cm.yaml]\n")
    (tmp_path / "base" / "cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\n"
                                               "data: {env: '${env:=dev}', region: '${region}', keep: '$${region}'}\n")
    (tmp_path / "staging" / "kustomization.yaml").write_text("resources: [../base]\nnamePrefix: stg-\n")
    (tmp_path / "vars.env").write_text("# cluster variables\nregion=eu-central-1\nenv=ignored\n")
    env = {"PATH": f"{TOOLS}:{os.environ['PATH']}"}
    done = helmop("render", str(tmp_path / "staging"), "--substitute", "env=staging", "--substitute-from-file",
                  str(tmp_path / "vars.env"), env=env)
    assert done.returncode == 0, done.stderr
    built = yaml.safe_load(done.stdout)
    assert built["metadata"] == {"name": "stg-settings"}
    assert built["data"] == {"env": "staging", "region": "eu-central-1", "keep": "${region}"}
    (tmp_path / "staging" / "kustomization.yaml").write_text("resources: [../../outside]\n")
    refused = helmop("render", str(tmp_path / "staging"), env=env)
    assert refused.returncode == 1 and "outside the repository" in refused.stderr, refused.stderr


def test_render_decrypts_an_overlay_and_masks_what_it_decrypted(tmp_path: Path) -> None:
    """`helmop render OVERLAY --decrypt KEYFILE`: what the operator would apply, every decrypted value masked in
    the output (which goes to terminals and CI logs); without the key, the reason."""
    identity, recipient = age_identity()
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "kustomization.yaml").write_text("resources: [secret.yaml]\n")
    (tmp_path / "app" / "secret.yaml").write_text(Sops(age=[recipient], regex="^(data|stringData)$").yaml(
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db"},
         "stringData": {"password": "render-me-not-1234"}}))
    (tmp_path / "key.txt").write_text(f"# age-keygen's file\n{identity}\n")
    env = {"PATH": f"{TOOLS}:{os.environ['PATH']}"}
    done = helmop("render", str(tmp_path / "app"), "--decrypt", str(tmp_path / "key.txt"), env=env)
    assert done.returncode == 0, done.stderr
    built = yaml.safe_load(done.stdout)
    assert built["metadata"]["name"] == "db" and built["stringData"]["password"] == "***"
    assert "render-me-not" not in done.stdout + done.stderr
    refused = helmop("render", str(tmp_path / "app"), env=env)
    assert refused.returncode == 1 and "is SOPS-encrypted: set spec.decryption" in refused.stderr


FLUX_REPO = {
    "clusters/prod/apps.yaml": """# synced by Flux
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: apps, namespace: flux-system}
spec:
  interval: 10m
  path: ./apps
  prune: true
  sourceRef: {kind: GitRepository, name: flux-system}
""",
    "apps/web.yaml": """apiVersion: v1
kind: Namespace
metadata: {name: web}
---
# the chart source, declared once
apiVersion: source.toolkit.fluxcd.io/v1
kind: HelmRepository
metadata: {name: stable, namespace: web}
spec: {interval: 1h, url: "https://charts.example.com"}
---
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {name: web, namespace: web}
spec:
  interval: 1h
  chart:
    spec: {chart: web, version: "1.x", sourceRef: {kind: HelmRepository, name: stable}}
  values: {replicaCount: 2}
""",
    "apps/kustomization.yaml": "resources: [web.yaml]\n",
}


def test_convert_flux_manifests_to_helmops_kinds_and_back(tmp_path: Path) -> None:
    source = tmp_path / "flux"
    for name, text in FLUX_REPO.items():
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        (source / name).write_text(text)
    done = helmop("convert", "-f", str(source), "-o", str(tmp_path / "helmop"))
    assert done.returncode == 0, done.stderr
    # the Kustomization's new tenancy is said, by file and line
    assert f"note: {source / 'clusters/prod/apps.yaml'}:2: Kustomization flux-system/apps: without " \
           "spec.serviceAccountName" in done.stderr
    ours = {name: list(yaml.safe_load_all((tmp_path / "helmop" / name).read_text())) for name in FLUX_REPO}
    assert [(d["apiVersion"], d["kind"]) for d in ours["apps/web.yaml"]] == [
        ("v1", "Namespace"), ("helmop.dev/v1alpha1", "HelmRepository"), ("helmop.dev/v1alpha1", "HelmRelease")]
    assert ours["clusters/prod/apps.yaml"][0]["kind"] == "ConfigSync"
    assert ours["apps/web.yaml"][2]["spec"] == yaml.safe_load(FLUX_REPO["apps/web.yaml"].split("---")[2])["spec"]
    assert (tmp_path / "helmop/apps/kustomization.yaml").read_text() == FLUX_REPO["apps/kustomization.yaml"]
    assert "# the chart source, declared once" in (tmp_path / "helmop/apps/web.yaml").read_text()
    assert validation.tree({name: (tmp_path / "helmop" / name).read_bytes() for name in FLUX_REPO
                            if name != "apps/kustomization.yaml"}) == []  # as the API server checks them

    back = helmop("convert", "--to", "flux", "-f", str(tmp_path / "helmop"), "-o", str(tmp_path / "back"))
    assert back.returncode == 0, back.stderr
    for name, text in FLUX_REPO.items():
        assert list(yaml.safe_load_all((tmp_path / "back" / name).read_text())) == list(yaml.safe_load_all(text))


def test_convert_names_what_the_other_side_cannot_say(tmp_path: Path) -> None:
    flux = tmp_path / "flux.yaml"
    flux.write_text("apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: remote}\n"
                    "spec:\n  interval: 1h\n  futureField: {secretRef: {name: cluster}}\n"
                    "  chartRef: {kind: OCIRepository, name: x}\n---\n"
                    "apiVersion: source.toolkit.fluxcd.io/v1\nkind: Bucket\nmetadata: {name: b}\n")
    done = helmop("convert", "-f", str(flux))
    assert done.returncode == 1
    assert f"error: {flux}:6: HelmRelease default/remote: UnsupportedField: spec.futureField is not implemented" \
        in done.stderr
    assert "kind: Bucket" in done.stdout  # not a kind to convert: kept as it is
    ours = tmp_path / "ours.yaml"
    ours.write_text("apiVersion: helmop.dev/v1alpha1\nkind: HelmRelease\nmetadata: {name: web, namespace: team}\n"
                    "spec:\n  chart: {repository: {url: 'https://charts.example.com', name: web}}\n")
    done = helmop("convert", "--to", "flux", "-f", "-", env=None, stdin=ours.read_text())
    assert done.returncode == 1 and "error: -:5: HelmRelease team/web: NoFluxEquivalent: spec.chart.repository " \
                                     "has no equivalent in Flux's API: declare a HelmRepository" in done.stderr


OLD_FLUX_REPO = {
    "clusters/prod/apps.yaml": """# written for Flux 2.2
apiVersion: helm.toolkit.fluxcd.io/v2beta1
kind: HelmRelease
metadata: {name: podinfo, namespace: apps}
spec:
  interval: 1h
  chart:
    spec:
      chart: podinfo
      valuesFile: values-prod.yaml
      sourceRef: {kind: HelmRepository, name: podinfo}
  postRenderers:
    - kustomize:
        patchesJson6902: []
---
apiVersion: kustomize.toolkit.fluxcd.io/v1beta2
kind: Kustomization
metadata: {name: apps, namespace: flux-system}
spec:
  interval: 10m
  path: ./apps
  prune: true
  sourceRef: {kind: GitRepository, name: flux-system}
  patchesStrategicMerge: []
""",
    "clusters/prod/notify.yaml": """apiVersion: notification.toolkit.fluxcd.io/v1beta2
kind: Provider
metadata: {name: slack, namespace: flux-system}
spec: {type: slack, channel: general}
---
apiVersion: notification.toolkit.fluxcd.io/v1
kind: Receiver
metadata: {name: github, namespace: flux-system}
spec: {type: github, resources: [{kind: GitRepository, name: flux-system}]}
""",
    "apps/web.yaml": """apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {name: web, namespace: web}
spec:
  interval: 1h
  chartRef: {kind: OCIRepository, name: web}
  futureField: x
  upgrade:
    futureOption: true
---
apiVersion: helm.toolkit.fluxcd.io/v3
kind: HelmRelease
metadata: {name: next, namespace: web}
spec: {}
""",
    "apps/ok.yaml": """apiVersion: source.toolkit.fluxcd.io/v1
kind: OCIRepository
metadata: {name: web, namespace: web}
spec: {interval: 1h, url: "oci://ghcr.io/org/web", ref: {tag: "1.0"}}
""",
}


def test_convert_names_every_refusal_of_a_tree_by_file_and_line(tmp_path: Path) -> None:
    for name, text in OLD_FLUX_REPO.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    done = helmop("convert", "-f", str(tmp_path), "-o", str(tmp_path / "out"))
    assert done.returncode == 1
    assert done.stderr.splitlines() == [f"{kind}: {tmp_path}/{line}" for kind, line in [
        ("error", "apps/web.yaml:7: HelmRelease web/web: UnsupportedField: spec.futureField is not implemented by "
                  "helmop; remove it, or keep this HelmRelease on Flux's controllers"),
        ("error", "apps/web.yaml:9: HelmRelease web/web: UnsupportedField: spec.upgrade.futureOption is not "
                  "implemented by helmop; remove it, or keep this HelmRelease on Flux's controllers"),
        ("error", "apps/web.yaml:11: HelmRelease web/next: UnknownAPIVersion: helm.toolkit.fluxcd.io/v3 is not a "
                  "version of HelmRelease helmop knows (it reads helm.toolkit.fluxcd.io/v2)"),
        ("error", "clusters/prod/apps.yaml:2: HelmRelease apps/podinfo: RemovedAPIVersion: "
                  "helm.toolkit.fluxcd.io/v2beta1 was removed in Flux 2.7: rewrite it as helm.toolkit.fluxcd.io/v2 "
                  "(flux migrate -f does)"),
        ("error", "clusters/prod/apps.yaml:10: HelmRelease apps/podinfo: RemovedField: spec.chart.spec.valuesFile is "
                  "not in helm.toolkit.fluxcd.io/v2: use spec.chart.spec.valuesFiles, a list"),
        ("error", "clusters/prod/apps.yaml:14: HelmRelease apps/podinfo: RemovedField: "
                  "spec.postRenderers[0].kustomize.patchesJson6902 is not in helm.toolkit.fluxcd.io/v2: use "
                  "spec.postRenderers[].kustomize.patches"),
        ("error", "clusters/prod/apps.yaml:16: Kustomization flux-system/apps: RemovedAPIVersion: "
                  "kustomize.toolkit.fluxcd.io/v1beta2 was removed in Flux 2.8: rewrite it as "
                  "kustomize.toolkit.fluxcd.io/v1 (flux migrate -f does)"),
        ("error", "clusters/prod/apps.yaml:24: Kustomization flux-system/apps: RemovedField: "
                  "spec.patchesStrategicMerge is not in kustomize.toolkit.fluxcd.io/v1: use spec.patches (each with "
                  "its patch and an optional target)"),
        ("error", "clusters/prod/notify.yaml:1: Provider flux-system/slack: RemovedAPIVersion: "
                  "notification.toolkit.fluxcd.io/v1beta2 was removed in Flux 2.9: rewrite it as "
                  "notification.toolkit.fluxcd.io/v1beta3 (flux migrate -f does)"),
        ("error", "clusters/prod/notify.yaml:6: Receiver flux-system/github: ValidationFailed: secretRef is required "
                  "when type is not generic-oidc"),
    ]]
    # what was refused is kept as it was; the rest of the tree is converted all the same
    assert (tmp_path / "out/clusters/prod/apps.yaml").read_text() == OLD_FLUX_REPO["clusters/prod/apps.yaml"]
    assert yaml.safe_load((tmp_path / "out/apps/ok.yaml").read_text())["apiVersion"] == "helmop.dev/v1alpha1"


def test_convert_reads_a_tree_as_hostile(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tmp_path / "secret.yaml").write_text("apiVersion: v1\nkind: Secret\nmetadata: {name: outside}\n")
    (tree / "leak.yaml").symlink_to(tmp_path / "secret.yaml")
    (tree / "big.yaml").write_bytes(b"#" * (5 << 20) + b"\n")
    (tree / "forged.yaml").write_text('apiVersion: helm.toolkit.fluxcd.io/v2beta1\nkind: HelmRelease\n'
                                      'metadata: {name: "x\\nerror: forged\\e[2J"}\n')
    done = helmop("convert", "-f", str(tree))
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"error: {tree}/big.yaml: larger than 5 MiB: not read",
        f"error: {tree}/forged.yaml:1: HelmRelease default/x\\x0aerror: forged\\x1b[2J: RemovedAPIVersion: "
        "helm.toolkit.fluxcd.io/v2beta1 was removed in Flux 2.7: rewrite it as helm.toolkit.fluxcd.io/v2 "
        "(flux migrate -f does)",
        f"error: {tree}/leak.yaml: a link to {tmp_path}/secret.yaml, outside {tree}: not read"]
    assert "outside" not in done.stdout
