"""The API versions of Flux's kinds: the one Flux serves today, those it has removed (and in which release), and
the fields that did not survive into the served version. Pure.

A manifest of a removed version (``helm.toolkit.fluxcd.io/v2beta1``) is no object of a cluster's Flux any more:
``helmop convert`` names it as such, where it would otherwise pass it over as not being Flux's. Rewriting the
apiVersion (what ``flux migrate -f`` does) is not always enough: a field the served version has no more (a
HelmRelease's ``valuesFile``) would be pruned by Flux's CRD unseen, so each is named too. The operator serves
the removed versions all the same (``--flux-api``, unless ``=current``): :mod:`.upgrade` reads their fields.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from helmop.api.kinds import FLUX, FLUX_ALERT, FLUX_IMAGES, FLUX_PROVIDER, FLUX_RECEIVER, Kind

from .paths import FieldPath, dotted

_BETAS_2_7_AND_2_8 = (("v1beta1", "2.7"), ("v1beta2", "2.8"))
_BETAS_2_7_AND_2_9 = (("v1beta1", "2.7"), ("v1beta2", "2.9"))
_PATCHES = "use spec.patches (each with its patch and an optional target)"
_NEVER_USED = "remove it: it was never used"


@dataclass(frozen=True)
class FluxKind:
    group: str
    kind: str
    served: str  # the version Flux serves
    removed: tuple[tuple[str, str], ...]  # (version, the Flux release that removed it)
    # (field of a removed version, what to write instead): "[]" stands for every item of a list
    gone: tuple[tuple[str, str], ...] = ()

    @property
    def served_api_version(self) -> str:
        return f"{self.group}/{self.served}"


def _served(kind: Kind, removed: tuple[tuple[str, str], ...], gone: tuple[tuple[str, str], ...] = ()) -> FluxKind:
    """One of the Flux kinds helmop serves, at the version it serves it."""
    return FluxKind(kind.group, kind.kind, kind.version, removed, gone)


KINDS = (
    _served(FLUX.helmrelease, (("v2beta1", "2.7"), ("v2beta2", "2.8")), (
        ("spec.chart.spec.valuesFile", "use spec.chart.spec.valuesFiles, a list"),
        ("spec.postRenderers[].kustomize.patchesStrategicMerge", "use spec.postRenderers[].kustomize.patches"),
        ("spec.postRenderers[].kustomize.patchesJson6902", "use spec.postRenderers[].kustomize.patches"))),
    _served(FLUX.configsync, _BETAS_2_7_AND_2_8, (
        ("spec.validation", "remove it: every object is validated by the server-side dry-run"),
        ("spec.patchesStrategicMerge", _PATCHES), ("spec.patchesJson6902", _PATCHES))),
    _served(FLUX.gitrepository, _BETAS_2_7_AND_2_8, (
        ("spec.gitImplementation", "remove it: go-git is the only implementation"),
        ("spec.accessFrom", _NEVER_USED))),
    _served(FLUX.helmrepository, _BETAS_2_7_AND_2_8),
    _served(FLUX.helmchart, _BETAS_2_7_AND_2_8, (("spec.valuesFile", "use spec.valuesFiles, a list"),
                                                 ("spec.accessFrom", _NEVER_USED))),
    _served(FLUX.bucket, _BETAS_2_7_AND_2_8, (("spec.accessFrom", _NEVER_USED),)),
    _served(FLUX.ocirepository, (("v1beta2", "2.8"),)),
    _served(FLUX.externalartifact, ()),
    _served(FLUX.artifactgenerator, ()),
    _served(FLUX_ALERT, _BETAS_2_7_AND_2_9),
    _served(FLUX_PROVIDER, _BETAS_2_7_AND_2_9),
    _served(FLUX_RECEIVER, _BETAS_2_7_AND_2_9),
    *(_served(kind, _BETAS_2_7_AND_2_9) for kind in FLUX_IMAGES),
)
GROUPS = frozenset(k.group for k in KINDS)


@dataclass(frozen=True)
class Refusal:
    """Why an object cannot be converted: ``field`` is where (empty: the object as a whole)."""

    reason: str
    message: str
    field: FieldPath = ()


def flux_kind(api_version: str, kind: str) -> FluxKind | None:
    """The Flux kind an object of ``api_version``/``kind`` is, of whatever version; None: not one of Flux's."""
    group = api_version.rpartition("/")[0]
    return next((k for k in KINDS if (k.group, k.kind) == (group, kind)), None)


def served(api_version: str, kind: str) -> str:
    """The apiVersion Flux serves ``kind`` at, for one of its removed versions; any other ``api_version`` as it
    is (the version of the fields helmop checks a removed version's object against)."""
    known = flux_kind(api_version, kind)
    version = api_version.rpartition("/")[2]
    return known.served_api_version if known and version in dict(known.removed) else api_version


def refusals(obj: dict[str, Any]) -> list[Refusal]:
    """An object of a version of a Flux kind that Flux has removed, or that helmop does not know, refused as such
    (with each field the served version has no more); nothing for any other object."""
    api_version, kind = str(obj.get("apiVersion", "")), str(obj.get("kind", ""))
    known = flux_kind(api_version, kind)
    version = api_version.rpartition("/")[2]
    if known is None or version == known.served:
        return []
    release = dict(known.removed).get(version)
    if release is None:
        return [Refusal("UnknownAPIVersion", f"{api_version} is not a version of {kind} helmop knows (it reads "
                                             f"{known.served_api_version})", ("apiVersion",))]
    removed = Refusal("RemovedAPIVersion", f"{api_version} was removed in Flux {release}: rewrite it as "
                                           f"{known.served_api_version} (flux migrate -f does)", ("apiVersion",))
    return [removed, *(Refusal("RemovedField", f"{dotted(path)} is not in {known.served_api_version}: {instead}", path)
                       for pattern, instead in known.gone for path in present(obj, pattern))]


def deprecation(known: FluxKind, version: str) -> str:
    """What the API server says of each request in ``version``, one of ``known``'s removed versions (its CRD's
    ``deprecationWarning``)."""
    return (f"{known.group}/{version} {known.kind} is deprecated (removed in Flux {dict(known.removed)[version]}): "
            f"use {known.served_api_version}")


def note(api_version: str, kind: str) -> str:
    """What to know of a Flux object ``helmop convert`` keeps as it is because helmop does not know its kind
    ("": nothing, or not Flux's: every kind of Flux's is served)."""
    if flux_kind(api_version, kind) is not None:
        return ""
    group = api_version.rpartition("/")[0]
    return f"kept as it is: {kind} is no kind of {group} helmop knows" if group in GROUPS else ""


def present(obj: dict[str, Any], pattern: str) -> Iterator[FieldPath]:
    """The fields of ``obj`` that the pattern of :attr:`FluxKind.gone` names (``spec.postRenderers[].kustomize``)."""
    return _present(obj, pattern.replace("[]", ".[]").split("."))


def _present(value: Any, parts: list[str], at: FieldPath = ()) -> Iterator[FieldPath]:
    """The paths in ``value`` that the pattern ``parts`` names ("[]": any item of a list)."""
    if not parts:
        yield at
    elif parts[0] == "[]" and isinstance(value, list):
        for i, item in enumerate(value):
            yield from _present(item, parts[1:], (*at, i))
    elif isinstance(value, dict) and parts[0] in value:
        yield from _present(value[parts[0]], parts[1:], (*at, parts[0]))

