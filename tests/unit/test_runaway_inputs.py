"""Inputs made to run away — an unterminated JSON string, a template that doubles a value, parentheses without
end, a token nested without end, a path an archive does not hold — end in a refusal, not in hours, gigabytes or a
crash."""

from __future__ import annotations

import asyncio
import base64
import json

import pytest

from helmop.api.bounded import json_within
from helmop.api.jwts import TokenRefused, unverified_issuer
from helmop.images.template import TemplateError, render
from helmop.sources.errors import SourceError
from helmop.sources.trees import TreeArtifact


def test_an_unterminated_json_string_is_refused_in_one_pass() -> None:
    body = b'"' + b'\\"' * (1 << 20)  # quadratic to scan with backtracking: hours at this size
    with pytest.raises(ValueError, match="is not JSON"):
        json_within(body, max_depth=64, what="the payload")
    with pytest.raises(ValueError, match="nests deeper than 64"):
        json_within(b"[" * 65 + b"]" * 65, max_depth=64, what="the payload")
    assert json_within(b'{"a": ["\\"[[[", {"b": 1}]}', max_depth=3, what="x") == {"a": ['"[[[', {"b": 1}]}


@pytest.mark.parametrize(("template", "said"), [
    ('{{$a := "xxxxxxxxxxxxxxxx"}}' + "{{$a = print $a $a}}" * 30, "longer than 64 KiB"),
    ('{{$a := "xxxxxxxxxxxxxxxx"}}' + '{{$a = replace "x" $a $a}}' * 3, "longer than 64 KiB"),
    ("{{ upper }}", "upper:"),
    ("{{ " + "(" * 5000 + '"a"' + ")" * 5000 + " }}", "nests too deeply"),
])
def test_a_template_cannot_grow_a_value_or_crash(template: str, said: str) -> None:
    with pytest.raises(TemplateError, match=said):
        render(template, {})


def test_a_token_nested_without_end_is_refused() -> None:
    claims = base64.urlsafe_b64encode(("[" * 100_000 + "]" * 100_000).encode()).decode().rstrip("=")
    with pytest.raises(TokenRefused):
        unverified_issuer(f"e30.{claims}.sig")
    assert unverified_issuer("e30." + base64.urlsafe_b64encode(json.dumps({"iss": "i"}).encode()).decode() + ".s") \
        == "i"


def test_a_path_an_archive_does_not_hold_is_not_an_empty_folder() -> None:
    artifact = TreeArtifact({"apps/a.yaml": b"a: 1\n"})
    assert asyncio.run(artifact.files("apps")) == {"a.yaml": b"a: 1\n"}
    assert asyncio.run(artifact.files("")) == {"apps/a.yaml": b"a: 1\n"}
    with pytest.raises(SourceError) as missing:
        asyncio.run(artifact.files("app"))
    assert missing.value.reason == "PathNotFound"
