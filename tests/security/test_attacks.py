"""Each class of attack on the operator's process, files, caches and parsers, with several variants, in
both tenancy modes (see conftest): refused with a specific reason, nothing written outside the fetch's
own folder, no bytes served across credentials, bombs bounded in memory and time, the operator healthy
and serving a good release afterwards."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import uuid
import zlib
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.controllers.conftest import GITREPO, condition, eventually, get
from tests.operations.conftest import HELMOP
from tests.registry import Registry

from .conftest import (
    CANARY,
    GROUP,
    Target,
    Tree,
    chart_archive,
    configsync,
    flux,
    gitrepository,
    helmrelease,
    nothing_named,
    push_tree,
    refused,
    secret_forms,
    settled,
    zero_bomb_archive,
)

pytestmark = pytest.mark.timeout(600)
CHART = b"apiVersion: v2\nname: crafted\nversion: 0.1.0\n"
TEMPLATE = b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: crafted}\ndata: {a: b}\n"


def tiny(target: Target) -> dict[str, Any]:
    return {"repository": {"url": target.charts.url, "name": "tiny", "version": "0.1.0"}}


def good_release_installs(target: Target, ns: str, name: str = "good", **spec: Any) -> dict[str, Any]:
    target.apply(ns, helmrelease(name, tiny(target), **spec))
    obj = eventually(lambda: (o := get(target.kube, ns, "hr", name)) and condition(o).get("status") == "True" and o,
                     timeout=90)
    assert get(target.kube, ns, "cm", name), "the good release's ConfigMap is there"
    return dict(obj)


def crafted_trees(marker: str) -> dict[str, Tree]:
    """Chart folders whose trees git accepts without fsck, each trying to place a file outside."""
    payload = ("100755", b"#!/bin/sh\necho owned > /tmp/" + marker.encode() + b"\n")
    base: list[tuple[bytes, Any]] = [(b"Chart.yaml", CHART), (b"templates", [(b"cm.yaml", TEMPLATE)])]
    return {
        "dotdot": [*base, (b"..", [(b"..", [(marker.encode(), payload)])])],
        "dot": [*base, (b".", [(marker.encode(), payload)])],
        "slash": [*base, (b"../../" + marker.encode(), payload)],
        "absolute": [*base, (b"/tmp/" + marker.encode(), payload)],
        "backslash": [*base, (b"..\\..\\" + marker.encode(), payload)],
        "control": [*base, (marker.encode() + b"\x1b[2J", payload)],
        "symlink-out": [*base, (b"values.yaml", ("120000", b"../../../../../../etc/passwd"))],
        "symlink-absolute": [*base, (b"values.yaml", ("120000", b"/etc/passwd"))],
        "duplicate": [*base, (b"values.yaml", b"a: 1\n"), (b"values.yaml", b"a: 2\n")],
    }


def test_crafted_git_trees_write_nothing_outside(target: Target) -> None:
    marker = f"owned-{uuid.uuid4().hex[:8]}"
    ns = target.namespace("trees")
    for variant, chart in crafted_trees(marker).items():
        repo = target.repo(ns)
        push_tree(repo, [(b"chart", chart)])
        target.apply(ns, gitrepository(variant, repo.url),
                     helmrelease(variant, {"sourceRef": {"name": variant}, "path": "chart"}),
                     configsync(variant, variant, "chart"))
    for variant in crafted_trees(marker):
        for kind in ("hr", "csync"):
            message = refused(target, ns, kind, variant, "InvalidPath")
            assert "InvalidPath" in message or "symlink" in message, (variant, message)
    assert not nothing_named(marker, target.work, *Path("/tmp").glob("helmop-*")), "a crafted entry was written"
    assert not Path("/tmp", marker).exists()
    # helmop's post-renderer is unchanged: a release that needs it installs (helm would be refused otherwise)
    obj = good_release_installs(target, ns, "after-trees", commonMetadata={"labels": {"checked": "yes"}})
    assert get(target.kube, ns, "cm", "after-trees")["metadata"]["labels"]["checked"] == "yes", obj


def test_hostile_chart_archives_are_refused_before_helm(target: Target) -> None:
    ns = target.namespace("archives")
    name = f"arc{uuid.uuid4().hex[:5]}"
    cases = {
        "traversal": chart_archive(f"{name}t", {f"{name}t/templates/../../../x.yaml": TEMPLATE}),
        "absolute": chart_archive(f"{name}a", {"/etc/x.yaml": TEMPLATE}),
        "symlink": chart_archive(f"{name}s", {}, links={f"{name}s/templates/passwd.yaml": "/etc/passwd"}),
    }
    for case, data in cases.items():
        chart = f"{name}{case[0]}"
        target.raw.add(chart, data)
        target.apply(ns, helmrelease(case, {"repository": {"url": target.raw.url, "name": chart, "version": "0.1.0"}}))
    for case in cases:
        assert "InvalidPath" in refused(target, ns, "hr", case, "InvalidPath")


def test_private_charts_are_not_served_without_their_credentials(target: Target) -> None:
    owner, attacker = target.namespace("owner"), target.namespace("attacker")
    url = f"oci://127.0.0.1:{target.registry.port}/charts/tiny"
    chart = {"repository": {"url": url, "name": "tiny", "version": "1.0.0", "insecure": True,
                            "secretRef": {"name": "creds"}}}
    target.kube("kubectl", "-n", owner, "create", "secret", "generic", "creds", "--from-literal=username=robot",
                "--from-literal=password=right")
    target.apply(owner, helmrelease("private", chart, values={"data": {"who": "owner"}}))
    eventually(lambda: condition(get(target.kube, owner, "hr", "private")).get("status") == "True", timeout=90)
    # The same URL and exact version: without credentials, and with another Secret of the attacker's.
    anonymous = {"repository": {k: v for k, v in chart["repository"].items() if k != "secretRef"}}
    target.kube("kubectl", "-n", attacker, "create", "secret", "generic", "creds", "--from-literal=username=",
                "--from-literal=password=")
    target.apply(attacker, helmrelease("anonymous", anonymous), helmrelease("other-secret", chart))
    for name in ("anonymous", "other-secret"):
        assert "access denied" in refused(target, attacker, "hr", name, "RepositoryAuthFailed")
        assert not get(target.kube, attacker, "cm", name)


def test_file_urls_cannot_name_the_cache(target: Target) -> None:
    ns = target.namespace("fileurls")
    seed = target.repo(ns)
    push_tree(seed, [(b"a.yaml", TEMPLATE)])
    allowed = target.allowed / f"ok-{uuid.uuid4().hex[:5]}.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(seed.bare), str(allowed)], check=True)
    target.apply(ns, gitrepository("allowed", f"file://{allowed}"))
    eventually(lambda: condition(get(target.kube, ns, GITREPO, "allowed")).get("status") == "True")
    mirror = next(p for p in (target.cache / "git").glob("*/*") if (p / "HEAD").exists())  # one it just fetched
    link = target.allowed / f"cache-{uuid.uuid4().hex[:5]}"
    link.symlink_to(target.cache)
    cases = {"mirror": f"file://{mirror}", "through-link": f"file://{link}/git", "cache": f"file://{target.cache}",
             "etc": "file:///etc", "outside": f"file://{target.work}", "dotdot": f"file://{target.allowed}/../operator"}
    target.apply(ns, *(gitrepository(name, url) for name, url in cases.items()))
    for name in cases:
        assert "file://" in refused(target, ns, GITREPO, name, "InvalidURL")


@pytest.mark.parametrize("path", [
    "/hooks/{a}/..%2F..%2F{b}%2Fgitrepositories%2Fprivate", "/hooks/{a}/..%2f{b}%2fprivate",
    "/hooks/{a}/%2e%2e%2F{b}%2Fprivate", "/hooks/..%2F{b}/private", "/hooks/{a}/private%2F..%2F..%2F{b}",
    "/hooks/{a}/..%252F{b}%252Fprivate", "/hooks/{a}/.", "/hooks/{a}/..", "/hooks/{a}/own%00", "/hooks/{a}/Own",
    "/hooks/{a}/own%3Fx=1", "/hooks/{a}/own%23frag"])
def test_webhook_paths_name_exactly_one_repository(target: Target, hooks: tuple[str, str], path: str) -> None:
    a, b = hooks
    assert target.hook(f"/hooks/{a}/own") == 202  # the attacker's own repository, with its own token
    assert target.hook(path.format(a=a, b=b)) in (401, 404), path
    private = get(target.kube, b, GITREPO, "private")
    assert "helmop.dev/requestedAt" not in (private["metadata"].get("annotations") or {}), path


@pytest.fixture(scope="module")
def hooks(target: Target) -> tuple[str, str]:
    """(the attacker's namespace with GitRepository "own", the victim's with "private"), once a mode."""
    a, b = target.namespace("hooks-a"), target.namespace("hooks-b")
    repo = target.repo(a)
    push_tree(repo, [(b"a.yaml", TEMPLATE)])
    target.apply(a, gitrepository("own", repo.url))
    target.apply(b, gitrepository("private", repo.url))
    for ns, name in ((a, "own"), (b, "private")):
        eventually(lambda ns=ns, name=name: condition(get(target.kube, ns, GITREPO, name)).get("status") == "True")
    return a, b


def test_chart_dependencies_stay_inside_the_chart(target: Target) -> None:
    ns = target.namespace("deps")
    cases = {
        "etc": b"file:///etc",
        "climb": b"file://../../../../../../etc",
        "sibling": b"file://../other",
    }
    for name, repository in cases.items():
        chart = (CHART + b"dependencies:\n- name: host\n  version: 0.1.0\n  repository: " + repository + b"\n")
        repo = target.repo(ns)
        push_tree(repo, [(b"chart", [(b"Chart.yaml", chart), (b"templates", [(b"cm.yaml", TEMPLATE)])]),
                         (b"other", [(b"Chart.yaml", CHART)])])
        target.apply(ns, gitrepository(name, repo.url), helmrelease(name, {"sourceRef": {"name": name},
                                                                          "path": "chart"}))
    for name, repository in cases.items():
        message = refused(target, ns, "hr", name, "InvalidChart")
        assert repository.decode() in message
        for host_path in (str(target.work), "/tmp/", str(target.cache)):
            assert host_path not in message


def test_redaction_of_transformed_secrets_and_lookups(target: Target) -> None:
    ns, victim = target.namespace("leak"), target.namespace("victim")
    password = f"Pw-{uuid.uuid4().hex[:12]}"
    stolen = f"Db-{uuid.uuid4().hex[:12]}"
    target.kube("kubectl", "-n", victim, "create", "secret", "generic", "db", f"--from-literal=password={stolen}")
    target.kube("kubectl", "-n", ns, "create", "secret", "generic", "values",
                f"--from-literal=values.yaml=password: {password}\n")
    leaky = f"leaky{uuid.uuid4().hex[:5]}"
    target.charts.publish(leaky, "0.1.0", files={
        "templates/cm.yaml": '{{ fail (printf "x %x %s %s %s %s %s" .Values.password (.Values.password | b32enc) '
                             '(.Values.password | urlquery) (.Values.password | b64enc | wrap 5) '
                             '(trunc 7 .Values.password) (printf "user:%s" .Values.password | b64enc)) }}\n'})
    looker = f"looker{uuid.uuid4().hex[:5]}"
    target.charts.publish(looker, "0.1.0", files={
        "templates/cm.yaml": f'{{{{ fail (toJson (lookup "v1" "Secret" "{victim}" "db")) }}}}\n'})
    target.apply(ns, helmrelease("leaky", {"repository": {"url": target.charts.url, "name": leaky, "version": "0.1.0"}},
                                 valuesFrom=[{"kind": "Secret", "name": "values"}]),
                 helmrelease("looker", {"repository": {"url": target.charts.url, "name": looker, "version": "0.1.0"}}))
    leaked = settled(target, ns, "hr", "leaky")
    settled(target, ns, "hr", "looker")
    texts = {"status": json.dumps(leaked["status"]), "events": json.dumps(get(target.kube, ns, "events")),
             "log": target.log()}
    assert "***" in texts["status"]
    forms = [*secret_forms(password), password[:7], base64.b64encode(f"user:{password}".encode()).decode()[8:20]]
    for where, text in texts.items():
        for form in forms:
            assert form.lower() not in text.lower(), (where, form)
    for form in secret_forms(stolen):  # what a chart read with `lookup` never reaches the operator's log
        assert form not in texts["log"], form


def test_a_configsync_without_service_account_writes_no_rbac(target: Target) -> None:
    ns = target.namespace("rbac")
    repo = target.repo(ns)
    role = (b"apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: everything}\n"
            b"rules: [{apiGroups: ['*'], resources: ['*'], verbs: ['*']}]\n")
    binding = (b"apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: grab}\n"
               b"roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}\n"
               b"subjects: [{kind: ServiceAccount, name: default, namespace: " + ns.encode() + b"}]\n")
    push_tree(repo, [(b"apps", [(b"role.yaml", role), (b"binding.yaml", binding), (b"cm.yaml", TEMPLATE)])])
    target.apply(ns, gitrepository("config", repo.url), configsync("apps", "config", "apps"))
    obj = settled(target, ns, "csync", "apps")
    if target.mode == "default":  # the operator's rights: refused by helmop itself
        assert "RoleBinding/" in refused(target, ns, "csync", "apps", "RBACObjectRefused")
    else:  # acting as helmop-tenant: Kubernetes' escalation checks refuse
        assert condition(obj)["status"] == "False", obj
    assert not get(target.kube, ns, "role", "everything") and not get(target.kube, ns, "rolebinding", "grab")


def helmop_cli(target: Target, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": str(target.sandbox.kubeconfig)}
    return subprocess.run([str(HELMOP), *args], capture_output=True, text=True, env=env, timeout=120)


def test_check_tenancy_reports_service_accounts_that_can_climb(target: Target) -> None:
    ns = target.namespace("check")
    if target.mode == "lockdown":
        done = helmop_cli(target, "check", "tenancy", "-n", ns, "--default-service-account", "helmop-tenant")
        assert done.returncode == 0 and "confined" in done.stdout, done
        target.kube("kubectl", "-n", ns, "create", "role", "climber", "--verb=escalate,bind",
                    "--resource=roles.rbac.authorization.k8s.io")
        target.kube("kubectl", "-n", ns, "create", "rolebinding", "climber", "--role=climber",
                    f"--serviceaccount={ns}:helmop-tenant")
        done = helmop_cli(target, "check", "tenancy", "-n", ns, "--default-service-account", "helmop-tenant")
        assert done.returncode == 1 and "escalate roles" in done.stdout and "bind roles" in done.stdout, done
    else:
        target.apply(ns, helmrelease("plain", tiny(target)))
        done = helmop_cli(target, "check", "tenancy", "-n", ns)
        assert done.returncode == 1 and "HelmRelease/plain" in done.stdout and "operator's own rights" in done.stdout


# --- bombs ------------------------------------------------------------------------------------------

def alias_bomb(levels: int = 9) -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def gzip_bomb(chunk: bytes, times: int) -> bytes:
    """``chunk`` repeated ``times`` times, gzipped, made without holding the whole in memory."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = chunk * (1 << 20)
    parts = [packer.compress(block) for _ in range(times >> 20)]
    return b"".join(parts) + packer.flush()


# Polls /healthz from a process of its own (this one runs the sandbox: its threads would delay the polls)
# until its standard input closes, then prints the slowest answer and the number of failed ones.
POLLER = r"""
import sys, threading, time, urllib.request
url, slowest, failed, done = sys.argv[1], 0.0, 0, threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
while not done.is_set():
    started = time.monotonic()
    try:
        failed += urllib.request.urlopen(url, timeout=5).status != 200
    except OSError:
        failed += 1
    slowest = max(slowest, time.monotonic() - started)
    time.sleep(0.02)
print(slowest, failed)
"""


class Watch:
    """/healthz polled while bombs are processed: the slowest answer, and how many failed."""

    def __init__(self, target: Target) -> None:
        assert target.operator is not None
        self.proc = subprocess.Popen([sys.executable, "-c", POLLER, f"{target.operator.url}/healthz"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.slowest, self.failures = 0.0, 0

    def close(self) -> None:
        out, _ = self.proc.communicate("", timeout=30)
        slowest, failures = out.split()
        self.slowest, self.failures = float(slowest), int(failures)


@pytest.mark.alone  # its bound is on /healthz latency: measured with nothing else running
def test_bombs_are_bounded_in_memory_and_time(target: Target, tmp_path: Path) -> None:
    assert target.operator is not None
    ns = target.namespace("bombs")
    good_release_installs(target, ns, "warm-up")  # the operator's own working set, before any bomb
    baseline = target.operator.peak_rss_mib()
    big = 64 << 20
    git_bomb = target.repo(ns)
    zeros = b"\0" * big
    push_tree(git_bomb, [(b"chart", [(b"Chart.yaml", CHART), (b"templates", [(b"cm.yaml", TEMPLATE)]),
                                     (b"big.bin", zeros)]),
                         (b"apps", [(b"big.yaml", zeros)])])
    del zeros
    archive = f"bomb{uuid.uuid4().hex[:5]}"
    target.raw.add(archive, zero_bomb_archive(archive, 256 << 20))
    registry = Registry({"1.0.0": zero_bomb_archive("layer", 256 << 20)})
    record = base64.b64encode(gzip_bomb(b"0,", 32 << 20)).decode()  # 64 MiB of JSON numbers, twice the cap
    target.kube("kubectl", "-n", ns, "create", "secret", "generic", "robot", "--from-literal=username=robot",
                "--from-literal=password=pw")
    target.kube("kubectl", "-n", ns, "create", "configmap", "aliases", f"--from-literal=values.yaml={alias_bomb()}")
    target.kube("kubectl", "-n", ns, "create", "configmap", "deep",
                "--from-literal=values.yaml=" + "a: " + "[" * 20000 + "]" * 20000)
    many = {f"k{i}": str(i) for i in range(3000)}
    # Not a bomb: the largest values a ConfigMap holds, as dense YAML (seconds of loading on the event loop)
    heavy = "\n".join(f"k{i}:\n  a: [1, 2, {{b: c}}]\n  d: {{e: f, g: [h, i]}}" for i in range(14000)) + "\n"
    target.kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "heavy-values"}, "data": {"values.yaml": heavy}}))
    watch = Watch(target)
    try:
        target.kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=json.dumps({
            "apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
            "metadata": {"name": "sh.helm.release.v1.forged.v1",
                         "labels": {"owner": "helm", "name": "forged", "status": "deployed", "version": "1"}},
            "data": {"release": base64.b64encode(record.encode()).decode()}}))
        repo_bomb = {"sourceRef": {"name": "bombs"}, "path": "chart"}
        slow = "self.data.map(a, self.data.map(b, a + b)).size() > 0"
        target.apply(ns, gitrepository("bombs", git_bomb.url))
        # One at a time, each to its outcome: what is measured is what each bomb costs the operator.
        bombs = [
            (helmrelease("aliases", tiny(target), valuesFrom=[{"kind": "ConfigMap", "name": "aliases"}]),
             "ValuesInvalid", "excessive aliasing"),
            (helmrelease("deep", tiny(target), valuesFrom=[{"kind": "ConfigMap", "name": "deep"}]),
             "ValuesInvalid", "nested too deeply"),
            (helmrelease("forged", tiny(target), test={"enable": True}), "ReleaseRecordInvalid",
             "refused as a decompression bomb"),
            (helmrelease("git-blob", repo_bomb), "FileTooLarge", "chart/big.bin"),
            (configsync("git-blob", "bombs", "apps"), "FileTooLarge", "apps/big.yaml"),
            (helmrelease("archive", {"repository": {"url": target.raw.url, "name": archive, "version": "0.1.0"}}),
             "ChartTooLarge", "larger than 5 MiB"),
            (helmrelease("layer", {"repository": {"url": f"oci://127.0.0.1:{registry.port}/charts/layer",
                                                  "name": "layer", "version": "1.0.0", "insecure": True,
                                                  "secretRef": {"name": "robot"}}}),
             "ChartTooLarge", "larger than 5 MiB"),
            (helmrelease("cel-static", tiny(target), healthCheckExprs=[{
                "apiVersion": "v1", "kind": "ConfigMap",
                "current": "self.data.map(a, self.data.map(b, self.data.map(c, a + b + c))).size() > 0"}]),
             "InvalidSpec", "cost budget")]
        for doc, reason, fragment in bombs:
            target.apply(ns, doc)
            kind = "csync" if doc["kind"] == "ConfigSync" else "hr"
            assert fragment in refused(target, ns, kind, doc["metadata"]["name"], reason), doc["metadata"]["name"]
        target.apply(ns, helmrelease("heavy", tiny(target), valuesFrom=[{"kind": "ConfigMap", "name": "heavy-values"}]))
        heavy_outcome = condition(settled(target, ns, "hr", "heavy", timeout=120))
        assert heavy_outcome["status"] == "True", heavy_outcome
        target.apply(ns, helmrelease("cel-runtime", tiny(target), values={"data": many}, timeout="20s",
                                     healthCheckExprs=[{"apiVersion": "v1", "kind": "ConfigMap", "current": slow}]))
        runtime = settled(target, ns, "hr", "cel-runtime", timeout=120)
        message = condition(runtime)["message"]
        assert "did not finish within" in message or "MiB it may use" in message, runtime["status"]
    finally:
        watch.close()
        registry.loop.call_soon_threadsafe(registry.loop.stop)
    growth = target.operator.peak_rss_mib() - baseline
    assert growth < 100, f"peak RSS grew {growth:.0f} MiB while the bombs were processed"
    # The issue's bound is 100 ms for a bomb's own cost; on this 2-core machine, with the sandbox in the test
    # process, a good release's install alone shows /healthz answers of 80-120 ms, and on a slow day the whole run's
    # slowest answer was 0.17-0.25 s alone and 0.27 s after the parallel tier, so the assertion leaves room for that
    # noise. What it catches: a parse or inflation on the loop (0.4-1.7 s before the bounds, 9-90 s in the report
    # that asked for them).
    assert watch.failures == 0 and watch.slowest < 0.35, (f"/healthz: {watch.failures} failed, "
                                                          f"slowest {watch.slowest:.3f}s")
    assert target.operator.proc.poll() is None
    good_release_installs(target, ns, "after-bombs")


def test_helm_runs_without_the_operators_environment_and_with_a_frozen_post_renderer(target: Target) -> None:
    """Helm (and what it runs: the post-renderer) sees a minimal environment, not the operator's; helmop's
    post-renderer lives in a read-only folder outside every cache."""
    ns = target.namespace("environment")
    good_release_installs(target, ns, "env-check", commonMetadata={"labels": {"seen": "yes"}})
    environments = (target.work / "helm-env.log").read_text().split("----\n")
    assert environments and all(CANARY not in env for env in environments)
    homes = {line.split("=", 1)[1] for env in environments for line in env.splitlines() if line.startswith("HOME=")}
    assert homes and all(not home.startswith(str(Path.home())) for home in homes), homes
    plugins = {line.split("=", 1)[1] for env in environments for line in env.splitlines()
               if line.startswith("HELM_PLUGINS=")}
    assert len(plugins) == 1, plugins
    folder = Path(plugins.pop())
    assert not folder.resolve().is_relative_to(target.cache.resolve())
    for path in (folder.parent, folder, *folder.rglob("*")):
        assert not path.stat().st_mode & 0o222, f"{path} is writable"


def kustomize_attacks(marker: str) -> dict[str, tuple[dict[str, bytes], str]]:
    """Config-repository folders whose kustomize build would read outside the repository, fetch something, or run
    a program (which would write /tmp/<marker>): the reason each gets."""
    script = f"#!/bin/sh\necho owned > /tmp/{marker}\n".encode()
    function = (b"apiVersion: x/v1\nkind: Run\nmetadata:\n  name: f\n  annotations:\n"
                b"    config.kubernetes.io/function: |\n      exec: {path: ./run.sh}\n")
    cm = b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: fine}\n"
    return {
        "remote-http": ({"kustomization.yaml": b"resources: [https://example.com/all.yaml]\n"}, "RemoteBaseRefused"),
        "remote-git": ({"kustomization.yaml": b"resources: [github.com/example/repo//base?ref=v1]\n"},
                       "RemoteBaseRefused"),
        "dotdot": ({"kustomization.yaml": b"resources: [../../../../etc]\n"}, "PathOutsideRepository"),
        "generator-file": ({"kustomization.yaml": b"configMapGenerator:\n- {name: x, files: [/etc/passwd]}\n"},
                           "PathOutsideRepository"),
        # kustomize reads keys in any case, and remote bases in many spellings
        "generator-key-case": ({"kustomization.yaml": b"ConfigMapGenerator:\n- {Name: x, FILES: [t=/etc/hostname]}\n"},
                               "PathOutsideRepository"),
        "remote-scp": ({"kustomization.yaml": b"Resources: ['git@github.com:example/repo.git//base']\n"},
                       "RemoteBaseRefused"),
        "remote-ssh": ({"kustomization.yaml": b"resources: ['ssh://git@127.0.0.1:22/repo//base?ref=main']\n"},
                       "RemoteBaseRefused"),
        "exec-function": ({"kustomization.yaml": b"resources: [cm.yaml]\ntransformers: [fn.yaml]\n", "cm.yaml": cm,
                           "fn.yaml": function, "run.sh": script}, "FunctionRefused"),
        "container-function": ({"kustomization.yaml": b"generators: [fn.yaml]\n",
                                "fn.yaml": function.replace(b"exec: {path: ./run.sh}", b"container: {image: x}")},
                               "FunctionRefused"),
        "helm-inflation": ({"kustomization.yaml": b"helmCharts:\n- {name: x, repo: https://charts.example.com}\n"},
                           "HelmChartRefused"),
    }


def test_kustomize_builds_reach_nothing_outside_and_run_nothing(target: Target) -> None:
    marker = f"owned-{uuid.uuid4().hex[:8]}"
    ns = target.namespace("kustomize")
    repo = target.repo(ns)
    attacks = kustomize_attacks(marker)
    # (git finds a name in a tree by its sorted order: these trees are ordinary ones)
    push_tree(repo, [(variant.encode(), [(name.encode(), data) for name, data in sorted(files.items())])
                     for variant, (files, _) in sorted(attacks.items())])
    target.apply(ns, gitrepository("config", repo.url),
                 *(configsync(variant, "config", variant) for variant in attacks))
    for variant, (_, reason) in attacks.items():
        message = refused(target, ns, "csync", variant, reason)
        assert f"{variant}/kustomization.yaml" in message, (variant, message)
    assert not Path("/tmp", marker).exists(), "a program the repository named was run"
    assert not get(target.kube, ns, "cm", "fine")  # nothing applied
    good_release_installs(target, ns, "after-kustomize")


FLUX_HR, FLUX_KS = "helmreleases.helm.toolkit.fluxcd.io", "kustomizations.kustomize.toolkit.fluxcd.io"


def test_flux_kinds_are_held_to_the_same_lockdown(target: Target) -> None:
    """Flux's kinds act with the operator's rights only where Flux's do (no lockdown flags): with
    --default-service-account and --no-cross-namespace-refs they are confined as helmop's own; in either mode
    they never take a release another HelmRelease owns, and a field helmop does not implement stops them."""
    victim, attacker = target.namespace("flux-victim"), target.namespace("flux-attacker")
    good_release_installs(target, victim, "owned")
    target.apply(victim, flux("HelmRepository", "shared", url=target.charts.url),
                 flux("OCIRepository", "packaged", url=f"oci://127.0.0.1:{target.registry.port}/charts/tiny",
                      insecure=True, ref={"tag": "1.0.0"}))
    target.apply(attacker, flux("HelmRelease", "takeover", targetNamespace=victim, releaseName="owned",
                                chart={"spec": {"chart": "tiny", "version": "0.1.0",
                                                "sourceRef": {"kind": "HelmRepository", "name": "shared",
                                                              "namespace": victim}}},
                                values={"data": {"who": "attacker"}}),
                 flux("HelmRelease", "borrowed-chart", chartRef={"kind": "OCIRepository", "name": "packaged",
                                                                 "namespace": victim}),
                 flux("HelmRelease", "elsewhere", futureField={"secretRef": {"name": "cluster"}},
                      chart={"spec": {"chart": "tiny", "sourceRef": {"kind": "HelmRepository", "name": "x"}}}))
    if target.mode == "lockdown":
        for name, field in (("takeover", "spec.chart.spec.sourceRef"), ("borrowed-chart", "spec.chartRef")):
            assert field in refused(target, attacker, FLUX_HR, name, "CrossNamespaceRef")
    else:
        refused(target, attacker, FLUX_HR, "takeover", "ReleaseOwnedElsewhere")
    assert "spec.futureField" in refused(target, attacker, FLUX_HR, "elsewhere", "UnsupportedField")
    assert get(target.kube, victim, "cm", "owned")["data"] == {"greeting": "hello"}  # the victim's, untouched

    # a Kustomization without a ServiceAccount: Flux's rights without lockdown, the tenant's with it
    repo = target.repo(attacker)
    repo.commit({"escalate.yaml": yaml.safe_dump({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": f"{attacker}-admin"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": attacker}]})})
    target.apply(attacker, flux("GitRepository", "fleet", url=repo.url, ref={"branch": "main"}),
                 flux("Kustomization", "climb", path="./", prune=True,
                      sourceRef={"kind": "GitRepository", "name": "fleet"}))
    if target.mode == "lockdown":
        said = settled(target, attacker, FLUX_KS, "climb")
        assert condition(said)["reason"] == "ApplyFailed" and "forbidden" in condition(said)["message"].lower()
        assert not get(target.kube, "", "clusterrolebinding", f"{attacker}-admin")
    else:  # Flux's semantics, as documented: the operator's rights (the lockdown flags are the protection)
        eventually(lambda: get(target.kube, "", "clusterrolebinding", f"{attacker}-admin"), timeout=60)


def test_notifications_reach_neither_other_tenants_events_nor_the_clusters_network(target: Target) -> None:
    """An Alert that subscribes to another namespace's events is refused under lockdown (Flux's
    --no-cross-namespace-refs); a Provider aimed at a cloud metadata endpoint or the API server's loopback is refused
    in both modes (this operator allows no range to notifications)."""
    ns = target.namespace("notify")
    target.apply(ns, {"apiVersion": GROUP, "kind": "Provider", "metadata": {"name": "metadata"},
                      "spec": {"type": "generic", "address": "http://169.254.169.254/latest/meta-data/"}},
                 {"apiVersion": GROUP, "kind": "Provider", "metadata": {"name": "api"},
                  "spec": {"type": "generic", "address": "https://[::ffff:127.0.0.1]:6443/api"}},
                 {"apiVersion": GROUP, "kind": "Alert", "metadata": {"name": "spy"},
                  "spec": {"providerRef": {"name": "metadata"},
                           "eventSources": [{"kind": "HelmRelease", "name": "*", "namespace": "kube-system"}]}})
    for name in ("metadata", "api"):
        assert "--allow-notify-cidr" in refused(target, ns, "providers.helmop.dev", name, "AddressRefused")
    if target.mode == "lockdown":
        assert "kube-system" in refused(target, ns, "alerts.helmop.dev", "spy", "CrossNamespaceRef")
    else:  # Flux's semantics without the flag: another namespace may be named
        assert condition(settled(target, ns, "alerts.helmop.dev", "spy"))["status"] == "True"


def test_no_request_a_tenant_points_reaches_an_internal_address_in_any_spelling(target: Target) -> None:
    """The cloud metadata endpoint written as IPv6 carriers of it, in unusual IPv4 spellings and as a name with a
    final dot: refused, with reason AddressRefused, for notifications and for every source kind."""
    ns = target.namespace("addresses")
    providers = {"nat64": "http://[64:ff9b::a9fe:a9fe]/latest", "sixtofour": "https://[2002:a9fe:a9fe::1]/latest",
                 "decimal": "http://2852039166/latest", "dotted": "http://metadata.google.internal./computeMetadata",
                 "mapped": "http://[::ffff:a9fe:a9fe]/latest"}
    target.apply(ns, *({"apiVersion": GROUP, "kind": "Provider", "metadata": {"name": name},
                        "spec": {"type": "generic", "address": address}} for name, address in providers.items()))
    target.apply(ns, gitrepository("metadata", "https://[64:ff9b::a9fe:a9fe]/team/config.git"),
                 helmrelease("metadata", {"repository": {"url": "http://[::ffff:169.254.169.254]/charts",
                                                         "name": "app", "version": "1.0.0"}}))
    for name in providers:
        refused(target, ns, "providers.helmop.dev", name, "AddressRefused")
    assert "169.254.169.254" in refused(target, ns, "gitrepositories.helmop.dev", "metadata", "AddressRefused")
    assert "169.254.169.254" in refused(target, ns, "hr", "metadata", "AddressRefused")


def _kubeconfig_of(target: Target, token: str, **user: Any) -> str:
    """A kubeconfig for the management cluster's own API, with ``token`` (or ``user``'s fields instead)."""
    config = yaml.safe_load(target.sandbox.kubeconfig.read_text())
    config["users"][0]["user"] = user or {"token": token}
    return yaml.safe_dump(config)


def test_a_tenants_kubeconfig_grants_only_what_its_identity_holds(target: Target, tmp_path: Path) -> None:
    """spec.kubeConfig pointed at the management cluster's own API with a tenant's token acts as that token and
    nothing more (lockdown's default ServiceAccount is not added on top); kubeconfigs that would run a program,
    read the operator's files or skip TLS are refused before anything connects."""
    ns = target.namespace("remote")
    target.kube("kubectl", "-n", ns, "create", "serviceaccount", "writer")
    target.kube("kubectl", "-n", ns, "create", "role", "writer", "--verb=*", "--resource=configmaps,secrets")
    target.kube("kubectl", "-n", ns, "create", "rolebinding", "writer", "--role=writer",
                f"--serviceaccount={ns}:writer")
    token = target.kube("kubectl", "-n", ns, "create", "token", "writer").stdout.strip()
    marker = tmp_path / f"ran-{uuid.uuid4().hex[:6]}"
    configs = {
        "own": _kubeconfig_of(target, token),
        "exec": _kubeconfig_of(target, "", exec={"apiVersion": "client.authentication.k8s.io/v1", "command": "sh",
                                                 "args": ["-c", f"touch {marker}; echo '{{}}'"]}),
        "files": _kubeconfig_of(target, "", tokenFile="/var/run/secrets/kubernetes.io/serviceaccount/token"),
        "operator": _kubeconfig_of(target, "", **{"client-certificate": str(target.sandbox.kubeconfig)}),
    }
    for name, text in configs.items():
        target.kube("kubectl", "-n", ns, "create", "secret", "generic", name, f"--from-literal=value={text}")
    remote = {"kubeConfig": {"secretRef": {"name": "own"}}}
    target.apply(ns, helmrelease("own", tiny(target), **remote),
                 helmrelease("climb", tiny(target), targetNamespace="kube-system", **remote),
                 *(helmrelease(name, tiny(target), kubeConfig={"secretRef": {"name": name}})
                   for name in ("exec", "files", "operator")))
    for name in ("exec", "files", "operator"):
        assert f"Secret {ns}/{name}" in refused(target, ns, "hr", name, "InvalidKubeConfig")
    assert not marker.exists(), "the tenant's exec plugin never ran"
    own = settled(target, ns, "hr", "own")
    assert condition(own)["status"] == "True", own["status"]
    writes = {who for who, attrs in target.sandbox.audit if attrs.namespace == ns and attrs.resource == "configmaps"
              and attrs.verb in ("create", "patch", "update")}
    assert writes == {f"system:serviceaccount:{ns}:writer"}, writes  # the kubeconfig's identity, no other
    climb = settled(target, ns, "hr", "climb")
    assert condition(climb)["status"] == "False" and "forbidden" in condition(climb)["message"].lower(), climb
    assert not get(target.kube, "kube-system", "cm", "climb")
