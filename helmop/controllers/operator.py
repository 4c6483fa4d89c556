"""Assembling and running the operator: connection, helm engine, caches, kopf settings."""

from __future__ import annotations

import asyncio
import gc
import hashlib
import json
import logging
import shutil
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import kopf

from helmop.api import crds, roles
from helmop.api.addresses import Policy
from helmop.api.flux import crds as flux_crds
from helmop.api.kinds import FINALIZER, FLUX_GROUPS, FLUX_RECEIVER, RECEIVER
from helmop.api.kubeconfigs import TokenAddresses
from helmop.api.settings import Limits, Settings
from helmop.api.shards import NOTHING
from helmop.helm.engine import Engine, Processes
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
from helmop.sources.repositories import Repositories, system_trust

from . import referrers
from .apps import App, generic_app, jenkins_app
from .context import Services
from .fluxgate import FluxGate
from .handlers import Dispatcher, register

log = logging.getLogger(__name__)
MANAGER = "helmop"


@dataclass
class Bound:
    """The ports the servers listen on, known once they serve (a port of 0 in the settings: any free one)."""

    webhook: int = 0
    metrics: int = 0


_CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
SWITCH_INTERVAL = 0.001  # seconds a thread computes before another that waits for the GIL takes it
_DEFINITION = "helmop.dev/definition"  # the digest of the definition helmop last applied to a CRD


async def install_crds(kube: Kube, flux: bool = False, removed: bool = True, limits: Limits | None = None) -> None:
    """Create or update helmop's CRDs (server-side apply) and wait until they are served; and the ClusterRoles
    that aggregate its kinds into the user-facing roles. With ``flux``, Flux's CRDs too where the cluster has
    none (a cluster moving from Flux keeps Flux's own), with the versions Flux has removed if ``removed``. The
    CRDs are read in one list and applied at once, each only where it differs from what helmop applied last: an
    operator restarting on a cluster that has them writes nothing."""
    live = {c["metadata"]["name"]: c for c in ((await kube.get(_CRDS)) or {}).get("items") or []}
    wanted = await asyncio.to_thread(_definitions, flux, removed)  # ~100 ms of CPU: off the event loop
    await asyncio.gather(*(_install_crd(kube, crd, digest, live.get(crd["metadata"]["name"]), limits or Limits())
                           for crd, digest in wanted))
    for role in roles.definitions():  # helmop's kinds in the cluster's admin, edit and view roles
        try:
            await kube.apply(f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{role['metadata']['name']}", role,
                             MANAGER)
        except KubeError as exc:
            if exc.status != 403:
                raise
            # deployed by the chart, which installs these roles itself (the operator may not write ClusterRoles)
            log.info("ClusterRole %s left to the installation: %s", role["metadata"]["name"], exc.message)


def _definitions(flux: bool, removed: bool) -> list[tuple[dict[str, Any], str]]:
    """The CRDs to install, each with the digest of its definition."""
    wanted = crds.definitions() + (flux_crds.definitions(removed) if flux else [])
    return [(crd, hashlib.sha256(json.dumps(crd, sort_keys=True).encode()).hexdigest()[:16]) for crd in wanted]


async def _install_crd(kube: Kube, crd: dict[str, Any], digest: str, live: dict[str, Any] | None,
                       limits: Limits) -> None:
    name = crd["metadata"]["name"]
    if live is not None and (kept := _kept(crd, live, digest)):
        log.info("CRD %s %s", name, kept)
        return
    metadata = {**crd["metadata"], "annotations": {**(crd["metadata"].get("annotations") or {}), _DEFINITION: digest}}
    await kube.apply(f"{_CRDS}/{name}", {**crd, "metadata": metadata}, MANAGER)
    for _ in range(round(limits.crd_established / limits.poll)):
        if _established(await kube.get(f"{_CRDS}/{name}") or {}):
            break
        await asyncio.sleep(limits.poll)
    log.info("CRD %s applied", name)


def _kept(crd: dict[str, Any], live: dict[str, Any], digest: str) -> str:
    """Why the cluster's CRD stays as it is ("": it is applied): Flux's own, or what helmop applied last."""
    metadata = live.get("metadata") or {}
    managers = {m.get("manager") for m in metadata.get("managedFields") or []}
    if crd["spec"]["group"].endswith(FLUX_GROUPS) and MANAGER not in managers:
        return "is Flux's own: kept"
    if _established(live) and (metadata.get("annotations") or {}).get(_DEFINITION) == digest:
        return "unchanged"
    return ""


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


async def run(settings: Settings, *, stop_flag: threading.Event | asyncio.Event | None = None,
              ready_flag: threading.Event | asyncio.Event | None = None, bound: Bound | None = None) -> None:
    """Run until ``stop_flag`` is set, a signal arrives, or (with leader election) the Lease is lost; ``bound``
    is told the ports the servers listen on."""
    # The loop shares the GIL with the threads that parse and decode off it (indexes, release records, large
    # YAML): each system call of the loop lets the GIL go, and taking it back from a thread that computes waits
    # for the switch interval. At Python's 5 ms, an iteration of ten socket reads waited 50 ms for it; a finer
    # one also cost the burst of 1000 releases less of the operator's CPU (benchmarks.md, wave 6 session 8).
    switch_interval = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL)
    kube = Kube(Connection.from_kubeconfig(settings.kubeconfig))
    process = _Process(settings, kube, ready_flag if ready_flag is not None else asyncio.Event(), bound or Bound())
    process.background.append(asyncio.create_task(_forward(stop_flag, process.halt,
                                                            settings.limits.stop_poll)))
    try:
        await process.run()
    except KubeError as exc:
        raise SystemExit(f"helmop: the Kubernetes API refused: {exc}") from None
    finally:
        for task in process.background:
            task.cancel()
        await asyncio.gather(*process.background, return_exceptions=True)
        await kube.close()
        sys.setswitchinterval(switch_interval)  # for a process that goes on (an operator run in-process)


class _Process:
    """One run of the operator, in steps: its services and servers, then (once leader, with an election) the
    controllers under kopf. ``halt`` is where every reason to stop ends up."""

    def __init__(self, settings: Settings, kube: Kube, ready: threading.Event | asyncio.Event, bound: Bound) -> None:
        self.settings, self.kube, self.ready, self.bound = settings, kube, ready, bound
        self.halt = asyncio.Event()
        self.helm = Processes()  # what a termination signal is passed on to
        self.rearm = handle_signals(self.halt, self.helm.signal, settings.limits.termination_deadline)
        self.background: list[asyncio.Task[Any]] = []
        self.standing_by = settings.leadership.election  # until the Lease is acquired
        self.servers: list[Server] = []
        self.receivers: Receivers | None = None
        self.probes: Probes | None = None  # once served

    async def run(self) -> None:
        settings = self.settings
        if settings.install_crds:
            await install_crds(self.kube, settings.flux.api, settings.flux.removed_versions, settings.limits)
        services = await build_services(settings, self.kube, self.helm)
        try:
            await self._serve(services)
            election = _election(settings, self.kube)
            if election is not None and not await election.acquire(self.halt):
                return  # stopped while standing by
            await self._act(services, election)
        finally:
            await services.close()
            for server in self.servers:
                await server.stop()
            if self.receivers is not None:
                await self.receivers.close()

    async def _serve(self, services: Services) -> None:
        """The probes, metrics and webhook servers: a standby serves them too."""
        servers = self.settings.servers
        probes = self.probes = Probes(self.kube, services.metrics, api_every=servers.api_check)
        self.background.append(asyncio.create_task(probes.run()))

        def not_ready() -> str:
            # A standby is ready when the API is: it answers webhooks, and a rollout must not wait for it.
            return probes.api_ready() if self.ready.is_set() or self.standing_by else "starting"

        repos, builds = services.repos, services.kustomize.outputs
        services.metrics.count_caches(lambda: CacheCounts(repos.hits, repos.misses, repos.index_fetches,
                                                          builds.hits if builds else 0, builds.misses if builds else 0))
        if servers.metrics_port is not None:
            self.servers.append(await serve(services.metrics.app(not_ready), servers.address, servers.metrics_port))
            self.bound.metrics = self.servers[-1].port
        if servers.webhook_port is not None:
            self.receivers = _receivers(self.settings, services)
            self.background.append(asyncio.create_task(self.receivers.run()))
            self.servers.append(await serve(webhooks.app(services.kube, self.receivers), servers.address,
                                            servers.webhook_port))
            self.bound.webhook = self.servers[-1].port

    async def _act(self, services: Services, election: Election | None) -> None:
        """The controllers, from the Flux gate's first answer until the process is told to stop."""
        settings = self.settings
        self.standing_by, lost = False, asyncio.Event()
        if election is not None:
            self.background.append(asyncio.create_task(_hold(election, self.halt, lost)))
        dispatcher = Dispatcher(services, settings)
        if self.probes is not None:
            self.probes.lag_listeners.append(dispatcher.scheduler.paced)
        if settings.flux.api:  # known before any Flux object gets a turn
            gate = dispatcher.flux_gate = FluxGate(self.kube, settings.flux.namespace, services.metrics,
                                                   dispatcher.serve_flux)
            await gate.check()
            self.background.append(asyncio.create_task(gate.run(settings.flux.check)))
        watches = referrers.Watches(dispatcher.ctx, list(settings.namespaces))
        self.background.append(asyncio.create_task(watches.run()))
        self.background.append(asyncio.create_task(_started(self.ready, self.rearm, settings.limits.poll)))
        # kopf gives the tasks started after it a grace period of 5 s when it stops; helmop's own
        # (probes, watches) are stopped as soon as the operator is told to stop, and so are the turns and the
        # shared watches, though started after kopf (the first task is not in the second's list: not cancelled).
        self.background.append(asyncio.create_task(_cancel_on(self.halt, list(self.background))))
        self.background.append(asyncio.create_task(_quiet_on(self.halt, dispatcher, services)))
        await self._kopf(dispatcher)
        if lost.is_set():
            raise SystemExit("helmop: lost the leader Lease; exiting so that a restart rejoins the election")
        if election is not None:
            await election.release()

    async def _kopf(self, dispatcher: Dispatcher) -> None:
        """kopf's watches, until the process is told to stop; then every turn stopped (helm told to stop) before a
        Lease goes or the process ends."""
        settings = self.settings
        registry = _registry(settings, dispatcher)
        left = asyncio.Event()  # set once every turn stopped: only then may the member Lease go
        member = _member(settings, self.kube, dispatcher, left) if settings.leadership.shards_auto else None
        try:
            await kopf.operator(registry=registry, settings=_settings(), standalone=True,
                                clusterwide=not settings.namespaces, namespaces=list(settings.namespaces),
                                stop_flag=self.halt, ready_flag=self.ready)
        finally:
            await dispatcher.stop()
            left.set()
            if member is not None:
                await member


async def build_services(settings: Settings, kube: Kube, processes: Processes) -> Services:
    """The operator's I/O: the helm engine, the chart, git and build caches, the API's clients."""
    # The Engine runs `helm version` here. Helm's own cache/config/data go under helmop's writable cache
    # (read-only root filesystems), unless the operator's environment names them.
    helm, sources = settings.helm, settings.sources
    engine, _ = await asyncio.gather(
        asyncio.to_thread(Engine.start, helm.executable, settings.kubeconfig, helm.cache_dir / "helm", processes),
        asyncio.to_thread(system_trust))
    repos = Repositories(helm.cache_dir, helm.cache_ttl, helm.index_max_size, helm.chart_max_size,
                         mirrors=helm.mirrors)
    git = GitCache(helm.cache_dir, file_roots=sources.allow_file_git, mirrors=sources.git_mirrors)
    kustomize = Kustomize(shutil.which(helm.kubectl) or helm.kubectl, helm.cache_dir / "kustomize",
                          confined=not sources.unconfined_builds, outputs=BuildOutputs())
    if kustomize.confined and confine.landlock_abi() < 1:
        log.error("kustomize builds will be refused (ConfinementUnavailable): this kernel offers no Landlock to "
                  "confine them; start helmop with --unconfined-builds to build with checks of the text only")
    remotes = RemoteOptions(allow_exec=settings.remotes.allow_exec,
                            allow_insecure_tls=settings.remotes.allow_insecure_tls,
                            token_addresses=_token_addresses(settings))
    return Services.of(kube, engine, repos, git, kustomize, settings=settings, remotes=remotes)


def _token_addresses(settings: Settings) -> TokenAddresses:
    """--kubeconfig-token-addresses, else Flux's default (any address), or none under either lockdown flag."""
    if settings.remotes.token_addresses is not None:
        return settings.remotes.token_addresses
    return TokenAddresses(everywhere=not settings.tenancy.locked_down)


def _receivers(settings: Settings, services: Services) -> Receivers:
    """Receivers' webhooks, served by every replica (a standby too); an OIDC issuer's keys are fetched as
    notifications are sent, through the notifications' address policy."""
    kinds = [RECEIVER, *([FLUX_RECEIVER] if settings.flux.api else [])]
    return Receivers(services.kube, kinds, list(settings.namespaces), tenancy=settings.tenancy,
                     metrics=services.metrics, policy=Policy.notifications(settings.notifications.allow_cidrs),
                     cel_timeout=settings.limits.cel_timeout)


def _registry(settings: Settings, dispatcher: Dispatcher) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        # Called again by kopf after a 401: read the credentials afresh (they rotate).
        conn = Connection.from_kubeconfig(settings.kubeconfig)
        return kopf.ConnectionInfo(server=conn.server, ca_path=conn.ca_file or None, token=conn.token or None,
                                   certificate_path=conn.cert_file or None,
                                   private_key_path=conn.key_file or None, insecure=conn.insecure)

    del login  # registered; kept only by kopf
    register(registry, dispatcher, app_kinds(settings), settings.leadership.shard,
             clusterwide=not settings.namespaces, flux=settings.flux.api)
    return registry


def app_kinds(settings: Settings) -> list[App]:
    """Jenkins, and the generic app kinds of --apps."""
    return [jenkins_app(dict(settings.helm.jenkins_chart)), *(generic_app(kind) for kind in settings.helm.apps)]


def _election(settings: Settings, kube: Kube) -> Election | None:
    """The leader election of --leader-elect (None without): only the holder of the Lease acts."""
    lead = settings.leadership
    if not lead.election:
        return None
    return Election(kube, lead.namespace, lease_name(lead.shard), identity(), lease_duration=lead.lease_duration,
                    renew_deadline=lead.renew_deadline, retry_period=lead.retry_period)


def _member(settings: Settings, kube: Kube, dispatcher: Dispatcher, left: asyncio.Event) -> asyncio.Task[None]:
    """Take part in --shards auto: act on nothing until the membership grants this replica its range."""
    dispatcher.acting = NOTHING
    lead = settings.leadership
    membership = Membership(kube, lead.namespace, lead.shard, identity(), dispatcher,
                            lease_duration=lead.lease_duration, renew_deadline=lead.renew_deadline,
                            retry_period=lead.retry_period)
    return asyncio.create_task(membership.run(left))


async def _forward(stop_flag: threading.Event | asyncio.Event | None, halt: asyncio.Event, poll: float) -> None:
    """Set ``halt`` when the caller's stop flag is set (a thread's Event is polled: it cannot be awaited)."""
    if isinstance(stop_flag, asyncio.Event):
        await stop_flag.wait()
    elif stop_flag is not None:
        while not stop_flag.is_set():
            await asyncio.sleep(poll)
    else:
        return
    halt.set()


async def _cancel_on(halt: asyncio.Event, tasks: list[asyncio.Task[Any]]) -> None:
    await halt.wait()
    for task in tasks:
        task.cancel()


async def _quiet_on(halt: asyncio.Event, dispatcher: Dispatcher, services: Services) -> None:
    await halt.wait()
    await dispatcher.stop()
    await services.unwatch()


async def _hold(election: Election, halt: asyncio.Event, lost: asyncio.Event) -> None:
    await election.hold(halt)
    if not halt.is_set():
        lost.set()
        halt.set()


async def _started(ready: threading.Event | asyncio.Event, rearm: Callable[[], None], poll: float) -> None:
    """Once kopf has started: put helmop's signal handlers back (kopf installs its own; both then run),
    and move everything allocated so far (modules, clients, caches) out of the garbage collector's
    sight: its full collections then scan only what reconciles allocate, and stop pausing the event
    loop for 100-200 ms (measured in the benchmark)."""
    while not ready.is_set():
        await asyncio.sleep(poll)
    rearm()
    gc.freeze()
    # Full collections ten times rarer than Python's default (one per 1000 young ones, against 100): a burst of
    # reconciles allocates fast, and a full one paused the loop for up to 90 ms at 1000 releases in flight. The
    # young generations stay small: each kopf event leaves its object in a reference cycle (kopf's Body and its
    # views) for the collector to free, and a young generation of 7000 took 10-30 ms of the loop's CPU per
    # collection, the middle one 20-30 ms (a thousand: a few ms each; benchmarks.md, wave 6 session 8).
    gc.set_threshold(1000, 10, 100)
