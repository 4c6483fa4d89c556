"""The docs: a site that builds, a short README, references generated from the schemas, the parser and the
metrics registry (documentation that cannot drift), every command block run by a test, and no page that
repeats another."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from helmop.api import crds, reference, validation
from helmop.cli import reference as cli_reference
from helmop.infra.metrics import CacheCounts, Metrics
from tests import test_docs_journey
from tests.docs import DOCS, block, blocks, files, page_name, pages
from tests.tools import ROOT, TOOLS, Run


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    """mkdocs with the Material theme, as `mkdocs build --strict`: a broken link, a missing anchor or a page
    left out of the navigation fails it."""
    done = subprocess.run([str(Path(sys.executable).with_name("mkdocs")), "build", "--strict", "-d", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "guides" / "helmrelease" / "index.html").exists()
    assert (tmp_path / "img" / "helmreleases-helm.png").exists()


def test_the_readme_is_a_front_door() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.encode()) <= 15 * 1024, len(text.encode())
    assert "scripts/demo" in text.split("\n## ")[0] and "scripts/test" in text.split("\n## ")[0]
    linked = set(re.findall(r"\]\((docs/[^)#]+)", text))
    assert {f"docs/{p}" for p in ("getting-started.md", "guides/helmrelease.md", "reference/crds.md",
                                  "operations/install.md", "architecture.md")} <= linked
    assert all((ROOT / link).exists() for link in linked), linked


def _paragraphs(text: str) -> set[str]:
    """The prose paragraphs of a page of 200 characters or more (code blocks and tables left out)."""
    text = re.sub(r"^ *```.*?^ *```", "", text, flags=re.S | re.M)
    paragraphs = (" ".join(p.split()) for p in text.split("\n\n"))
    return {p for p in paragraphs if len(p) >= 200 and not p.startswith("|")}


def test_no_page_repeats_another() -> None:
    seen: dict[str, str] = {}
    for path in pages():
        for paragraph in _paragraphs(path.read_text()):
            assert paragraph not in seen, f"{page_name(path)} repeats {seen[paragraph]}: {paragraph[:80]}..."
            seen[paragraph] = page_name(path)


def test_every_command_block_is_named_and_run_by_a_test() -> None:
    journey = {("getting-started.md", name) for name in test_docs_journey.TOUR}
    journey |= set(test_docs_journey.IN_THE_TOUR) | set(test_docs_journey.FROM_THE_CLONE)
    sources = "\n".join(p.read_text() for folder in ("tests", "e2e") for p in (ROOT / folder).rglob("*.py"))
    for path in pages():
        page = page_name(path)
        for name, commands in blocks(page):
            assert name, f"{page}: a bash block without a name: {commands[:60]!r}"
            assert (page, name) in journey or f'block("{page}", "{name}")' in sources, (
                f"{page}: block {name!r} is run by no test")


def test_every_metric_is_documented() -> None:
    metrics = Metrics()
    metrics.count_caches(lambda: CacheCounts(0, 0, 0))
    page = (DOCS / "operations" / "metrics.md").read_text()
    names = {family.name for family in metrics.registry.collect()}
    assert len(names) >= 12
    for name in names:
        assert f"| `{name}`" in page, name


def test_crd_reference_matches_the_schemas() -> None:
    text = (DOCS / "reference" / "crds.md").read_text()
    start, end = "<!-- crd-reference:start -->\n", "<!-- crd-reference:end -->"
    section = text[text.index(start) + len(start):text.index(end)]
    assert section == reference.markdown(), "regenerate with: python -m helmop.api.reference"


def test_cli_reference_matches_the_parser() -> None:
    text = (DOCS / "reference" / "cli.md").read_text()
    start, end = "<!-- cli-reference:start -->\n", "<!-- cli-reference:end -->"
    section = text[text.index(start) + len(start):text.index(end)]
    assert section == cli_reference.markdown(), "regenerate with: python -m helmop.cli.reference"
    for verb in ("get", "export", "events", "logs", "tree", "trace", "completion", "create helmrelease"):
        assert f"| `helmop {verb}" in section, verb


def test_every_spec_field_is_documented() -> None:
    generated = reference.markdown()
    for crd in crds.definitions():
        spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        for name in spec["properties"]:
            assert f"| `spec.{name}` |" in generated, (crd["metadata"]["name"], name)


def _fields(node: dict[str, object], path: str) -> list[tuple[str, dict[str, object]]]:
    out = []
    for name, sub in (node.get("properties") or {}).items():  # type: ignore[attr-defined]
        out.append((f"{path}.{name}", sub))
        child = sub.get("items") if sub.get("type") == "array" else sub
        if isinstance(child, dict):
            out += _fields(child, f"{path}.{name}")
    return out


def test_every_crd_field_has_a_description() -> None:
    missing = [path for crd in crds.definitions()
               for path, node in _fields(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"],
                                         crd["spec"]["names"]["kind"])
               if not str(node.get("description", "")).strip()]
    assert not missing, missing


def test_kubectl_explain_shows_the_descriptions(run: Run) -> None:
    files = [arg for f in sorted((ROOT / "helmop/api/crds").glob("*.yaml")) for arg in ("-f", str(f))]
    run("kubectl", "apply", "--server-side", *files)
    run("kubectl", "wait", "--for=condition=Established", "crd", "--all", "--timeout=30s")
    for resource, phrase in (("helmrelease.spec", "The chart, its values"),
                             ("helmrelease.spec.install", "Options of helm install"),
                             ("helmrelease.spec.valuesFrom", "ConfigMaps and Secrets"),
                             ("jenkins.spec.ingress", "Expose Jenkins"),
                             ("gitrepository.status.artifact", "resolved revision")):
        out = run("kubectl", "explain", resource).stdout
        assert phrase in " ".join(out.split()) and "<empty>" not in out, (resource, out)


def test_sandbox_rows_name_tests_that_exist() -> None:
    """Each row of the sandbox's "what is emulated" table names tests; they must exist."""
    text = (DOCS / "contributing" / "sandbox.md").read_text()
    section = text[text.index("What is emulated"):text.index("Simulation knobs")]
    named = re.findall(r"`(test_\w+\.py)::(test_\w+)`", section)
    assert len(named) >= 20
    for module, test in named:
        path = ROOT / "sandbox" / "tests" / module
        assert path.exists(), module
        source = path.read_text()
        assert re.search(rf"^(async )?def {test}\(", source, re.M), f"{module}::{test}"
    for module in re.findall(r"`(\w+\.py)`", section):
        if not module.startswith("test_"):
            assert (ROOT / "sandbox" / "helmop_sandbox" / module).exists(), module


def test_flux_table_names_working_helmop_commands() -> None:
    """Each row of "Coming from Flux" gives a helmop command its parser accepts, or says why there is none."""
    import shlex

    from helmop.cli.main import parser

    section = (DOCS / "guides" / "coming-from-flux.md").read_text()
    rows = [line.split(" | ") for line in section.splitlines() if line.startswith("| `flux")]
    assert len(rows) >= 20, "the table lost its rows"
    for flux, helmop, notes in rows:
        commands = re.findall(r"`(helmop [^`]+)`", helmop)
        if not commands:
            assert helmop.startswith("`helm install ") or (helmop.strip() == "—" and len(notes.strip(" |")) > 10), (
                flux, "says why there is none")
            continue
        for command in commands:
            args = shlex.split(command.replace("\\|", "|"))[1:]
            try:
                parser().parse_args(args)
            except SystemExit as exc:
                raise AssertionError(f"{command!r} ({flux}) does not parse") from exc


def test_the_config_repository_guide_builds_as_it_says(tmp_path: Path) -> None:
    """The guide's files are a repository: its preview command builds them as a ConfigSync would."""
    import yaml

    page = "guides/config-repositories.md"
    shown = files(page)
    wanted = {"apps/base/kustomization.yaml", "apps/staging/kustomization.yaml", "clusters/staging/apps.yaml"}
    assert wanted <= set(shown)
    for path, text in shown.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    assert validation.tree({p: t.encode() for p, t in shown.items() if p.startswith("clusters/")}) == []
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    path = f"{Path(sys.executable).parent}:{TOOLS}:{os.environ['PATH']}"  # helmop, kubectl
    done = subprocess.run(["bash", "-c", "set -euo pipefail\n" + block("guides/config-repositories.md", "preview")],
                          cwd=tmp_path, capture_output=True, text=True, env={**os.environ, "PATH": path})
    assert done.returncode == 0, done.stderr
    objects = list(yaml.safe_load_all(done.stdout))
    deploy = next(o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "web")
    settings = next(o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"].startswith("settings-"))
    container = deploy["spec"]["template"]["spec"]["containers"][0]
    assert deploy["spec"]["replicas"] == 2 and container["image"] == "nginx:1.27"
    assert container["env"] == [{"name": "REGION", "value": "eu-central-1"}]
    assert container["envFrom"][0]["configMapRef"]["name"] == settings["metadata"]["name"]  # the hashed name
    assert settings["data"] == {"log_level": "debug"}
    assert deploy["metadata"]["annotations"]["prometheus.io/scrape"] == "true"  # the component
