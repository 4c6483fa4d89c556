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

from . import images, target
from .argtree import Arg, Verb, add, arg
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


def _given(**fields: Any) -> dict[str, Any]:
    """The fields the flags gave (a spec leaves the others out, for their defaults)."""
    return {key: value for key, value in fields.items() if value}


def _ref(name: str | None) -> dict[str, str] | None:
    return {"name": name} if name else None


def _chart(args: argparse.Namespace) -> dict[str, Any]:
    """A HelmRelease's chart: ``chart`` from a --repo, or from a HelmRepository or GitRepository --source (the chart
    named by --chart); else ``chartRef``, the --source by reference."""
    if bool(args.repo) == bool(args.source):
        raise Failed("give the chart's --repo URL (Helm repository or oci://) or its --source (GitRepository/NAME, "
                     "HelmRepository/NAME, OCIRepository/NAME, HelmChart/NAME or ExternalArtifact/NAME)")
    version = _given(version=args.chart_version)
    if args.repo:
        return {"chart": {"repository": {"url": args.repo, **_given(name=args.chart), **version}}}
    kind, name = _source(args.source, ("GitRepository", "HelmRepository", "OCIRepository", "HelmChart",
                                       "ExternalArtifact"))
    if kind == "HelmRepository":  # Flux's form: the repository declared once, shared
        if not args.chart:
            raise Failed("--chart is the chart's name in the HelmRepository")
        return {"chart": {"spec": {"chart": args.chart, "sourceRef": {"kind": kind, "name": name}, **version}}}
    if kind == "GitRepository":
        if not args.chart:
            raise Failed("--chart is the chart's path in the GitRepository")
        return {"chart": {"sourceRef": {"kind": kind, "name": name}, "path": args.chart}}
    return {"chartRef": {"kind": kind, "name": name}}


def _values(files: list[str]) -> dict[str, Any]:
    """The --values files merged in order."""
    values: dict[str, Any] = {}
    for file in files:
        try:
            values = merge(values, parse_values(Path(file).read_text(), file))
        except OSError as exc:
            raise Failed(f"--values {file}: {exc.strerror}") from None
    return values


def _dependency(text: str) -> dict[str, str]:
    """``[NAMESPACE/]NAME`` as a dependsOn entry."""
    namespace, slash, name = text.rpartition("/")
    return {"name": name, **({"namespace": namespace} if slash else {})}


def helmrelease_spec(args: argparse.Namespace) -> dict[str, Any]:
    spec = _chart(args) | {"interval": args.interval} | _given(
        targetNamespace=args.target_namespace, releaseName=args.release_name, serviceAccountName=args.service_account,
        timeout=args.timeout, values=_values(args.values or []))
    if args.depends_on:
        spec["dependsOn"] = [_dependency(d) for d in args.depends_on]
    if args.create_target_namespace:
        spec["install"] = {"createNamespace": True}
    return spec


def gitrepository_spec(args: argparse.Namespace) -> dict[str, Any]:
    refs = _given(branch=args.branch, tag=args.tag, semver=args.tag_semver, commit=args.commit)
    if len(refs) > 1:
        raise Failed("give one of --branch, --tag, --tag-semver or --commit")
    return {"url": args.url, "ref": refs or {"branch": "main"}, "interval": args.interval} | _given(
        secretRef=_ref(args.secret_ref), timeout=args.timeout)


def helmrepository_spec(args: argparse.Namespace) -> dict[str, Any]:
    return {"url": args.url, "interval": args.interval, **({"type": "oci"} if args.url.startswith("oci://") else {}),
            **_given(secretRef=_ref(args.secret_ref), timeout=args.timeout)}


def ocirepository_spec(args: argparse.Namespace) -> dict[str, Any]:
    refs = _given(tag=args.tag, semver=args.tag_semver, digest=args.digest)
    if len(refs) > 1:
        raise Failed("give one of --tag, --tag-semver or --digest")
    return {"url": args.url, "ref": refs or {"tag": "latest"}, "interval": args.interval} | _given(
        secretRef=_ref(args.secret_ref), insecure=args.insecure, ignore=args.ignore)


def bucket_spec(args: argparse.Namespace) -> dict[str, Any]:
    return {"bucketName": args.bucket_name, "endpoint": args.endpoint, "interval": args.interval} | _given(
        secretRef=_ref(args.secret_ref), insecure=args.insecure, prefix=args.prefix, region=args.region,
        ignore=args.ignore)


def helmchart_spec(args: argparse.Namespace) -> dict[str, Any]:
    kind, name = _source(args.source, ("HelmRepository", "GitRepository", "Bucket"))
    return {"chart": args.chart, "sourceRef": {"kind": kind, "name": name}, "interval": args.interval} | _given(
        version=args.chart_version, valuesFiles=args.values_file, reconcileStrategy=args.reconcile_strategy)


def configsync_spec(args: argparse.Namespace) -> dict[str, Any]:
    kind, name = _source(args.source, CONFIG_SOURCES)
    return {"sourceRef": {"kind": kind, "name": name}, "path": args.path, "interval": args.interval,
            "prune": args.prune} | _given(targetNamespace=args.target_namespace,
                                          serviceAccountName=args.service_account)


def provider_spec(args: argparse.Namespace) -> dict[str, Any]:
    return {"type": args.type} | _given(
        address=args.address, channel=args.channel, username=args.username, proxy=args.proxy, timeout=args.timeout,
        commitStatusExpr=args.commit_status_expr, secretRef=_ref(args.secret_ref),
        certSecretRef=_ref(args.cert_secret_ref))


def _event_source(text: str) -> dict[str, str]:
    """``KIND/NAME[.NAMESPACE]`` (NAME may be ``*``), as ``flux create alert --event-source`` takes it."""
    kind, sep, rest = text.partition("/")
    name, _, namespace = rest.partition(".")
    if not kind or not sep or not name:
        raise Failed(f"--event-source {text!r}: expected KIND/NAME or KIND/NAME.NAMESPACE (NAME may be *)")
    return {"kind": kind, "name": name, **({"namespace": namespace} if namespace else {})}


def alert_spec(args: argparse.Namespace) -> dict[str, Any]:
    sources = [_event_source(part) for text in args.event_source for part in text.split(",") if part]
    return {"providerRef": {"name": args.provider_ref}, "eventSeverity": args.event_severity,
            "eventSources": sources} | _given(exclusionList=args.exclusion, inclusionList=args.inclusion)


_SECRET = "Secret with the credentials (username/password)"
HELMRELEASE_FLAGS = (
    arg("--repo", metavar="URL", help="Helm repository (http[s]://) or OCI chart (oci://)"),
    arg("--source", metavar="KIND/NAME", help="where the chart is: GitRepository/NAME (--chart: its path), "
                                              "HelmRepository/NAME (--chart: its name), or by reference "
                                              "OCIRepository/NAME, HelmChart/NAME or ExternalArtifact/NAME"),
    arg("--chart", help="chart name in --repo or a HelmRepository, or its path in a GitRepository"),
    arg("--chart-version", help="version or constraint (^1.2; default the newest stable)"),
    arg("--values", action="append", metavar="FILE", help="values file, merged in order (repeatable)"),
    arg("--target-namespace", help="namespace of the release's objects"),
    arg("--create-target-namespace", action="store_true", help="create it on install"),
    arg("--release-name", help="helm release name (default [<target-namespace>-]NAME)"),
    arg("--service-account", help="act as this ServiceAccount of the namespace"),
    arg("--depends-on", action="append", metavar="[NAMESPACE/]NAME",
        help="a HelmRelease that must be Ready first (repeatable)"),
    arg("--timeout", help="helm action timeout (a duration: 5m)"))
GITREPOSITORY_FLAGS = (
    arg("--url", required=True, help="https://, ssh:// or git@host:path"),
    arg("--branch", help="follow this branch (default main)"),
    arg("--tag", help="use this tag"),
    arg("--tag-semver", metavar="RANGE", help="the highest tag in this semver range"),
    arg("--commit", help="exactly this commit"),
    arg("--secret-ref", metavar="NAME", help="Secret with the credentials"),
    arg("--timeout", help="git operation timeout (a duration: 60s)"))
HELMREPOSITORY_FLAGS = (
    arg("--url", required=True, help="a Helm repository (https://) or an OCI registry path (oci://, which makes it "
                                     "type oci)"),
    arg("--secret-ref", metavar="NAME", help=_SECRET),
    arg("--timeout", help="index fetch timeout (a duration: 60s)"))
OCIREPOSITORY_FLAGS = (
    arg("--url", required=True, help="oci://REGISTRY/REPOSITORY of the artifact"),
    arg("--tag", help="this tag (default latest)"),
    arg("--tag-semver", metavar="RANGE", help="the highest tag in this semver range"),
    arg("--digest", help="exactly this manifest (sha256:...)"),
    arg("--secret-ref", metavar="NAME", help=_SECRET),
    arg("--insecure", action="store_true", help="plain HTTP to the registry"),
    arg("--ignore", help="gitignore patterns left out of the extracted layer"))
BUCKET_FLAGS = (
    arg("--bucket-name", required=True, help="the bucket"),
    arg("--endpoint", required=True, help="host[:port] of the S3-compatible endpoint"),
    arg("--secret-ref", metavar="NAME", help="Secret with accesskey and secretkey"),
    arg("--insecure", action="store_true", help="plain HTTP to the endpoint"),
    arg("--prefix", help="only the keys that start with it"),
    arg("--region", help="the region requests are signed for (default us-east-1)"),
    arg("--ignore", help="gitignore patterns over the keys"))
HELMCHART_FLAGS = (
    arg("--source", required=True, metavar="KIND/NAME", help="HelmRepository/NAME (--chart: its name), "
                                                             "GitRepository/NAME or Bucket/NAME (--chart: its folder)"),
    arg("--chart", required=True, help="the chart's name, or its folder"),
    arg("--chart-version", help="version or constraint (HelmRepository; default the newest)"),
    arg("--values-file", action="append", metavar="PATH", help="values file merged in order (repeatable)"),
    arg("--reconcile-strategy", choices=("ChartVersion", "Revision"),
        help="for a chart from files: a new version (default) or any new revision"))
CONFIGSYNC_FLAGS = (
    arg("--source", required=True, metavar="[KIND/]NAME",
        help="the source: a GitRepository's NAME, or OCIRepository/NAME, Bucket/NAME or ExternalArtifact/NAME"),
    arg("--path", default="", help="directory in the source's artifact (default the root)"),
    arg("--prune", action=argparse.BooleanOptionalAction, default=True, help="delete what leaves git (default: yes)"),
    arg("--target-namespace", help="namespace for objects that name none"),
    arg("--service-account", help="apply as this ServiceAccount of the namespace"))
PROVIDER_FLAGS = (
    arg("--type", required=True, choices=TYPES, help="the service"),
    arg("--address", help="its URL (a webhook, an API endpoint, a repository for commit statuses); a webhook whose "
                          "path is its credential: the Secret's address key instead"),
    arg("--channel", help="the channel (slack, rocket), room (webex, matrix), chat (telegram), CHANNEL/TOPIC (zulip) "
                          "or environment (sentry); the routing key (pagerduty)"),
    arg("--username", help="the name to post as (slack, rocket)"),
    arg("--secret-ref", metavar="NAME", help="Secret with address, token, username, password, headers or proxy"),
    arg("--cert-secret-ref", metavar="NAME", help="Secret with ca.crt, tls.crt and tls.key"),
    arg("--proxy", metavar="URL", help="an HTTP(S) proxy"),
    arg("--timeout", help="one request's timeout (a duration: 15s)"),
    arg("--commit-status-expr", metavar="CEL", help="the commit status's name, a CEL expression of event, provider "
                                                    "and alert"))
ALERT_FLAGS = (
    arg("--provider-ref", required=True, metavar="NAME", help="the Provider to send to"),
    arg("--event-source", action="append", required=True, metavar="KIND/NAME[.NAMESPACE]",
        help="objects whose events are sent (NAME may be *; repeatable, or comma-separated)"),
    arg("--event-severity", choices=["info", "error"], default="info",
        help="error: only errors; info: every event (default %(default)s)"),
    arg("--exclusion", action="append", metavar="REGEX", help="never send events whose message matches (repeatable)"),
    arg("--inclusion", action="append", metavar="REGEX", help="send only events whose message matches one "
                                                              "(repeatable)"))


@dataclass(frozen=True)
class Creatable:
    """A kind ``create`` writes: its sub-verb and alias (none: a form of ``create image``), how its spec is built
    from the flags, its own flags, and its default interval (None: nothing to reconcile at an interval)."""

    kind: Kind
    names: tuple[str, str]
    build: Callable[[argparse.Namespace], dict[str, Any]]
    flags: tuple[Arg, ...]
    interval: str | None = "5m"

    def verb(self, which: str) -> Verb:
        """The sub-verb: the cluster's flags, NAME, the flags every kind takes, then the kind's own."""
        full, short = self.names
        interval = (arg("--interval", default=self.interval, help="reconcile interval (default %(default)s)"),)
        common = (*target.flags(), arg("name"),
                  arg("--label", action="append", metavar="KEY=VALUE", help="a label (repeatable)"),
                  *(interval if self.interval else ()),
                  arg("--export", action="store_true", help="print the YAML instead of applying it"))
        return Verb(full, f"a {self.kind.kind}" if short else f"an {self.kind.kind}", (*common, *self.flags),
                    aliases=(short,) if short else (), defaults={"create": which})


KINDS = {"helmrelease": Creatable(HELMRELEASE, ("helmrelease", "hr"), helmrelease_spec, HELMRELEASE_FLAGS, "10m"),
         "gitrepo": Creatable(GITREPOSITORY, ("gitrepository", "gitrepo"), gitrepository_spec, GITREPOSITORY_FLAGS),
         "helmrepo": Creatable(HELMREPOSITORY, ("helmrepository", "helmrepo"), helmrepository_spec,
                               HELMREPOSITORY_FLAGS),
         "ocirepo": Creatable(OCIREPOSITORY, ("ocirepository", "ocirepo"), ocirepository_spec, OCIREPOSITORY_FLAGS),
         "bucket": Creatable(BUCKET, ("bucket", "buckets"), bucket_spec, BUCKET_FLAGS),
         "helmchart": Creatable(HELMCHART, ("helmchart", "hc"), helmchart_spec, HELMCHART_FLAGS),
         "csync": Creatable(CONFIGSYNC, ("configsync", "csync"), configsync_spec, CONFIGSYNC_FLAGS),
         "provider": Creatable(PROVIDER, ("provider", "prov"), provider_spec, PROVIDER_FLAGS, None),
         "alert": Creatable(ALERT, ("alert", "alerts"), alert_spec, ALERT_FLAGS, None),
         # `create image repository|policy|update` (helmop.cli.images says them so)
         "imagerepo": Creatable(IMAGEREPOSITORY, ("repository", ""), images.repository_spec, images.REPOSITORY_FLAGS),
         "imagepolicy": Creatable(IMAGEPOLICY, ("policy", ""), images.policy_spec, images.POLICY_FLAGS, "10m"),
         "imageupdate": Creatable(IMAGEUPDATEAUTOMATION, ("update", ""), images.update_spec, images.UPDATE_FLAGS)}


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


def add_verbs(kinds: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``create`` sub-verbs (``kinds``: the create verb's sub-parsers), the image kinds under ``create image``
    as Flux's CLI says them."""
    image = images.nest(kinds)
    for which, creatable in KINDS.items():
        add(kinds if creatable.names[1] else image, creatable.verb(which))
