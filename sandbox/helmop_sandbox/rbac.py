"""Authentication and RBAC authorization, as the apiserver's RBAC authorizer decides.

Identities: the admin token (group ``system:masters``: everything) and ServiceAccount tokens issued
through the TokenRequest API (``POST .../serviceaccounts/<name>/token``, what ``kubectl create
token`` calls). Rules come from Roles/ClusterRoles through RoleBindings/ClusterRoleBindings, with
apiGroups, resources (``res/sub`` for subresources), verbs, resourceNames, nonResourceURLs and
``*`` as upstream. ``Impersonate-User``/``Impersonate-Group`` need the ``impersonate`` verb.
Discovery and OpenAPI are open to every authenticated identity (upstream's system:discovery).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .errors import ApiError
from .store import Obj, Store

RBAC = "rbac.authorization.k8s.io"


@dataclass(frozen=True)
class Identity:
    user: str
    groups: tuple[str, ...] = ()

    @property
    def admin(self) -> bool:
        return "system:masters" in self.groups


@dataclass(frozen=True)
class Attributes:
    verb: str
    group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""  # non-resource requests only

    def describe(self) -> str:
        if not self.resource:
            return f'cannot {self.verb} path "{self.path}"'
        what = f"{self.resource}/{self.subresource}" if self.subresource else self.resource
        where = f' in the namespace "{self.namespace}"' if self.namespace else " at the cluster scope"
        return f'cannot {self.verb} resource "{what}" in API group "{self.group}"{where}'


def _matches(values: list[str], wanted: str) -> bool:
    return "*" in values or wanted in values


def rule_allows(rule: dict[str, Any], attrs: Attributes) -> bool:
    if not _matches(rule.get("verbs") or [], attrs.verb):
        return False
    if not attrs.resource:
        return any(u == attrs.path or (u.endswith("*") and attrs.path.startswith(u[:-1]))
                   for u in rule.get("nonResourceURLs") or [])
    if not _matches(rule.get("apiGroups") or [], attrs.group):
        return False
    resource = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    resources = rule.get("resources") or []
    if not (_matches(resources, resource) or (attrs.subresource and f"*/{attrs.subresource}" in resources)):
        return False
    names = rule.get("resourceNames") or []
    return not names or attrs.name in names


@dataclass
class Authenticator:
    """The admin token, and ServiceAccount tokens signed with ``signing_key`` (HS256 JWTs): like the
    API server's, they are checked by signature, so they stay valid across a restart that keeps the key."""

    admin_token: str
    signing_key: bytes = field(default_factory=lambda: secrets.token_bytes(32))

    def identify(self, authorization: str | None) -> Identity | None:
        token = (authorization or "").removeprefix("Bearer ").strip()
        if token and secrets.compare_digest(token, self.admin_token):
            return Identity("sandbox-admin", ("system:masters", "system:authenticated"))
        head, _, signature = token.rpartition(".")
        if not head or not secrets.compare_digest(signature, self._sign(head)):
            return None
        try:
            claims = json.loads(base64.urlsafe_b64decode(head.split(".")[1] + "=="))
            namespace, name = claims["kubernetes.io"]["namespace"], claims["kubernetes.io"]["serviceaccount"]["name"]
        except (ValueError, KeyError, IndexError, TypeError):
            return None
        return Identity(f"system:serviceaccount:{namespace}:{name}",
                        ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"))

    def issue(self, namespace: str, service_account: str) -> str:
        claims = {"sub": f"system:serviceaccount:{namespace}:{service_account}", "jti": secrets.token_hex(8),
                  "kubernetes.io": {"namespace": namespace, "serviceaccount": {"name": service_account}}}
        head = f"{_b64({'alg': 'HS256', 'typ': 'JWT'})}.{_b64(claims)}"
        return f"{head}.{self._sign(head)}"

    def _sign(self, head: str) -> str:
        digest = hmac.new(self.signing_key, head.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def _quote(value: Any) -> str:
    """A name quoted as Go's %q does (for the names Kubernetes allows)."""
    return json.dumps(str(value), ensure_ascii=False)


def _b64(value: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(value, separators=(",", ":")).encode()).decode().rstrip("=")


class Authorizer:
    def __init__(self, store: Store, record: Callable[[tuple[str, Attributes]], None] | None = None) -> None:
        self.store = store
        self.record = record  # sees every check: an audit trail

    def _subject(self, subject: dict[str, Any], who: Identity) -> bool:
        kind, name = subject.get("kind"), subject.get("name")
        if kind == "User":
            return name == who.user
        if kind == "Group":
            return name in who.groups
        if kind == "ServiceAccount":
            return who.user == f"system:serviceaccount:{subject.get('namespace', '')}:{name}"
        return False

    def _rules(self, ref: dict[str, Any], namespace: str) -> list[dict[str, Any]]:
        if ref.get("kind") == "ClusterRole":
            role = self.store.get((RBAC, "clusterroles"), "", ref.get("name", ""))
        else:
            role = self.store.get((RBAC, "roles"), namespace, ref.get("name", ""))
        return list((role or {}).get("rules") or [])

    def _bound(self, who: Identity, namespace: str) -> Iterator[tuple[str, list[dict[str, Any]]]]:
        """For each binding naming ``who``: how upstream's RBAC describes it, and the rules it grants."""
        bindings: list[tuple[Obj, str]] = [(b, "") for b in self.store.items((RBAC, "clusterrolebindings"))]
        if namespace:
            bindings += [(b, namespace) for b in self.store.items((RBAC, "rolebindings"), namespace)]
        for binding, scope in bindings:
            subject = next((s for s in binding.get("subjects") or [] if self._subject(s, who)), None)
            if subject is None:
                continue
            ref = binding.get("roleRef") or {}
            name = f"{binding['metadata']['name']}/{scope}" if scope else binding["metadata"]["name"]
            named = f"{subject.get('name')}/{subject.get('namespace') or scope}" \
                if subject.get("kind") == "ServiceAccount" else subject.get("name")
            source = (f'{"RoleBinding" if scope else "ClusterRoleBinding"} {_quote(name)} of {ref.get("kind")} '
                      f'{_quote(ref.get("name"))} to {subject.get("kind")} {_quote(named)}')
            yield source, self._rules(ref, scope)

    def rules_for(self, who: Identity, namespace: str) -> list[dict[str, Any]]:
        return [rule for _source, rules in self._bound(who, namespace) for rule in rules]

    def decide(self, who: Identity, attrs: Attributes) -> tuple[bool, str]:
        """Allowed or not, and the reason upstream's authorizers give (none for system:masters)."""
        if who.admin:
            return True, ""
        for source, rules in self._bound(who, attrs.namespace):
            if any(rule_allows(rule, attrs) for rule in rules):
                return True, f"RBAC: allowed by {source}"
        return False, ""

    def allowed(self, who: Identity, attrs: Attributes) -> bool:
        return self.decide(who, attrs)[0]

    def check(self, who: Identity, attrs: Attributes) -> None:
        if self.record is not None:
            self.record((who.user, attrs))
        if not self.allowed(who, attrs):
            what = f'{attrs.resource} "{attrs.name}"' if attrs.resource else f'path "{attrs.path}"'
            raise ApiError("Forbidden", f'{what} is forbidden: User "{who.user}" {attrs.describe()}',
                           {"name": attrs.name, "group": attrs.group, "kind": attrs.resource})

    def impersonate(self, who: Identity, user: str | None, groups: list[str]) -> Identity:
        """The identity a request acts as after ``Impersonate-*`` headers (checked first)."""
        if not user:
            return who
        namespace, _, sa = user.removeprefix("system:serviceaccount:").partition(":")
        if user.startswith("system:serviceaccount:"):
            self.check(who, Attributes("impersonate", "", "serviceaccounts", namespace=namespace, name=sa))
        else:
            self.check(who, Attributes("impersonate", "", "users", name=user))
        for group in groups:
            self.check(who, Attributes("impersonate", "", "groups", name=group))
        if user.startswith("system:serviceaccount:"):
            groups = [*groups, "system:serviceaccounts", f"system:serviceaccounts:{namespace}"]
        return Identity(user, (*groups, "system:authenticated"))
