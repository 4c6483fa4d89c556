"""Kubernetes' CEL authorization library (``authorizer``), as kube-apiserver gives it to admission expressions.

``authorizer`` checks what the requesting user may do, answered by the sandbox's RBAC:
``authorizer.group(g).resource(r)`` with optional ``.subresource(s)``, ``.namespace(ns)``, ``.name(n)``,
``.fieldSelector(s)``, ``.labelSelector(s)`` (RBAC ignores selectors), then ``.check(verb)``;
``authorizer.path(p).check(verb)`` for non-resource URLs; ``authorizer.serviceAccount(ns, name)`` checks as
that ServiceAccount (its user and groups, as its tokens have them, without system:authenticated as
upstream). ``authorizer.requestResource`` is the resource under admission, ready for ``.check(verb)``.
A Decision has ``allowed()`` (RBAC's "no opinion" is not allowed), ``reason()`` (upstream's wording of the
binding that allowed it), ``errored()`` and ``error()`` (RBAC does not error: a missing role only fails to
allow). Upstream has no ``denied()``, so neither does this.

The ``cel`` package has no object types: the values are maps whose state sits under a key that no field
access can name, and the functions are global names that check their receiver, so ``name`` or
``namespace`` stay plain fields on any other map (``object.metadata.name``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .rbac import Attributes, Authorizer, Identity

_STATE = "\x00authz"
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def _value(kind: str, **state: Any) -> dict[str, Any]:
    return {_STATE: {"kind": kind, **state}}


def variable(who: Identity, group: str, resource: str, subresource: str, namespace: str,
             name: str) -> dict[str, Any]:
    """The ``authorizer`` variable for a request by ``who`` on that resource."""
    user = {"user": who.user, "groups": list(who.groups)}
    out = _value("Authorizer", **user)
    out["requestResource"] = _value("ResourceCheck", **user, group=group, resource=resource,
                                    subresource=subresource, namespace=namespace, name=name)
    return out


def _state(function: str, receiver: Any, *kinds: str) -> dict[str, Any]:
    state = receiver.get(_STATE) if isinstance(receiver, dict) else None
    if not isinstance(state, dict) or state.get("kind") not in kinds:
        raise TypeError(f"found no matching overload for '{function}' applied to this receiver")
    return state


def _text(function: str, value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"found no matching overload for '{function}' applied to {type(value).__name__}")
    return value


def _setter(function: str) -> Callable[[Any, str], dict[str, Any]]:
    """``ResourceCheck.<function>(value)``: the same check with that field set."""
    def setter(receiver: Any, value: str) -> dict[str, Any]:
        return {_STATE: {**_state(function, receiver, "ResourceCheck"), function: _text(function, value)}}
    return setter


def _ignored(function: str) -> Callable[[Any, str], dict[str, Any]]:
    """``ResourceCheck.<function>(selector)``: accepted, and the same check (RBAC has no use for selectors)."""
    def same(receiver: Any, value: str) -> dict[str, Any]:
        _state(function, receiver, "ResourceCheck")
        _text(function, value)
        return dict(receiver)
    return same


def _group(receiver: Any, group: str) -> dict[str, Any]:
    state = _state("group", receiver, "Authorizer")
    return _value("GroupCheck", user=state["user"], groups=state["groups"], group=_text("group", group))


def _resource(receiver: Any, resource: str) -> dict[str, Any]:
    state = _state("resource", receiver, "GroupCheck")
    if not _text("resource", resource).strip():
        raise ValueError("resource must not be empty")
    return {_STATE: {**state, "kind": "ResourceCheck", "resource": resource, "subresource": "",
                     "namespace": "", "name": ""}}


def _path(receiver: Any, path: str) -> dict[str, Any]:
    state = _state("path", receiver, "Authorizer")
    if not _text("path", path).strip():
        raise ValueError("path must not be empty")
    return _value("PathCheck", user=state["user"], groups=state["groups"], path=path)


def _service_account(receiver: Any, namespace: str, name: str) -> dict[str, Any]:
    _state("serviceAccount", receiver, "Authorizer")
    if not _DNS_SUBDOMAIN.fullmatch(_text("serviceAccount", name)) or len(name) > 253:
        raise ValueError("Invalid service account name")
    if not _DNS_LABEL.fullmatch(_text("serviceAccount", namespace)) or len(namespace) > 63:
        raise ValueError("Invalid service account namespace")
    return _value("Authorizer", user=f"system:serviceaccount:{namespace}:{name}",
                  groups=["system:serviceaccounts", f"system:serviceaccounts:{namespace}"])


def _decision(function: str) -> Callable[[Any], Any]:
    """``Decision.<function>()``: allowed, reason, errored, error."""
    def read(receiver: Any) -> Any:
        return _state(function, receiver, "Decision")[function]
    return read


def functions(authz: Authorizer) -> dict[str, Callable[..., Any]]:
    """The library's functions, answered by ``authz`` (without recording: these are not requests)."""
    def check(receiver: Any, verb: str) -> dict[str, Any]:
        state = _state("check", receiver, "ResourceCheck", "PathCheck")
        if state["kind"] == "PathCheck":
            attrs = Attributes(_text("check", verb), path=state["path"])
        else:
            attrs = Attributes(_text("check", verb), state["group"], state["resource"], state["subresource"],
                               state["namespace"], state["name"])
        allowed, reason = authz.decide(Identity(state["user"], tuple(state["groups"])), attrs)
        return _value("Decision", allowed=allowed, reason=reason, errored=False, error="")

    return {"group": _group, "resource": _resource, "path": _path, "serviceAccount": _service_account,
            "subresource": _setter("subresource"), "namespace": _setter("namespace"), "name": _setter("name"),
            "fieldSelector": _ignored("fieldSelector"), "labelSelector": _ignored("labelSelector"), "check": check,
            **{name: _decision(name) for name in ("allowed", "reason", "errored", "error")}}
