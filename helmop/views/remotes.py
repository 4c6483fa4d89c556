"""Following a HelmRelease's or ConfigSync's ``spec.kubeConfig`` into the cluster it delivers to, as the reader:
the kubeconfig Secret is read with the reader's own client (their RBAC decides: no Secret, no remote), checked
as the operator checks a tenant's (:func:`helmop.api.kubeconfigs.check`: everything inline; an exec plugin or
skipped TLS verification only when the reader allows it, as the operator's ``--insecure-kubeconfig-exec`` and
``--insecure-kubeconfig-tls`` do), its server judged by the operator's address policy for remotes, and asked
once whether it answers. What cannot be followed is one line saying why, never an error: what the management
cluster knows (status, inventory) is still shown."""

from __future__ import annotations

import asyncio
import base64
import binascii
import tempfile
from pathlib import Path
from typing import Any

from helmop.api.addresses import AddressRefused, Policy
from helmop.api.errors import SpecError, describe
from helmop.api.kubeconfigs import SECRET_KEYS, check, parse_ref
from helmop.api.objects import Resource
from helmop.infra.kube import Connection, Kube, KubeError
from helmop.infra.kubeconfig import KubeconfigError

from .cells import cluster

PROBE_TIMEOUT = 5.0  # seconds a remote API server has to answer /version


class Reach:
    """The clients a reader reaches remote clusters with, one per kubeconfig Secret, closed with :meth:`close`."""

    def __init__(self, *, allow_exec: bool = False, allow_insecure_tls: bool = False) -> None:
        self.allow_exec, self.allow_insecure_tls = allow_exec, allow_insecure_tls
        self.policy = Policy.sources()  # the operator's for remotes: never a metadata endpoint
        self._got: dict[tuple[str, str, str], Kube | str] = {}  # (namespace, Secret, key) -> client or why not

    async def client(self, kube: Kube, obj: dict[str, Any]) -> Kube | str:
        """The client for the cluster ``obj`` (read with ``kube``) delivers to, or one line saying why there is
        none."""
        this, name = Resource(obj), cluster(obj)
        try:
            ref = parse_ref(this.spec.get("kubeConfig"))
        except SpecError as exc:
            return f"cluster {name} not followed: {exc}"
        if ref is None:
            return f"cluster {name} not followed: its object names no kubeconfig"
        if ref.config_map:
            return f"cluster {name} not followed: spec.kubeConfig.configMapRef is not implemented by helmop"
        key = (this.namespace, ref.secret, ref.key)
        if key not in self._got:
            got = await self._connect(kube, this.namespace, ref.secret, ref.key)
            self._got[key] = got if isinstance(got, Kube) else f"cluster {name} not followed: {got}"
        return self._got[key]

    async def _connect(self, kube: Kube, namespace: str, secret: str, wanted: str) -> Kube | str:
        where = f"Secret {namespace}/{secret}"
        try:
            found = await kube.get(f"/api/v1/namespaces/{namespace}/secrets/{secret}")
        except KubeError as exc:
            if exc.status != 403:
                raise
            return f"you may not read {where}, which holds its kubeconfig ({exc.message})"
        if found is None:
            return f"{where} (spec.kubeConfig.secretRef) does not exist"
        data = found.get("data") or {}
        key = wanted or next((k for k in SECRET_KEYS if k in data), "")
        if key not in data:
            return f"{where} has no key {repr(wanted) if wanted else ' or '.join(map(repr, SECRET_KEYS))}"
        try:
            text = base64.b64decode(str(data[key]), validate=True).decode()
        except (binascii.Error, ValueError):
            return f"the kubeconfig in {where} (key {key!r}) is not base64 of text"
        try:
            checked = check(text, allow_exec=self.allow_exec, allow_insecure=self.allow_insecure_tls,
                            where=f"{where} (key {key!r})")
        except SpecError as exc:  # the operator's words; its flags are the command's too
            return str(exc).replace("this operator refuses", "helmop refuses")
        try:
            self.policy.check_host(checked.host)
        except AddressRefused as exc:
            return f"the kubeconfig in {where} names server {checked.server}: {exc}"
        return await self._open(text, checked.server, where)

    async def _open(self, text: str, server: str, where: str) -> Kube | str:
        with tempfile.TemporaryDirectory(prefix="helmop-remote-") as folder:  # read once, then gone
            path = Path(folder) / "kubeconfig"
            path.touch(0o600)
            path.write_text(text)
            try:  # an exec plugin (when allowed) runs here: off the loop
                conn = await asyncio.to_thread(Connection.from_kubeconfig, path)
            except KubeconfigError as exc:
                return f"the kubeconfig in {where} cannot be used: {describe(exc).replace(str(path), 'it')}"
        remote = Kube(conn, policy=self.policy)
        try:
            await asyncio.wait_for(remote.request("GET", "/version", attempts=1), PROBE_TIMEOUT)
        except (KubeError, TimeoutError) as exc:
            if not isinstance(exc, KubeError) or exc.status == 0:
                await remote.close()
                said = exc.message if isinstance(exc, KubeError) else f"no answer within {PROBE_TIMEOUT:.0f}s"
                return f"{server} does not answer: {said.removeprefix(server + ': ')}"
        return remote

    async def close(self) -> None:
        for got in self._got.values():
            if isinstance(got, Kube):
                await got.close()
        self._got.clear()
