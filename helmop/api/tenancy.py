"""The operator's multi-tenancy policy (Flux's lockdown flags): whose rights a resource's changes are
made with, and whether a resource may reference objects in another namespace. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from .errors import SpecError


@dataclass(frozen=True)
class Tenancy:
    # --default-service-account: resources that name no ServiceAccount act as this one of their own namespace
    default_service_account: str = ""
    # --no-cross-namespace-refs: every reference stays inside the referring resource's namespace
    no_cross_namespace_refs: bool = False

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
