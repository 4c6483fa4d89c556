"""Assembling and running the operator: connection, helm engine, caches, kopf settings."""

from __future__ import annotations

import asyncio
import gc
import hashlib
import json
import logging
import os
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kopf

from helmop.api import crds, jenkins, roles, settings
from helmop.api.addresses import Policy
from helmop.api.apps import AppKind
from helmop.api.flux import crds as flux_crds
from helmop.api.kinds import FINALIZER, FLUX_GROUPS, FLUX_RECEIVER, RECEIVER
from helmop.api.kubeconfigs import TokenAddresses
from helmop.api.settings import Tunables
from helmop.api.shards import NOTHING
from helmop.api.tenancy import Tenancy
from helmop.helm.engine import Engine, Processes, default_executable
from helmop.infra import confine, webhooks
from helmop.infra.clusters import Options as RemoteOptions
from helmop.infra.kube import Connection, Kube, KubeError
from helmop.infra.leader import Election, identity, lease_name
from helmop.infra.membership import Membership
from helmop.infra.metrics import CacheCounts
from helmop.infra.probes import Probes
from helmop.infra.receivers import Receivers
from helmop.infra.serving import Server, serve
from helmop.infra.termination import handle_signals
from helmop.sources.buildcache import BuildOutputs
from helmop.sources.git import GitCache
from helmop.sources.kustomize import Kustomize
from helmop.sources.repositories import Repositories

from . import referrers
from .apps import generic_app, jenkins_app
from .context import Services
from .fluxgate import FluxGate
from .handlers import Dispatcher, register

log = logging.getLogger(__name__)
MANAGER = "helmop"


@dataclass
class OperatorConfig:
    kubeconfig: Path | None = None
    namespaces: list[str] = field(default_factory=list)  # empty: all namespaces
    concurrency: int = settings.CONCURRENCY
    cache_dir: Path = field(default_factory=lambda: Path(os.environ.get("XDG_CACHE_HOME",
                                                                        Path.home() / ".cache")) / "helmop")
    helm: str = field(default_factory=default_executable)
    kubectl: str = field(default_factory=lambda: os.environ.get("HELMOP_KUBECTL", "kubectl"))  # its kustomize
    install_crds: bool = False
    allow_file_git: tuple[Path, ...] = ()  # directories file:// GitRepositories may name (tests, one machine)
    webhook_port: int | None = None  # None: no webhook server; 0: any free port
    webhook_address: str = "0.0.0.0"
    bound_webhook_port: int = 0  # the port actually bound
    apps: list[AppKind] = field(default_factory=list)  # generic app kinds (--apps)
    metrics_port: int | None = None  # /metrics, /healthz, /readyz; None: off
    metrics_address: str = "0.0.0.0"
    bound_metrics_port: int = 0
    jenkins_chart: dict[str, Any] = field(default_factory=lambda: dict(jenkins.DEFAULT_CHART))
    tenancy: Tenancy = field(default_factory=Tenancy)  # --default-service-account, --no-cross-namespace-refs
    shard: str = ""  # handle only resources labelled helmop.dev/shard=<shard> ("": those without the label)
    shards_auto: bool = False  # split the objects with the other replicas by uid hash (infra.membership)
    leader_election: bool = False
    leader_election_namespace: str = "default"  # where the Lease lives (the operator's own namespace)
    helm_cache_ttl: float = settings.HELM_CACHE_TTL  # seconds a repository index is used before it is revalidated
    helm_index_max_size: int = settings.HELM_INDEX_MAX_SIZE
    helm_chart_max_size: int = settings.HELM_CHART_MAX_SIZE
    chart_mirrors: tuple[tuple[str, str], ...] = ()  # --chart-mirror FROM=TO
    git_mirrors: tuple[tuple[str, str], ...] = ()  # --git-mirror FROM=TO
    flux_api: bool = False  # --flux-api: Flux's kinds served and reconciled too
    flux_namespace: str = "flux-system"  # where Flux's controllers run (their leader Leases)
    allow_notify_cidrs: tuple[str, ...] = ()  # --allow-notify-cidr: private ranges notifications may reach
    unconfined_builds: bool = False  # --unconfined-builds: kustomize without the kernel's confinement
    decryption_keys: Path | None = None  # --decryption-keys: SOPS keys for objects that name no Secret
    kubeconfig_exec: bool = False  # --insecure-kubeconfig-exec: exec plugins in kubeconfigs of spec.kubeConfig
    kubeconfig_tls: bool = False  # --insecure-kubeconfig-tls: insecure-skip-tls-verify in those kubeconfigs
    # --kubeconfig-token-addresses: where minted ServiceAccount tokens may go; None: any, or none under lockdown
    kubeconfig_token_addresses: TokenAddresses | None = None
    tunables: Tunables = field(default_factory=Tunables)  # every wait and backoff (tests shorten them)


_CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
_DEFINITION = "helmop.dev/definition"  # the digest of the definition helmop last applied to a CRD


async def install_crds(kube: Kube, flux: bool = False, removed: bool = True) -> None:
    """Create or update helmop's CRDs (server-side apply) and wait until they are served; and the ClusterRoles
    that aggregate its kinds into the user-facing roles. With ``flux``, Flux's CRDs too where the cluster has
    none (a cluster moving from Flux keeps Flux's own), with the versions Flux has removed if ``removed``. The
    CRDs are read in one list and applied at once, each only where it differs from what helmop applied last: an
    operator restarting on a cluster that has them writes nothing."""
    live = {c["metadata"]["name"]: c for c in ((await kube.get(_CRDS)) or {}).get("items") or []}
    wanted = crds.definitions() + (flux_crds.definitions(removed) if flux else [])
    await asyncio.gather(*(_install_crd(kube, crd, live.get(crd["metadata"]["name"])) for crd in wanted))
    for role in roles.definitions():  # helmop's kinds in the cluster's admin, edit and view roles
        try:
            await kube.apply(f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{role['metadata']['name']}", role,
                             MANAGER)
        except KubeError as exc:
            if exc.status != 403:
                raise
            # deployed by the chart, which installs these roles itself (the operator may not write ClusterRoles)
            log.info("ClusterRole %s left to the installation: %s", role["metadata"]["name"], exc.message)


async def _install_crd(kube: Kube, crd: dict[str, Any], live: dict[str, Any] | None) -> None:
    name = crd["metadata"]["name"]
    managers = {m.get("manager") for m in ((live or {}).get("metadata") or {}).get("managedFields") or []}
    if live is not None and crd["spec"]["group"].endswith(FLUX_GROUPS) and MANAGER not in managers:
        log.info("CRD %s is Flux's own: kept", name)
        return
    digest = hashlib.sha256(json.dumps(crd, sort_keys=True).encode()).hexdigest()[:16]
    if live is not None and _established(live) and \
            ((live.get("metadata") or {}).get("annotations") or {}).get(_DEFINITION) == digest:
        log.info("CRD %s unchanged", name)
        return
    metadata = {**crd["metadata"], "annotations": {**(crd["metadata"].get("annotations") or {}), _DEFINITION: digest}}
    await kube.apply(f"{_CRDS}/{name}", {**crd, "metadata": metadata}, MANAGER)
    for _ in range(100):
        if _established(await kube.get(f"{_CRDS}/{name}") or {}):
            break
        await asyncio.sleep(0.1)
    log.info("CRD %s applied", name)


def _established(crd: dict[str, Any]) -> bool:
    return any(c.get("type") == "Established" and c.get("status") == "True"
               for c in (crd.get("status") or {}).get("conditions") or [])


class _NoDiffBase(kopf.DiffBaseStorage):
    """kopf builds, for every event, a deep copy of the object's essence to diff for change handlers; helmop has
    none (kopf only watches: ``handlers.seen``), so nothing would ever read it: none is built."""

    def build(self, **_: Any) -> kopf.BodyEssence:
        return kopf.BodyEssence()

    def fetch(self, **_: Any) -> kopf.BodyEssence | None:
        return None

    def store(self, **_: Any) -> None:
        return None


def _settings() -> kopf.OperatorSettings:
    kopf_settings = kopf.OperatorSettings()
    # kopf only watches (helmop's scheduler adds and removes helmop's finalizer): a name of kopf's own that
    # nothing carries, so that kopf never takes helmop's finalizer for a leftover of its own and removes it.
    kopf_settings.persistence.finalizer = f"kopf.{FINALIZER}"
    kopf_settings.posting.enabled = False  # helmop posts its own Events, without repeats
    kopf_settings.persistence.diffbase_storage = _NoDiffBase()
    # kopf runs a worker per object with events queued: 10 000 objects listed at start are 10 000 workers at
    # once, whose memory stays behind as fragmentation; the handler only records the event, so a hundred do.
    kopf_settings.queueing.worker_limit = 100
    kopf_settings.queueing.idle_timeout = 0.1  # a worker done with its events gives its place up soon
    kopf_settings.peering.standalone = True
    return kopf_settings


async def run(cfg: OperatorConfig, *, stop_flag: threading.Event | asyncio.Event | None = None,
              ready_flag: threading.Event | asyncio.Event | None = None) -> None:
    """Run until ``stop_flag`` is set, a signal arrives, or (with leader election) the Lease is lost."""
    kube = Kube(Connection.from_kubeconfig(cfg.kubeconfig))
    halt = asyncio.Event()  # every reason to stop ends up here
    helm = Processes()  # what a termination signal is passed on to
    rearm = handle_signals(halt, helm.signal, cfg.tunables.termination_deadline)
    background = [asyncio.create_task(_forward(stop_flag, halt))]
    try:
        if cfg.install_crds:
            await install_crds(kube, cfg.flux_api, cfg.tunables.flux_removed_versions)
        services = await _services(cfg, kube, helm)
        ready = ready_flag if ready_flag is not None else asyncio.Event()
        probes = Probes(kube, services.metrics, api_every=cfg.tunables.api_check)
        background.append(asyncio.create_task(probes.run()))
        t = cfg.tunables
        election = (Election(kube, cfg.leader_election_namespace, lease_name(cfg.shard), identity(),
                             lease_duration=t.lease_duration, renew_deadline=t.renew_deadline,
                             retry_period=t.retry_period) if cfg.leader_election else None)

        standing_by = election is not None

        def not_ready() -> str:
            # A standby is ready when the API is: it answers webhooks, and a rollout must not wait for it.
            return probes.api_ready() if ready.is_set() or standing_by else "starting"

        repos, builds = services.repos, services.kustomize.outputs
        services.metrics.count_caches(lambda: CacheCounts(repos.hits, repos.misses, repos.index_fetches,
                                                          builds.hits if builds else 0, builds.misses if builds else 0))
        servers: list[Server] = []
        receivers: Receivers | None = None
        try:
            if cfg.metrics_port is not None:
                servers.append(await serve(services.metrics.app(not_ready), cfg.metrics_address, cfg.metrics_port))
                cfg.bound_metrics_port = servers[-1].port
            if cfg.webhook_port is not None:
                receivers = _receivers(cfg, services)
                background.append(asyncio.create_task(receivers.run()))
                servers.append(await serve(webhooks.app(services.kube, receivers), cfg.webhook_address,
                                           cfg.webhook_port))
                cfg.bound_webhook_port = servers[-1].port
            if election is not None and not await election.acquire(halt):
                return  # stopped while standing by
            standing_by, lost = False, asyncio.Event()
            if election is not None:
                background.append(asyncio.create_task(_hold(election, halt, lost)))
            dispatcher = Dispatcher(services, cfg.tunables)
            if cfg.flux_api:  # known before any Flux object gets a turn
                gate = dispatcher.flux_gate = FluxGate(kube, cfg.flux_namespace, services.metrics,
                                                       dispatcher.serve_flux)
                await gate.check()
                background.append(asyncio.create_task(gate.run(t.flux_check)))
            watches = referrers.Watches(dispatcher.ctx, cfg.namespaces)
            background.append(asyncio.create_task(watches.run()))
            background.append(asyncio.create_task(_started(ready, rearm)))
            # kopf gives the tasks started after it a grace period of 5 s when it stops; helmop's own
            # (probes, watches) are stopped as soon as the operator is told to stop.
            background.append(asyncio.create_task(_cancel_on(halt, list(background))))
            registry = _registry(cfg, dispatcher)
            left = asyncio.Event()  # set once every turn stopped: only then may the member Lease go
            member = _member(cfg, kube, dispatcher, left) if cfg.shards_auto else None
            try:
                await kopf.operator(registry=registry, settings=_settings(), standalone=True,
                                    clusterwide=not cfg.namespaces, namespaces=cfg.namespaces,
                                    stop_flag=halt, ready_flag=ready)
            finally:  # every turn stopped (helm told to stop) before a Lease goes or the process ends
                await dispatcher.stop()
                left.set()
                if member is not None:
                    await member
            if lost.is_set():
                raise SystemExit("helmop: lost the leader Lease; exiting so that a restart rejoins the election")
            if election is not None:
                await election.release()
        finally:
            await services.close()
            for server in servers:
                await server.stop()
            if receivers is not None:
                await receivers.close()
    except KubeError as exc:
        raise SystemExit(f"helmop: the Kubernetes API refused: {exc}") from None
    finally:
        for task in background:
            task.cancel()
        await asyncio.gather(*background, return_exceptions=True)
        await kube.close()


async def _services(cfg: OperatorConfig, kube: Kube, processes: Processes) -> Services:
    # The Engine runs `helm version` here. Helm's own cache/config/data go under helmop's writable cache
    # (read-only root filesystems), unless the operator's environment names them.
    engine = await asyncio.to_thread(Engine.start, cfg.helm, cfg.kubeconfig, cfg.cache_dir / "helm", processes)
    repos = Repositories(cfg.cache_dir, cfg.helm_cache_ttl, cfg.helm_index_max_size, cfg.helm_chart_max_size,
                         mirrors=cfg.chart_mirrors)
    git = GitCache(cfg.cache_dir, file_roots=cfg.allow_file_git, mirrors=cfg.git_mirrors)
    kustomize = Kustomize(shutil.which(cfg.kubectl) or cfg.kubectl, cfg.cache_dir / "kustomize",
                          confined=not cfg.unconfined_builds, outputs=BuildOutputs())
    if kustomize.confined and confine.landlock_abi() < 1:
        log.error("kustomize builds will be refused (ConfinementUnavailable): this kernel offers no Landlock to "
                  "confine them; start helmop with --unconfined-builds to build with checks of the text only")
    return Services.of(kube, engine, repos, git, kustomize, concurrency=cfg.concurrency, tunables=cfg.tunables,
                       notify=Policy.notifications(cfg.allow_notify_cidrs), keys_folder=cfg.decryption_keys,
                       remotes=RemoteOptions(allow_exec=cfg.kubeconfig_exec, allow_insecure_tls=cfg.kubeconfig_tls,
                                             token_addresses=_token_addresses(cfg)),
                       tenancy=cfg.tenancy)


def _token_addresses(cfg: OperatorConfig) -> TokenAddresses:
    """--kubeconfig-token-addresses, else Flux's default (any address), or none under either lockdown flag."""
    if cfg.kubeconfig_token_addresses is not None:
        return cfg.kubeconfig_token_addresses
    return TokenAddresses(everywhere=not cfg.tenancy.locked_down)


def _receivers(cfg: OperatorConfig, services: Services) -> Receivers:
    """Receivers' webhooks, served by every replica (a standby too); an OIDC issuer's keys are fetched as
    notifications are sent, through the notifications' address policy."""
    kinds = [RECEIVER, *([FLUX_RECEIVER] if cfg.flux_api else [])]
    return Receivers(services.kube, kinds, cfg.namespaces, tenancy=cfg.tenancy, metrics=services.metrics,
                     policy=Policy.notifications(cfg.allow_notify_cidrs), cel_timeout=cfg.tunables.cel_timeout)


def _registry(cfg: OperatorConfig, dispatcher: Dispatcher) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        # Called again by kopf after a 401: read the credentials afresh (they rotate).
        conn = Connection.from_kubeconfig(cfg.kubeconfig)
        return kopf.ConnectionInfo(server=conn.server, ca_path=conn.ca_file or None, token=conn.token or None,
                                   certificate_path=conn.cert_file or None,
                                   private_key_path=conn.key_file or None, insecure=conn.insecure)

    del login  # registered; kept only by kopf
    apps = [jenkins_app(cfg.jenkins_chart), *(generic_app(kind) for kind in cfg.apps)]
    register(registry, dispatcher, apps, cfg.shard, clusterwide=not cfg.namespaces, flux=cfg.flux_api)
    return registry


def _member(cfg: OperatorConfig, kube: Kube, dispatcher: Dispatcher, left: asyncio.Event) -> asyncio.Task[None]:
    """Take part in --shards auto: act on nothing until the membership grants this replica its range."""
    dispatcher.acting = NOTHING
    t = cfg.tunables
    membership = Membership(kube, cfg.leader_election_namespace, cfg.shard, identity(), dispatcher,
                            lease_duration=t.lease_duration, renew_deadline=t.renew_deadline,
                            retry_period=t.retry_period)
    return asyncio.create_task(membership.run(left))


async def _forward(stop_flag: threading.Event | asyncio.Event | None, halt: asyncio.Event) -> None:
    """Set ``halt`` when the caller's stop flag is set (a thread's Event is polled: it cannot be awaited)."""
    if isinstance(stop_flag, asyncio.Event):
        await stop_flag.wait()
    elif stop_flag is not None:
        while not stop_flag.is_set():
            await asyncio.sleep(0.2)
    else:
        return
    halt.set()


async def _cancel_on(halt: asyncio.Event, tasks: list[asyncio.Task[Any]]) -> None:
    await halt.wait()
    for task in tasks:
        task.cancel()


async def _hold(election: Election, halt: asyncio.Event, lost: asyncio.Event) -> None:
    await election.hold(halt)
    if not halt.is_set():
        lost.set()
        halt.set()


async def _started(ready: threading.Event | asyncio.Event, rearm: Callable[[], None]) -> None:
    """Once kopf has started: put helmop's signal handlers back (kopf installs its own; both then run),
    and move everything allocated so far (modules, clients, caches) out of the garbage collector's
    sight: its full collections then scan only what reconciles allocate, and stop pausing the event
    loop for 100-200 ms (measured in the benchmark)."""
    while not ready.is_set():
        await asyncio.sleep(0.1)
    rearm()
    gc.freeze()
    # Collections ten times rarer: a burst of reconciles allocates fast, and every hundredth collection is a
    # full one, which paused the loop for up to 90 ms at 1000 releases in flight (50 ms at most since).
    gc.set_threshold(7000, 10, 10)
