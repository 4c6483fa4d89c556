"""CRD structural schemas: validation, defaulting and pruning as the API server applies them."""

from __future__ import annotations

from typing import Any

from helmop_sandbox.structural import check

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "required": ["name"],
            "properties": {
                "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 8},
                "replicas": {"type": "integer", "minimum": 0, "maximum": 5, "default": 1},
                "mode": {"type": "string", "enum": ["a", "b"]},
                "port": {"x-kubernetes-int-or-string": True},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "opaque": {"type": "object"},
                "maybe": {"type": "string", "nullable": True},
                "nested": {"type": "object", "default": {}, "properties": {
                    "depth": {"type": "integer", "default": 3}}},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2,
                         "x-kubernetes-list-type": "set"},
            },
        },
    },
}


def _check(spec: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    obj = {"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "n", "anything": "kept"}, "spec": spec}
    return obj, check(obj, SCHEMA, custom=True)


def test_valid_object_is_defaulted_and_pruned() -> None:
    obj, found = _check({"name": "ok", "port": "http", "labels": {"a": "b"}, "free": {"x": {"y": 1}},
                         "opaque": {"gone": 1}, "maybe": None, "unknown": True})
    assert not found.invalid and not found.type_errors
    assert found.unknown == ["spec.opaque.gone", "spec.unknown"]
    assert obj["spec"] == {"name": "ok", "port": "http", "labels": {"a": "b"}, "free": {"x": {"y": 1}},
                           "opaque": {}, "maybe": None, "replicas": 1, "nested": {"depth": 3}}
    assert obj["metadata"] == {"name": "n", "anything": "kept"}  # metadata is not the schema's business


def test_a_schema_of_an_object_alone_keeps_the_resources_type_and_metadata() -> None:
    """``openAPIV3Schema: {type: object}``: everything but apiVersion, kind and metadata is pruned."""
    obj = {"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "n"}, "spec": {"a": 1}}
    found = check(obj, {"type": "object"}, custom=True)
    assert found.unknown == ["spec"] and obj == {"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "n"}}


def test_each_violation_is_reported_with_its_field() -> None:
    _, found = _check({"name": "Not-OK-too-long", "replicas": 9, "mode": "c", "port": 1.5,
                       "labels": {"a": 1}, "tags": ["x", "x", "y"]})
    reasons = {(c.field, c.reason) for c in found.invalid + found.type_errors}
    assert reasons == {
        ("spec.name", "FieldValueInvalid"), ("spec.name", "FieldValueTooLong"),
        ("spec.replicas", "FieldValueInvalid"), ("spec.mode", "FieldValueNotSupported"),
        ("spec.port", "FieldValueTypeInvalid"), ("spec.labels.a", "FieldValueTypeInvalid"),
        ("spec.tags", "FieldValueTooMany"), ("spec.tags[1]", "FieldValueDuplicate"),
    }


def test_required_and_null() -> None:
    _, found = _check({"mode": None})
    assert {(c.field, c.reason) for c in found.invalid} == {("spec.name", "FieldValueRequired")}
    assert {(c.field, c.reason) for c in found.type_errors} == {("spec.mode", "FieldValueTypeInvalid")}
