"""The SOPS keys an object's spec.decryption names (a ConfigSync's build, a HelmRelease's values), read for one
turn: age identities and OpenPGP keys held in memory only (helmop.sources.decryption.keys)."""

from __future__ import annotations

import asyncio

from helmop.api.decryption import Decryption
from helmop.helm.inputs import InputError
from helmop.sources.decryption.keys import KeyInvalid, Keys
from helmop.sources.errors import SourceError
from helmop.sources.secrets import secret_entries

from .context import Context


async def decryption_keys(ctx: Context, namespace: str, decryption: Decryption | None) -> Keys | None:
    """The keys spec.decryption asks for: its Secret's (of the object's own namespace), else the operator's key
    folder; None when it asks for no decryption. Keys are parsed off the event loop (RSA keys take a while)."""
    if decryption is None:
        return None
    name = decryption.secret_ref
    if not name:
        folder = ctx.services.keys_folder
        if folder and not ctx.tenancy.operator_keys_serve(namespace):
            return Keys(refusal=f"the operator's decryption keys are not for namespace {namespace} (an administrator "
                                "lists the namespaces they serve: --decryption-keys-namespaces); name a Secret of "
                                "this namespace's own keys in spec.decryption.secretRef")
        if not folder:
            return Keys(source="no keys (spec.decryption names no Secret, and the operator has no "
                               "--decryption-keys folder)")
        try:
            return await asyncio.to_thread(Keys.of_folder, folder)
        except KeyInvalid as exc:  # the administrator's to fix: tried again at the interval
            raise InputError("DecryptionFailed", f"--decryption-keys: {exc}", transient=True) from None
        except OSError as exc:
            raise InputError("DecryptionFailed", f"--decryption-keys: the operator's key folder cannot be read "
                                                 f"({exc.strerror or type(exc).__name__})", transient=True) from None
    try:
        entries = await secret_entries(ctx.services.kube, namespace, name, "spec.decryption.secretRef")
        return await asyncio.to_thread(Keys.of_entries, entries, f"Secret {namespace}/{name}")
    except SourceError as exc:
        raise InputError("DecryptionFailed", str(exc), transient=exc.transient) from None
    except KeyInvalid as exc:
        raise InputError("DecryptionFailed", f"spec.decryption.secretRef: {exc}", transient=False) from None
