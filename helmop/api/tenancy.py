"""The operator's multi-tenancy policy (Flux's lockdown flags): whose rights a resource's changes are
made with, and whether a resource may reference objects in another namespace. Pure."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import SpecError

_NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


@dataclass(frozen=True)
class Tenancy:
    # --default-service-account: resources that name no ServiceAccount act as this one of their own namespace
    default_service_account: str = ""
    # --no-cross-namespace-refs: every reference stays inside the referring resource's namespace
    no_cross_namespace_refs: bool = False
    # --decryption-keys-namespaces: the namespaces whose objects may decrypt with the operator's own SOPS keys
    # ("*": all); None: all, or none under either lockdown flag (a tenant would open what another encrypted)
    decryption_keys_namespaces: frozenset[str] | None = None

    @property
    def locked_down(self) -> bool:
        """Either lockdown flag: what the operator holds (its keys, a token a tenant's kubeconfig mints) is then
        no tenant's unless an administrator lists it."""
        return self.no_cross_namespace_refs or bool(self.default_service_account)

    def operator_keys_serve(self, namespace: str) -> bool:
        """Whether objects of ``namespace`` that name no key Secret may decrypt with --decryption-keys."""
        listed = self.decryption_keys_namespaces
        if listed is None:
            return not self.locked_down
        return "*" in listed or namespace in listed

    @staticmethod
    def namespaces(values: list[str]) -> frozenset[str]:
        """The namespaces of --decryption-keys-namespaces (repeated, comma-separated; "" for none), checked."""
        listed = frozenset(name.strip() for value in values for name in value.split(",") if name.strip())
        bad = sorted(name for name in listed if name != "*" and not _NAMESPACE.fullmatch(name))
        if bad:
            raise ValueError(f"{bad[0]!r} is not a namespace name")
        return listed

    def acting_as(self, namespace: str, service_account: str) -> str:
        """The user to impersonate for a resource in ``namespace`` naming ``service_account`` ("" = the
        operator's own rights)."""
        name = service_account or self.default_service_account
        return f"system:serviceaccount:{namespace}:{name}" if name else ""

    def check_reference(self, namespace: str, referenced: str, field: str) -> None:
        """SpecError ``CrossNamespaceRef`` when ``field`` points into another namespace and that is refused."""
        if self.no_cross_namespace_refs and referenced and referenced != namespace:
            raise SpecError("CrossNamespaceRef", f"{field} refers to namespace {referenced!r}: references to other "
                                                 "namespaces are disabled on this operator (--no-cross-namespace-refs)")
