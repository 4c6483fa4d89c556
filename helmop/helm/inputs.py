"""Gathering what a reconcile needs: merged values (valuesFrom + values) and the resolved chart.

Everything read here is read through the API or the sources layer; the result carries the config
digest (chart reference + merged values + where the release goes) that decides whether helm needs
to run at all, and the secret strings to scrub from any message.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import shutil
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import yaml

from helmop.api import yamlc
from helmop.api.addresses import AddressRefused
from helmop.api.errors import HelmopError, SpecError
from helmop.api.helmcharts import parse_helm_chart
from helmop.api.helmrelease import (
    ArtifactChart,
    Chart,
    HelmReleaseSpec,
    SharedRepositoryChart,
    SourceChart,
    ValuesFile,
    ValuesReference,
)
from helmop.api.kinds import HELMOP, Family, Kind
from helmop.api.manifests import YamlProblem
from helmop.api.redaction import safe_url
from helmop.api.repositories import (
    Verification,
    parse_helm_repository,
    parse_oci_repository,
)
from helmop.api.settings import Limits
from helmop.api.tenancy import Tenancy
from helmop.helm import chartdeps
from helmop.helm import values as helm_values
from helmop.helm.engine import Engine
from helmop.helm.errors import HelmError
from helmop.infra import addresses
from helmop.infra.kube import Kube
from helmop.infra.worker import Worker, WorkerTimeout
from helmop.sources import artifacts
from helmop.sources.credentials import credentials
from helmop.sources.decryption import stores
from helmop.sources.decryption.keys import Keys
from helmop.sources.decryption.repository import Decryptor, encrypted
from helmop.sources.errors import SourceError
from helmop.sources.git import GitCache, tree_digest, write_tree
from helmop.sources.readers import Readers as SourceReaders
from helmop.sources.readers import Referrer, read_file, referenced, source_artifact, unpublished
from helmop.sources.repositories import Credentials, Repositories, ResolvedChart
from helmop.sources.secrets import secret_entries
from helmop.sources.trees import Artifact, GitArtifact
from helmop.sources.verification import registry


class Readers(SourceReaders, Protocol):
    """Where inputs are read from: a source's readers (the API, the chart and git caches, the tenancy), helm
    (dependency builds) and the worker process that loads large YAML. The operator's services are one; the CLI
    builds its own."""

    @property
    def engine(self) -> Engine: ...
    @property
    def yaml(self) -> Worker: ...


@dataclass
class StandaloneReaders:
    """Readers outside the operator (the CLI's diff)."""

    kube: Kube
    repos: Repositories
    git: GitCache
    engine: Engine
    yaml: Worker = field(default_factory=lambda: Worker(timeout=Limits().yaml_timeout))
    tenancy: Tenancy = field(default_factory=Tenancy)  # the CLI reads with its user's own rights


class InputError(HelmopError):
    """Inputs cannot be gathered (a missing ConfigMap, Secret or source, values that do not parse)."""


class Opener:
    """SOPS-encrypted values documents opened with spec.decryption's keys (None: it names none): a YAML or JSON
    document with SOPS metadata is decrypted, its MAC checked; one found without keys is refused, never taken as
    values with its ENC[...] strings."""

    def __init__(self, decryptor: Decryptor | None) -> None:
        self.decryptor = decryptor

    def text(self, text: str, where: str) -> str:
        data = text.encode()
        found = stores.detect(data)
        if found not in (stores.Format.YAML, stores.Format.JSON) or not encrypted(_parsed_or_text(text)):
            return text
        if self.decryptor is None:
            raise InputError("DecryptionFailed", f"{where} is SOPS-encrypted: set spec.decryption (provider sops) "
                                                 "to decrypt it", transient=False)
        try:
            return self.decryptor.file(data, found, where, stores.Format.YAML).decode()
        except SourceError as exc:
            raise InputError(exc.reason, str(exc), transient=exc.transient) from None

    def plaintexts(self) -> list[str]:
        """What was decrypted (to be masked wherever a message could quote it)."""
        return [p for p in (self.decryptor.plaintexts if self.decryptor else []) if len(p) >= 3]


@dataclass
class Inputs:
    chart: ResolvedChart
    chart_path: Path
    values: dict[str, Any]
    digest: str
    secrets: list[str] = field(default_factory=list)
    source_revision: str = ""  # of the source the chart was read from (a GitRepository's commit)


def _secret_strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value] if len(value) >= 4 else []
    if isinstance(value, dict):
        return [s for v in value.values() for s in _secret_strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _secret_strings(v)]
    return []


async def _reference(kube: Kube, namespace: str, ref: ValuesReference) -> tuple[str | None, bool]:
    """(text of the key or None when optional and missing, whether it came from a Secret)."""
    plural = "configmaps" if ref.kind == "ConfigMap" else "secrets"
    obj = await kube.get(f"/api/v1/namespaces/{namespace}/{plural}/{ref.name}")
    if obj is None:
        if ref.optional:
            return None, False
        raise InputError("ValuesFromNotFound", f"{ref.kind} {namespace}/{ref.name} named in spec.valuesFrom "
                                               "does not exist", transient=True)
    data = obj.get("data") or {}
    if ref.values_key not in data:
        if ref.optional:
            return None, False
        raise InputError("ValuesKeyNotFound", f"{ref.kind} {namespace}/{ref.name} has no key "
                                              f"{ref.values_key!r}", transient=True)
    text = str(data[ref.values_key])
    if ref.kind == "Secret":
        text = base64.b64decode(text).decode(errors="replace")
    return text, ref.kind == "Secret"


MAX_VALUES_BYTES = 4 << 20


def _check_size(pieces: list[tuple[ValuesReference, str]]) -> None:
    size = sum(len(text) for _, text in pieces)
    if size > MAX_VALUES_BYTES:  # checked before parsing: a parse of that size would cost seconds
        raise InputError("ValuesTooLarge", f"spec.valuesFrom adds up to {size / (1 << 20):.1f} MiB, more than "
                                           f"{MAX_VALUES_BYTES >> 20} MiB (helm keeps the values in a release "
                                           "record, a Secret of at most 1 MiB compressed)")


def compose_values(pieces: list[tuple[ValuesReference, str]], spec: HelmReleaseSpec,
                   base: dict[str, Any] | None = None) -> dict[str, Any]:
    _check_size(pieces)
    try:
        return helm_values.compose(pieces, spec.values, base)
    except ValueError as exc:
        raise InputError("ValuesInvalid", str(exc)) from None


async def values_pieces(kube: Kube, namespace: str, spec: HelmReleaseSpec, worker: Worker | None = None,
                        opener: Opener | None = None) -> tuple[list[tuple[ValuesReference, str]], list[str]]:
    """The texts of spec.valuesFrom from the cluster, in order (a SOPS document decrypted by ``opener``), and the
    secret strings among them. With a ``worker``, a large document is loaded there and handed on as JSON (which
    loads in milliseconds)."""
    pieces: list[tuple[ValuesReference, str]] = []
    refs_secrets: list[int] = []  # the pieces that came from Secrets
    for ref in spec.values_from:
        text, from_secret = await _reference(kube, namespace, ref)
        if text is not None and not ref.target_path:  # a whole document (a targetPath's value is a scalar)
            text = (opener or Opener(None)).text(text, f"spec.valuesFrom {ref.kind} {namespace}/{ref.name} key "
                                                       f"{ref.values_key}")
        if text is not None:
            pieces.append((ref, text))
            _check_size(pieces)
            if worker is not None and not ref.target_path and len(text) > yamlc.LARGE:
                pieces[-1] = (ref, await _as_json(worker, f"{ref.kind} {ref.name} key {ref.values_key}", text))
            if from_secret:
                refs_secrets.append(len(pieces) - 1)
    secrets = [s for i in refs_secrets for s in _secret_strings(
        pieces[i][1] if pieces[i][0].target_path else _parsed_or_text(pieces[i][1]))]
    return pieces, secrets


async def _as_json(worker: Worker, where: str, text: str) -> str:
    """A values document (``where``, as a message names it) loaded in the worker, as JSON text; InputError as
    parsing it here would give."""
    try:
        documents = await worker.documents(text)
    except yaml.YAMLError as exc:
        found = YamlProblem.of(exc)
        raise InputError("ValuesInvalid", f"{where} is not valid YAML{found.at}: {found.problem}") from None
    except WorkerTimeout as exc:
        raise InputError("ValuesInvalid", f"{where}: loading it {exc}") from None
    if len(documents) > 1:
        raise InputError("ValuesInvalid", f"{where} holds {len(documents)} YAML documents; values are one")
    return json.dumps(documents[0][1]) if documents else ""


def _parsed_or_text(text: str) -> Any:
    """A values document's data, to find the secret strings in it (the text itself if it does not parse:
    composing the values reports that)."""
    try:
        return helm_values.parse_values(text, "")
    except ValueError:
        return text


async def gather(ctx: Readers, namespace: str, spec: HelmReleaseSpec, *, asked_at: float = 0.0,
                 family: Family = HELMOP, keys: Keys | None = None) -> Inputs:
    """Everything a release is made of. A chart repository's index is at most ``spec.interval`` old and,
    for an explicit reconcile request made at ``asked_at``, fetched after it (a HelmRepository's: its own
    interval, refreshed by its own reconcile). Sources are ``family``'s kinds. ``keys``: spec.decryption's, which
    open SOPS-encrypted values (files and valuesFrom entries); what they decrypt is masked as Secrets are."""
    opener = Opener(Decryptor(keys) if keys is not None else None)
    pieces, secrets = await values_pieces(ctx.kube, namespace, spec, ctx.yaml, opener)
    values = compose_values(pieces, spec)
    release = [spec.release_name, spec.target_namespace]
    try:
        chart = await chart_inputs(ctx, namespace, spec.chart, family, interval=spec.interval, asked_at=asked_at)
        files = await source_values(ctx, namespace, spec.values_files, family, ctx.yaml, opener)
    except SourceError as exc:
        raise InputError(exc.reason, str(exc), transient=exc.transient) from None
    secrets += opener.plaintexts()
    if chart.file_values or files:  # the chart's own values files, then spec.valuesFiles, under valuesFrom
        values = compose_values(pieces, spec, helm_values.merge(chart.file_values, files))
    digest = helm_values.digest({"chart": chart.reference, "values": values, "release": release,
                                 "postRender": spec.post_render})
    return Inputs(chart.resolved, chart.path, values, digest, secrets + chart.creds.secrets(), chart.source_revision)


MAX_VALUES_FILE_BYTES = 1 << 20


async def source_values(ctx: Readers, namespace: str, files: tuple[ValuesFile, ...], family: Family = HELMOP,
                        worker: Worker | None = None, opener: Opener | None = None) -> dict[str, Any]:
    """spec.valuesFiles of a release of ``namespace``, merged in order: each read from its source's artifact at
    the revision the source published (each source's artifact read once, however many of its files are named).
    What a release takes of them is their values: a revision that changes none of them changes no digest."""
    merged: dict[str, Any] = {}
    read: dict[tuple[str, str, str], Artifact] = {}
    total = 0
    for i, ref in enumerate(files):
        text = await values_file_text(ctx, namespace, ref, f"spec.valuesFiles[{i}]", family, read)
        if text is None:
            continue
        text = (opener or Opener(None)).text(text, f"spec.valuesFiles[{i}] ({ref.describe(namespace)})")
        total += len(text)
        if total > MAX_VALUES_BYTES:
            raise InputError("ValuesTooLarge", f"spec.valuesFiles add up to more than {MAX_VALUES_BYTES >> 20} MiB "
                                               "(helm keeps the values in a release record)", transient=False)
        where = ref.describe(namespace)
        if worker is not None and len(text) > yamlc.LARGE:
            text = await _as_json(worker, where, text)
        try:
            merged = helm_values.merge(merged, helm_values.parse_values(text, where))
        except ValueError as exc:
            raise InputError("ValuesInvalid", str(exc), transient=False) from None
    return merged


async def values_file_text(ctx: Readers, namespace: str, ref: ValuesFile, field: str, family: Family,
                           read: dict[tuple[str, str, str], Artifact]) -> str | None:
    """The text of one values file (``field`` names it in a refusal; None: optional, and missing), its source's
    artifact read into ``read`` unless it is there. The one place a values file's bytes are read."""
    where = ref.namespace or namespace
    source = (ref.kind, where, ref.name)
    if source not in read:
        read[source] = await source_artifact(ctx, family, ref.kind, where, ref.name,
                                             Referrer(namespace, f"{field}.sourceRef"))
    artifact = read[source]
    data = await read_file(artifact, ref.path)  # a link out of the artifact is refused there (InvalidPath)
    if data is None:
        if ref.optional:
            return None
        raise InputError("ValuesFileNotFound", f"{field}: {ref.describe(namespace)} does not exist at revision "
                                               f"{artifact.revision} (set optional to skip it)", transient=False)
    if len(data) > MAX_VALUES_FILE_BYTES:
        raise InputError("ValuesTooLarge", f"{field}: {ref.describe(namespace)} is {len(data) >> 10} KiB, more than "
                                           f"{MAX_VALUES_FILE_BYTES >> 20} MiB", transient=False)
    try:
        return data.decode()
    except UnicodeDecodeError:
        raise InputError("ValuesInvalid", f"{field}: {ref.describe(namespace)} is not UTF-8 text",
                         transient=False) from None


@dataclass(frozen=True)
class ChartInputs:
    """A chart as a release takes it: resolved, on disk, with the credentials it was read with, its values files
    merged, and what it is in the config digest (``reference``)."""

    resolved: ResolvedChart
    path: Path
    creds: Credentials
    file_values: dict[str, Any]
    reference: list[Any]
    digest: str = ""  # of the chart's content (an archive's sha256, a source chart's files')
    source_revision: str = ""  # the revision of the source it was read from
    values_found: tuple[str, ...] = ()  # the values files merged (ignoreMissingValuesFiles may skip some)


async def chart_inputs(ctx: Readers, namespace: str, chart: Chart, family: Family = HELMOP, *, interval: float = 0.0,
                       asked_at: float = 0.0) -> ChartInputs:
    """The chart ``chart`` names, for a release (or a HelmChart) of ``namespace``."""
    if isinstance(chart, SourceChart):
        return await git_chart(ctx, namespace, chart, family)
    if isinstance(chart, SharedRepositoryChart):
        resolved, path, creds = await shared_chart(ctx, namespace, chart, family)
        file_values, found = await archive_values(path, chart.values_files, chart.ignore_missing_values_files)
        return ChartInputs(resolved, path, creds, file_values,
                           [resolved.repository, resolved.name, resolved.version, chart.values_files],
                           await _file_digest(path), values_found=found)
    if isinstance(chart, ArtifactChart) and chart.kind == "HelmChart":
        return await helm_chart(ctx, namespace, chart, family)
    if isinstance(chart, ArtifactChart) and chart.kind == "ExternalArtifact":
        return await external_chart(ctx, namespace, chart, family)
    if isinstance(chart, ArtifactChart):
        resolved, path, creds = await artifact_chart(ctx, namespace, chart, family)
        return ChartInputs(resolved, path, creds, {},
                           [resolved.repository, resolved.name, resolved.version, resolved.digest])
    creds = await credentials(ctx.kube, namespace, chart.secret_ref, "spec.chart.repository")
    resolved = await ctx.repos.resolve(chart.url, chart.name, chart.version, creds, chart.insecure,
                                       max_age=interval, asked_at=asked_at)
    path = await ctx.repos.fetch(resolved, chart.url, creds, chart.insecure)
    return ChartInputs(resolved, path, creds, {}, [resolved.repository, resolved.name, resolved.version])


async def _file_digest(path: Path) -> str:
    return "sha256:" + hashlib.sha256(await asyncio.to_thread(path.read_bytes)).hexdigest()


async def helm_chart(ctx: Readers, namespace: str, ref: ArtifactChart, family: Family) -> ChartInputs:
    """spec.chartRef to a HelmChart: the chart it published (its version pinned: what it resolved is what the
    release takes, whatever its HelmRepository lists by now), with its values files."""
    where = ref.namespace or namespace
    obj, revision = await _published(ctx, namespace, ref, family.helmchart)
    try:
        template = parse_helm_chart(obj.get("spec") or {}).chart
    except SpecError as exc:
        raise InputError("SourceNotReady", f"HelmChart {where}/{ref.name}: {exc}", transient=True) from None
    if isinstance(template, SharedRepositoryChart):
        # Flux marks a chart with values files "+<generation>": the version is what comes before
        version = revision.rsplit("+", 1)[0] if template.values_files else revision
        return await chart_inputs(ctx, where, replace(template, namespace=where, version=version), family)
    return await git_chart(ctx, where, replace(template, namespace=where), family)


async def external_chart(ctx: Readers, namespace: str, ref: ArtifactChart, family: Family) -> ChartInputs:
    """spec.chartRef to an ExternalArtifact: its archive holds a chart in a folder at its top (as Helm packages
    one), taken as a chart from files at every change of the artifact."""
    where = ref.namespace or namespace
    artifact = await source_artifact(ctx, family, "ExternalArtifact", where, ref.name,
                                     Referrer(namespace, "spec.chartRef"))
    tops = sorted({name.split("/", 1)[0] for name in await artifact.files("", lambda rel: rel.endswith("/Chart.yaml")
                                                                          and rel.count("/") == 1)})
    if len(tops) != 1:
        raise InputError("ChartNotFound", f"ExternalArtifact {where}/{ref.name} holds no chart in one folder at its "
                                          "top (<chart>/Chart.yaml)", transient=False)
    source = SourceChart(kind="ExternalArtifact", name=ref.name, path=tops[0], namespace=where)
    return await git_chart(ctx, where, source, family)


async def _published(ctx: Readers, namespace: str, ref: ArtifactChart, kind: Kind) -> tuple[dict[str, Any], str]:
    """The source spec.chartRef names (of a release of ``namespace``) and the revision of the artifact it
    published; InputError until it has published one."""
    where = ref.namespace or namespace
    obj = await _source(ctx, kind, where, ref.name, Referrer(namespace, "spec.chartRef"))
    revision = str(((obj.get("status") or {}).get("artifact") or {}).get("revision") or "")
    if not revision:
        why = unpublished(obj, kind, where, ref.name)
        raise InputError(why.reason, str(why), transient=why.transient)
    return obj, revision


async def _source(ctx: Readers, kind: Kind, namespace: str, name: str, by: Referrer) -> dict[str, Any]:
    """A source object as ``by`` names it (the tenancy policy's check, as every source reader's)."""
    try:
        return await referenced(ctx, kind, namespace, name, by)
    except SourceError as exc:
        raise InputError(exc.reason, str(exc), transient=exc.transient) from None


async def shared_chart(ctx: Readers, namespace: str, chart: SharedRepositoryChart,
                       family: Family) -> tuple[ResolvedChart, Path, Credentials]:
    """A chart by name and version from a HelmRepository, resolved from the index its reconcile keeps fresh
    (read here only when the cache has none: after a restart, or before the repository's first turn)."""
    where = chart.namespace or namespace
    repo = await _source(ctx, family.helmrepository, where, chart.repository,
                         Referrer(namespace, "spec.chart.spec.sourceRef"))
    try:
        source = parse_helm_repository(repo.get("spec") or {})
    except SpecError as exc:
        raise InputError("SourceNotReady", f"HelmRepository {where}/{chart.repository}: {exc}",
                         transient=True) from None
    creds = await credentials(ctx.kube, where, source.secret_ref, f"HelmRepository {where}/{chart.repository}",
                              source.cert_secret_ref)
    # An OCI HelmRepository names a registry path; its charts are repositories under it, as Flux reads it
    url = f"{source.url}/{chart.chart}" if source.oci else source.url
    # twice the interval: the repository's own turn refreshes the index; a release never races it for that
    resolved = await ctx.repos.resolve(url, chart.chart, chart.version, creds, source.insecure,
                                       max_age=2 * source.interval, shared=True)
    if chart.verify is not None:  # pulled by the very manifest whose signature was checked
        manifest = await _signed(ctx, where, chart.verify, url if source.oci else "", resolved.version, creds,
                                 source.insecure)
        resolved = replace(resolved, manifest=manifest)
    path = await ctx.repos.fetch(resolved, url, creds, source.insecure, pass_credentials=source.pass_credentials)
    return resolved, path, creds


async def _signed(ctx: Readers, namespace: str, verify: Verification, url: str, version: str, creds: Credentials,
                  insecure: bool) -> str:
    """The digest of the chart's manifest, its signature checked (spec.chart.spec.verify; ``url`` "": not from an
    OCI registry, where nothing is signed to check)."""
    if not url:
        raise InputError("VerificationError", "spec.chart.spec.verify: chart signatures are verified for OCI "
                                              "HelmRepositories only", transient=False)
    manifest = await artifacts.manifest_of(ctx.repos, url, version.replace("+", "_"), creds, insecure)
    entries = await secret_entries(ctx.kube, namespace, verify.secret_ref, "spec.chart.spec.verify.secretRef")
    await registry.verify(ctx.repos, url, creds, insecure, manifest, verify, entries,
                          f"Secret {namespace}/{verify.secret_ref}")
    return manifest.digest


async def artifact_chart(ctx: Readers, namespace: str, chart: ArtifactChart,
                         family: Family) -> tuple[ResolvedChart, Path, Credentials]:
    """The chart an OCIRepository's artifact holds (its layer, from the cache or the registry by digest)."""
    where = chart.namespace or namespace
    repo, revision = await _published(ctx, namespace, chart, family.ocirepository)
    try:
        source = parse_oci_repository(repo.get("spec") or {})
    except SpecError as exc:
        raise InputError("SourceNotReady", f"OCIRepository {where}/{chart.name}: {exc}", transient=True) from None
    creds = await credentials(ctx.kube, where, source.secret_ref, f"OCIRepository {where}/{chart.name}",
                              source.cert_secret_ref, source.proxy_secret_ref)
    # the layer of the manifest the source published (its revision), whatever the tag names now
    layer = await artifacts.layer_of(ctx.repos, source, revision, creds)
    resolved, path = await artifacts.chart(ctx.repos, source.url, layer, creds, source.insecure)
    return resolved, path, creds


async def archive_values(path: Path, files: tuple[str, ...],
                         ignore_missing: bool) -> tuple[dict[str, Any], tuple[str, ...]]:
    """spec.chart.spec.valuesFiles of a chart archive, merged in order; and those it holds."""
    merged: dict[str, Any] = {}
    found = []
    for name in files:
        data = await asyncio.to_thread(artifacts.read_file, path, name)
        if data is None:
            if ignore_missing:
                continue
            raise InputError("ValuesFileNotFound", f"the chart has no values file {name!r} (spec.chart.spec."
                                                   "valuesFiles; set ignoreMissingValuesFiles to skip it)")
        try:
            merged = helm_values.merge(merged, helm_values.parse_values(data.decode(errors="replace"), name))
        except ValueError as exc:
            raise InputError("ValuesInvalid", str(exc)) from None
        found.append(name)
    return merged, tuple(found)


async def _judge_dependencies(ctx: Readers, path: str, meta: dict[str, Any], lock: Any) -> None:
    """The hosts helm will fetch the chart's dependencies from, judged by the address policy (helm connects by
    itself: a name that resolves elsewhere a moment later is the residue no check here closes)."""
    for host, port in chartdeps.remote_hosts(meta, lock):
        try:
            await addresses.resolved(ctx.repos.policy, host, port)
        except AddressRefused as exc:
            raise InputError("AddressRefused", f"{path}: a dependency's repository: {exc}") from None


def _chart_metadata(files: dict[str, bytes], path: str) -> tuple[dict[str, Any], Any]:
    """Chart.yaml (a map) and Chart.lock (if any) of a chart's files."""
    try:
        meta = yamlc.load(files["Chart.yaml"]) or {}
        lock = yamlc.load(files["Chart.lock"]) if "Chart.lock" in files else None
    except yaml.YAMLError as exc:
        raise InputError("ChartInvalid", f"{path}/Chart.yaml or Chart.lock is not valid YAML: {exc}") from None
    if not isinstance(meta, dict):
        raise InputError("ChartInvalid", f"{path}/Chart.yaml is not a map")
    return meta, lock


async def git_chart(ctx: Readers, namespace: str, chart: SourceChart, family: Family = HELMOP) -> ChartInputs:
    """The chart directory at the source's revision (a GitRepository's or a Bucket's), materialised once per
    content digest (with its dependencies built), and the values files merged in order. The digest that decides
    an upgrade is the files' (reconcileStrategy Revision) or the chart's version and the values files'
    (ChartVersion)."""
    where = chart.namespace or namespace
    source = await source_artifact(ctx, family, chart.kind, where, chart.name,
                                   Referrer(namespace, "spec.chart.sourceRef"))
    files = await source.files(chart.path)
    if "Chart.yaml" not in files:
        raise SourceError("ChartNotFound", f"{chart.path} has no Chart.yaml", transient=False)
    file_values: dict[str, Any] = {}
    extra: dict[str, bytes] = {}
    for values_file in chart.values_files:
        data = await read_file(source, values_file)
        if data is None:
            if chart.ignore_missing_values_files:
                continue
            raise SourceError("PathNotFound", f"file {values_file!r} does not exist at {source.revision}",
                              transient=False)
        extra[values_file] = data
        try:
            file_values = helm_values.merge(file_values, helm_values.parse_values(data.decode(), values_file))
        except ValueError as exc:
            raise InputError("ValuesInvalid", str(exc)) from None
    meta, lock = _chart_metadata(files, chart.path)
    versioned = {"\0version": f"{meta.get('name')}\0{meta.get('version')}".encode()}
    digest = tree_digest({**(files if chart.reconcile_strategy == "Revision" else versioned),
                          **{f"\0values/{k}": v for k, v in extra.items()}})
    outside = chartdeps.outside_the_chart(meta, lock)
    if outside:
        raise InputError("InvalidChart", f"{chart.path}: file:// dependencies must stay inside the chart's folder: "
                                         f"{', '.join(outside)}; refused")
    origin = safe_url(source.url) if isinstance(source, GitArtifact) else f"{chart.kind.lower()}/{where}/{chart.name}"
    resolved = ResolvedChart(origin, str(meta.get("name", "")), str(meta.get("version", "")))
    # The folder's name is fixed: Chart.yaml's name is the tenant's to choose, a path is not.
    target = ctx.repos.cache_dir / "gitcharts" / tree_digest(files)[7:31] / "chart"
    if not target.exists():
        staging = Path(tempfile.mkdtemp(prefix="chart-", dir=ctx.repos.cache_dir))
        try:
            write_tree(files, staging)
            if meta.get("dependencies"):
                await _judge_dependencies(ctx, chart.path, meta, lock)
                try:
                    await ctx.engine.dependency_build(staging)
                except HelmError as exc:  # helm names the staging folder: the user knows the chart's path
                    raise InputError("DependencyBuildFailed", str(exc).replace(str(staging), chart.path)) from None
            target.parent.mkdir(parents=True, exist_ok=True)
            staging.rename(target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return ChartInputs(resolved, target, Credentials(), file_values, [resolved.repository, chart.path, digest],
                       tree_digest(files), source.revision, tuple(extra))
