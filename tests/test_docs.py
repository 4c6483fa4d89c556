"""The README's CRD and CLI references are the ones the schemas and the parser generate: documentation that
cannot drift."""

from __future__ import annotations

from helmop.api import crds, reference
from helmop.cli import reference as cli_reference
from tests.tools import ROOT, Run


def test_readme_crd_reference_matches_the_schemas() -> None:
    text = (ROOT / "README.md").read_text()
    start, end = "<!-- crd-reference:start -->\n", "<!-- crd-reference:end -->"
    section = text[text.index(start) + len(start):text.index(end)]
    assert section == reference.markdown(), "regenerate with: python -m helmop.api.reference"


def test_readme_cli_reference_matches_the_parser() -> None:
    text = (ROOT / "README.md").read_text()
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


def test_readme_sandbox_rows_name_tests_that_exist() -> None:
    """Each row of the sandbox's "what is emulated" table names tests; they must exist."""
    import re

    text = (ROOT / "README.md").read_text()
    section = text[text.index("What is emulated"):text.index("Simulation knobs")]
    named = re.findall(r"`(test_\w+\.py)::(test_\w+)`", section)
    assert len(named) >= 20
    for module, test in named:
        found = [path for path in (ROOT / "sandbox" / "tests" / module, ROOT / "tests" / "sandbox" / module)
                 if path.exists()]
        assert found, module
        source = found[0].read_text()
        assert re.search(rf"^(async )?def {test}\(", source, re.M), f"{module}::{test}"
    for module in re.findall(r"`(\w+\.py)`", section):
        if not module.startswith("test_"):
            assert (ROOT / "sandbox" / "helmop_sandbox" / module).exists(), module


def test_readme_flux_table_names_working_helmop_commands() -> None:
    """Each row of "Coming from Flux" gives a helmop command its parser accepts, or says why there is none."""
    import re
    import shlex

    from helmop.cli.main import parser

    text = (ROOT / "README.md").read_text()
    section = text[text.index("### Coming from Flux"):text.index("## Installing into a cluster")]
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
