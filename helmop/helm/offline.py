"""HelmReleases as manifests name them, rendered without a cluster: which releases a set of manifests amounts to
(helmop's and Flux's HelmReleases, Jenkins and app resources, as the operator maps them), the ConfigMaps and Secrets
their valuesFrom read, the chart a release names (its repository, or a path of the tree), and the objects of a rendered
manifest. What ``helmop render``, ``helmop diff`` and previews share."""

from __future__ import annotations

import base64
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from helmop.api import jenkins, manifests, yamlc
from helmop.api.apps import AppKind
from helmop.api.errors import SpecError
from helmop.api.flux import spec as flux_spec
from helmop.api.flux import upgrade
from helmop.api.flux.versions import flux_kind
from helmop.api.helmcharts import parse_helm_chart
from helmop.api.helmrelease import ArtifactChart, HelmReleaseSpec, RepositoryChart, SharedRepositoryChart, parse_spec
from helmop.api.kinds import FLUX, HELMRELEASE
from helmop.api.repositories import parse_helm_repository, parse_oci_repository
from helmop.sources import artifacts
from helmop.sources.repositories import Credentials, Repositories

from . import values as helm_values
from .apps import release_spec
from .inputs import InputError, Opener, archive_values


@dataclass(frozen=True)
class Planned:
    """A HelmRelease as the operator would see it: from a HelmRelease manifest or an app resource."""

    origin: str  # where it was found (file#document) or "the cluster"
    namespace: str
    name: str  # the HelmRelease's name (an app's generated one: <name>-<kind>)
    spec: HelmReleaseSpec
    api_version: str = HELMRELEASE.api_version  # of the HelmRelease: helmop's (an app's too), or Flux's


def _app_kinds(apps: list[AppKind]) -> list[AppKind]:
    # Jenkins with its pinned default chart (the operator's --jenkins-chart-* flags are not known here).
    return [jenkins.app_kind(jenkins.DEFAULT_CHART), *apps]


def planned(found: list[manifests.Manifest], apps: list[AppKind],
            default_namespace: str) -> tuple[list[Planned], list[str]]:
    """The HelmReleases that the manifests amount to, and ``origin: problem`` errors."""
    out: list[Planned] = []
    errors: list[str] = []
    for item in found:
        namespace = str((item.obj.get("metadata") or {}).get("namespace") or default_namespace)
        spec = dict(item.obj.get("spec") or {})
        try:
            if item.api_version == HELMRELEASE.api_version and item.kind == HELMRELEASE.kind:
                out.append(Planned(item.origin, namespace, item.name, parse_spec(spec, item.name, namespace)))
                continue
            if _is_flux_release(item):
                out.append(Planned(item.origin, namespace, item.name, _flux_spec(item.api_version, spec, item.name,
                                                                                 namespace), item.api_version))
                continue
            kind = next((k for k in _app_kinds(apps)
                         if (k.resource.api_version, k.kind) == (item.api_version, item.kind)), None)
            if kind is not None:
                hr_name = kind.release_object_name(item.name)
                out.append(Planned(item.origin, namespace, hr_name,
                                   parse_spec(release_spec(kind, item.name, spec), hr_name, namespace)))
        except SpecError as exc:
            errors.append(f"{item.origin}: {item.kind} {namespace}/{item.name}: {exc.reason}: {exc}")
    return out, errors


def _is_flux_release(item: manifests.Manifest) -> bool:
    known = flux_kind(item.api_version, item.kind)
    return known is not None and known.kind == FLUX.helmrelease.kind and item.api_version.rpartition("/")[2] in (
        known.served, *dict(known.removed))


def _flux_spec(api_version: str, spec: dict[str, Any], name: str, namespace: str) -> HelmReleaseSpec:
    """A Flux HelmRelease's spec as helmop reconciles it (``--flux-api``): a removed version's fields read as the
    served version's (a manifest says which version it is written in), a field helmop does not implement refused by
    name, Flux's labels on what it renders."""
    kind = FLUX.helmrelease
    if api_version != kind.api_version:
        spec, _ = upgrade.upgrade(kind.kind, spec, lambda _: True)
    flux_spec.check(kind, spec)
    return parse_spec(spec, name, namespace, origin=kind.origin_labels(namespace, name), group=kind.group)


def tree_values(found: list[manifests.Manifest]) -> dict[tuple[str, str, str], dict[str, str]]:
    """ConfigMaps and Secrets of the tree: (kind, namespace, name) -> data (strings)."""
    out: dict[tuple[str, str, str], dict[str, str]] = {}
    for item in found:
        if item.kind not in ("ConfigMap", "Secret") or item.api_version != "v1":
            continue
        meta = item.obj.get("metadata") or {}
        data = {k: str(v) for k, v in (item.obj.get("data") or {}).items()}
        if item.kind == "Secret":
            data = {k: base64.b64decode(v).decode(errors="replace") for k, v in data.items()}
            data.update({k: str(v) for k, v in (item.obj.get("stringData") or {}).items()})
        out[(item.kind, str(meta.get("namespace") or "default"), item.name)] = data
    return out


async def offline_chart(spec: HelmReleaseSpec, root: Path, repos: Repositories,
                        sources: dict[tuple[str, str, str], dict[str, Any]],
                        namespace: str) -> tuple[Path, dict[str, Any]]:
    """The chart and its valuesFiles' values: from its repository (a HelmRepository or OCIRepository found in
    the tree), or from the tree for a git chart (the tree stands for the repository: paths are relative to it)."""
    chart = spec.chart
    if isinstance(chart, RepositoryChart):
        resolved = await repos.resolve(chart.url, chart.name, chart.version, Credentials(), chart.insecure)
        return await repos.fetch(resolved, chart.url, Credentials(), chart.insecure), {}
    if isinstance(chart, SharedRepositoryChart | ArtifactChart):
        kind = "HelmRepository" if isinstance(chart, SharedRepositoryChart) else chart.kind
        name = chart.repository if isinstance(chart, SharedRepositoryChart) else chart.name
        source = sources.get((kind, chart.namespace or namespace, name))
        if source is None:
            raise InputError("SourceNotFound", f"{kind} {chart.namespace or namespace}/{name} is not in the tree")
        if kind == "HelmChart":  # its template, read as the release's own chart.spec would be
            template = replace(parse_helm_chart(source.get("spec") or {}).chart, namespace=chart.namespace or namespace)
            return await offline_chart(replace(spec, chart=template), root, repos, sources, namespace)
        if isinstance(chart, ArtifactChart):
            oci = parse_oci_repository(source.get("spec") or {})
            found = await artifacts.resolve(repos, oci, Credentials())
            return (await artifacts.chart(repos, oci.url, found.digest, Credentials(), oci.insecure))[1], {}
        helm = parse_helm_repository(source.get("spec") or {})
        resolved = await repos.resolve(helm.url, chart.chart, chart.version, Credentials(), helm.insecure)
        path = await repos.fetch(resolved, helm.url, Credentials(), helm.insecure)
        return path, (await archive_values(path, chart.values_files, chart.ignore_missing_values_files))[0]
    local = (root / chart.path).resolve()
    if not (local / "Chart.yaml").exists() or root.resolve() not in local.parents:
        raise InputError("ChartNotFound", f"chart path {chart.path!r} is not a chart inside {root}")
    base: dict[str, Any] = {}
    for name in chart.values_files:
        file = (root / name).resolve()
        if root.resolve() not in file.parents or not file.is_file():
            raise InputError("ValuesFileNotFound", f"values file {name!r} is not a file inside {root}")
        base = helm_values.merge(base, helm_values.parse_values(file.read_text(), name))
    return local, base


_SEPARATOR = re.compile(r"^---[ \t]*(?:#.*)?$", re.M)


async def chart_and_values(release: Planned, root: Path, values_of: dict[tuple[str, str, str], dict[str, str]],
                           sources: dict[tuple[str, str, str], dict[str, Any]], repos: Repositories,
                           where: str = "tree", *, files: Mapping[str, bytes] | None = None,
                           opener: Opener | None = None) -> tuple[Path, dict[str, Any]]:
    """The chart and the values the operator would install ``release`` with, from what ``where`` holds (its
    valuesFrom ConfigMaps and Secrets in ``values_of``, its chart sources in ``sources``; its spec.valuesFiles from a
    GitRepository read from ``files``, the tree rendered, which is the repository a release's GitRepository names
    where values live beside the manifests that use them). ``opener``: SOPS documents decrypted (what it decrypts is
    its ``plaintexts()``); without one, a SOPS document is refused, never rendered as ENC[...] strings."""
    opener = opener or Opener(None)
    pieces = []
    for ref in release.spec.values_from:
        data = values_of.get((ref.kind, release.namespace, ref.name))
        if data is None or ref.values_key not in data:
            if ref.optional:
                continue
            raise InputError("ValuesFromNotFound", f"{ref.kind} {release.namespace}/{ref.name} (key "
                                                   f"{ref.values_key}) is not in the {where}")
        text = data[ref.values_key]
        pieces.append((ref, text if ref.target_path else opener.text(text, f"{ref.kind} {ref.name} key "
                                                                             f"{ref.values_key}")))
    chart, base = await offline_chart(release.spec, root, repos, sources, release.namespace)
    if release.spec.values_files:
        base = helm_values.merge(base, _tree_values_files(release, files, opener, where))
    return chart, helm_values.compose(pieces, release.spec.values, base)


def _tree_values_files(release: Planned, files: Mapping[str, bytes] | None, opener: Opener,
                       where: str) -> dict[str, Any]:
    """spec.valuesFiles read from the tree: a GitRepository's only (other sources are not the tree)."""
    merged: dict[str, Any] = {}
    for i, ref in enumerate(release.spec.values_files):
        field = f"spec.valuesFiles[{i}]"
        if ref.kind != "GitRepository" or files is None:
            raise InputError("ValuesFileNotFound", f"{field}: values from {ref.describe(release.namespace)} are not "
                                                   f"in the {where} (only a GitRepository's, read from the tree)")
        data = files.get(posixpath.normpath(ref.path))
        if data is None:
            if ref.optional:
                continue
            raise InputError("ValuesFileNotFound", f"{field}: {ref.path!r} is not in the {where}")
        text = opener.text(data.decode(errors="replace"), f"{field} ({ref.path})")
        merged = helm_values.merge(merged, helm_values.parse_values(text, ref.path))
    return merged


def manifest_objects(manifest: str, namespace: str) -> dict[tuple[str, str, str, str], str]:
    """Each object's text in a helm manifest, by (apiVersion, kind, namespace, name) (namespace
    ``namespace`` when it names none: the manifest does not say which kinds are cluster-scoped)."""
    out: dict[tuple[str, str, str, str], str] = {}
    for chunk in _SEPARATOR.split(manifest):
        if not chunk.strip():
            continue
        try:
            obj = yamlc.load(chunk)
        except yaml.YAMLError:
            continue
        if isinstance(obj, dict) and obj.get("kind"):
            meta = obj.get("metadata") or {}
            key = (str(obj.get("apiVersion", "")), str(obj["kind"]), str(meta.get("namespace") or namespace),
                   str(meta.get("name", "")))
            out[key] = chunk.strip("\n") + "\n"
    return out
