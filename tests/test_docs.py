"""The README's CRD reference is the one the schemas generate: documentation that cannot drift."""

from __future__ import annotations

from helmop.api import crds, reference
from tests.conftest import ROOT


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
