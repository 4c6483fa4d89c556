"""What a test reads of a cluster, in-process: the objects ``kubectl get <resource> [name] -o json`` prints, read
with one kept-alive HTTPS connection instead of a kubectl process per look; and a wait that follows one object's
watch (:meth:`Api.until`), as ``kubectl wait`` does, instead of looking again and again.
Resource names resolve as kubectl's do (plural, singular, kind or short name, optionally ``.group``; the first
group in the server's discovery order wins), from the aggregated discovery the server serves (read again when a
name is not found: a CRD installed since)."""

from __future__ import annotations

import base64
import http.client
import json
import math
import re
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml

T = TypeVar("T")

DISCOVERY = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


def _warning_text(header: str) -> str:
    """The text of a Warning header (``299 - "text"``, RFC 7234: a quoted string with backslash escapes)."""
    _code, _agent, quoted = header.split(" ", 2) if header.count(" ") >= 2 else ("", "", header)
    quoted = quoted.strip()
    if quoted.startswith('"') and quoted.endswith('"'):
        quoted = re.sub(r"\\(.)", r"\1", quoted[1:-1])
    return quoted


@dataclass(frozen=True)
class Resource:
    prefix: str  # /api/v1 or /apis/<group>/<version>
    plural: str
    namespaced: bool
    names: frozenset[str]  # what names it: plural, singular, kind, short names (lower case)
    group: str


class Api:
    """The server of a kubeconfig (its first cluster and user: a sandbox's), read as its admin."""

    def __init__(self, kubeconfig: Path | str) -> None:
        config = yaml.safe_load(Path(kubeconfig).read_text())
        cluster, user = config["clusters"][0]["cluster"], config["users"][0]["user"]
        server = urllib.parse.urlsplit(cluster["server"])
        self.host, self.port = server.hostname or "127.0.0.1", server.port or 443
        self.token = str(user.get("token") or "")
        self.tls = ssl.create_default_context(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
        self.local = threading.local()  # a connection per thread (tests may look from helper threads)
        self.resources: list[Resource] = []

    def _connect(self, timeout: float) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(self.host, self.port, context=self.tls, timeout=timeout)

    def _headers(self, accept: str = "application/json") -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}", "Accept": accept}

    def _request(self, path: str, accept: str = "application/json", method: str = "GET",
                 body: dict[str, Any] | None = None, warnings: list[str] | None = None) -> tuple[int, Any]:
        """The status and body the server answers; the texts of its Warning headers added to ``warnings``."""
        for attempt in (1, 2):  # a kept-alive connection the server closed meanwhile is opened again once
            connection = getattr(self.local, "connection", None)
            if connection is None:
                connection = self.local.connection = self._connect(30)
            try:
                headers = self._headers(accept) | ({"Content-Type": "application/json"} if body is not None else {})
                connection.request(method, path, json.dumps(body) if body is not None else None, headers)
                answer = connection.getresponse()
                data = answer.read()
            except (OSError, http.client.HTTPException):
                connection.close()
                self.local.connection = None
                if attempt == 2:
                    raise
                continue
            if warnings is not None:  # 299 - "text": the text, as kubectl prints it
                warnings += [_warning_text(value) for value in answer.headers.get_all("Warning") or []]
            return answer.status, json.loads(data) if data else {}
        raise AssertionError("unreachable")

    def _discover(self) -> None:
        found = []
        for root, prefix in (("/api", "/api"), ("/apis", "/apis")):
            status, listed = self._request(root, DISCOVERY)
            assert status == 200, f"discovery of {root}: {status} {listed}"
            for group in listed.get("items") or []:
                name = str((group.get("metadata") or {}).get("name") or "")
                seen: set[str] = set()
                for version in group.get("versions") or []:  # the preferred version first: a resource is its
                    where = "/".join(part for part in (prefix, name, str(version.get("version") or "")) if part)
                    for r in version.get("resources") or []:
                        if r["resource"] in seen:
                            continue
                        seen.add(r["resource"])
                        kind = str((r.get("responseKind") or {}).get("kind") or "")
                        names = {r["resource"], str(r.get("singularResource") or ""), kind.lower(),
                                 *(s.lower() for s in r.get("shortNames") or [])}
                        found.append(Resource(where, r["resource"], r.get("scope") == "Namespaced",
                                              frozenset(n for n in names if n), name))
        self.resources = found

    def resource(self, text: str) -> Resource:
        """The resource ``text`` names, as kubectl resolves it."""
        name, _, group = text.lower().partition(".")
        for attempt in (1, 2):
            if attempt == 2 or not self.resources:
                self._discover()
            for resource in self.resources:
                if name in resource.names and (not group or resource.group == group
                                               or f"{resource.prefix.rsplit('/', 1)[1]}.{resource.group}" == group):
                    return resource
        raise AssertionError(f"the server has no resource {text!r}")

    def resource_of(self, api_version: str, kind: str) -> Resource | None:
        """The resource of ``kind`` objects in ``api_version`` (None: not served, or not at its preferred version)."""
        prefix = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
        for attempt in (1, 2):
            if attempt == 2 or not self.resources:
                self._discover()
            found = next((r for r in self.resources if r.prefix == prefix and kind.lower() in r.names), None)
            if found is not None:
                return found
        return None

    def status(self, path: str) -> int:
        """What the server answers a GET of ``path`` with."""
        return self._request(path)[0]

    def post(self, path: str, body: dict[str, Any], warnings: list[str] | None = None) -> int:
        """POST ``body`` to ``path``: the status the server answered (its warnings added to ``warnings``)."""
        return self._request(path, method="POST", body=body, warnings=warnings)[0]

    def create_namespace(self, name: str) -> None:
        """``kubectl create namespace <name>``."""
        status, answer = self._request("/api/v1/namespaces", method="POST",
                                       body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        assert status == 201, f"namespace {name}: {status} {answer}"

    def _collection(self, namespace: str, resource: str) -> str:
        return self.collection(self.resource(resource), namespace)

    @staticmethod
    def collection(found: Resource, namespace: str) -> str:
        """The path of ``found``'s objects in ``namespace`` (its cluster-wide path for a cluster-scoped kind or "")."""
        return f"{found.prefix}/namespaces/{namespace}/{found.plural}" if found.namespaced and namespace else \
            f"{found.prefix}/{found.plural}"

    def until(self, namespace: str, resource: str, name: str, check: Callable[[dict[str, Any]], T],
              timeout: float = 60.0) -> T:
        """Follow object ``name``'s watch until ``check`` of it ({} while there is none) returns something true,
        and return that; after ``timeout`` seconds, an AssertionError with the object as last seen. Each change is
        looked at as it comes (no poll); a watch the server ends (its timeout, 410 Gone) is listed again."""
        path = self._collection(namespace, resource)
        selector = urllib.parse.urlencode({"fieldSelector": f"metadata.name={name}"})
        deadline, last = time.monotonic() + timeout, {}
        while True:
            status, listed = self._request(f"{path}?{selector}")
            assert status == 200, f"{path}: {status} {listed}"
            kind = str(listed.get("kind") or "").removesuffix("List")
            items = [{"apiVersion": listed.get("apiVersion"), "kind": kind, **item} for item in listed["items"]]
            last = items[0] if items else {}
            if result := check(last):
                return result
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"not within {timeout}s; last: {last!r}"[:2000])
            found = self._follow(f"{path}?{selector}&watch=1&allowWatchBookmarks=true&timeoutSeconds="
                                 f"{math.ceil(left)}&resourceVersion={listed['metadata']['resourceVersion']}",
                                 check, left)
            if found is not None:
                return found[0]

    def _follow(self, path: str, check: Callable[[dict[str, Any]], T], left: float) -> tuple[T] | None:
        """(what ``check`` returned) once it says yes of an event's object; None when the watch ended first."""
        connection = self._connect(left)  # a watch holds its connection: one of its own
        try:
            connection.request("GET", path, headers=self._headers())
            answer = connection.getresponse()
            while line := answer.readline():
                event = json.loads(line)
                if event.get("type") == "ERROR":
                    return None
                if event.get("type") != "BOOKMARK" and (
                        result := check(event["object"] if event.get("type") != "DELETED" else {})):
                    return (result,)
            return None
        except TimeoutError:
            return None
        finally:
            connection.close()

    def get(self, namespace: str, resource: str, name: str = "", selector: str = "") -> dict[str, Any]:
        """The object (or the list of them, without a name) as ``kubectl get -o json`` prints it; {} when there
        is none (kubectl's error)."""
        path = self._collection(namespace, resource)
        path += f"/{urllib.parse.quote(name)}" if name else ""
        if selector:
            path += "?" + urllib.parse.urlencode({"labelSelector": selector})
        status, obj = self._request(path)
        if status != 200 or not isinstance(obj, dict):
            return {}
        if not name:  # kubectl names each item's apiVersion and kind, which a list's items leave out
            kind = str(obj.get("kind") or "").removesuffix("List")
            for item in obj.get("items") or []:
                item.setdefault("apiVersion", obj.get("apiVersion"))
                item.setdefault("kind", kind)
        return obj
