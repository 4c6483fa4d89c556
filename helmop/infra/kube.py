"""A small async Kubernetes API client (aiohttp) for what handlers need beyond kopf's own calls:
reading ConfigMaps/Secrets and release records, writing status, posting Events, applying CRDs.

Paths are built by the callers (plain REST paths); this module only does I/O, authentication
from a kubeconfig or the in-cluster service account, error mapping, and one retry policy for
every request (tenacity): connection failures, 429 (honouring Retry-After), 5xx, and 409 on a
status write are retried with jittered exponential backoff. Credentials are read again when they
may have rotated: the in-cluster token file every minute (projected tokens rotate), and the whole
kubeconfig (exec plugins, token files) once when the server answers 401.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import aiohttp
import yarl
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt, stop_after_delay
from tenacity.wait import wait_base, wait_exponential_jitter

from helmop.api.addresses import Policy
from helmop.api.errors import describe

from . import kubeconfig
from .addresses import Resolver
from .kubeconfig import KubeconfigError

log = logging.getLogger(__name__)
TOKEN_REREAD = 60.0  # as client-go re-reads a token file
# Requests at once per identity. Watches and other streams have connections of their own, outside this pool:
# they last (a shared collection is watched for a minute after its last reader), and one per kind and namespace
# filled a pool they shared once releases spread over ~50 namespaces, so every request then timed out waiting.
REQUEST_CONNECTIONS = 50


class KubeError(Exception):
    def __init__(self, status: int, reason: str, message: str, retry_after: float = 0.0) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.retry_after = retry_after  # seconds the server asked to wait (429/503 Retry-After)


class Unreachable(KubeError):
    """No answer from the API server (refused, reset, timed out, TLS failure): status 0. ``sent``: the
    request may have reached the server before the connection failed."""

    def __init__(self, message: str, *, sent: bool, server: str = "") -> None:
        super().__init__(0, "Unreachable", message)
        self.sent = sent
        self.server = server  # the API server that did not answer


@dataclass(frozen=True)
class Connection:
    server: str
    token: str = ""
    ca_file: str = ""
    cert_file: str = ""
    key_file: str = ""
    insecure: bool = False
    kubeconfig: str = ""  # the file it was read from, to read it again ("": the default search)
    token_file: str = ""  # a token that rotates on disk (in-cluster)
    context: str = ""  # the kubeconfig context ("": its current-context)
    namespace: str = ""  # the context's namespace (in a pod: the pod's own), as kubectl defaults to it

    @classmethod
    def from_kubeconfig(cls, path: str | Path | None = None, context: str | None = None) -> Connection:
        """From a kubeconfig file (or $KUBECONFIG / ~/.kube/config) and one of its contexts (default its
        current-context), else the in-cluster account; KubeconfigError says which file is missing or why
        none could be used."""
        creds = kubeconfig.load(path, context)
        return cls(server=creds.server, token=creds.token, ca_file=creds.ca_file, cert_file=creds.cert_file,
                   key_file=creds.key_file, insecure=creds.insecure, kubeconfig=str(path or ""),
                   token_file=creds.token_file, context=context or "", namespace=creds.namespace)

    def reloaded(self) -> Connection:
        """The same connection with credentials read afresh (a rotated token, a re-run exec plugin)."""
        return Connection.from_kubeconfig(self.kubeconfig or None, self.context or None)

    def with_token_file(self) -> Connection:
        """This connection with the token its token file holds now."""
        if not self.token_file:
            return self
        try:
            token = Path(self.token_file).read_text().strip()
        except OSError:
            return self
        return self if token == self.token else replace(self, token=token)


def _check_path(path: str) -> None:
    """Paths are built from names, some of them a user's: one with a "." or ".." segment, or a character
    no Kubernetes name has that a URL would act on, could address another object than the one named."""
    segments = path.split("/")
    if any(seg in (".", "..") for seg in segments) or any(c in path for c in "?#%\\") or "//" in path[1:]:
        raise KubeError(400, "BadRequest", f"refused to request {path!r}: not a path of object names")


def _reply(text: str) -> dict[str, Any]:
    """An answer's body: JSON, or its text as the message."""
    try:
        reply: dict[str, Any] = json.loads(text) if text else {}
    except ValueError:
        reply = {"message": text}
    return reply


def _answered(status: int, http_reason: str, reply: dict[str, Any], retry_after: str) -> KubeError:
    """The error an answer of status >= 400 means: its Status body's reason and message."""
    return KubeError(status, str(reply.get("reason", http_reason)), str(reply.get("message", json.dumps(reply))),
                     float(retry_after) if retry_after.isdigit() else 0.0)


def _retryable(exc: BaseException, method: str, path: str) -> bool:
    """What the policy retries: answers that say "try again", and failures that did not change anything."""
    if isinstance(exc, Unreachable):
        # A create that may have reached the server is not repeated (it would answer AlreadyExists).
        return not exc.sent or method != "POST"
    if isinstance(exc, KubeError):
        return exc.status in (429, 500, 502, 503, 504) or (exc.status == 409 and path.endswith("/status"))
    return False


class _WaitRetryAfter(wait_base):
    """Jittered exponential backoff, but never shorter than the server's Retry-After."""

    def __init__(self) -> None:
        self.backoff = wait_exponential_jitter(multiplier=0.2, max=5, jitter=0.5)

    def __call__(self, retry_state: RetryCallState) -> float:
        exc = retry_state.outcome.exception() if retry_state.outcome else None
        asked = min(exc.retry_after, 30.0) if isinstance(exc, KubeError) else 0.0
        return max(asked, self.backoff(retry_state))


def _log_retry(retry_state: RetryCallState) -> None:
    exc = retry_state.outcome.exception() if retry_state.outcome else None
    log.info("API request failed (%s); retry %d", exc, retry_state.attempt_number)


class Kube:
    def __init__(self, conn: Connection, impersonate: str = "", groups: tuple[str, ...] = (),
                 policy: Policy | None = None) -> None:
        self.conn = conn
        self.policy = policy  # where the server may be (a tenant's kubeconfig names it): judged as it resolves
        self.impersonate = impersonate
        self.groups = groups  # Impersonate-Group, with a user only
        self._sessions: dict[bool, aiohttp.ClientSession] = {}  # by streaming: requests, or watches and logs
        self._resources: dict[tuple[str, str], tuple[str, bool]] = {}
        self._acting: dict[tuple[str, tuple[str, ...]], Kube] = {}
        self._root = self  # impersonating clients use their root's credentials, which rotate
        self._token_read = time.monotonic()

    def acting_as(self, user: str, groups: tuple[str, ...] = ()) -> Kube:
        """A client whose requests impersonate ``user`` in ``groups`` (``""``: this one): RBAC then judges them
        as that user's, which is how a tenant's objects are written with the tenant's rights only, and how the
        web UI reads with its viewer's."""
        if not user or (user, groups) == (self.impersonate, self.groups):
            return self
        root = self._root
        if (user, groups) not in root._acting:
            child = root._acting[(user, groups)] = Kube(root.conn, user, groups, root.policy)
            child._resources = root._resources  # discovery is the same for everyone
            child._root = root
        return root._acting[(user, groups)]

    async def forget(self, user: str, groups: tuple[str, ...] = ()) -> None:
        """Close and drop the client acting as ``user`` (a viewer gone: clients are not kept for everyone
        who ever looked)."""
        child = self._root._acting.pop((user, groups), None)
        if child is not None:
            await child.close()

    def _ssl(self) -> ssl.SSLContext | bool:
        conn = self._root.conn
        if conn.insecure:
            return False
        ctx = ssl.create_default_context(cafile=conn.ca_file or None)
        if conn.cert_file:
            ctx.load_cert_chain(conn.cert_file, conn.key_file or None)
        return ctx

    def session(self, streaming: bool = False) -> aiohttp.ClientSession:
        """The HTTP client for requests (a pool of REQUEST_CONNECTIONS) or for streams (a connection each, held
        while the stream lasts)."""
        session = self._sessions.get(streaming)
        if session is None or session.closed:
            headers = ([("Impersonate-User", self.impersonate), *(("Impersonate-Group", g) for g in self.groups)]
                       if self.impersonate else [])
            session = self._sessions[streaming] = aiohttp.ClientSession(
                str(yarl.URL(self._root.conn.server).origin()), headers=headers, trust_env=False,
                connector=aiohttp.TCPConnector(ssl=self._ssl(), limit=0 if streaming else REQUEST_CONNECTIONS,
                                               resolver=Resolver(self.policy) if self.policy else None),
                timeout=aiohttp.ClientTimeout(total=60, connect=10))
        return session

    def _prefix(self) -> str:
        """The server's path, before every request's (a proxy's, as Rancher's /k8s/clusters/<id>): client-go
        puts it there too."""
        return yarl.URL(self._root.conn.server).path.rstrip("/")

    def _token(self) -> str:
        root = self._root
        if root.conn.token_file and time.monotonic() - root._token_read > TOKEN_REREAD:
            root.conn, root._token_read = root.conn.with_token_file(), time.monotonic()
        return root.conn.token

    async def _reauthenticate(self) -> bool:
        """After a 401: read the credentials again; True when they changed (worth one more try)."""
        root = self._root
        try:
            fresh = await asyncio.to_thread(root.conn.reloaded)
        except KubeconfigError as exc:
            log.warning("the API refused the credentials and they could not be read again: %s", exc)
            return False
        if fresh == root.conn:
            return False
        tls_changed = replace(fresh, token="") != replace(root.conn, token="")
        root.conn, root._token_read = fresh, time.monotonic()
        if tls_changed:  # client certificates live in the sessions' TLS contexts
            for client in (root, *root._acting.values()):
                for session in client._sessions.values():
                    await session.close()
        return True

    async def close(self) -> None:
        for child in self._acting.values():
            await child.close()
        for session in self._sessions.values():
            await session.close()

    async def request(self, method: str, path: str, body: Any = None, *, params: dict[str, str] | None = None,
                      content_type: str = "application/json", attempts: int = 5, accept: str = "") -> dict[str, Any]:
        """One API call under the retry policy (``attempts=1``: no retry, e.g. for a probe)."""
        _check_path(path)
        data = None if body is None else (body if isinstance(body, str | bytes) else json.dumps(body))
        headers = {"Content-Type": content_type} if data is not None else {}
        if accept:
            headers["Accept"] = accept
        # The first attempt is made outside tenacity, whose retry object is ~40 objects in reference cycles per
        # call: under a burst, most of what the garbage collector had to find (in pauses of the event loop).
        try:
            return await self._send(method, path, data, params, headers)
        except KubeError as exc:
            if attempts <= 1 or not _retryable(exc, method, path):
                raise
            first: KubeError | None = exc
        retrying = AsyncRetrying(retry=retry_if_exception(lambda exc: _retryable(exc, method, path)),
                                 wait=_WaitRetryAfter(), stop=stop_after_attempt(attempts) | stop_after_delay(30),
                                 before_sleep=_log_retry, reraise=True)
        async for attempt in retrying:
            with attempt:
                if first is not None:  # the policy's first attempt is the one made above
                    failed, first = first, None
                    raise failed
                return await self._send(method, path, data, params, headers)
        raise AssertionError("tenacity re-raises the last error")

    async def _send(self, method: str, path: str, data: str | bytes | None, params: dict[str, str] | None,
                    headers: dict[str, str]) -> dict[str, Any]:
        for reauthenticated in (False, True):
            try:
                async with self.session().request(method, self._prefix() + path, data=data, params=params,
                                                  headers={**headers, **self._auth()}) as r:
                    status, text = r.status, await r.text()
                    retry_after = r.headers.get("Retry-After", "")
                    http_reason = r.reason or ""
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                raise Unreachable(f"{self._root.conn.server}: {describe(exc)}", server=self._root.conn.server,
                                  sent=not isinstance(exc, aiohttp.ClientConnectorError)) from None
            if status == 401 and not reauthenticated and await self._reauthenticate():
                continue
            reply = _reply(text)
            if status >= 400:
                raise _answered(status, http_reason, reply, retry_after)
            return reply
        raise AssertionError("the loop returns or raises")

    def _auth(self) -> dict[str, str]:
        token = self._token()
        return {"Authorization": f"Bearer {token}"} if token else {}

    async def watch(self, path: str, params: dict[str, str], accept: str = "") -> AsyncIterator[dict[str, Any]]:
        """The events of a watch, until the server ends it (no retry: the caller resumes from its
        resourceVersion, or lists again after 410 Gone)."""
        async for line in self.stream(path, {**params, "watch": "true"}, accept):
            if line.strip():
                yield json.loads(line)

    async def stream(self, path: str, params: dict[str, str], accept: str = "",
                     idle: float = 330) -> AsyncIterator[bytes]:
        """A long response line by line as the server sends it (a watch, a followed pod log), until the server
        ends it or sends nothing for ``idle`` seconds (a dead peer)."""
        headers = {**self._auth(), **({"Accept": accept} if accept else {})}
        try:
            async with self.session(streaming=True).get(
                    self._prefix() + path, params=params, headers=headers,
                    timeout=aiohttp.ClientTimeout(sock_connect=10, sock_read=idle)) as r:
                if r.status >= 400:
                    raise _answered(r.status, r.reason or "", _reply(await r.text()), r.headers.get("Retry-After", ""))
                async for line in r.content:
                    yield line
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise Unreachable(f"{self._root.conn.server}: {describe(exc)}", sent=True,
                              server=self._root.conn.server) from None

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
