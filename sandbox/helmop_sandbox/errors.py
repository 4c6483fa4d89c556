"""API errors as the kube-apiserver reports them: a ``kind: Status`` body with reason and code.

Every failure inside the sandbox is raised as :class:`ApiError`; the HTTP layer turns it into the
Status reply clients (client-go, kopf, the Python client) parse for ``reason`` and ``details``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# HTTP code for each StatusReason the sandbox uses (k8s.io/apimachinery/pkg/api/errors).
CODES = {
    "BadRequest": 400,
    "Unauthorized": 401,
    "Forbidden": 403,
    "NotFound": 404,
    "MethodNotAllowed": 405,
    "NotAcceptable": 406,
    "AlreadyExists": 409,
    "Conflict": 409,
    "Gone": 410,
    "Expired": 410,
    "RequestEntityTooLarge": 413,
    "UnsupportedMediaType": 415,
    "Invalid": 422,
    "TooManyRequests": 429,
    "InternalError": 500,
    "ServiceUnavailable": 503,
    "Timeout": 504,
    "": 500,  # StatusReasonUnknown: an error that is not a Status, as upstream's ErrorToAPIStatus answers it
}


_DETAILS = ("name", "group", "kind", "uid", "causes", "retryAfterSeconds")


@dataclass
class Cause:
    """One field-level problem: ``reason`` is a k8s field ErrorType such as FieldValueRequired."""

    reason: str
    message: str
    field: str = ""

    def to_json(self) -> dict[str, str]:
        out = {"reason": self.reason, "message": self.message}
        if self.field:
            out["field"] = self.field
        return out


@dataclass
class ApiError(Exception):
    reason: str
    message: str
    details: dict[str, Any] = field(default_factory=dict)
    causes: list[Cause] = field(default_factory=list)

    def __str__(self) -> str:
        return self.message

    @property
    def code(self) -> int:
        return CODES[self.reason]

    def status(self) -> dict[str, Any]:
        """The Status body, its fields in metav1.Status's order and empty ones left out (omitempty)."""
        body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                "message": self.message}
        if self.reason:
            body["reason"] = self.reason
        details = {**self.details, "causes": [c.to_json() for c in self.causes]}
        ordered = {k: details[k] for k in _DETAILS if details.get(k)}
        if ordered:
            body["details"] = ordered
        body["code"] = self.code
        return body


def not_found(group: str, plural: str, name: str) -> ApiError:
    resource = f"{plural}.{group}" if group else plural
    return ApiError(
        "NotFound",
        f'{resource} "{name}" not found',
        {"name": name, "group": group, "kind": plural},
    )


def already_exists(group: str, plural: str, name: str) -> ApiError:
    resource = f"{plural}.{group}" if group else plural
    return ApiError(
        "AlreadyExists",
        f'{resource} "{name}" already exists',
        {"name": name, "group": group, "kind": plural},
    )


def conflict(group: str, plural: str, name: str, why: str) -> ApiError:
    resource = f"{plural}.{group}" if group else plural
    return ApiError(
        "Conflict",
        f'Operation cannot be fulfilled on {resource} "{name}": {why}',
        {"name": name, "group": group, "kind": plural},
    )


def invalid(kind: str, group: str, name: str, causes: list[Cause]) -> ApiError:
    qualified = f"{kind}.{group}" if group else kind
    listed = ", ".join(f"{c.field}: {c.message}" if c.field else c.message for c in causes)
    text = listed if len(causes) == 1 else f"[{listed}]"
    return ApiError(
        "Invalid",
        f'{qualified} "{name}" is invalid: {text}',
        {"name": name, "group": group, "kind": kind},
        causes,
    )


def bad_request(message: str) -> ApiError:
    return ApiError("BadRequest", message)
