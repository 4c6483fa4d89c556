"""spec.decryption, as a ConfigSync (Flux's Kustomization's shape) and a HelmRelease take it: SOPS, with the keys of
a Secret of the object's namespace, or the operator's own key folder."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import SpecError

DECRYPTION_SECRET = "helmop.dev/decryption-secret"  # a Flux HelmRelease's spec.decryption (its schema is Flux's)


@dataclass(frozen=True)
class Decryption:
    """SOPS, with the keys of a Secret of the object's namespace (``secret_ref``), or, without one, the operator's
    own key folder."""

    secret_ref: str = ""


def parse_decryption(spec: dict[str, Any]) -> Decryption | None:
    raw = spec.get("decryption")
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise SpecError("InvalidSpec", "spec.decryption must be a map")
    if raw.get("provider") != "sops":
        raise SpecError("InvalidSpec", "spec.decryption.provider must be sops")
    if raw.get("serviceAccountName"):
        raise SpecError("UnsupportedField", "spec.decryption.serviceAccountName (a cloud KMS identity) is not "
                                            "implemented by helmop: decrypt with age or OpenPGP keys in "
                                            "spec.decryption.secretRef")
    secret = raw.get("secretRef") or {}
    return Decryption(secret_ref=str(secret.get("name") or "") if isinstance(secret, dict) else "")
