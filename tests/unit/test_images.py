"""Image automation's pure parts: image names as Docker reads them, the tag each policy chooses (as Flux's
reflector), setter markers spliced in without touching anything else, commit message templates and their bounds."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from helmop.api.errors import SpecError
from helmop.api.images import parse_image, parse_image_policy, parse_image_repository, parse_image_update_automation
from helmop.api.kinds import FLUX, FLUX_IMAGE
from helmop.api.status.images import ImageRef
from helmop.controllers.fluxgate import FluxGate
from helmop.images import policies, setters
from helmop.images.template import MAX_STEPS, TemplateError, render
from helmop.sources.errors import SourceError


def test_image_names_are_read_as_docker_reads_them() -> None:
    assert parse_image("nginx").canonical == "index.docker.io/library/nginx"
    assert parse_image("org/app").canonical == "index.docker.io/org/app"
    assert parse_image("localhost:5000/app").canonical == "localhost:5000/app"
    assert parse_image("ghcr.io/org/app").written == "ghcr.io/org/app"
    for bad in ("ghcr.io/org/app:1.0", "https://ghcr.io/app", "ghcr.io/org/App", "app@sha256:00", ""):
        with pytest.raises(SpecError):
            parse_image(bad)


def test_fields_helmop_cannot_honour_are_refused_by_name() -> None:
    base = {"image": "org/app", "interval": "1m"}
    for field, value in (("provider", "aws"), ("serviceAccountName", "puller")):
        with pytest.raises(SpecError) as refused:
            parse_image_repository({**base, field: value})
        assert refused.value.reason == "UnsupportedField" and f"spec.{field}" in str(refused.value)
    with pytest.raises(SpecError, match="exclusionList"):
        parse_image_repository({**base, "exclusionList": ["(unclosed"]})
    assert parse_image_repository(base).exclusions == ("^.*\\.sig$",)


def policy(kind: str, argument: str, **spec: object) -> object:
    body = {"range": argument} if kind == "semver" else {"order": argument}
    return parse_image_policy({"imageRepositoryRef": {"name": "r"}, "policy": {kind: body}, **spec})


TAGS = ("1.2.0", "1.3.0", "1.4.0-rc.1", "2.0.0", "latest", "v1.3.1", "main-7-abc", "main-12-def", "1.2.0.sig")


def test_policies_choose_as_fluxs_reflector() -> None:
    assert policies.choose(policy("semver", ">=1.0.0 <2.0.0"), TAGS) == "v1.3.1"  # -rc and 2.0.0 never chosen
    assert policies.choose(policy("semver", ">=1.4.0-0 <2.0.0"), TAGS) == "1.4.0-rc.1"  # a range naming one
    assert policies.choose(policy("alphabetical", "asc"), ("a", "c", "b")) == "c"
    assert policies.choose(policy("alphabetical", "desc"), ("a", "c", "b")) == "a"
    numbered = policy("numerical", "asc", filterTags={"pattern": r"^main-(?P<n>\d+)-", "extract": "$n"})
    assert policies.choose(numbered, TAGS) == "main-12-def"  # 12 > 7, as numbers
    with pytest.raises(SourceError) as none:
        policies.choose(policy("semver", "^3"), TAGS)
    assert none.value.reason == "TagNotFound"
    with pytest.raises(SourceError, match="not one"):
        policies.choose(policy("numerical", "asc"), ("1", "latest"))
    with pytest.raises(SpecError):
        parse_image_policy({"imageRepositoryRef": {"name": "r"}, "policy": {"semver": {}, "numerical": {}}})


WEB = {"web": ImageRef(name="reg/web", tag="1.10", digest="sha256:" + "a" * 64)}


def test_setters_splice_values_and_leave_every_other_byte() -> None:
    text = ("# Ünïcode before: indexes are characters\nkind: Deployment\nmetadata: {name: web}\nspec:\n"
            "  a: &anchor 'reg/web:1.0' # {\"$imagepolicy\": \"apps:web\"}\n"
            "  b: *anchor\n"
            "  c:   1.0   # {\"$imagepolicy\": \"apps:web:tag\"}\n"
            "  d: x # {\"$imagepolicy\": \"apps:web:digest\"}\n"
            "  e: reg/web:1.0 # {\"$imagepolicy\": \"other:web\"}\n"
            "  f: reg/web:1.0 # {\"$imagepolicy\": \"apps:nope\"}\n")
    changed, result = setters.update({"d.yaml": text.encode(), "notes.txt": b'"$imagepolicy"'}, WEB, "apps")
    after = changed["d.yaml"].decode()
    assert after == (text.replace("'reg/web:1.0'", f"'{WEB['web']}'").replace("  1.0   #", '  "1.10"   #')
                     .replace("d: x #", f"d: {WEB['web'].digest} #"))
    assert list(changed) == ["d.yaml"]
    (obj, changes), = result.objects().items()
    assert (obj.kind, obj.name) == ("Deployment", "web") and [c.setter for c in changes] == [
        "apps:web", "apps:web:tag", "apps:web:digest"]


def test_a_file_that_is_not_yaml_is_named_and_left_alone() -> None:
    bad = b'a: [unclosed # {"$imagepolicy": "apps:web"}\n'
    changed, result = setters.update({"bad.yaml": bad, "big.yml": b'"$imagepolicy"' * (setters.MAX_FILE // 10)},
                                     WEB, "apps")
    assert changed == {} and [p.split(":")[0] for p in result.problems] == ["bad.yaml", "big.yml"]


def test_templates_render_the_subset_and_refuse_the_rest_by_name() -> None:
    data = {"Values": {"env": "prod"}, "Items": ["a", "b"]}
    assert render('{{ .Values.env | upper }}{{ range $i, $x := .Items }} {{ $i }}={{ $x }}{{ end }}', data) == \
        "PROD 0=a 1=b"
    assert render("a\n{{- if .Items }} yes {{- end }}\n", data) == "a yes\n"
    for template, said in (("{{ with .Items }}x{{ end }}", "{{with}}"), ("{{ .Items | sha1sum }}", "'sha1sum'"),
                           ("{{ if .Items }}", "no {{end}}"), ("{{ $y = 1 }}", "before it is declared")):
        with pytest.raises(TemplateError, match=said.replace("{", r"\{").replace("}", r"\}")):
            render(template, data)
    with pytest.raises(TemplateError, match="steps"):
        render("{{ range .A }}{{ range $.A }}{{ if false }}x{{ end }}{{ end }}{{ end }}", {"A": list(range(MAX_STEPS))})


def test_an_automation_names_what_is_wrong_in_its_spec() -> None:
    base = {"sourceRef": {"name": "config"}, "interval": "1m", "git": {"commit": {"author": {"email": "a@b"}}}}
    assert parse_image_update_automation(base).author_email == "a@b"
    for change, reason in (({"sourceRef": {"kind": "Bucket", "name": "x"}}, "InvalidSourceConfiguration"),
                           ({"policySelector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}},
                            "InvalidPolicySelector"),
                           ({"git": {"commit": {"author": {"email": "nobody"}}}}, "InvalidSpec")):
        with pytest.raises(SpecError) as refused:
            parse_image_update_automation({**base, **change})
        assert refused.value.reason == reason


async def test_fluxs_image_controllers_hold_only_the_image_kinds() -> None:
    """A cluster that kept Flux's image controllers (as helmop's docs said before it served their kinds) keeps
    them: helmop serves every other Flux kind, and the image kinds once they are scaled to zero."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    leases = {"image-automation-controller": {"spec": {"holderIdentity": "pod", "renewTime": now,
                                                       "leaseDurationSeconds": 15}}}

    class Leases:
        async def get(self, path: str) -> dict[str, object] | None:
            return leases.get(path.rsplit("/", 1)[1].removesuffix("-leader-election"))

    served: list[bool] = []
    metrics = SimpleNamespace(flux_controllers=SimpleNamespace(set=lambda n: None))
    gate = FluxGate(Leases(), "flux-system", metrics, lambda: served.append(True))  # type: ignore[arg-type]
    await gate.check()
    assert gate.holds(FLUX.helmrelease.group) == "" and "image-automation-controller" in gate.holds(FLUX_IMAGE)
    leases.clear()
    await gate.check()
    assert gate.holds(FLUX_IMAGE) == "" and served == [True]
