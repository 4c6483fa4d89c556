"""Image automation's specs (helmop.dev/v1alpha1, and Flux's image.toolkit.fluxcd.io/v1): an ImageRepository
(whose tags are scanned), an ImagePolicy (which of them is the latest) and an ImageUpdateAutomation (the setter
markers of a git repository rewritten to it, committed and pushed). Field names are Flux's. Pure.

What helmop cannot honour is refused by name (a cloud ``provider``, ``serviceAccountName``), never ignored."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .durations import duration_field
from .errors import SpecError
from .fields import flag, text
from .gitrefs import GitRef
from .kinds import FLUX, FLUX_IMAGES, HELMOP, IMAGES, Kind
from .names import check_references
from .patterns import compile_pattern
from .repositories import access_from_selectors, generic_identity_only, grants, ref_name
from .selectors import Requirement

DEFAULT_EXCLUSIONS = ("^.*\\.sig$",)  # Flux's default: cosign's signature tags are not images
MAX_EXCLUSIONS = 64
MAX_TEMPLATE = 16 << 10  # characters of a commit message template
MAX_VALUES = 64  # messageTemplateValues and push options entries
DOCKER_HUB = "index.docker.io"
# OCI's grammar of a tag and of a repository path's components (distribution/reference)
TAG = re.compile(r"^[\w][\w.-]{0,127}$")
_COMPONENT = re.compile(r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$")
_HOST = re.compile(r"^(?:[a-zA-Z0-9-]+(?:\.[a-zA-Z0-9-]+)*|\[[0-9a-fA-F:]+\])(?::[0-9]{1,5})?$")
_EMAIL = re.compile(r"^[^\s<>]+@[^\s<>]+$")
POLICIES = ("semver", "alphabetical", "numerical")
ANY_POLICY = "*"  # what an automation reads: every policy of its namespace (no object is named so)
REFLECTIONS = ("Never", "IfNotPresent", "Always")


@dataclass(frozen=True)
class ImageKinds:
    """Image automation's kinds of one family (helmop's, or Flux's), and the GitRepository kind they push to."""

    repository: Kind
    policy: Kind
    automation: Kind
    gitrepository: Kind


HELMOP_IMAGES = ImageKinds(*IMAGES, HELMOP.gitrepository)
FLUX_IMAGE_KINDS = ImageKinds(*FLUX_IMAGES, FLUX.gitrepository)


@dataclass(frozen=True)
class Image:
    """An image repository: the registry's host and the repository's path there (``index.docker.io`` and
    ``library/nginx`` for ``nginx``, as Docker and Flux read a name without a registry)."""

    host: str
    path: str
    written: str = ""  # as spec.image gives it (what a policy reports as its latestRef.name)

    @property
    def canonical(self) -> str:
        return f"{self.host}/{self.path}"


def parse_image(text: str, where: str = "spec.image") -> Image:
    """``ghcr.io/org/app``, ``org/app`` or ``app`` (Docker Hub); a tag, digest or scheme is refused."""
    if not isinstance(text, str) or not text or len(text) > 512 or text != text.strip():
        raise SpecError("ImageURLInvalid", f"{where} must be an image repository such as ghcr.io/org/app")
    if "://" in text or "@" in text:
        raise SpecError("ImageURLInvalid", f"{where} {text[:100]!r} must name a repository without a scheme or digest")
    first, _, rest = text.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        host, path = first, rest
    else:
        host, path = DOCKER_HUB, text if "/" in text else f"library/{text}"
    if not _HOST.match(host):
        raise SpecError("ImageURLInvalid", f"{where}: {host[:100]!r} is not a registry host")
    if ":" in path:
        raise SpecError("ImageURLInvalid", f"{where} {text[:100]!r} must not have a tag: the tags are what is scanned")
    if not all(_COMPONENT.match(part) for part in path.split("/")):
        raise SpecError("ImageURLInvalid", f"{where}: {path[:100]!r} is not a repository path (lowercase letters, "
                                           "digits and separators)")
    return Image(host, path, text)


@dataclass(frozen=True)
class ImageRepositorySpec:
    image: Image
    interval: float
    timeout: float
    secret_ref: str = ""  # a dockerconfigjson Secret
    cert_secret_ref: str = ""
    proxy_secret_ref: str = ""
    insecure: bool = False
    suspend: bool = False
    exclusions: tuple[str, ...] = DEFAULT_EXCLUSIONS
    access_from: tuple[tuple[tuple[str, str], ...], ...] | None = None  # None: this namespace's policies only

    def grants(self, labels: dict[str, str]) -> bool:
        """Whether spec.accessFrom lets a policy of a namespace with ``labels`` read this repository."""
        return grants(self.access_from or (), labels)

    def compiled(self) -> tuple[Any, ...]:
        return tuple(compile_pattern(p, f"spec.exclusionList[{i}]") for i, p in enumerate(self.exclusions))


def parse_image_repository(spec: dict[str, Any]) -> ImageRepositorySpec:
    check_references(spec)
    generic_identity_only(spec)
    interval = duration_field(spec, "interval", None)
    if not interval:
        raise SpecError("IntervalNotConfigured", "spec.interval is required (how often the tags are scanned)")
    exclusions = spec.get("exclusionList", list(DEFAULT_EXCLUSIONS))
    if not isinstance(exclusions, list) or len(exclusions) > MAX_EXCLUSIONS:
        raise SpecError("InvalidSpec", f"spec.exclusionList must be a list of at most {MAX_EXCLUSIONS} expressions")
    out = ImageRepositorySpec(
        image=parse_image(spec.get("image") or ""), interval=interval,
        timeout=duration_field(spec, "timeout", None) or min(interval, 300.0),
        secret_ref=ref_name(spec, "secretRef"), cert_secret_ref=ref_name(spec, "certSecretRef"),
        proxy_secret_ref=ref_name(spec, "proxySecretRef"), insecure=bool(spec.get("insecure", False)),
        suspend=bool(spec.get("suspend", False)), exclusions=tuple(str(p) for p in exclusions),
        access_from=access_from_selectors(spec.get("accessFrom")))
    out.compiled()  # every expression checked now: a bad one is the spec's fault
    return out


@dataclass(frozen=True)
class ImagePolicySpec:
    repository: str
    repository_namespace: str  # "": the policy's own
    policy: str  # semver | alphabetical | numerical
    argument: str  # the semver range, or the order (asc | desc)
    pattern: str = ""  # filterTags.pattern (RE2, unanchored as Go's)
    extract: str = ""  # filterTags.extract: what the policy orders ($1, ${name}); "": the whole tag
    reflect_digest: str = "Never"
    interval: float | None = None
    suspend: bool = False


def parse_image_policy(spec: dict[str, Any]) -> ImagePolicySpec:
    check_references(spec)
    ref = spec.get("imageRepositoryRef")
    if not isinstance(ref, dict) or not ref.get("name"):
        raise SpecError("InvalidSpec", "spec.imageRepositoryRef.name is required")
    policy, argument = _policy(spec.get("policy"))
    filters = _map(spec, "filterTags")
    pattern = text(filters, "pattern")
    if pattern:
        compile_pattern(pattern, "spec.filterTags.pattern")
    reflect, interval = _reflection(spec)
    return ImagePolicySpec(str(ref["name"]), text(ref, "namespace"), policy, argument, pattern,
                           text(filters, "extract"), reflect, interval, flag(spec, "suspend"))


def _policy(policy: Any) -> tuple[str, str]:
    """spec.policy: which of POLICIES, and its argument (the semver range, or the order)."""
    chosen = [p for p in POLICIES if isinstance(policy, dict) and policy.get(p) is not None]
    if len(chosen) != 1:
        raise SpecError("InvalidPolicy", "spec.policy must have exactly one of semver, alphabetical or numerical")
    body = policy[chosen[0]]
    if not isinstance(body, dict):
        raise SpecError("InvalidPolicy", f"spec.policy.{chosen[0]} must be a map")
    if chosen[0] == "semver":
        argument = text(body, "range")
        if not argument:
            raise SpecError("InvalidPolicy", "spec.policy.semver.range is required")
        return chosen[0], argument
    argument = text(body, "order", "asc").lower()
    if argument not in ("asc", "desc"):
        raise SpecError("InvalidPolicy", f"spec.policy.{chosen[0]}.order must be asc or desc")
    return chosen[0], argument


def _reflection(spec: dict[str, Any]) -> tuple[str, float | None]:
    """spec.digestReflectionPolicy and spec.interval, which Always needs."""
    reflect = text(spec, "digestReflectionPolicy", "Never")
    if reflect not in REFLECTIONS:
        raise SpecError("InvalidSpec", f"spec.digestReflectionPolicy must be one of {', '.join(REFLECTIONS)}")
    interval = duration_field(spec, "interval", None)
    if reflect == "Always" and not interval:
        raise SpecError("IntervalNotConfigured", "spec.interval is required with digestReflectionPolicy Always")
    return reflect, interval


@dataclass(frozen=True)
class ImageUpdateAutomationSpec:
    source: str  # the GitRepository's name
    source_namespace: str  # "": the automation's own
    interval: float
    author_email: str
    author_name: str = ""
    checkout: GitRef = field(default_factory=GitRef)  # spec.git.checkout.ref (none given: the GitRepository's)
    message_template: str = ""
    template_values: tuple[tuple[str, str], ...] = ()
    signing: str = ""  # gpg | ssh ("" unsigned)
    signing_secret: str = ""
    push_branch: str = ""
    refspec: str = ""
    push_options: tuple[tuple[str, str], ...] = ()
    path: str = ""  # update.path, as written
    selector: tuple[Requirement, ...] = ()  # policySelector: every one must hold
    suspend: bool = False


def parse_image_update_automation(spec: dict[str, Any]) -> ImageUpdateAutomationSpec:
    check_references(spec)
    source = _git_source(spec)
    interval = duration_field(spec, "interval", None)
    if not interval:
        raise SpecError("IntervalNotConfigured", "spec.interval is required")
    git = _map(spec, "git")
    commit = _map(git, "commit", "spec.git")
    email, name = _author(commit)
    update = _map(spec, "update")
    if text(update, "strategy", "Setters") != "Setters":
        raise SpecError("InvalidSpec", "spec.update.strategy must be Setters")
    template = text(commit, "messageTemplate")
    if len(template) > MAX_TEMPLATE:
        raise SpecError("InvalidSpec", f"spec.git.commit.messageTemplate is longer than {MAX_TEMPLATE} characters")
    signing = _map(commit, "signingKey", "spec.git.commit")
    push = _map(git, "push", "spec.git")
    ref = _map(_map(git, "checkout", "spec.git"), "ref", "spec.git.checkout")
    return ImageUpdateAutomationSpec(
        source=str(source["name"]), source_namespace=text(source, "namespace"), interval=interval,
        author_email=email, author_name=name,
        checkout=GitRef(*(text(ref, k) for k in ("branch", "tag", "semver", "commit", "name"))),
        message_template=template, template_values=_strings(commit, "messageTemplateValues"),
        signing=text(signing, "type", "gpg") if signing else "",
        signing_secret=ref_name(signing, "secretRef") if signing else "",
        push_branch=text(push, "branch"), refspec=text(push, "refspec"),
        push_options=_strings(push, "options"), path=text(update, "path"),
        selector=_label_selector(spec.get("policySelector")), suspend=flag(spec, "suspend"))


def _git_source(spec: dict[str, Any]) -> dict[str, Any]:
    source = _map(spec, "sourceRef")
    if text(source, "kind", "GitRepository") != "GitRepository" or not source.get("name"):
        raise SpecError("InvalidSourceConfiguration", "spec.sourceRef must name a GitRepository (the only kind an "
                                                      "automation updates)")
    return source


def _author(commit: dict[str, Any]) -> tuple[str, str]:
    """spec.git.commit.author: its email (required) and name."""
    author = _map(commit, "author", "spec.git.commit")
    email, name = text(author, "email"), text(author, "name")
    if not _EMAIL.match(email) or len(email) > 256 or len(name) > 256:
        raise SpecError("InvalidSpec", "spec.git.commit.author.email is required (an address), name at most 256 "
                                       "characters")
    return email, name


def _map(spec: dict[str, Any], key: str, where: str = "spec") -> dict[str, Any]:
    value = spec.get(key) or {}
    if not isinstance(value, dict):
        raise SpecError("InvalidSpec", f"{where}.{key} must be a map")
    return value


def _strings(spec: dict[str, Any], key: str) -> tuple[tuple[str, str], ...]:
    value = spec.get(key) or {}
    if not isinstance(value, dict) or len(value) > MAX_VALUES:
        raise SpecError("InvalidSpec", f"{key} must be a map of at most {MAX_VALUES} strings")
    return tuple(sorted((str(k), "" if v is None else str(v)) for k, v in value.items()))


_OPERATORS = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!exists"}


def _label_selector(raw: Any) -> tuple[Requirement, ...]:
    """A Deployment-style selector (matchLabels, matchExpressions) as requirements that must all hold."""
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        raise SpecError("InvalidPolicySelector", "spec.policySelector must be a map")
    labels = raw.get("matchLabels") or {}
    expressions = raw.get("matchExpressions") or []
    if not isinstance(labels, dict) or not isinstance(expressions, list) or len(labels) + len(expressions) > 32:
        raise SpecError("InvalidPolicySelector", "spec.policySelector: matchLabels a map and matchExpressions a list, "
                                                 "32 terms at most")
    out = [Requirement(str(k), "=", frozenset({str(v)})) for k, v in labels.items()]
    for i, term in enumerate(expressions):
        operator = _OPERATORS.get(str((term or {}).get("operator"))) if isinstance(term, dict) else None
        values = term.get("values") or [] if isinstance(term, dict) else []
        if operator is None or not term.get("key") or not isinstance(values, list) \
                or (operator in ("in", "notin")) != bool(values):
            raise SpecError("InvalidPolicySelector", f"spec.policySelector.matchExpressions[{i}] must have a key, an "
                                                     "operator (In, NotIn, Exists, DoesNotExist) and values for In "
                                                     "and NotIn only")
        out.append(Requirement(str(term["key"]), operator, frozenset(str(v) for v in values)))
    return tuple(out)
