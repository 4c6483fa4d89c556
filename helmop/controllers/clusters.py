"""Where a HelmRelease or ConfigSync acts: the operator's own cluster, or the remote one its ``spec.kubeConfig``
names. Everything that touches the target (helm and its release storage, applies, pruning, drift, health
and inventory reads) goes through the turn's :class:`Cluster`; the object itself, its status, Events and the
Secrets and sources it reads stay on the operator's cluster.

Identity on a remote cluster: the kubeconfig's own, or with spec.serviceAccountName that ServiceAccount of
the object's namespace, impersonated there (Flux's rule). The operator's --default-service-account is not
applied to a remote: a tenant's kubeconfig already names the only identity it may act as."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

import yaml

from helmop.api.errors import HelmopError, SpecError
from helmop.api.kubeconfigs import CLUSTER_LABEL, SECRET_KEYS, KubeConfigRef, check_audiences
from helmop.api.names import problem
from helmop.api.tenancy import Tenancy
from helmop.helm.releases import Gateway
from helmop.infra.clusters import Holder, Remote
from helmop.infra.kube import Kube
from helmop.infra.metadata import MetadataWatches
from helmop.infra.watches import Collections

from .context import Context


@dataclass(frozen=True)
class Cluster:
    kube: Kube  # the operator's client for it (impersonation is added per request)
    collections: Collections  # its shared watches (readiness)
    releases: Gateway  # helm's storage there
    kubeconfig: str = ""  # helm's --kubeconfig ("": the operator's)
    name: str = ""  # "" for the operator's own cluster
    server: str = ""
    key: str = ""  # the drift memory's name of it ("" for the operator's own cluster: Remote.key)
    # the remote's metadata watches of the kinds its releases deployed (None here: the referrers' watches)
    metadata: MetadataWatches | None = None

    @property
    def remote(self) -> bool:
        return bool(self.kubeconfig)

    def acting_as(self, tenancy: Tenancy, namespace: str, service_account: str) -> str:
        """The user requests are made as ("": the client's own identity)."""
        if not self.remote:
            return tenancy.acting_as(namespace, service_account)
        return f"system:serviceaccount:{namespace}:{service_account}" if service_account else ""


class ClusterUnreachable(HelmopError):
    """The remote cluster does not answer; ``cluster``: its name (status.cluster says it all the same)."""

    def __init__(self, remote: Remote) -> None:
        super().__init__("ClusterUnreachable", f"cluster {remote.name} ({remote.server}) does not answer: "
                                               f"{remote.problem.removeprefix(remote.server + ': ')}", transient=True)
        self.cluster = remote.name


def retried_on_deletion(exc: HelmopError) -> bool:
    """Whether a deleted object whose target could not be had (``exc``, from :func:`target`) waits for it. A
    remote that does not answer now, or the operator's limit of remotes, is tried again (as Flux does: the
    cluster may come back). One that cannot be built at all (its kubeconfig gone, invalid or refused, no token
    for its ServiceAccount or its address) would hold the object's finalizer until someone changes a
    tenant's Secret or patches the finalizer away: the object goes, its objects are left there, said in a
    Warning Event. (Flux's controllers let go only when the kubeconfig's Secret is gone.) An object with nothing
    to clean up there (suspended, never installed, no inventory) never asks for its target on deletion."""
    return exc.reason in ("ClusterUnreachable", "ClusterLimit")


def local(ctx: Context) -> Cluster:
    services = ctx.services
    return Cluster(services.kube, services.collections, services.releases)


async def target(ctx: Context, holder: Holder, ref: KubeConfigRef | None) -> Cluster:
    """The cluster ``holder`` acts on. HelmopError ClusterUnreachable (transient) when the remote does not
    answer; SpecError InvalidKubeConfig / HelmopError KubeConfigNotFound for a kubeconfig that cannot be used."""
    remotes = ctx.services.remotes
    if ref is None:
        if holder in remotes.held:
            await remotes.release(holder)
        return local(ctx)
    reading = _workload_identity if ref.config_map else _kubeconfig
    text, name, where = await reading(ctx, holder[1], ref)
    remote = await remotes.acquire(holder, text, where=where, name=name)
    reachable = remote.reachable
    problem = await remote.probe()
    if remote.reachable != reachable:
        remotes.publish()
    if problem:
        raise ClusterUnreachable(remote)
    return _of(ctx, remote)


def _of(ctx: Context, remote: Remote) -> Cluster:
    gateways = ctx.services.gateways
    gateway = gateways.get(remote.kube)
    if gateway is None:
        gateway = gateways[remote.kube] = Gateway(remote.kube)
    return Cluster(remote.kube, remote.collections, gateway, str(remote.kubeconfig), remote.name, remote.server,
                   remote.key, remote.metadata)


async def _workload_identity(ctx: Context, namespace: str, ref: KubeConfigRef) -> tuple[str, str, str]:
    """Flux 2.7's spec.kubeConfig.configMapRef: with provider ``generic``, the ConfigMap's address and CA, and a
    token of its ServiceAccount (TokenRequest, for its audiences or the address; under lockdown for the address
    only), which the remote cluster trusts by federation. The clouds' providers are refused by name; so is a
    ConfigMap naming no ServiceAccount (Flux would lend the controller's own token, to whatever address a tenant
    writes)."""
    where = f"ConfigMap {namespace}/{ref.config_map}"
    found = await ctx.services.kube.get(f"/api/v1/namespaces/{namespace}/configmaps/{ref.config_map}")
    if found is None:
        raise HelmopError("KubeConfigNotFound", f"{where} named in spec.kubeConfig.configMapRef does not exist",
                          transient=True)
    data = {str(k): str(v) for k, v in (found.get("data") or {}).items()}
    provider = data.get("provider", "")
    if provider in ("aws", "azure", "gcp"):
        raise SpecError("UnsupportedField", f"{where}: provider {provider} (a cloud's workload identity) is not "
                                            "implemented by helmop; use provider generic, or a kubeconfig Secret")
    if provider != "generic" or not data.get("address") or not data.get("serviceAccountName"):
        raise SpecError("InvalidKubeConfig", f"{where} must set provider (generic), address and serviceAccountName "
                                             "(helmop lends no token of its own)")
    if problem(data["serviceAccountName"]):  # a path of the TokenRequest: a bent one would be an API error
        raise SpecError("InvalidKubeConfig", f"{where}: serviceAccountName {data['serviceAccountName'][:80]!r} "
                                             f"{problem(data['serviceAccountName'])}")
    audiences = tuple(line.strip() for line in data.get("audiences", "").splitlines() if line.strip())
    if ctx.tenancy.locked_down:  # judged before minting
        check_audiences(audiences, data["address"], where)
    server, token = await ctx.services.remotes.service_account_token(
        ctx.services.kube, namespace, data["serviceAccountName"], audiences, address=data["address"], where=where)
    cluster: dict[str, Any] = {"server": server}
    if data.get("ca.crt"):
        cluster["certificate-authority-data"] = base64.b64encode(data["ca.crt"].encode()).decode()
    text = yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "current-context": "remote",
                           "clusters": [{"name": "remote", "cluster": cluster}],
                           "users": [{"name": "remote", "user": {"token": token}}],
                           "contexts": [{"name": "remote", "context": {"cluster": "remote", "user": "remote"}}]})
    return text, _label(found), where


async def _kubeconfig(ctx: Context, namespace: str, ref: KubeConfigRef) -> tuple[str, str, str]:
    """(kubeconfig text, cluster name from the Secret's label, where it was read)."""
    where = f"Secret {namespace}/{ref.secret}"
    secret = await ctx.services.kube.get(f"/api/v1/namespaces/{namespace}/secrets/{ref.secret}")
    if secret is None:
        raise HelmopError("KubeConfigNotFound", f"{where} named in spec.kubeConfig.secretRef does not exist",
                          transient=True)
    data = secret.get("data") or {}
    key = ref.key or next((k for k in SECRET_KEYS if k in data), "")
    if key not in data:
        wanted = f"key {ref.key!r}" if ref.key else f"key {SECRET_KEYS[0]!r} or {SECRET_KEYS[1]!r}"
        raise HelmopError("KubeConfigNotFound", f"{where} has no {wanted} (spec.kubeConfig.secretRef)", transient=True)
    try:
        text = base64.b64decode(str(data[key]), validate=True).decode()
    except (binascii.Error, ValueError):
        raise SpecError("InvalidKubeConfig", f"the kubeconfig in {where} (key {key!r}) is not base64 of text") from None
    return text, _label(secret), f"{where} (key {key!r})"


def _label(obj: dict[str, Any]) -> str:
    """The cluster's name its kubeconfig's object gives (helmop.dev/cluster), at a label's length."""
    return str(((obj.get("metadata") or {}).get("labels") or {}).get(CLUSTER_LABEL) or "")[:63]
