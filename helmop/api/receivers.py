"""Receivers, as Flux's notification-controller defines them (``notification.toolkit.fluxcd.io/v1``): an incoming
webhook at ``/hook/<sha256(token + name + namespace)>`` that asks the objects it lists to reconcile at once. Pure:
the spec as the operator reads it, the webhook path, and which objects a request names.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .durations import parse_duration
from .errors import SpecError
from .kinds import FLUX, FLUX_IMAGES, FLUX_REQUESTED_AT, REQUESTED_AT, VERSION, family_of
from .names import problem

TYPES = ("generic", "generic-hmac", "generic-oidc", "github", "gitlab", "bitbucket", "harbor", "dockerhub", "quay",
         "gcr", "nexus", "acr", "cdevents")
FILTERED = ("github", "gitlab", "bitbucket", "cdevents")  # the types spec.events applies to (Flux's)
PREFIX = "/hook/"
INTERVAL = 600.0  # Flux's default: the Secret's token read again this often
AUDIENCE = "notification-controller"  # a generic-oidc token's audience when spec.oidcProviders[] names none
# The kinds a Flux Receiver may name (Flux's enum), and the apiVersion of those it may name without one
FLUX_KINDS = ("Bucket", "GitRepository", "Kustomization", "HelmRelease", "HelmChart", "HelmRepository",
              "ImageRepository", "ImagePolicy", "ImageUpdateAutomation", "OCIRepository", "ArtifactGenerator",
              "ExternalArtifact")
FLUX_DEFAULT_VERSIONS = {**{k.kind: k.api_version for k in (FLUX.bucket, FLUX.helmchart, FLUX.helmrepository,
                                                            FLUX.gitrepository, FLUX.ocirepository,
                                                            FLUX.artifactgenerator)},
                         "ImageRepository": FLUX_IMAGES[0].api_version}
_LIMIT = 256  # entries of resources, events, oidcProviders and their lists; characters of a CEL expression: 4096
_EXPRESSION = 4096
_IDENTIFIER = re.compile(r"[_a-zA-Z][_a-zA-Z0-9]*")
_API_VERSION = re.compile(r"([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?v[0-9]+([a-z]+[0-9]+)?")


@dataclass(frozen=True)
class Target:
    """One entry of spec.resources: an object by name, or every object of a kind with ``match_labels``."""

    api_version: str
    kind: str
    name: str  # "*": every object with match_labels
    namespace: str  # "": the Receiver's own
    match_labels: tuple[tuple[str, str], ...] = ()
    filter: str = ""  # a CEL expression over res, req (and claims), as spec.resourceFilter

    @property
    def selector(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.match_labels)


@dataclass(frozen=True)
class Check:
    expression: str
    message: str


@dataclass(frozen=True)
class Variable:
    name: str
    expression: str


@dataclass(frozen=True)
class Issuer:
    """An entry of spec.oidcProviders: whose tokens a generic-oidc Receiver takes, and what it asks of them."""

    url: str
    audience: str
    validations: tuple[Check, ...]
    variables: tuple[Variable, ...] = ()


@dataclass(frozen=True)
class ReceiverSpec:
    type: str
    resources: tuple[Target, ...]
    events: tuple[str, ...] = ()
    interval: float = INTERVAL
    resource_filter: str = ""
    secret_ref: str = ""
    suspend: bool = False
    issuers: tuple[Issuer, ...] = ()

    def expressions(self) -> list[tuple[str, str]]:
        """(field, CEL expression) of every expression the spec holds, for the checks made when it is read."""
        found = [("spec.resourceFilter", self.resource_filter)] if self.resource_filter else []
        found += [(f"spec.resources[{i}].filter", t.filter) for i, t in enumerate(self.resources) if t.filter]
        for i, issuer in enumerate(self.issuers):
            found += [(f"spec.oidcProviders[{i}].variables[{j}].expression", v.expression)
                      for j, v in enumerate(issuer.variables)]
            found += [(f"spec.oidcProviders[{i}].validations[{j}].expression", c.expression)
                      for j, c in enumerate(issuer.validations)]
        return found

    def handles(self, event: str) -> bool:
        """Whether a request of ``event`` (the sender's header) is acted on: spec.events, compared as Flux does
        (case-insensitive), for the types that have events; every request for the others."""
        return self.type not in FILTERED or not self.events or event.lower() in {e.lower() for e in self.events}


def webhook_path(token: bytes, name: str, namespace: str) -> str:
    """``/hook/`` and the hex SHA-256 of the token, the name and the namespace, one after the other: Flux's path,
    so that a webhook a git host already has keeps working (a generic-oidc Receiver's token is empty)."""
    return PREFIX + hashlib.sha256(token + name.encode() + namespace.encode()).hexdigest()


def requested_annotation(api_version: str) -> str:
    """The annotation that asks an object of ``api_version`` to reconcile now: Flux's on Flux's kinds (what
    `flux reconcile` and Flux's Receivers set; helmop reads it too), helmop's on the others."""
    return FLUX_REQUESTED_AT if family_of(api_version.rpartition("/")[0]).flux else REQUESTED_AT


def parse_receiver(spec: Mapping[str, Any], *, flux: bool) -> ReceiverSpec:
    """The spec of a Receiver (Flux's with ``flux``), every rule of Flux's CRD and controller checked: SpecError
    ``ValidationFailed`` (Flux's reason) naming the field."""
    kind = _text(spec, "type")
    if kind not in TYPES:
        raise _invalid(f"spec.type must be one of {', '.join(TYPES)}")
    oidc = kind == "generic-oidc"
    secret = spec.get("secretRef")
    if oidc and secret is not None:
        raise _invalid("secretRef cannot be set when type is generic-oidc")
    if not oidc and secret is None:
        raise _invalid("secretRef is required when type is not generic-oidc")
    if not oidc and spec.get("oidcProviders"):
        raise _invalid("oidcProviders can only be set when type is generic-oidc")
    issuers = _issuers(spec.get("oidcProviders"))
    if oidc and not issuers:
        raise _invalid("generic-oidc receivers must define at least one oidcProvider")
    try:
        interval = parse_duration(str(spec["interval"])) if spec.get("interval") else INTERVAL
    except ValueError as exc:
        raise _invalid(f"spec.interval: {exc}") from None
    return ReceiverSpec(type=kind, resources=_targets(spec.get("resources"), flux), interval=interval,
                        events=tuple(_strings(spec.get("events"), "spec.events")),
                        resource_filter=_expression(spec.get("resourceFilter"), "spec.resourceFilter"),
                        secret_ref=_secret(secret), suspend=bool(spec.get("suspend")), issuers=issuers)


def _invalid(message: str) -> SpecError:
    return SpecError("ValidationFailed", message)


def _text(spec: Mapping[str, Any], name: str, where: str = "spec") -> str:
    value = spec.get(name)
    if not isinstance(value, str) or not value:
        raise _invalid(f"{where}.{name} must be a non-empty string")
    return value


def _strings(value: Any, where: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > _LIMIT or not all(isinstance(v, str) for v in value):
        raise _invalid(f"{where} must be a list of at most {_LIMIT} strings")
    return list(value)


def _list(value: Any, where: str) -> list[Mapping[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > _LIMIT or not all(isinstance(v, Mapping) for v in value):
        raise _invalid(f"{where} must be a list of at most {_LIMIT} maps")
    return list(value)


def _expression(value: Any, where: str) -> str:
    if value is None or value == "":
        return ""
    if not isinstance(value, str) or len(value) > _EXPRESSION:
        raise _invalid(f"{where} must be a CEL expression of at most {_EXPRESSION} characters")
    return value


def _secret(ref: Any) -> str:
    if ref is None:
        return ""
    name = ref.get("name") if isinstance(ref, Mapping) else None
    if not isinstance(name, str) or problem(name):
        raise _invalid("spec.secretRef.name must name a Secret of the Receiver's namespace")
    return name


def _targets(value: Any, flux: bool) -> tuple[Target, ...]:
    if value is None:
        raise _invalid("spec.resources is required")
    return tuple(_target(entry, f"spec.resources[{i}]", flux)
                 for i, entry in enumerate(_list(value, "spec.resources")))


def _target(entry: Mapping[str, Any], where: str, flux: bool) -> Target:
    kind, name = _text(entry, "kind", where), _text(entry, "name", where)
    if flux and kind not in FLUX_KINDS:
        raise _invalid(f"{where}.kind must be one of {', '.join(FLUX_KINDS)}")
    api_version = _api_version(entry, where, kind, flux)
    labels = _match_labels(entry, where)
    if name == "*" and not labels:
        raise _invalid(f"{where}: matchLabels must be set when name is '*'")
    if name != "*" and problem(name):
        raise _invalid(f"{where}.name {name[:80]!r} {problem(name)}")
    where_ns = entry.get("namespace") or ""
    if where_ns and (not isinstance(where_ns, str) or problem(where_ns, namespace=True)):
        raise _invalid(f"{where}.namespace is not a namespace name")
    return Target(api_version, kind, name, where_ns, tuple(sorted(labels.items())),
                  _expression(entry.get("filter"), f"{where}.filter"))


def _api_version(entry: Mapping[str, Any], where: str, kind: str, flux: bool) -> str:
    """The target's apiVersion; by default Flux's version of the kind, or helmop's."""
    api_version = entry.get("apiVersion") or (FLUX_DEFAULT_VERSIONS.get(kind, "") if flux else f"helmop.dev/{VERSION}")
    if not isinstance(api_version, str) or not api_version:
        raise _invalid(f"{where}.apiVersion must be specified for kind {kind!r}")
    if not _API_VERSION.fullmatch(api_version):
        raise _invalid(f"{where}.apiVersion {api_version[:80]!r} is not an API version (group/version)")
    return api_version


def _match_labels(entry: Mapping[str, Any], where: str) -> Mapping[str, str]:
    labels = entry.get("matchLabels") or {}
    if not isinstance(labels, Mapping) or not all(isinstance(k, str) and isinstance(v, str)
                                                  for k, v in labels.items()):
        raise _invalid(f"{where}.matchLabels must map label names to values")
    return labels


def _issuers(value: Any) -> tuple[Issuer, ...]:
    issuers: list[Issuer] = []
    for i, entry in enumerate(_list(value, "spec.oidcProviders")):
        where = f"spec.oidcProviders[{i}]"
        url = _text(entry, "issuerURL", where)
        if not re.match(r"https?://", url):
            raise _invalid(f"{where}.issuerURL {url[:80]!r} must start with http:// or https://")
        if any(issuer.url == url for issuer in issuers):
            raise _invalid(f"{where}: duplicate issuerURL {url[:80]!r}")
        audience = entry.get("audience") or AUDIENCE
        if not isinstance(audience, str):
            raise _invalid(f"{where}.audience must be a string")
        checks = tuple(Check(_text(c, "expression", f"{where}.validations[{j}]"),
                             _text(c, "message", f"{where}.validations[{j}]"))
                       for j, c in enumerate(_list(entry.get("validations"), f"{where}.validations")))
        if not checks:
            raise _invalid(f"{where}: at least one validation is required; without validations any caller able to "
                           "obtain a token from this issuer can trigger the Receiver")
        variables = tuple(Variable(_text(v, "name", f"{where}.variables[{j}]"),
                                   _text(v, "expression", f"{where}.variables[{j}]"))
                          for j, v in enumerate(_list(entry.get("variables"), f"{where}.variables")))
        for j, variable in enumerate(variables):
            if not _IDENTIFIER.fullmatch(variable.name):
                raise _invalid(f"{where}.variables[{j}].name {variable.name[:80]!r} is not a CEL identifier")
        issuers.append(Issuer(url, audience, checks, variables))
    return tuple(issuers)
