"""What can be checked of the image and the logs without a Docker engine."""

from __future__ import annotations

import json
import logging
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path
from typing import Any

from helmop.cli.logsetup import JsonFormatter
from helmop.cli.main import parser

ROOT = Path(__file__).resolve().parent.parent


def _instructions() -> list[tuple[str, str]]:
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    return [(m.group(1).upper(), m.group(2).strip()) for m in re.finditer(r"^\s*([A-Za-z]+)\s+(.*)$", text, re.M)
            if not m.group(0).lstrip().startswith("#")]


def test_image_runs_as_non_root_and_starts_the_operator() -> None:
    final = _instructions()
    final = final[max(i for i, (op, _) in enumerate(final) if op == "FROM"):]  # the last stage
    users = [arg for op, arg in final if op == "USER"]
    assert users and users[-1].split(":")[0] not in ("0", "root")
    entry = json.loads(next(arg for op, arg in final if op == "ENTRYPOINT"))
    assert entry[0] == "helmop" and entry[1] == "run"
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["helmop"] == "helmop.cli:main"
    cmd = json.loads(next(arg for op, arg in final if op == "CMD"))
    parser().parse_args(entry[1:] + cmd)  # the default arguments are valid ones
    env = " ".join(arg for op, arg in final if op == "ENV")
    assert "XDG_CACHE_HOME=/var/cache" in env and "HELMOP_HELM=" in env  # caches off the root filesystem


def test_image_carries_what_the_operator_uses_and_no_more() -> None:
    steps = _instructions()
    assert all("--platform=linux/amd64" in arg for op, arg in steps if op == "FROM")  # the helm binary is x86-64
    runs = " ".join(arg for op, arg in steps if op == "RUN")
    assert "openssh-client" in runs  # ssh:// GitRepositories
    assert "install-tools v35" in runs  # helm 4 only: no helm 3 download
    copies = " ".join(arg for op, arg in steps if op == "COPY")
    assert ".tools/bin/kubectl /usr/local/bin/" in copies and "HELMOP_KUBECTL=/usr/local/bin/kubectl" in " ".join(
        arg for op, arg in steps if op == "ENV")  # kustomize builds of config repositories
    # The cache volume belongs to the runtime user (a volume created from the image keeps the owner).
    user = next(arg for op, arg in reversed(steps) if op == "USER").split(":")[0]
    assert f"-o {user} -g {user}" in runs and "/var/cache/helmop" in runs


def test_json_logs_carry_the_object_and_nothing_else() -> None:
    # Through the real logging call path, as the Event recorder logs (a clash with LogRecord's own
    # attributes would raise here).
    logging.getLogger("probe").info("x", extra={"k8s_kind": "HelmRelease", "k8s_namespace": "a", "k8s_name": "b"})
    record = logging.LogRecord("helmop.infra.events", logging.WARNING, __file__, 1, "%s/%s %s: %s",
                               ("shop", "web", "RenderFailed", "bad password ***"), None)
    record.k8s_kind, record.k8s_namespace, record.k8s_name = "HelmRelease", "shop", "web"
    line = json.loads(JsonFormatter().format(record))
    assert line["kind"] == "HelmRelease" and line["namespace"] == "shop" and line["name"] == "web"
    assert line["level"] == "WARNING" and line["message"] == "shop/web RenderFailed: bad password ***"


def test_the_operator_wheel_holds_the_operator_and_not_the_sandbox(tmp_path: Path) -> None:
    # Built from a copy (tests never write into the source tree) by the same backend pip uses.
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source)
    shutil.copytree(ROOT / "helmop", source / "helmop", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet",
                    "-w", str(tmp_path / "dist"), str(source)], check=True, capture_output=True, timeout=300)
    (wheel,) = (tmp_path / "dist").glob("helmop-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "helmop/controllers/operator.py" in names and "helmop/api/crds/helmreleases.helmop.dev.yaml" in names
    assert not [n for n in names if "sandbox" in n.split("/")[0] or "/sandbox/" in n], names
    requires = [line.split(":", 1)[1].strip() for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    installed = [r for r in requires if "extra ==" not in r]  # what `pip install helmop` brings
    # the sandbox's own dependencies are not the operator's (cryptography is: SOPS and signatures; croniter is:
    # deployment windows)
    assert not [r for r in installed if r.startswith(("kubernetes", "kubernetes-validate"))], installed
    assert [r for r in installed if r.startswith("croniter")], installed


def test_the_chart_installs_the_roles_the_operator_installs() -> None:
    """helmop's kinds in admin/edit/view: the chart's ClusterRoles are the ones `--install-crds` applies."""
    import yaml

    from helmop.api import roles
    from tests.tools import tool

    rendered = subprocess.run([tool("helm"), "template", "x", str(ROOT / "deploy" / "helmop")], check=True,
                              capture_output=True, text=True, timeout=60).stdout
    charted = [d for d in yaml.safe_load_all(rendered)
               if d and d["kind"] == "ClusterRole" and d["metadata"]["name"] in ("helmop-edit", "helmop-view")]
    assert charted == roles.definitions()


def test_the_charts_web_ui_runs_as_a_viewer_not_as_the_operator() -> None:
    """ui.enabled: its own ServiceAccount and ClusterRole (tokens reviewed, viewers impersonated, helmop's kinds,
    Flux's with fluxAPI.enabled, and Events watched; nothing read or written as itself), a Service and a
    NetworkPolicy to its port only, and arguments helmop's own parser takes. Off by default."""
    import yaml

    from helmop.api.flux.crds import PAIRS
    from helmop.api.kinds import BUILTIN
    from helmop.cli.main import parser
    from tests.tools import tool

    def render(*settings: str) -> list[dict[str, Any]]:
        out = subprocess.run([tool("helm"), "template", "x", str(ROOT / "deploy" / "helmop"), *settings], check=True,
                             capture_output=True, text=True, timeout=60).stdout
        return [d for d in yaml.safe_load_all(out) if d]

    assert not [d for d in render() if d["metadata"]["name"] == "x-helmop-ui"]
    made = {d["kind"]: d for d in render("--set", "ui.enabled=true", "--set", "ui.actions=true")
            if d["metadata"]["name"] == "x-helmop-ui"}
    assert set(made) == {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Deployment", "Service",
                         "NetworkPolicy"}
    verbs = {verb for rule in made["ClusterRole"]["rules"] for verb in rule["verbs"]}
    assert verbs == {"create", "impersonate", "list", "watch"}  # no get, patch or delete of its own
    watched = {(group, r) for rule in made["ClusterRole"]["rules"] if "watch" in rule["verbs"]
               for group in rule["apiGroups"] for r in rule["resources"]}
    assert watched == {(k.group, k.plural) for k in BUILTIN} | {("", "events")}
    role = next(d for d in render("--set", "ui.enabled=true", "--set", "fluxAPI.enabled=true")
                if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "x-helmop-ui")
    assert {(group, r) for rule in role["rules"] if "watch" in rule["verbs"] for group in rule["apiGroups"]
            for r in rule["resources"]} == watched | {(flux.group, flux.plural) for _, flux in PAIRS}
    assert {verb for rule in role["rules"] for verb in rule["verbs"]} == verbs
    pod = made["Deployment"]["spec"]["template"]
    assert pod["spec"]["serviceAccountName"] == "x-helmop-ui" and pod["metadata"]["labels"]["app.kubernetes.io/name"] \
        == "helmop-ui"  # not the operator's pods (their selector is app.kubernetes.io/name=helmop)
    container = pod["spec"]["containers"][0]
    args = parser().parse_args([*container["args"]])
    assert container["command"] == ["helmop"] and (args.verb, args.auth, args.actions) == ("ui", "token", True)
    assert made["NetworkPolicy"]["spec"]["ingress"] == [{"ports": [{"port": "http"}]}]


def test_the_charts_operator_arguments_are_ones_helmop_accepts() -> None:
    """Every way the chart starts the operator (leader election, hash shards) parses with helmop's own parser."""
    import yaml

    from helmop.cli.main import parser
    from tests.tools import tool

    cases = [([], (None, True)), (["--set", "sharding=auto"], ("auto", False)),
             (["--set", "leaderElection.enabled=false"], (None, False))]
    for settings, (shards, leader_elect) in cases:
        rendered = subprocess.run([tool("helm"), "template", "x", str(ROOT / "deploy" / "helmop"), *settings],
                                  check=True, capture_output=True, text=True, timeout=60).stdout
        deployment = next(d for d in yaml.safe_load_all(rendered) if d and d["kind"] == "Deployment")
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        args = parser().parse_args(["run", *container["args"]])
        assert (args.shards, args.leader_elect) == (shards, leader_elect), settings
    mirrored = subprocess.run([tool("helm"), "template", "x", str(ROOT / "deploy" / "helmop"), "--set-json",
                               'chartMirrors=[{"from": "https://charts.example.com", "to": "https://mirror.local/c"}]',
                               "--set-json", 'gitMirrors=[{"from": "https://github.com/", "to": "https://git.local/"}]'],
                              check=True, capture_output=True, text=True, timeout=60).stdout
    deployment = next(d for d in yaml.safe_load_all(mirrored) if d and d["kind"] == "Deployment")
    args = parser().parse_args(["run", *deployment["spec"]["template"]["spec"]["containers"][0]["args"]])
    assert args.chart_mirror == ["https://charts.example.com=https://mirror.local/c"]
    assert args.git_mirror == ["https://github.com/=https://git.local/"]
