"""Remote clusters (``spec.kubeConfig``): one client, one set of shared watches (the collections readiness is judged
from, and the metadata watches of the kinds its releases deployed, which drift checks trust) and one connection pool
per cluster and namespace, made when an object first targets it and closed when the last one stops.

A remote is keyed by the namespace of the objects that name it and the digest of the kubeconfig's text, so
two tenants never share a client, even with the same kubeconfig, and a rotated credential is a new remote
(the old one goes with its last holder). Its kubeconfig is checked as a tenant's
(:func:`helmop.api.kubeconfigs.check`) and written to a private file: what helmop's client reads and the
``--kubeconfig`` helm is run with. The server it names is judged by the sources' address policy, as it
resolves, at every connection helmop makes; helm resolves it again itself (a window for DNS rebinding, as for
chart dependencies). Reachability is probed at most every :data:`PROBE_EVERY` seconds, so an unreachable
cluster costs its own objects one short failed request each, not the operator's request retries.

A kubeconfig whose client cannot be built (a certificate TLS cannot load, a URL the HTTP client refuses) is
``InvalidKubeConfig`` when it is first acquired, not an error of a later request. A ServiceAccount token for a
workload identity is minted only after its address is checked (https, allowed by the operator's
:class:`~helmop.api.kubeconfigs.TokenAddresses`, and by the address policy): a refused address never gets one."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import os
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from helmop.api.addresses import AddressRefused, Policy
from helmop.api.errors import HelmopError, SpecError, describe
from helmop.api.kubeconfigs import Checked, TokenAddresses, check, token_server

from .kube import Connection, Kube, KubeError
from .kubeconfig import KubeconfigError
from .metadata import MetadataWatches
from .metrics import Metrics
from .watches import Collections

Holder = tuple[str, str, str]  # (kind, namespace, name) of an object that targets a remote
PROBE_EVERY = 10.0  # seconds a reachability verdict is trusted
PROBE_TIMEOUT = 5.0
MAX_REMOTES = 1000  # remotes one operator keeps at once; past it a new one is refused (ClusterLimit)
# remotes the objects of one namespace keep at once: a tenant's fleet is a few clusters (each credential rotation
# holds two for a moment), so 50 is far above one team's need, while a tenant with many distinct kubeconfig
# Secrets fills at most 1/20 of MAX_REMOTES and never the whole operator's
MAX_REMOTES_PER_NAMESPACE = 50
# metadata watches (kind x namespace of what its releases deployed) one remote keeps for drift: a tenant's chart
# spread over many namespaces must not hold an open connection per namespace and kind; past it, objects are compared
# at every look
MAX_WATCHES = 64
TOKEN_LIFE = 3600  # seconds a ServiceAccount token asked for a remote (configMapRef) is valid


@dataclass
class Remote:
    """One remote cluster as the objects of one namespace reach it."""

    digest: str
    namespace: str
    name: str  # the Secret's helmop.dev/cluster label, else the server's host:port
    server: str
    kubeconfig: Path  # for helm's --kubeconfig
    kube: Kube
    collections: Collections
    metadata: MetadataWatches  # with this remote's client, never the operator's
    holders: set[Holder] = field(default_factory=set)
    reachable: bool = True
    problem: str = ""  # why it was not reachable at the last probe
    probed_at: float = 0.0

    @functools.cached_property
    def key(self) -> str:
        """What names this remote among the operator's clusters ("" is its own): the namespace and the digest."""
        return f"{self.namespace}/{self.digest}"

    async def probe(self) -> str:
        """"" when the API server answers (``/version``, one short try), else why not; a recent verdict stands."""
        now = time.monotonic()
        if now - self.probed_at < PROBE_EVERY:
            return self.problem
        try:
            await asyncio.wait_for(self.kube.request("GET", "/version", attempts=1), PROBE_TIMEOUT)
            self.problem, self.reachable = "", True
        except KubeError as exc:
            if exc.status != 0:  # it answered (401, 403: the credentials' problem, said when they are used)
                self.problem, self.reachable = "", True
            else:
                self.problem, self.reachable = exc.message, False
        except TimeoutError:
            self.problem, self.reachable = f"{self.server}: no answer within {PROBE_TIMEOUT:.0f}s", False
        self.probed_at = time.monotonic()
        return self.problem

    async def close(self) -> None:
        await self.metadata.close()
        await self.collections.close()
        await self.kube.close()
        with contextlib.suppress(OSError):
            self.kubeconfig.unlink()


@dataclass(frozen=True)
class Options:
    allow_exec: bool = False  # --insecure-kubeconfig-exec
    allow_insecure_tls: bool = False  # --insecure-kubeconfig-tls
    # the sources' ranges: a cluster's API may be on the node or a private network, never a cloud's metadata endpoint
    policy: Policy = field(default_factory=lambda: replace(Policy.sources(), rule="helmop connects to no cluster "
                                                                                  "there"))
    limit: int = MAX_REMOTES
    namespace_limit: int = MAX_REMOTES_PER_NAMESPACE
    # --kubeconfig-token-addresses: where minted ServiceAccount tokens may go (the CLI resolves its default)
    token_addresses: TokenAddresses = field(default_factory=lambda: TokenAddresses(everywhere=True))


class Remotes:
    """The operator's remote clusters, by (namespace, kubeconfig digest)."""

    def __init__(self, options: Options | None = None, metrics: Metrics | None = None) -> None:
        self.options = options or Options()
        self.metrics = metrics
        self._published: set[str] = set()  # the cluster names metrics have series of
        self.by_key: dict[tuple[str, str], Remote] = {}
        self.held: dict[Holder, tuple[str, str]] = {}  # which remote each holder targets
        self._folder: Path | None = None
        self._lock = asyncio.Lock()
        self._tokens: dict[tuple[str, str, tuple[str, ...]], tuple[str, float]] = {}  # (token, renew at)

    async def acquire(self, holder: Holder, text: str, *, where: str, name: str = "") -> Remote:
        """The remote ``holder`` (an object of namespace ``holder[1]``) reaches with kubeconfig ``text`` (read from
        ``where``); SpecError InvalidKubeConfig for one helmop refuses, HelmopError for one it cannot use."""
        namespace = holder[1]
        key = (namespace, hashlib.sha256(text.encode()).hexdigest())
        async with self._lock:
            remote = self.by_key.get(key)
            if remote is None:
                checked = check(text, allow_exec=self.options.allow_exec,
                                allow_insecure=self.options.allow_insecure_tls, where=where)
                self._check_limits(holder)
                remote = self.by_key[key] = await self._connect(key, text, checked, name, where)
            remote.name = name or remote.name
            await self._move(holder, key)
            remote.holders.add(holder)
            self.publish()
        return remote

    def _check_limits(self, holder: Holder) -> None:
        """HelmopError ClusterLimit (transient: a remote let go makes room) when no new remote may be made for
        ``holder``: its namespace's limit first, so that one tenant cannot use up every other's. The remote it
        alone holds now is not counted: it goes when the holder moves (a rotated credential at the limit)."""
        before = self.held.get(holder)
        leaving = before if before is not None and self.by_key[before].holders == {holder} else None
        kept = [key for key in self.by_key if key != leaving]
        mine = sum(1 for namespace, _ in kept if namespace == holder[1])
        if mine >= self.options.namespace_limit:
            raise HelmopError("ClusterLimit", f"the objects of namespace {holder[1]} already reach {mine} remote "
                                              "clusters (distinct kubeconfigs; the limit per namespace)",
                              transient=True)
        if len(kept) >= self.options.limit:
            raise HelmopError("ClusterLimit", f"this operator already reaches {len(kept)} remote clusters (its "
                                              "limit)", transient=True)

    async def _connect(self, key: tuple[str, str], text: str, checked: Checked, name: str, where: str) -> Remote:
        try:
            self.options.policy.check_host(checked.host)
        except AddressRefused as exc:
            raise SpecError("InvalidKubeConfig", f"the kubeconfig in {where} names server {checked.server}: "
                                                 f"{exc}") from None
        path = self._private() / f"{key[1][:32]}-{hashlib.sha256(key[0].encode()).hexdigest()[:8]}.yaml"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        kube = None
        try:  # an exec plugin (when allowed) runs here: off the loop
            conn = await asyncio.to_thread(Connection.from_kubeconfig, path)
            kube = Kube(conn, policy=self.options.policy)
            kube.session()  # its TLS context and base URL: what the tenant wrote fails here, not in a request
        except (KubeconfigError, ValueError, TypeError, OSError) as exc:  # ssl.SSLError is an OSError
            if kube is not None:
                await kube.close()
            path.unlink()
            raise SpecError("InvalidKubeConfig", f"the kubeconfig in {where} cannot be used: "
                                                 f"{describe(exc).replace(str(path), 'it')}"[:1024]) from None
        return Remote(digest=key[1], namespace=key[0], name=name or f"{checked.host}:{checked.port}",
                      server=checked.server, kubeconfig=path, kube=kube, collections=Collections(kube),
                      metadata=MetadataWatches(kube, MAX_WATCHES))

    async def release(self, holder: Holder) -> None:
        """``holder`` targets no remote any more (the local cluster, or it is gone)."""
        async with self._lock:
            await self._move(holder, None)
            self.publish()

    async def _move(self, holder: Holder, key: tuple[str, str] | None) -> None:
        before = self.held.pop(holder, None)
        if key is not None:
            self.held[holder] = key
        if before is None or before == key:
            return
        remote = self.by_key.get(before)
        if remote is not None:
            remote.holders.discard(holder)
            if not remote.holders:
                del self.by_key[before]
                await remote.close()

    def token_server(self, address: str, where: str) -> Checked:
        """The server a workload identity's ``address`` names, if a token may be sent there (checked before one is
        minted): https, allowed by --kubeconfig-token-addresses, and by the address policy. SpecError
        InvalidKubeConfig, or TokenAddressNotAllowed, otherwise."""
        server = token_server(address, where)
        allowed = self.options.token_addresses
        if not allowed.allows(server):
            raise SpecError("TokenAddressNotAllowed", f"{where}: no ServiceAccount token is sent to {server.server}: "
                                                      "this operator sends them only to "
                                                      f"{allowed.describe()} (--kubeconfig-token-addresses)")
        try:
            self.options.policy.check_host(server.host)
        except AddressRefused as exc:
            raise SpecError("InvalidKubeConfig", f"{where} names address {server.server}: {exc}") from None
        return server

    async def service_account_token(self, kube: Kube, namespace: str, name: str, audiences: tuple[str, ...], *,
                                    address: str, where: str) -> tuple[str, str]:
        """(server, token): the server ``address`` names, and a token of ServiceAccount ``namespace/name`` for
        ``audiences`` (or the server) to send there (TokenRequest), minted only once the address is allowed
        (:meth:`token_server`), and reused until 80% of its life: the kubeconfig made of it, and so the remote's
        client, changes only when it is renewed."""
        server = self.token_server(address, where).server
        key = (namespace, name, audiences or (address,))
        cached = self._tokens.get(key)
        if cached is not None and time.monotonic() < cached[1]:
            return server, cached[0]
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                "spec": {"audiences": list(key[2]), "expirationSeconds": TOKEN_LIFE}}
        try:
            answer = await kube.request("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token", body)
        except KubeError as exc:
            if exc.status in (403, 404):
                raise HelmopError("TokenRequestFailed", f"no token of ServiceAccount {namespace}/{name}: "
                                                        f"{exc.message}", transient=True) from None
            raise
        token = str((answer.get("status") or {}).get("token") or "")
        now = time.monotonic()
        self._tokens = {k: v for k, v in self._tokens.items() if v[1] > now}  # those past renewal are not kept
        self._tokens[key] = (token, now + TOKEN_LIFE * 0.8)
        return server, token

    def unanswered(self, server: str, problem: str) -> bool:
        """A request to ``server`` got no answer: its remotes are unreachable until their next probe says otherwise.
        False when no remote has that server (it was the operator's own cluster)."""
        found = [remote for remote in self.by_key.values() if remote.server == server.rstrip("/")]
        for remote in found:
            remote.reachable, remote.problem, remote.probed_at = False, problem, time.monotonic()
        if found:
            self.publish()
        return bool(found)

    def publish(self) -> None:
        """Each cluster's metrics (one series per name, over the namespaces that reach it); names gone are removed."""
        if self.metrics is None:
            return
        names: dict[str, tuple[bool, int]] = {}
        for remote in self.by_key.values():
            up, count = names.get(remote.name, (True, 0))
            names[remote.name] = (up and remote.reachable, count + len(remote.holders))
        for name, (up, count) in names.items():
            self.metrics.cluster_up.labels(name).set(1 if up else 0)
            self.metrics.cluster_objects.labels(name).set(count)
        for gone in self._published - set(names):
            self.metrics.cluster_up.remove(gone)
            self.metrics.cluster_objects.remove(gone)
        self._published = set(names)

    def _private(self) -> Path:
        if self._folder is None:
            self._folder = Path(tempfile.mkdtemp(prefix="helmop-remotes-"))
        return self._folder

    async def unwatch(self) -> None:
        for remote in list(self.by_key.values()):
            await remote.metadata.close()
            await remote.collections.close()

    async def close(self) -> None:
        for remote in list(self.by_key.values()):
            await remote.close()
        self.by_key.clear()
        self.held.clear()
        if self._folder is not None:
            with contextlib.suppress(OSError):
                self._folder.rmdir()
