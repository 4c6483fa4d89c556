"""The README's CRD reference is the one the schemas generate: documentation that cannot drift."""

from __future__ import annotations

from helmop.api import crds, reference
from tests.tools import ROOT, Run


def test_readme_crd_reference_matches_the_schemas() -> None:
    text = (ROOT / "README.md").read_text()
    start, end = "<!-- crd-reference:start -->\n", "<!-- crd-reference:end -->"
    section = text[text.index(start) + len(start):text.index(end)]
    assert section == reference.markdown(), "regenerate with: python -m helmop.api.reference"


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
