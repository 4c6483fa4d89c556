"""The review APIs and RBAC escalation prevention, as kube-apiserver has them.

Reviews are virtual kinds: created, answered, never stored. SelfSubjectAccessReview and
SelfSubjectRulesReview (``kubectl auth can-i [--list]``), SubjectAccessReview and
LocalSubjectAccessReview (for callers allowed to create them), SelfSubjectReview
(``kubectl auth whoami``), and TokenReview (who a bearer token is, for callers allowed to create them:
how a web front end that takes its viewers' tokens learns whom to impersonate).

Escalation prevention: a Role/ClusterRole may only grant what its author holds (or the author has
``escalate`` on it), and a binding may only bind a role whose rules its author holds (or the author has
``bind`` on that role) — so RBAC cannot be used to climb.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from .errors import ApiError
from .rbac import RBAC, Attributes, Authorizer, Identity, rule_allows

AUTHZ, AUTHN = "authorization.k8s.io", "authentication.k8s.io"
# (group, version) -> discovery entries of the virtual kinds
DISCOVERY: dict[tuple[str, str], list[dict[str, Any]]] = {
    (AUTHZ, "v1"): [
        {"name": "localsubjectaccessreviews", "singularName": "localsubjectaccessreview", "namespaced": True,
         "kind": "LocalSubjectAccessReview", "verbs": ["create"]},
        {"name": "selfsubjectaccessreviews", "singularName": "selfsubjectaccessreview", "namespaced": False,
         "kind": "SelfSubjectAccessReview", "verbs": ["create"]},
        {"name": "selfsubjectrulesreviews", "singularName": "selfsubjectrulesreview", "namespaced": False,
         "kind": "SelfSubjectRulesReview", "verbs": ["create"]},
        {"name": "subjectaccessreviews", "singularName": "subjectaccessreview", "namespaced": False,
         "kind": "SubjectAccessReview", "verbs": ["create"]}],
    (AUTHN, "v1"): [
        {"name": "selfsubjectreviews", "singularName": "selfsubjectreview", "namespaced": False,
         "kind": "SelfSubjectReview", "verbs": ["create"]},
        {"name": "tokenreviews", "singularName": "tokenreview", "namespaced": False,
         "kind": "TokenReview", "verbs": ["create"]}],
}
_KIND_OF = {e["name"]: (group, version, e["kind"]) for (group, version), entries in DISCOVERY.items()
            for e in entries}


def is_review(group: str, version: str, rest: list[str]) -> bool:
    plural = rest[2] if len(rest) == 3 and rest[0] == "namespaces" else (rest[0] if len(rest) == 1 else "")
    return any(e["name"] == plural for e in DISCOVERY.get((group, version), []))


def _attributes(spec: dict[str, Any], namespace: str = "") -> Attributes:
    resource = spec.get("resourceAttributes")
    if isinstance(resource, dict):
        return Attributes(str(resource.get("verb", "")), str(resource.get("group", "")),
                          str(resource.get("resource", "")), str(resource.get("subresource", "")),
                          namespace or str(resource.get("namespace", "")), str(resource.get("name", "")))
    other = spec.get("nonResourceAttributes") or {}
    return Attributes(str(other.get("verb", "")), path=str(other.get("path", "")))


def _subject(spec: dict[str, Any]) -> Identity:
    user = str(spec.get("user") or "")
    groups = [str(g) for g in spec.get("groups") or []]
    if user.startswith("system:serviceaccount:"):
        groups += ["system:serviceaccounts", f"system:serviceaccounts:{user.split(':')[2]}"]
    return Identity(user, (*groups, "system:authenticated"))


def answer(authz: Authorizer, who: Identity, group: str, version: str, rest: list[str],
           body: dict[str, Any], identify: Callable[[str], Identity | None]) -> dict[str, Any]:
    """The created review: the request echoed with its status filled in."""
    namespace = rest[1] if rest[0] == "namespaces" else ""
    plural = rest[-1]
    _group, _version, kind = _KIND_OF[plural]
    spec = body.get("spec") or {}
    out = {"kind": kind, "apiVersion": f"{group}/{version}", "metadata": {"creationTimestamp": None}, "spec": spec}
    if plural == "selfsubjectreviews":
        out.pop("spec")
        out["status"] = {"userInfo": {"username": who.user, "groups": list(who.groups)}}
    elif plural == "tokenreviews":
        authz.check(who, Attributes("create", AUTHN, plural))
        out["status"] = token_review(identify(f"Bearer {spec.get('token') or ''}"))
    elif plural == "selfsubjectrulesreviews":
        out["status"] = rules_review(authz, who, str(spec.get("namespace") or ""))
    else:
        subject = who
        if plural in ("subjectaccessreviews", "localsubjectaccessreviews"):
            # reviewing someone else is itself a permission (upstream grants it to no one by default)
            authz.check(who, Attributes("create", AUTHZ, plural, namespace=namespace))
            subject = _subject(spec)
        allowed = authz.allowed(subject, _attributes(spec, namespace))
        # RBAC gives no reason for a denial (it only has no rule that allows), so neither does kubectl
        out["status"] = {"allowed": allowed}
    return out


def token_review(found: Identity | None) -> dict[str, Any]:
    if found is None:  # upstream's `authenticated` is omitted when false, and the user left empty
        return {"user": {}}
    return {"authenticated": True, "user": {"username": found.user, "groups": list(found.groups)}}


def rules_review(authz: Authorizer, who: Identity, namespace: str) -> dict[str, Any]:
    if who.admin:
        return {"resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}], "incomplete": False}
    rules = authz.rules_for(who, namespace)
    resource = [{k: r[k] for k in ("verbs", "apiGroups", "resources", "resourceNames") if r.get(k)}
                for r in rules if r.get("resources")]
    other = [{"verbs": r.get("verbs") or [], "nonResourceURLs": r["nonResourceURLs"]}
             for r in rules if r.get("nonResourceURLs")]
    return {"resourceRules": resource, "nonResourceRules": other, "incomplete": False}


def _uncovered(owner: list[dict[str, Any]], rule: dict[str, Any], namespace: str) -> list[str]:
    """The pieces of ``rule`` that no rule of ``owner`` allows (upstream's "Covers", piece by piece: a
    wildcard is covered only by a wildcard)."""
    missing = []
    for verb in rule.get("verbs") or []:
        for url in rule.get("nonResourceURLs") or []:
            if not any(rule_allows(o, Attributes(verb, path=url)) for o in owner):
                missing.append(f"{{NonResourceURLs:[{url}], Verbs:[{verb}]}}")
        for group, resource, name in itertools.product(rule.get("apiGroups") or [], rule.get("resources") or [],
                                                       rule.get("resourceNames") or [""]):
            main, _, sub = resource.partition("/")
            if not any(rule_allows(o, Attributes(verb, group, main, sub, namespace, name)) for o in owner):
                names = f", ResourceNames:[{name}]" if name else ""
                missing.append(f"{{APIGroups:[{group!r}], Resources:[{resource!r}]{names}, Verbs:[{verb!r}]}}")
    return missing


def _role_rules(authz: Authorizer, ref: dict[str, Any], namespace: str) -> list[dict[str, Any]]:
    kind = ref.get("kind")
    if kind == "ClusterRole":
        role = authz.store.get((RBAC, "clusterroles"), "", str(ref.get("name", "")))
    elif kind == "Role":
        role = authz.store.get((RBAC, "roles"), namespace, str(ref.get("name", "")))
    else:
        raise ApiError("Invalid", f'roleRef.kind: Unsupported value: "{kind}": supported values: "ClusterRole", "Role"')
    if role is None:
        raise ApiError("NotFound", f'{"clusterroles" if kind == "ClusterRole" else "roles"}.{RBAC} '
                                   f'"{ref.get("name")}" not found', {"name": ref.get("name"), "group": RBAC,
                                                                      "kind": f"{str(kind).lower()}s"})
    return list(role.get("rules") or [])


def check_escalation(authz: Authorizer, who: Identity, plural: str, namespace: str, obj: dict[str, Any]) -> None:
    """Forbidden unless ``who`` may write this Role/ClusterRole/binding without gaining rights."""
    if who.admin or plural not in ("roles", "clusterroles", "rolebindings", "clusterrolebindings"):
        return
    name = str((obj.get("metadata") or {}).get("name", ""))
    owner = authz.rules_for(who, namespace)
    if plural in ("roles", "clusterroles"):
        if authz.allowed(who, Attributes("escalate", RBAC, plural, namespace=namespace, name=name)):
            return
        rules = list(obj.get("rules") or [])
    else:
        ref = obj.get("roleRef") or {}
        role_plural = "clusterroles" if ref.get("kind") == "ClusterRole" else "roles"
        if authz.allowed(who, Attributes("bind", RBAC, role_plural, namespace=namespace, name=str(ref.get("name")))):
            return
        rules = _role_rules(authz, ref, namespace)
    missing = [m for rule in rules for m in _uncovered(owner, rule, namespace)]
    if missing:
        raise ApiError("Forbidden", f'{plural}.{RBAC} "{name}" is forbidden: user "{who.user}" (groups='
                                    f'{list(who.groups)}) is attempting to grant RBAC permissions not currently '
                                    f'held:\n{chr(10).join(missing)}', {"name": name, "group": RBAC, "kind": plural})
