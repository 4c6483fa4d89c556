"""A small async Kubernetes API client (aiohttp) for what handlers need beyond kopf's own calls:
reading ConfigMaps/Secrets and release records, writing status, posting Events, applying CRDs.

Paths are built by the callers (plain REST paths); this module only does I/O, authentication
from a kubeconfig or the in-cluster service account, and error mapping.
"""

from __future__ import annotations

import json
import os
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp


class KubeconfigError(Exception):
    """No usable kubeconfig (or in-cluster account); the message names the file or says what is missing."""


class KubeError(Exception):
    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message


@dataclass(frozen=True)
class Connection:
    server: str
    token: str = ""
    ca_file: str = ""
    cert_file: str = ""
    key_file: str = ""
    insecure: bool = False

    @classmethod
    def from_kubeconfig(cls, path: str | Path | None = None) -> Connection:
        """From a kubeconfig file (or $KUBECONFIG / ~/.kube/config), else the in-cluster account;
        KubeconfigError says which file is missing or why none could be used."""
        from kubernetes import client, config

        _check_exists(path)
        configuration = client.Configuration()
        try:
            config.load_kube_config(config_file=str(path) if path else None,  # type: ignore[no-untyped-call]
                                    client_configuration=configuration)
        except config.ConfigException as exc:
            if path or os.environ.get("KUBECONFIG") or Path(config.KUBE_CONFIG_DEFAULT_LOCATION).expanduser().exists():
                raise KubeconfigError(f"kubeconfig {path or os.environ.get('KUBECONFIG') or '~/.kube/config'} "
                                      f"cannot be used: {exc}") from None
            try:
                config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
            except config.ConfigException:
                raise KubeconfigError("no kubeconfig: ~/.kube/config does not exist, $KUBECONFIG is not set, and "
                                      "this is not a pod in a cluster (pass --kubeconfig)") from None
        token = (configuration.api_key or {}).get("authorization", "") or (configuration.api_key or {}).get(
            "BearerToken", "")
        return cls(server=configuration.host, token=token.removeprefix("Bearer ").strip(),
                   ca_file=configuration.ssl_ca_cert or "", cert_file=configuration.cert_file or "",
                   key_file=configuration.key_file or "", insecure=not configuration.verify_ssl)


def _check_exists(path: str | Path | None) -> None:
    """A kubeconfig named explicitly (or every file in $KUBECONFIG) that does not exist is an error that
    names it, not a fall-back to some other cluster."""
    if path:
        if not Path(path).is_file():
            raise KubeconfigError(f"kubeconfig {path} does not exist")
        return
    listed = [p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    if listed and not any(Path(p).is_file() for p in listed):
        raise KubeconfigError(f"KUBECONFIG names {', '.join(listed)}, which does not exist")


class Kube:
    def __init__(self, conn: Connection, impersonate: str = "") -> None:
        self.conn = conn
        self.impersonate = impersonate
        self._session: aiohttp.ClientSession | None = None
        self._resources: dict[tuple[str, str], tuple[str, bool]] = {}
        self._acting: dict[str, Kube] = {}

    def acting_as(self, user: str) -> Kube:
        """A client whose requests impersonate ``user`` (``""``: this one): RBAC then judges them as that
        user's, which is how a tenant's objects are written with the tenant's rights only."""
        if not user or user == self.impersonate:
            return self
        if user not in self._acting:
            self._acting[user] = Kube(self.conn, user)
            self._acting[user]._resources = self._resources  # discovery is the same for everyone
        return self._acting[user]

    def _ssl(self) -> ssl.SSLContext | bool:
        if self.conn.insecure:
            return False
        ctx = ssl.create_default_context(cafile=self.conn.ca_file or None)
        if self.conn.cert_file:
            ctx.load_cert_chain(self.conn.cert_file, self.conn.key_file or None)
        return ctx

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            headers = {"Authorization": f"Bearer {self.conn.token}"} if self.conn.token else {}
            if self.impersonate:
                headers["Impersonate-User"] = self.impersonate
            self._session = aiohttp.ClientSession(
                self.conn.server.rstrip("/"), headers=headers, trust_env=False,
                connector=aiohttp.TCPConnector(ssl=self._ssl(), limit=50),
                timeout=aiohttp.ClientTimeout(total=60, connect=10))
        return self._session

    async def close(self) -> None:
        for child in self._acting.values():
            await child.close()
        if self._session is not None:
            await self._session.close()

    async def request(self, method: str, path: str, body: Any = None, *, params: dict[str, str] | None = None,
                      content_type: str = "application/json") -> dict[str, Any]:
        data = None if body is None else (body if isinstance(body, str | bytes) else json.dumps(body))
        headers = {"Content-Type": content_type} if data is not None else {}
        async with self.session.request(method, path, data=data, params=params, headers=headers) as r:
            text = await r.text()
            try:
                reply: dict[str, Any] = json.loads(text) if text else {}
            except ValueError:
                reply = {"message": text}
            if r.status >= 400:
                raise KubeError(r.status, str(reply.get("reason", r.reason)), str(reply.get("message", text)))
            return reply

    async def get(self, path: str) -> dict[str, Any] | None:
        try:
            return await self.request("GET", path)
        except KubeError as exc:
            if exc.status == 404:
                return None
            raise

    async def list(self, path: str, label_selector: str = "") -> list[dict[str, Any]]:
        params = {"labelSelector": label_selector} if label_selector else None
        items: list[dict[str, Any]] = (await self.request("GET", path, params=params)).get("items") or []
        return items

    async def resource(self, api_version: str, kind: str) -> tuple[str, bool]:
        """(plural, namespaced) of a kind, from discovery; asked again on a miss (CRDs come and go)."""
        found = self._resources.get((api_version, kind))
        if found is None:
            prefix = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
            for entry in (await self.request("GET", prefix)).get("resources") or []:
                if "/" not in entry["name"]:
                    self._resources[(api_version, entry["kind"])] = (entry["name"], bool(entry["namespaced"]))
            found = self._resources.get((api_version, kind))
            if found is None:
                raise KubeError(404, "NotFound", f"the server does not serve {kind} in {api_version}")
        return found

    async def path_of(self, api_version: str, kind: str, namespace: str, name: str) -> str:
        """The REST path of an object (``namespace`` is ignored for cluster-scoped kinds)."""
        plural, namespaced = await self.resource(api_version, kind)
        prefix = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
        return f"{prefix}/namespaces/{namespace}/{plural}/{name}" if namespaced else f"{prefix}/{plural}/{name}"

    async def merge_patch(self, path: str, patch: dict[str, Any]) -> dict[str, Any]:
        return await self.request("PATCH", path, patch, content_type="application/merge-patch+json")

    async def apply(self, path: str, obj: dict[str, Any], manager: str, *, dry_run: bool = False) -> dict[str, Any]:
        params = {"fieldManager": manager, "force": "true", **({"dryRun": "All"} if dry_run else {})}
        return await self.request("PATCH", path, obj, params=params, content_type="application/apply-patch+yaml")
