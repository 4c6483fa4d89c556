"""The verbs that act on a cluster's helmop resources: reconcile, suspend and resume; how kinds are named.
Each returns what to print, or raises Failed with a message for the user."""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helmop.api.kinds import BUILTIN, FLUX, FLUX_ALERT, FLUX_PROVIDER, FLUX_RECEIVER, Kind, family_of
from helmop.api.objects import Resource
from helmop.infra.kube import Kube, KubeError
from helmop.views import requests

from .errors import Failed

ALIASES = {alias: kind for kind in BUILTIN
           for alias in (kind.kind.lower(), kind.plural, *kind.short_names)}
# Any helmop or Flux kind qualified by its group, as kubectl takes them (hr.helm.toolkit.fluxcd.io): the short
# names alone are helmop's own, which Flux's kinds share.
ALIASES |= {f"{alias}.{kind.group}": kind for kind in (*BUILTIN, *FLUX.kinds, FLUX_PROVIDER, FLUX_ALERT, FLUX_RECEIVER)
            for alias in (kind.kind.lower(), kind.plural, *kind.short_names)}
SHORT = ", ".join((kind.short_names or (kind.kind.lower(),))[0] for kind in BUILTIN)


def kind_of(text: str) -> Kind:
    kind = ALIASES.get(text.lower())
    if kind is None:
        raise Failed(f"unknown kind {text!r}: use one of {SHORT}")
    return kind


@dataclass(frozen=True)
class Served:
    """A resource the API server serves (discovery)."""

    api_version: str
    kind: str
    plural: str
    namespaced: bool


async def discover(kube: Kube, text: str) -> Served | None:
    """Any served resource by plural, singular, kind or short name, as kubectl finds them (core first)."""
    wanted = text.lower()
    versions = [("", "v1")] + [(str(g["name"]), str((g.get("preferredVersion") or {}).get("version", "")))
                               for g in (await kube.request("GET", "/apis")).get("groups") or []]
    for group, version in versions:
        try:
            listing = await kube.request("GET", f"/apis/{group}/{version}" if group else "/api/v1")
        except KubeError:
            continue
        for entry in listing.get("resources") or []:
            names = {entry["name"], str(entry.get("singularName", "")), str(entry.get("kind", "")).lower(),
                     *entry.get("shortNames", [])}
            if "/" not in entry["name"] and wanted in names:
                return Served(f"{group}/{version}" if group else version, str(entry["kind"]), str(entry["name"]),
                              bool(entry.get("namespaced")))
    return None


async def resolve_kind(kube: Kube, text: str) -> Kind:
    """helmop's kinds by alias, else a namespaced custom resource the cluster serves (an app kind from an
    apps file), found as kubectl finds resources."""
    if text.lower() in ALIASES:
        return ALIASES[text.lower()]
    served = await discover(kube, text)
    if served is None or "/" not in served.api_version or not served.namespaced:
        raise Failed(f"unknown kind {text!r}: use one of {SHORT}, or an app kind the cluster serves")
    group, _, version = served.api_version.partition("/")
    return Kind(served.kind, group, version, served.plural)


async def reference(kube: Kube, text: str, namespace: str, name: str) -> tuple[str, str, str, str]:
    """(apiVersion, kind, namespace, name) of any object, its kind named as kubectl takes it."""
    helmops = ALIASES.get(text.lower())
    served = (Served(helmops.api_version, helmops.kind, helmops.plural, helmops.namespaced) if helmops
              else await discover(kube, text))
    if served is None:
        raise Failed(f"the server doesn't have a resource type {text!r}")
    return served.api_version, served.kind, namespace if served.namespaced else "", name


async def reconcile(kube: Kube, kind: Kind, namespace: str, name: str, *, with_source: bool, timeout: float,
                    reset: bool = False, force: bool = False, out: Any = None, reason: str = "") -> bool:
    """Ask for a reconcile now and wait for its outcome (not an earlier one); True when it ended Ready.
    ``reset``: the failure counts start afresh (one more try); ``force``: one forced upgrade."""
    out = out or sys.stdout  # the stream of the moment (not of import time)
    obj = await kube.get(kind.path(namespace, name))
    if obj is None:
        raise Failed(f"{kind.kind} {namespace}/{name} not found")
    source = Resource(obj).source_ref
    source_kind = family_of(kind.group).source(str((source or {}).get("kind") or "GitRepository"))
    if with_source and source and source_kind is not None and not await reconcile(
            kube, source_kind, str(source.get("namespace") or namespace), source["name"], with_source=False,
            timeout=timeout, out=out):
        return False
    try:
        stamp = await requests.ask_reconcile(kube, kind, obj, reset=reset, force=force, reason=reason)
    except requests.Refused as exc:
        raise Failed(str(exc)) from None
    print(f"► annotating {kind.kind} {namespace}/{name}; waiting for the reconcile", file=out, flush=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready = requests.outcome(await kube.get(kind.path(namespace, name)) or {}, requests.reconciled(stamp))
        if ready is not None:
            mark = "✔" if ready.get("status") == "True" else "✗"
            print(f"{mark} {ready.get('reason', '')}: {ready.get('message', '')}", file=out, flush=True)
            return ready.get("status") == "True"
        await asyncio.sleep(0.5)
    raise Failed(f"{kind.kind} {namespace}/{name} was not reconciled within {timeout:.0f}s")


async def set_suspended(kube: Kube, kind: Kind, namespace: str, name: str, suspended: bool, *,
                        reason: str = "") -> str:
    try:
        await requests.set_suspended(kube, kind, namespace, name, suspended, reason=reason)
    except requests.Refused as exc:
        raise Failed(str(exc)) from None
    return f"✔ {kind.kind} {namespace}/{name} {'suspended' if suspended else 'resumed'}"


def temp_cache() -> Path:
    return Path(tempfile.mkdtemp(prefix="helmop-cli-"))
