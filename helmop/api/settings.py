"""The operator's settings, in one object of groups: every interval, wait, backoff, limit and timeout, the
servers, helm, leadership, Flux, notifications and tenancy. Production's values are the defaults; tests shorten
the waits instead of waiting them out.

A setting that ``helmop run`` takes carries its flags in its field's metadata (:class:`Flag`, :func:`setting`):
the command line (``helmop.cli.runflags``) and the chart's arguments are generated from them, and the settings
built from the parsed flags by the same metadata."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import previews, receivers
from .addresses import Policy
from .durations import parse_duration, parse_size
from .kubeconfigs import TokenAddresses
from .tenancy import Tenancy

if TYPE_CHECKING:
    from .apps import AppKind

# Intervals of objects whose spec names none: releases (HelmRelease, app kinds) and sources (GitRepository,
# ConfigSync), as Flux's; the spec parsers default to them as well.
RELEASE_INTERVAL = 600.0
SOURCE_INTERVAL = 300.0


@dataclass(frozen=True)
class Backoff:
    first: float
    limit: float

    def after(self, failures: int) -> float:
        """The delay after ``failures`` failures in a row (1 for the first): doubling up to the limit."""
        return float(min(self.limit, self.first * 2 ** max(0, failures - 1)))


@dataclass(frozen=True)
class Flag:
    """One command-line flag of ``helmop run``. ``parse`` reads one value's text (a class such as int: argparse's
    own message; a function: its ValueError's message); without it the flag is a switch. ``chart`` names the
    chart value (deploy/helmop) that gives it; ``error`` words a value the setting refuses."""

    name: str
    help: str  # "%(default)s": the setting's default
    parse: Callable[[str], Any] | None = None
    metavar: str | None = None
    repeatable: bool = False  # given again for each value (argparse's append)
    short: str = ""
    choices: tuple[str, ...] = ()
    optional_value: str = ""  # the value of the flag given alone (--flux-api: "all"); "": a value is required
    negatable: bool = False  # --x / --no-x, unset when neither is given
    chart: str = ""  # the chart value, as a path in values.yaml (tests/test_chart.py checks the chart by it)
    error: str = "{flag}: {problem}"  # {problem}: the ValueError's message

    @property
    def dest(self) -> str:
        return self.name.removeprefix("--").replace("-", "_")


# The flags' parsed values, by argparse's dest; what a field's build function reads.
Given = Mapping[str, Any]


def setting(default: Any = None, *flags: Flag, factory: Callable[[], Any] | None = None,
            build: Callable[[Given], Any] | None = None) -> Any:
    """A field given by ``flags``: ``build`` makes its value from their parsed values (None: the default); with
    one flag and no ``build``, the flag's value itself (a repeated flag's list as a tuple)."""
    if flags and build is None:
        build = _value_of(flags[0])
    metadata = {"flags": flags, "build": build}
    if factory is not None:
        return field(default_factory=factory, metadata=metadata)
    return field(default=default, metadata=metadata)


def _value_of(flag: Flag) -> Callable[[Given], Any]:
    def value(given: Given) -> Any:
        raw = given.get(flag.dest)
        return tuple(raw) if flag.repeatable and raw is not None else raw

    return value


def _path(given: Given, dest: str) -> Path | None:
    return Path(given[dest]) if given.get(dest) else None


def _mirrors(values: Sequence[str] | None) -> tuple[tuple[str, str], ...] | None:
    """--chart-mirror / --git-mirror FROM=TO, as (FROM, TO) pairs."""
    if values is None:
        return None
    pairs = [value.split("=", 1) for value in values]
    if any(len(pair) != 2 or not pair[0] or not pair[1] for pair in pairs):
        raise ValueError("not FROM=TO")
    return tuple((pair[0], pair[1]) for pair in pairs)


_MIRROR_ERROR = "{flag} takes FROM=TO (two URL prefixes)"


@dataclass(frozen=True)
class Intervals:
    """How often an object is reconciled again when its spec names no interval, and the short waits of a
    reconcile (each also woken by the change it waits for)."""

    release: float = RELEASE_INTERVAL  # HelmRelease, Jenkins and app kinds
    source: float = SOURCE_INTERVAL  # sources, ConfigSyncs, image repositories and automations, Projects
    image_policy: float = 600.0  # woken by their repository's scans besides
    artifact_generator: float = 3600.0  # Flux's source-watcher has none: an hour, and at once when a source publishes
    preview: float = previews.INTERVAL  # the open pull requests listed again
    receiver: float = receivers.INTERVAL  # the Secret's token read again
    dependency_recheck: float = 30.0  # a release waiting for dependsOn
    dependents_wait: float = 2.0  # a deleted release looks again this soon whether its dependents are gone
    # Deleted together: `kubectl delete hr db app` sends one DELETE after the other, so a dependent deleted
    # this much later than what it depends on still goes first.
    deleted_together: float = 5.0
    cleanup_wait: float = 2.0  # a clean-up waiting for what it deleted to go
    progress_after: float = 2.0  # Reconciling=True for a helm action still running after this


@dataclass(frozen=True)
class Backoffs:
    failure: Backoff = Backoff(2.0, 300.0)  # a reconcile that failed (every kind)
    error: Backoff = Backoff(5.0, 300.0)  # an unexpected error (a bug, reported as ReconcileError)


@dataclass(frozen=True)
class Limits:
    """Bounds on what one process does at once, and how long its steps may take."""

    # Turns (reconciles, clean-ups) running at once, every kind together; helm actions are bounded apart
    # (--concurrency). Without a bound, 10 000 objects seen at start would all ask the API at once: the
    # burst's buffers stay in the heap as fragmentation long after it.
    max_turns: int = 100
    min_turns: int = 10  # places always open, however late the event loop (controllers/scheduler.py's pacing)
    release_rounds: int = 6  # unlock, install/upgrade, test: actions of one reconcile before it answers "nothing"
    dependency_chain: int = 100  # HelmReleases followed through dependsOn when looking for a cycle
    termination_deadline: float = 4.5  # after SIGTERM; a pod's default grace period is 30 s
    cel_timeout: float = 1.0  # one object's health expressions
    yaml_timeout: float = 30.0  # one large YAML document (a few MiB of dense YAML take a few seconds)
    crd_established: float = 10.0  # an applied CRD waited for until the API serves it (--install-crds)
    # an app resource's deletion waits this long for its HelmRelease to go, looking every ``uninstall_poll``;
    # most uninstalls end within it, the rest are looked at again after ``intervals.cleanup_wait``
    uninstall_wait: float = 30.0
    uninstall_poll: float = 0.5
    poll: float = 0.1  # how often what has no event is looked at again while waited for (a CRD, kopf's start)
    stop_poll: float = 0.2  # how often the stop flag of a thread that embeds the operator is looked at (tests)
    unwatched_poll: float = 1.0  # a release's objects of collections the operator may not watch, while waited for
    # How long a status written wins at most over watch events that do not show it yet: a bound for a write whose
    # own event never comes (the watch listed afresh, and someone else wrote the status meanwhile), not the watch's
    # delay.
    written_wins: float = 60.0


def _cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "helmop"


# The app kinds' and Jenkins' modules are imported when asked: they import the spec parsers, which import this
# module's intervals.
def _apps(given: Given) -> tuple[AppKind, ...] | None:
    from .apps import parse_apps

    return tuple(parse_apps(Path(given["apps"]).read_text(), given["apps"])) if given.get("apps") else None


def _jenkins_chart(given: Given) -> dict[str, Any]:
    from .jenkins import DEFAULT_CHART

    repository = DEFAULT_CHART["repository"]
    return {"repository": {**repository, "url": given.get("jenkins_chart_repository") or repository["url"],
                           "version": given.get("jenkins_chart_version") or repository["version"]}}


def default_helm() -> str:
    """The helm binary to run: ``$HELMOP_HELM`` (unless empty), else ``helm`` on the PATH (read when asked, not at
    import)."""
    return os.environ.get("HELMOP_HELM") or "helm"


@dataclass(frozen=True)
class Helm:
    """helm (and kubectl for kustomize), the chart caches and the charts helmop itself installs."""

    executable: str = field(default_factory=default_helm)
    kubectl: str = field(default_factory=lambda: os.environ.get("HELMOP_KUBECTL", "kubectl"))  # its kustomize
    concurrency: int = setting(10, Flag("--concurrency", "helm actions at once (default %(default)s)", int,
                                        chart="concurrency"))
    cache_dir: Path = setting(None, Flag("--cache-dir", "chart and helm caches (default ~/.cache/helmop)", str),
                              factory=_cache_dir, build=lambda given: _path(given, "cache_dir"))
    cache_ttl: float = setting(900.0, Flag(
        "--helm-cache-ttl", "how long a chart repository's index is used before it is asked again (default "
        "%(default)ss; `helmop reconcile` asks at once)", parse_duration, "DURATION", chart="helmCache.ttl"))
    index_max_size: int = setting(64 << 20, Flag(
        "--helm-index-max-size", "largest repository index read (default %(default)s bytes); over it: "
        "IndexTooLarge", parse_size, "SIZE", chart="helmCache.indexMaxSize"))
    chart_max_size: int = setting(64 << 20, Flag(
        "--helm-chart-max-size", "largest chart archive downloaded (default %(default)s bytes); over it: "
        "ChartTooLarge", parse_size, "SIZE", chart="helmCache.chartMaxSize"))
    mirrors: tuple[tuple[str, str], ...] = setting((), Flag(
        "--chart-mirror", "fetch charts whose URL (HTTP or oci://) starts with FROM from TO instead (repeatable): "
        "repositories written for the internet, unchanged behind a mirror", str, "FROM=TO", repeatable=True,
        chart="chartMirrors", error=_MIRROR_ERROR), build=lambda given: _mirrors(given.get("chart_mirror")))
    apps: tuple[AppKind, ...] = setting((), Flag(  # generic app kinds
        "--apps", "app kinds file: custom resources whose spec are a chart's values", str), build=_apps)
    jenkins_chart: Mapping[str, Any] = setting(
        None, Flag("--jenkins-chart-repository", "Helm repository of the Jenkins chart (default "
                   "https://charts.jenkins.io)", str, chart="jenkins.chartRepository"),
        Flag("--jenkins-chart-version", "Jenkins chart version (default: the pinned one)", str,
             chart="jenkins.chartVersion"), factory=lambda: _jenkins_chart({}), build=_jenkins_chart)


@dataclass(frozen=True)
class Sources:
    """Where sources are fetched from, and how ConfigSyncs build and decrypt them."""

    git_mirrors: tuple[tuple[str, str], ...] = setting((), Flag(
        "--git-mirror", "fetch git repositories whose URL starts with FROM from TO instead (repeatable): "
        "GitRepositories written for a public host, unchanged behind a mirror", str, "FROM=TO", repeatable=True,
        chart="gitMirrors", error=_MIRROR_ERROR), build=lambda given: _mirrors(given.get("git_mirror")))
    # directories file:// GitRepositories may name (tests, one machine)
    allow_file_git: tuple[Path, ...] = setting((), Flag(
        "--allow-file-git", "allow file:// GitRepository URLs under DIR (repeatable; never helmop's cache)", str,
        "DIR", repeatable=True, chart="allowFileGit"),
        build=lambda given: tuple(map(Path, given.get("allow_file_git") or ())))
    # a ConfigSync's ${var} with no value and no default fails the sync (Flux's StrictPostBuildSubstitutions
    # feature gate) instead of becoming ""
    strict_substitution: bool = setting(False, Flag(
        "--strict-substitution", "a ConfigSync's ${var} without a value or a default fails its sync instead of "
        "becoming \"\" (Flux's StrictPostBuildSubstitutions)"))
    unconfined_builds: bool = setting(False, Flag(
        "--unconfined-builds", "run kustomize builds without the kernel's confinement (Landlock and seccomp: reads "
        "beneath the repository only, no program, no socket) where the kernel has none; their boundary is then a "
        "check of the kustomizations' text alone (docs: Multi-tenancy)"))
    # SOPS keys for objects that name no Secret
    decryption_keys: Path | None = setting(None, Flag(
        "--decryption-keys", "SOPS keys (*.agekey, *.asc files) for ConfigSyncs whose spec.decryption names no "
        "Secret (Flux's controller-wide decryption; chart value decryption.keysSecret)", str, "DIR",
        chart="decryption.keysSecret"), build=lambda given: _path(given, "decryption_keys"))


@dataclass(frozen=True)
class Servers:
    """The webhook server (Receivers, git push webhooks) and the metrics and probes server."""

    # where both listen (the CLI's default: all interfaces, 127.0.0.1 with --sandbox)
    address: str = setting("0.0.0.0", Flag(
        "--bind-address", "address the webhook and metrics servers listen on (default: all interfaces; 127.0.0.1 "
        "with --sandbox)", str))
    webhook_port: int | None = setting(None, Flag(  # None: no webhook server; 0: any free port
        "--webhook-port", "serve git push webhooks on this port (default: off)", int, chart="webhook.port"))
    metrics_port: int | None = setting(None, Flag(  # /metrics, /healthz, /readyz; None: off
        "--metrics-port", "serve /metrics, /healthz and /readyz on this port", int, chart="metrics.port"))
    api_check: float = 5.0  # how often readiness asks the API server


@dataclass(frozen=True)
class Leadership:
    """Replicas: a leader Lease (one acts), or shards by label and by uid hash (each acts on its part)."""

    # only the holder of the Lease acts (the CLI's default: on in a pod)
    election: bool = setting(False, Flag(
        "--leader-elect", "run as one of several replicas: only the holder of the Lease helmop-leader[-SHARD] acts "
        "(default: on in a pod, where replicas are likely; off elsewhere)", negatable=True,
        chart="leaderElection.enabled"))
    # where the Leases live (the CLI's default: the operator's own namespace)
    namespace: str = setting("default", Flag(
        "--leader-election-namespace", "namespace of the leader Lease (default: $POD_NAMESPACE, the pod's own, or "
        "default)", str, "NAMESPACE"))
    # handle only resources labelled helmop.dev/shard=<shard> ("": those without the label)
    shard: str = setting("", Flag(
        "--shard", "handle only resources labelled helmop.dev/shard=NAME (default: only those without it)", str,
        "NAME", chart="shards"))
    # split the objects with the other replicas by uid hash (infra.membership)
    shards_auto: bool = setting(False, Flag(
        "--shards", "auto: the replicas (of this --shard) split the objects among themselves by the hash of their "
        "uid, each announced by a Lease helmop-member-<identity>; no leader", str, choices=("auto",),
        chart="sharding"), build=lambda given: given.get("shards") == "auto")
    # controller-runtime's defaults, under Flux's flags' names (a standby acts lease_duration after the leader's end)
    lease_duration: float = setting(15.0, Flag(
        "--leader-election-lease-duration", "how long a standby waits before it takes a Lease nobody renewed "
        "(default %(default)ss)", parse_duration, "DURATION"))
    renew_deadline: float = setting(10.0, Flag(
        "--leader-election-renew-deadline", "how long the holder tries to renew its Lease before it stops acting "
        "(default %(default)ss; shorter than the lease duration: the difference is the time its helm processes "
        "have to stop before a standby may act)", parse_duration, "DURATION"))
    retry_period: float = setting(2.0, Flag(
        "--leader-election-retry-period", "how often a Lease is renewed or tried for (default %(default)ss; shorter "
        "than the renew deadline)", parse_duration, "DURATION"))

    def __post_init__(self) -> None:
        if not self.lease_duration > self.renew_deadline > self.retry_period > 0:
            raise ValueError(f"--leader-election-lease-duration ({self.lease_duration:g}s) must be longer than "
                             f"--leader-election-renew-deadline ({self.renew_deadline:g}s), and that longer than "
                             f"--leader-election-retry-period ({self.retry_period:g}s), more than 0")


@dataclass(frozen=True)
class Flux:
    """--flux-api: Flux's kinds served and reconciled too, while Flux's own controllers are gone."""

    api: bool = setting(False, Flag(
        "--flux-api", "serve and reconcile Flux's kinds too (HelmRelease v2, GitRepository, HelmRepository, "
        "OCIRepository, Kustomization; Provider and Alert v1beta3) with Flux's semantics: a Flux cluster moves over "
        "unchanged. The versions Flux has removed (HelmRelease v2beta1, Kustomization v1beta2, ...) are served too, "
        "read as the current ones with a Warning; --flux-api=current serves only the versions Flux serves", str,
        "current", choices=("all", "current"), optional_value="all", chart="fluxAPI.enabled"),
        build=lambda given: given.get("flux_api") is not None)
    # where Flux's controllers run (their leader Leases)
    namespace: str = setting("flux-system", Flag(
        "--flux-namespace", "with --flux-api: the namespace of Flux's controllers, whose leader Leases say whether "
        "they still run (Flux's kinds are not served until they stop; default: flux-system)", str, "NAMESPACE",
        chart="fluxAPI.namespace"))
    # the versions Flux has removed are served too, their fields read as the served version's (api.flux.upgrade);
    # False with --flux-api=current
    removed_versions: bool = setting(True, build=lambda given: given.get("flux_api") != "current")
    check: float = 10.0  # how often Flux's leader Leases are read (controllers.fluxgate)


def _cidrs(values: Sequence[str] | None) -> tuple[str, ...] | None:
    return None if values is None else tuple(str(Policy.notifications([c]).allowed[0]) for c in values)


@dataclass(frozen=True)
class Notifications:
    """Providers' deliveries: a receiver that fails is tried again (timeouts, 429, 5xx) with ``backoff`` for
    ``retry_for``; each Provider queues at most ``queue`` (the oldest dropped); the same event is sent once per
    ``rate_limit``."""

    # private ranges notifications may reach
    allow_cidrs: tuple[str, ...] = setting((), Flag(
        "--allow-notify-cidr", "notifications may reach addresses in this range (repeatable): loopback, "
        "link-local, private and cluster ranges are refused by default (an in-cluster Alertmanager: its range)",
        str, "CIDR", repeatable=True, chart="notifications.allowCIDRs"),
        build=lambda given: _cidrs(given.get("allow_notify_cidr")))
    backoff: Backoff = Backoff(1.0, 60.0)
    retry_for: float = 600.0
    queue: int = 100
    rate_limit: float = 300.0  # Flux's --rate-limit-interval


def _tenancy(given: Given) -> Tenancy:
    served = given.get("decryption_keys_namespaces")
    return Tenancy(given.get("default_service_account") or "", bool(given.get("no_cross_namespace_refs")),
                   None if served is None else Tenancy.namespaces(served))


_TENANCY = (
    Flag("--default-service-account", "resources that name no ServiceAccount act as this ServiceAccount of their "
         "own namespace (multi-tenancy lockdown; default: the operator's own rights)", str, "NAME",
         chart="multitenancy.defaultServiceAccount"),
    Flag("--no-cross-namespace-refs", "refuse every reference from a resource into another namespace (sourceRef, "
         "...)", chart="multitenancy.noCrossNamespaceRefs"),
    Flag("--decryption-keys-namespaces", "the namespaces whose objects may use the --decryption-keys (repeatable, "
         "comma-separated; '*': all; '': none). Default: all, or none with --no-cross-namespace-refs or "
         "--default-service-account (a tenant must not open what another encrypted for these keys)", str, "NS,...",
         repeatable=True, chart="decryption.namespaces"))


@dataclass(frozen=True)
class Remotes:
    """What the kubeconfigs of spec.kubeConfig (remote clusters) may do."""

    # exec plugins in those kubeconfigs
    allow_exec: bool = setting(False, Flag(
        "--insecure-kubeconfig-exec", "let kubeconfigs of spec.kubeConfig run exec credential plugins (Flux's flag; "
        "refused by default: a tenant's kubeconfig would run a program in the operator)",
        chart="remoteClusters.allowExecPlugins"))
    # insecure-skip-tls-verify in those kubeconfigs
    allow_insecure_tls: bool = setting(False, Flag(
        "--insecure-kubeconfig-tls", "let kubeconfigs of spec.kubeConfig skip TLS verification "
        "(insecure-skip-tls-verify; Flux's flag)", chart="remoteClusters.allowInsecureTLS"))
    # where minted ServiceAccount tokens may go; None: any, or none under lockdown
    token_addresses: TokenAddresses | None = setting(None, Flag(
        "--kubeconfig-token-addresses", "where ServiceAccount tokens minted for spec.kubeConfig.configMapRef "
        "(workload identity) may be sent: hosts (any port), host:port or https URLs (repeatable, comma-separated; "
        "'*': any; '': none). Default: any, as Flux, or none with --no-cross-namespace-refs or "
        "--default-service-account (a tenant would send its namespace's tokens where it likes)", str,
        "HOST|URL,...", repeatable=True, chart="remoteClusters.tokenAddresses"),
        build=lambda given: None if given.get("kubeconfig_token_addresses") is None
        else TokenAddresses.parse(given["kubeconfig_token_addresses"]))


@dataclass(frozen=True)
class Settings:
    """Everything the operator is run with, fixed at start: what it watches and where its API is, then the groups.
    Change one with dataclasses.replace (``replace(s, flux=replace(s.flux, check=0.3))``)."""

    # kubeconfig to use; None: $KUBECONFIG, ~/.kube/config, in-cluster
    kubeconfig: Path | None = setting(None, Flag(
        "--kubeconfig", "kubeconfig to use (default: $KUBECONFIG, ~/.kube/config, in-cluster); with --sandbox, "
        "where to write the sandbox's", str), build=lambda given: _path(given, "kubeconfig"))
    install_crds: bool = setting(False, Flag("--install-crds", "create or update helmop's CRDs at start"))
    # the namespaces watched; empty: all
    namespaces: tuple[str, ...] = setting(
        (), Flag("--namespace", "watch this namespace (repeatable; default all)", str, repeatable=True, short="-n",
                 chart="watchNamespaces"),
        Flag("--all-namespaces", "watch all namespaces (the default)", short="-A"),
        build=lambda given: None if given.get("all_namespaces") else tuple(given.get("namespace") or ()))
    intervals: Intervals = field(default_factory=Intervals)
    backoffs: Backoffs = field(default_factory=Backoffs)
    limits: Limits = field(default_factory=Limits)
    helm: Helm = field(default_factory=Helm)
    sources: Sources = field(default_factory=Sources)
    servers: Servers = field(default_factory=Servers)
    leadership: Leadership = field(default_factory=Leadership)
    flux: Flux = field(default_factory=Flux)
    notifications: Notifications = field(default_factory=Notifications)
    # what references may name, what identity acts, who may use the operator's keys
    tenancy: Tenancy = setting(None, *_TENANCY, factory=Tenancy, build=_tenancy)
    remotes: Remotes = field(default_factory=Remotes)


def flags(group: type[Any] = Settings) -> Iterator[Flag]:
    """Every flag of ``group``'s settings and its groups', in the order of their fields, their help naming the
    setting's default."""
    for f in fields(group):
        if isinstance(f.type, str) and f.type in _GROUPS:
            yield from flags(_GROUPS[f.type])
        for flag in f.metadata.get("flags", ()):
            yield replace(flag, help=flag.help.replace("%(default)s", str(f.default)))


def from_flags(given: Given, group: type[Any] = Settings) -> Any:
    """``group``'s settings from the flags' parsed values (a setting without flags, or whose flags were not
    given: its default); ValueError naming the flag for a value a setting refuses (its field's last flag: the
    one of its flags whose value is checked)."""
    values: dict[str, Any] = {}
    for f in fields(group):
        if isinstance(f.type, str) and f.type in _GROUPS:
            values[f.name] = from_flags(given, _GROUPS[f.type])
        elif f.metadata.get("build") is not None:
            try:
                value = f.metadata["build"](given)
            except ValueError as exc:
                flag = f.metadata["flags"][-1]
                raise ValueError(flag.error.format(flag=flag.name, problem=exc)) from None
            if value is not None:
                values[f.name] = value
    return group(**values)


_GROUPS: dict[str, type[Any]] = {cls.__name__: cls for cls in (
    Intervals, Backoffs, Limits, Helm, Sources, Servers, Leadership, Flux, Notifications, Remotes)}
