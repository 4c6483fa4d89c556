"""The kinds the UI shows, as the API server serves them (its discovery, read again at most every ``FRESH``
seconds, so a CRD installed or removed shows without a restart): helmop's own, Flux's that helmop serves with
``--flux-api`` (at the versions helmop serves), and app kinds: any other resource of the ``helmop`` category
(an apps file's CRD lists it, as deploy/examples/webapp's does), as ``kubectl get helmop`` finds them.

Discovery is read with the UI's own account (every authenticated user may read it): it says which kinds exist,
never what anyone may see of them; each page still reads the objects with its viewer's rights."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from helmop.api.flux.crds import PAIRS
from helmop.api.kinds import BUILTIN, Kind
from helmop.infra.kube import Kube, KubeError

log = logging.getLogger(__name__)

KNOWN = (*BUILTIN, *(flux for _, flux in PAIRS))  # helmop's kinds, then Flux's it serves
CATEGORY = "helmop"
FRESH = 30.0  # seconds discovery's answer is used
AGGREGATED = ",".join(f"application/json;g=apidiscovery.k8s.io;v={v};as=APIGroupDiscoveryList"
                      for v in ("v2", "v2beta1")) + ",application/json"  # one request where the server can
Shown = dict[str, Kind]  # page name -> kind, in the order shown


@dataclass(frozen=True)
class Served:
    """One resource of discovery."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    categories: tuple[str, ...] = ()


def page_of(kind: Kind) -> str:
    """A kind's name in the UI's paths: helmop's own by plural (``/helmreleases``), any other qualified by its
    group as kubectl qualifies it (``/helmreleases.helm.toolkit.fluxcd.io``): a Flux HelmRelease is another kind."""
    return kind.plural if kind in BUILTIN else f"{kind.plural}.{kind.group}"


def families(kinds: Shown) -> list[tuple[str, list[tuple[str, Kind]]]]:
    """The kinds under the heading each is listed under (helmop's own, Flux's, app kinds), in the order shown."""
    out: dict[str, list[tuple[str, Kind]]] = {}
    for page, kind in kinds.items():
        out.setdefault("helmop" if kind in BUILTIN else "Flux" if kind.flux else "Apps", []).append((page, kind))
    return list(out.items())


def shown(served: Iterable[Served]) -> Shown:
    """The known kinds served at their version, then the ``helmop`` category's others (first version seen)."""
    served = list(served)
    at = {(s.group, s.version, s.plural) for s in served}
    kinds = [k for k in KNOWN if (k.group, k.version, k.plural) in at]
    taken = {(k.group, k.plural) for k in KNOWN}
    for s in served:
        if CATEGORY in s.categories and (s.group, s.plural) not in taken:
            taken.add((s.group, s.plural))
            kinds.append(Kind(s.kind, s.group, s.version, s.plural, namespaced=s.namespaced))
    return {page_of(k): k for k in kinds}


def _aggregated(answer: dict[str, Any]) -> list[Served]:
    return [Served(str((group.get("metadata") or {}).get("name") or ""), str(version.get("version") or ""),
                   str(r.get("resource") or ""), str((r.get("responseKind") or {}).get("kind") or ""),
                   r.get("scope") == "Namespaced", tuple(r.get("categories") or ()))
            for group in answer.get("items") or [] for version in group.get("versions") or []
            for r in version.get("resources") or []]


async def _legacy(kube: Kube, groups: dict[str, Any]) -> list[Served]:
    """A server without aggregated discovery: each group version's list (its preferred one, and the versions of
    the kinds helmop knows)."""
    wanted = {(k.group, k.version) for k in KNOWN}
    versions = [(str(g["name"]), str(v.get("version"))) for g in groups.get("groups") or []
                for v in g.get("versions") or []
                if (g["name"], v.get("version")) in wanted or v == g.get("preferredVersion")]

    async def one(group: str, version: str) -> list[Served]:
        try:
            listing = await kube.request("GET", f"/apis/{group}/{version}", attempts=1)
        except KubeError:
            return []
        return [Served(group, version, str(r["name"]), str(r.get("kind")), bool(r.get("namespaced")),
                       tuple(r.get("categories") or ())) for r in listing.get("resources") or []
                if "/" not in str(r.get("name"))]

    return [s for found in await asyncio.gather(*(one(g, v) for g, v in versions)) for s in found]


async def discover(kube: Kube) -> list[Served]:
    answer = await kube.request("GET", "/apis", accept=AGGREGATED, attempts=1)
    if answer.get("kind") == "APIGroupDiscoveryList":
        return _aggregated(answer)
    return await _legacy(kube, answer)


class Registry:
    """The kinds shown, read from discovery when older than ``FRESH``; ``changed`` hears of each new set."""

    def __init__(self, kube: Kube, changed: Callable[[Iterable[Kind]], None]) -> None:
        self.kube, self.changed = kube, changed
        self._shown: Shown = {}
        self._read_at = -FRESH
        self._lock = asyncio.Lock()

    @property
    def current(self) -> Shown:
        """The kinds last read (helmop's own until discovery has answered once)."""
        return self._shown or {page_of(k): k for k in BUILTIN}

    async def kinds(self) -> Shown:
        async with self._lock:
            if time.monotonic() - self._read_at >= FRESH:
                try:
                    found = shown(await discover(self.kube))
                except KubeError as exc:  # the last answer stands; asked again at the next page
                    log.warning("web UI: discovery failed (%s); the kinds shown are the last known", exc.message)
                else:
                    self._read_at = time.monotonic()
                    if found != self._shown:
                        self._shown = found
                        self.changed(found.values())
        return self.current
