"""``helmop create helmrelease|gitrepo|helmrepo|ocirepo|bucket|helmchart|csync|provider|alert NAME ...``: a resource
written from flags
(as ``flux create``), checked as ``render --validate`` and the operator check it, then applied server-side or
printed with ``--export``. Projects are written by :mod:`helmop.cli.projects`."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from helmop.api import validation
from helmop.api.errors import SpecError
from helmop.api.kinds import (
    ALERT,
    BUCKET,
    CONFIGSYNC,
    GITREPOSITORY,
    HELMCHART,
    HELMRELEASE,
    HELMREPOSITORY,
    IMAGEPOLICY,
    IMAGEREPOSITORY,
    IMAGEUPDATEAUTOMATION,
    OCIREPOSITORY,
    PROVIDER,
    Kind,
)
from helmop.api.notifications import TYPES
from helmop.decisions.specs import read_spec
from helmop.helm.values import merge, parse_values
from helmop.infra.kube import Kube

from . import images
from .errors import Failed

MANAGER = "helmop-cli"


SOURCE_KINDS = {"gitrepository": "GitRepository", "gitrepo": "GitRepository", "helmrepository": "HelmRepository",
                "helmrepo": "HelmRepository", "ocirepository": "OCIRepository", "ocirepo": "OCIRepository",
                "bucket": "Bucket", "helmchart": "HelmChart", "hc": "HelmChart", "externalartifact": "ExternalArtifact",
                "ea": "ExternalArtifact"}
CONFIG_SOURCES = ("GitRepository", "OCIRepository", "Bucket", "ExternalArtifact")


def _source(text: str, kinds: tuple[str, ...] = ("GitRepository",)) -> tuple[str, str]:
    """(kind, name) of ``NAME`` (a GitRepository) or ``KIND/NAME``, KIND one of ``kinds`` (or its short name)."""
    given, _, name = text.rpartition("/")
    kind = SOURCE_KINDS.get(given.lower(), given) if given else "GitRepository"
    if kind not in kinds:
        raise Failed(f"--source {text!r}: the source is one of {', '.join(f'{k}/NAME' for k in kinds)}")
    return kind, name


def _labels(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not key or not sep:
            raise Failed(f"--label {pair!r}: expected key=value")
        out[key] = value
    return out


def helmrelease_spec(args: argparse.Namespace) -> dict[str, Any]:
    if bool(args.repo) == bool(args.source):
        raise Failed("give the chart's --repo URL (Helm repository or oci://) or its --source (GitRepository/NAME, "
                     "HelmRepository/NAME, OCIRepository/NAME, HelmChart/NAME or ExternalArtifact/NAME)")
    chart: dict[str, Any] = {}
    kind, name = _source(args.source, ("GitRepository", "HelmRepository", "OCIRepository", "HelmChart",
                                       "ExternalArtifact")) if args.source else ("", "")
    if args.repo:
        chart = {"repository": {"url": args.repo, **({"name": args.chart} if args.chart else {}),
                                **({"version": args.chart_version} if args.chart_version else {})}}
    elif kind == "HelmRepository":  # Flux's form: the repository declared once, shared
        if not args.chart:
            raise Failed("--chart is the chart's name in the HelmRepository")
        chart = {"spec": {"chart": args.chart, "sourceRef": {"kind": kind, "name": name},
                          **({"version": args.chart_version} if args.chart_version else {})}}
    elif kind == "GitRepository":
        if not args.chart:
            raise Failed("--chart is the chart's path in the GitRepository")
        chart = {"sourceRef": {"kind": kind, "name": name}, "path": args.chart}
    values: dict[str, Any] = {}
    for file in args.values or []:
        try:
            values = merge(values, parse_values(Path(file).read_text(), file))
        except OSError as exc:
            raise Failed(f"--values {file}: {exc.strerror}") from None
    spec: dict[str, Any] = ({"chart": chart} if chart else {"chartRef": {"kind": kind, "name": name}}) | {
        "interval": args.interval}
    optional = {"targetNamespace": args.target_namespace, "releaseName": args.release_name,
                "serviceAccountName": args.service_account, "timeout": args.timeout, "values": values}
    spec.update({k: v for k, v in optional.items() if v})
    if args.depends_on:
        spec["dependsOn"] = [{"name": d.rpartition("/")[2], **({"namespace": d.rpartition("/")[0]} if "/" in d
                                                                else {})} for d in args.depends_on]
    if args.create_target_namespace:
        spec["install"] = {"createNamespace": True}
    return spec


def gitrepository_spec(args: argparse.Namespace) -> dict[str, Any]:
    refs = {k: v for k, v in (("branch", args.branch), ("tag", args.tag), ("semver", args.tag_semver),
                              ("commit", args.commit)) if v}
    if len(refs) > 1:
        raise Failed("give one of --branch, --tag, --tag-semver or --commit")
    spec: dict[str, Any] = {"url": args.url, "ref": refs or {"branch": "main"}, "interval": args.interval}
    if args.secret_ref:
        spec["secretRef"] = {"name": args.secret_ref}
    if args.timeout:
        spec["timeout"] = args.timeout
    return spec


def helmrepository_spec(args: argparse.Namespace) -> dict[str, Any]:
    spec: dict[str, Any] = {"url": args.url, "interval": args.interval,
                            **({"type": "oci"} if args.url.startswith("oci://") else {})}
    if args.secret_ref:
        spec["secretRef"] = {"name": args.secret_ref}
    if args.timeout:
        spec["timeout"] = args.timeout
    return spec


def ocirepository_spec(args: argparse.Namespace) -> dict[str, Any]:
    refs = {k: v for k, v in (("tag", args.tag), ("semver", args.tag_semver), ("digest", args.digest)) if v}
    if len(refs) > 1:
        raise Failed("give one of --tag, --tag-semver or --digest")
    spec: dict[str, Any] = {"url": args.url, "ref": refs or {"tag": "latest"}, "interval": args.interval}
    optional = {"secretRef": {"name": args.secret_ref} if args.secret_ref else None, "insecure": args.insecure,
                "ignore": args.ignore}
    spec.update({k: v for k, v in optional.items() if v})
    return spec


def bucket_spec(args: argparse.Namespace) -> dict[str, Any]:
    spec: dict[str, Any] = {"bucketName": args.bucket_name, "endpoint": args.endpoint, "interval": args.interval}
    optional = {"secretRef": {"name": args.secret_ref} if args.secret_ref else None, "insecure": args.insecure,
                "prefix": args.prefix, "region": args.region, "ignore": args.ignore}
    spec.update({k: v for k, v in optional.items() if v})
    return spec


def helmchart_spec(args: argparse.Namespace) -> dict[str, Any]:
    kind, name = _source(args.source, ("HelmRepository", "GitRepository", "Bucket"))
    spec: dict[str, Any] = {"chart": args.chart, "sourceRef": {"kind": kind, "name": name}, "interval": args.interval}
    optional = {"version": args.chart_version, "valuesFiles": args.values_file,
                "reconcileStrategy": args.reconcile_strategy}
    spec.update({k: v for k, v in optional.items() if v})
    return spec


def configsync_spec(args: argparse.Namespace) -> dict[str, Any]:
    kind, name = _source(args.source, CONFIG_SOURCES)
    spec: dict[str, Any] = {"sourceRef": {"kind": kind, "name": name},
                            "path": args.path, "interval": args.interval, "prune": args.prune}
    optional = {"targetNamespace": args.target_namespace, "serviceAccountName": args.service_account}
    spec.update({k: v for k, v in optional.items() if v})
    return spec


def provider_spec(args: argparse.Namespace) -> dict[str, Any]:
    spec: dict[str, Any] = {"type": args.type}
    optional = {"address": args.address, "channel": args.channel, "username": args.username, "proxy": args.proxy,
                "timeout": args.timeout, "commitStatusExpr": args.commit_status_expr}
    spec.update({k: v for k, v in optional.items() if v})
    spec.update({field: {"name": name} for field, name in (("secretRef", args.secret_ref),
                                                            ("certSecretRef", args.cert_secret_ref)) if name})
    return spec


def _event_source(text: str) -> dict[str, str]:
    """``KIND/NAME[.NAMESPACE]`` (NAME may be ``*``), as ``flux create alert --event-source`` takes it."""
    kind, sep, rest = text.partition("/")
    name, _, namespace = rest.partition(".")
    if not kind or not sep or not name:
        raise Failed(f"--event-source {text!r}: expected KIND/NAME or KIND/NAME.NAMESPACE (NAME may be *)")
    return {"kind": kind, "name": name, **({"namespace": namespace} if namespace else {})}


def alert_spec(args: argparse.Namespace) -> dict[str, Any]:
    sources = [_event_source(part) for text in args.event_source for part in text.split(",") if part]
    spec: dict[str, Any] = {"providerRef": {"name": args.provider_ref}, "eventSeverity": args.event_severity,
                            "eventSources": sources}
    if args.exclusion:
        spec["exclusionList"] = args.exclusion
    if args.inclusion:
        spec["inclusionList"] = args.inclusion
    return spec


@dataclass(frozen=True)
class Creatable:
    kind: Kind
    names: tuple[str, str]  # the sub-verb and its alias
    build: Callable[[argparse.Namespace], dict[str, Any]]


KINDS = {"helmrelease": Creatable(HELMRELEASE, ("helmrelease", "hr"), helmrelease_spec),
         "gitrepo": Creatable(GITREPOSITORY, ("gitrepository", "gitrepo"), gitrepository_spec),
         "helmrepo": Creatable(HELMREPOSITORY, ("helmrepository", "helmrepo"), helmrepository_spec),
         "ocirepo": Creatable(OCIREPOSITORY, ("ocirepository", "ocirepo"), ocirepository_spec),
         "bucket": Creatable(BUCKET, ("bucket", "buckets"), bucket_spec),
         "helmchart": Creatable(HELMCHART, ("helmchart", "hc"), helmchart_spec),
         "csync": Creatable(CONFIGSYNC, ("configsync", "csync"), configsync_spec),
         "provider": Creatable(PROVIDER, ("provider", "prov"), provider_spec),
         "alert": Creatable(ALERT, ("alert", "alerts"), alert_spec),
         # `create image repository|policy|update` (helmop.cli.images says them so)
         "imagerepo": Creatable(IMAGEREPOSITORY, ("repository", ""), images.repository_spec),
         "imagepolicy": Creatable(IMAGEPOLICY, ("policy", ""), images.policy_spec),
         "imageupdate": Creatable(IMAGEUPDATEAUTOMATION, ("update", ""), images.update_spec)}


def manifest(which: str, args: argparse.Namespace, namespace: str) -> tuple[Kind, dict[str, Any]]:
    """The resource the flags describe, checked against the CRD schema (strict) and as the operator reads it."""
    creatable = KINDS[which]
    kind = creatable.kind
    obj: dict[str, Any] = {"apiVersion": kind.api_version, "kind": kind.kind,
                           "metadata": {"name": args.name, "namespace": namespace,
                                        **({"labels": _labels(args.label)} if args.label else {})},
                           "spec": creatable.build(args)}
    problems = validation.tree({"flags.yaml": yaml.safe_dump(obj).encode()})
    if problems:
        raise Failed("; ".join(p.split(": ", 1)[1] for p in problems))
    try:
        read_spec(kind, {"metadata": {"name": args.name, "namespace": namespace}, "spec": obj["spec"]})
    except SpecError as exc:
        raise Failed(f"{kind.kind} {namespace}/{args.name}: {exc.reason}: {exc}") from None
    return kind, obj


async def apply(kube: Kube, kind: Kind, obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    await kube.apply(kind.path(meta["namespace"], meta["name"]), obj, MANAGER)
    return f"✔ {kind.kind} {meta['namespace']}/{meta['name']} applied"


def add_arguments(verbs: Any, add_target: Any) -> None:
    """The ``create`` sub-verbs' flags (``verbs``: the create verb's sub-parsers)."""
    nested = images.nest(verbs)  # `create image repository|policy|update`, as Flux's CLI says them
    for which, creatable in KINDS.items():
        full, short = creatable.names
        sub = (nested(full, creatable.kind.kind) if which in images.FLAGS
               else verbs.add_parser(full, aliases=[short], help=f"a {creatable.kind.kind}"))
        add_target(sub)
        sub.add_argument("name")
        sub.add_argument("--label", action="append", metavar="KEY=VALUE", help="a label (repeatable)")
        if which not in ("provider", "alert"):  # nothing to reconcile at an interval
            sub.add_argument("--interval", default={"helmrelease": "10m", "imagepolicy": "10m"}.get(which, "5m"),
                             help="reconcile interval (default %(default)s)")
        sub.add_argument("--export", action="store_true", help="print the YAML instead of applying it")
        sub.set_defaults(create=which)
        if which in images.FLAGS:
            images.FLAGS[which](sub)
        elif which == "helmrelease":
            sub.add_argument("--repo", metavar="URL", help="Helm repository (http[s]://) or OCI chart (oci://)")
            sub.add_argument("--source", metavar="KIND/NAME", help="where the chart is: GitRepository/NAME (--chart: "
                                                                 "its path), HelmRepository/NAME (--chart: its name), "
                                                                 "or by reference OCIRepository/NAME, HelmChart/NAME "
                                                                 "or ExternalArtifact/NAME")
            sub.add_argument("--chart", help="chart name in --repo or a HelmRepository, or its path in a "
                                             "GitRepository")
            sub.add_argument("--chart-version", help="version or constraint (^1.2; default the newest stable)")
            sub.add_argument("--values", action="append", metavar="FILE", help="values file, merged in order "
                                                                               "(repeatable)")
            sub.add_argument("--target-namespace", help="namespace of the release's objects")
            sub.add_argument("--create-target-namespace", action="store_true", help="create it on install")
            sub.add_argument("--release-name", help="helm release name (default [<target-namespace>-]NAME)")
            sub.add_argument("--service-account", help="act as this ServiceAccount of the namespace")
            sub.add_argument("--depends-on", action="append", metavar="[NAMESPACE/]NAME",
                             help="a HelmRelease that must be Ready first (repeatable)")
            sub.add_argument("--timeout", help="helm action timeout (a duration: 5m)")
        elif which == "helmrepo":
            sub.add_argument("--url", required=True, help="a Helm repository (https://) or an OCI registry path "
                                                          "(oci://, which makes it type oci)")
            sub.add_argument("--secret-ref", metavar="NAME", help="Secret with the credentials (username/password)")
            sub.add_argument("--timeout", help="index fetch timeout (a duration: 60s)")
        elif which == "ocirepo":
            sub.add_argument("--url", required=True, help="oci://REGISTRY/REPOSITORY of the artifact")
            sub.add_argument("--tag", help="this tag (default latest)")
            sub.add_argument("--tag-semver", metavar="RANGE", help="the highest tag in this semver range")
            sub.add_argument("--digest", help="exactly this manifest (sha256:...)")
            sub.add_argument("--secret-ref", metavar="NAME", help="Secret with the credentials (username/password)")
            sub.add_argument("--insecure", action="store_true", help="plain HTTP to the registry")
            sub.add_argument("--ignore", help="gitignore patterns left out of the extracted layer")
        elif which == "bucket":
            sub.add_argument("--bucket-name", required=True, help="the bucket")
            sub.add_argument("--endpoint", required=True, help="host[:port] of the S3-compatible endpoint")
            sub.add_argument("--secret-ref", metavar="NAME", help="Secret with accesskey and secretkey")
            sub.add_argument("--insecure", action="store_true", help="plain HTTP to the endpoint")
            sub.add_argument("--prefix", help="only the keys that start with it")
            sub.add_argument("--region", help="the region requests are signed for (default us-east-1)")
            sub.add_argument("--ignore", help="gitignore patterns over the keys")
        elif which == "helmchart":
            sub.add_argument("--source", required=True, metavar="KIND/NAME",
                             help="HelmRepository/NAME (--chart: its name), GitRepository/NAME or Bucket/NAME "
                                  "(--chart: its folder)")
            sub.add_argument("--chart", required=True, help="the chart's name, or its folder")
            sub.add_argument("--chart-version", help="version or constraint (HelmRepository; default the newest)")
            sub.add_argument("--values-file", action="append", metavar="PATH", help="values file merged in order "
                                                                                    "(repeatable)")
            sub.add_argument("--reconcile-strategy", choices=("ChartVersion", "Revision"),
                             help="for a chart from files: a new version (default) or any new revision")
        elif which == "gitrepo":
            sub.add_argument("--url", required=True, help="https://, ssh:// or git@host:path")
            sub.add_argument("--branch", help="follow this branch (default main)")
            sub.add_argument("--tag", help="use this tag")
            sub.add_argument("--tag-semver", metavar="RANGE", help="the highest tag in this semver range")
            sub.add_argument("--commit", help="exactly this commit")
            sub.add_argument("--secret-ref", metavar="NAME", help="Secret with the credentials")
            sub.add_argument("--timeout", help="git operation timeout (a duration: 60s)")
        elif which == "provider":
            sub.add_argument("--type", required=True, choices=TYPES, help="the service")
            sub.add_argument("--address", help="its URL (a webhook, an API endpoint, a repository for commit "
                                               "statuses); a webhook whose path is its credential: the Secret's "
                                               "address key instead")
            sub.add_argument("--channel", help="the channel (slack, rocket), room (webex, matrix), chat (telegram), "
                                               "CHANNEL/TOPIC (zulip) or environment (sentry); the routing key "
                                               "(pagerduty)")
            sub.add_argument("--username", help="the name to post as (slack, rocket)")
            sub.add_argument("--secret-ref", metavar="NAME", help="Secret with address, token, username, password, "
                                                                  "headers or proxy")
            sub.add_argument("--cert-secret-ref", metavar="NAME", help="Secret with ca.crt, tls.crt and tls.key")
            sub.add_argument("--proxy", metavar="URL", help="an HTTP(S) proxy")
            sub.add_argument("--timeout", help="one request's timeout (a duration: 15s)")
            sub.add_argument("--commit-status-expr", metavar="CEL", help="the commit status's name, a CEL "
                                                                         "expression of event, provider and alert")
        elif which == "alert":
            sub.add_argument("--provider-ref", required=True, metavar="NAME", help="the Provider to send to")
            sub.add_argument("--event-source", action="append", required=True, metavar="KIND/NAME[.NAMESPACE]",
                             help="objects whose events are sent (NAME may be *; repeatable, or comma-separated)")
            sub.add_argument("--event-severity", choices=["info", "error"], default="info",
                             help="error: only errors; info: every event (default %(default)s)")
            sub.add_argument("--exclusion", action="append", metavar="REGEX", help="never send events whose message "
                                                                                   "matches (repeatable)")
            sub.add_argument("--inclusion", action="append", metavar="REGEX", help="send only events whose message "
                                                                                   "matches one (repeatable)")
        else:
            sub.add_argument("--source", required=True, metavar="[KIND/]NAME",
                             help="the source: a GitRepository's NAME, or OCIRepository/NAME, Bucket/NAME or "
                                  "ExternalArtifact/NAME")
            sub.add_argument("--path", default="", help="directory in the source's artifact (default the root)")
            sub.add_argument("--prune", action=argparse.BooleanOptionalAction, default=True,
                             help="delete what leaves git (default: yes)")
            sub.add_argument("--target-namespace", help="namespace for objects that name none")
            sub.add_argument("--service-account", help="apply as this ServiceAccount of the namespace")
