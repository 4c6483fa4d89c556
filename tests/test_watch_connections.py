"""Watches hold connections (a shared collection is watched for a minute after its last reader, one per kind and
namespace), against the sandbox over HTTP: however many are open, requests still go through; and how many are
kept without a reader is bounded."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from helmop_sandbox import Sandbox

from helmop.infra import watches
from helmop.infra.kube import REQUEST_CONNECTIONS, Connection, Kube, KubeError
from helmop.infra.metadata import MetadataWatches
from helmop.infra.watches import Collection, Collections


async def test_requests_go_through_while_more_watches_are_open_than_the_request_pool_holds() -> None:
    with Sandbox(ready_delay=0.05) as sandbox:
        kube = Kube(Connection.from_kubeconfig(sandbox.kubeconfig))
        opened = 0
        everyone = asyncio.Event()
        watches = REQUEST_CONNECTIONS + 10

        async def hold() -> None:
            nonlocal opened
            # without a resourceVersion a watch starts with the object as it is: the stream is open once it came
            async for _ in kube.watch("/api/v1/namespaces", {"fieldSelector": "metadata.name=default"}):
                opened += 1
                if opened == watches:
                    everyone.set()
                await asyncio.Event().wait()  # held open, as a collection's watch is

        tasks = [asyncio.create_task(hold()) for _ in range(watches)]
        try:
            await asyncio.wait_for(everyone.wait(), 30)
            answer = await asyncio.wait_for(kube.request("GET", "/api/v1/namespaces/default"), 5)
            assert answer["metadata"]["name"] == "default"
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await kube.close()


async def test_collections_without_readers_stay_watched_up_to_a_bound() -> None:
    with Sandbox(ready_delay=0.05) as sandbox:
        kube = Kube(Connection.from_kubeconfig(sandbox.kubeconfig))
        collections = Collections(kube, linger=60, idle=3)
        paths = [f"/api/v1/namespaces/n{i}/configmaps" for i in range(5)]
        kept = {}
        for path in paths:  # releases in five namespaces, one after the other
            async with collections.reading({path}) as held:
                kept[path] = held[path]
        # the three read last stay watched for whoever reads them next; the two before were stopped at once
        assert list(collections.open) == paths[2:]
        async with collections.reading({paths[2]}) as held:
            assert held[paths[2]] is kept[paths[2]]
        async with collections.reading({paths[0]}) as held:
            assert held[paths[0]] is not kept[paths[0]]  # listed and watched afresh
        assert list(collections.open) == [paths[2], paths[4], paths[0]]  # n3 had been idle longest
        listed = [a.namespace for _, a in sandbox.audit if a.verb == "list" and a.resource == "configmaps"]
        assert sorted(listed) == ["n0", "n0", "n1", "n2", "n3", "n4"]
        await collections.close()
        await kube.close()


async def _five_configmaps(kube: Kube) -> str:
    """c0 to c4 in the default namespace (three pages of two); the collection's path."""
    path = "/api/v1/namespaces/default/configmaps"
    for i in range(5):
        await kube.request("POST", path, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"c{i}"},
                                          "data": {"v": "1"}})
    return path


@contextlib.asynccontextmanager
async def _read(kube: Kube, path: str) -> AsyncIterator[Collection]:
    """``path``'s shared collection, listed (c0 to c4 in it) and watched while the block runs; then closed, and
    ``kube`` with it."""
    collections = Collections(kube)
    try:
        async with collections.reading({path}) as held:
            assert {f"c{i}" for i in range(5)} <= set(held[path].objects)
            yield held[path]
    finally:
        await collections.close()
        await kube.close()


async def test_a_collection_is_listed_in_pages_and_watched_from_the_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """Listed in pages (a page's objects parsed and packed at once, never a namespace's whole list), and
    watched from the first page's version: a change made while the later pages were read is not lost."""
    monkeypatch.setattr(watches, "PAGE", 2)
    with Sandbox(ready_delay=0.05) as sandbox:
        kube = Kube(Connection.from_kubeconfig(sandbox.kubeconfig))
        path = await _five_configmaps(kube)
        request = kube.request

        async def changing_after_the_first_page(method: str, asked: str, *args: Any, **kwargs: Any) -> Any:
            answer = await request(method, asked, *args, **kwargs)
            if asked == path and not (kwargs.get("params") or {}).get("continue"):
                await request("PUT", f"{path}/c0", {**answer["items"][0], "data": {"v": "2"}})
            return answer

        monkeypatch.setattr(kube, "request", changing_after_the_first_page)
        async with _read(kube, path) as collection:
            assert (collection.get("c4") or {}).get("kind") == "ConfigMap"
            pages = [a for _, a in sandbox.audit if a.verb == "list" and a.resource == "configmaps"]
            assert len(pages) >= 3
            while (collection.get("c0") or {}).get("data") != {"v": "2"}:
                await asyncio.wait_for(collection.changed("c0").wait(), 5)


async def test_an_expired_continue_token_lists_everything_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A continue token the server no longer knows (410 Expired, once etcd compacted past it) is answered as
    client-go's pager answers it: one list of everything, then the watch from that list's version."""
    monkeypatch.setattr(watches, "PAGE", 2)
    with Sandbox(ready_delay=0.05) as sandbox:
        kube = Kube(Connection.from_kubeconfig(sandbox.kubeconfig))
        path = await _five_configmaps(kube)
        request, asked = kube.request, []

        async def expiring(method: str, where: str, *args: Any, **kwargs: Any) -> Any:
            params = kwargs.get("params") or {}
            asked.append(params)
            if params.get("continue"):
                raise KubeError(410, "Expired", "The provided continue parameter is too old")
            return await request(method, where, *args, **kwargs)

        monkeypatch.setattr(kube, "request", expiring)
        async with _read(kube, path) as collection:
            assert asked[:3] == [{"limit": "2"}, {"limit": "2", "continue": asked[1].get("continue")}, {}]
            changed = collection.changed("c1")
            await request("PUT", f"{path}/c1", {**(collection.get("c1") or {}), "data": {"v": "2"}})
            await asyncio.wait_for(changed.wait(), 5)  # watched from the whole list's version
            assert (collection.get("c1") or {}).get("data") == {"v": "2"}


async def test_a_continue_token_answered_with_itself_is_not_followed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A server (or a proxy) that honours ``limit`` but hands the same continue token back would be asked for the
    same page for ever: the list fails instead, and the collection's watcher backs off as after any failure."""
    with Sandbox(ready_delay=0.05) as sandbox:
        kube = Kube(Connection.from_kubeconfig(sandbox.kubeconfig))
        request = kube.request

        async def stuck(method: str, where: str, *args: Any, **kwargs: Any) -> Any:
            answer = await request(method, where)  # every page the same, and the same token after it
            return {**answer, "metadata": {**answer["metadata"], "continue": "same"}}

        monkeypatch.setattr(kube, "request", stuck)
        try:
            with pytest.raises(ValueError, match="answered continue token 'same' with itself"):
                await Collection(kube, "/api/v1/namespaces/default/configmaps")._listed()
        finally:
            await kube.close()


class _Told:
    """What metadata watches told (a :class:`helmop.infra.metadata.Listener`), in order."""

    def __init__(self) -> None:
        self.said: list[tuple[str, str, str]] = []
        self.news = asyncio.Event()

    def _add(self, entry: tuple[str, str, str]) -> None:
        self.said.append(entry)
        self.news.set()

    def started(self, kind: str, namespace: str, *, listed: bool) -> None:
        self._add(("started", kind, namespace))

    def lost(self, kind: str, namespace: str) -> None:
        self._add(("lost", kind, namespace))

    def changed(self, api_version: str, kind: str, type_: str, meta: dict[str, object]) -> None:
        self._add((type_, kind, f"{meta.get('namespace')}/{meta.get('name')}"))

    async def until(self, entry: tuple[str, str, str]) -> None:
        while entry not in self.said:
            self.news.clear()
            await asyncio.wait_for(self.news.wait(), 30)


async def test_metadata_watches_tell_their_listener_up_to_a_bound_and_stop_when_closed() -> None:
    """A remote cluster's drift watches (one per kind and namespace, at most ``limit``): each tells when it runs,
    what changed, and when it stops; closed (the remote let go), every one says it is lost and none starts again."""
    with Sandbox(ready_delay=0.05) as sandbox:
        kube = Kube(Connection.from_kubeconfig(sandbox.kubeconfig))
        told, watches = _Told(), MetadataWatches(kube, limit=2)
        for namespace in ("a", "b", "c"):
            await kube.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                               "metadata": {"name": namespace}})
            watches.follow(("v1", "ConfigMap", namespace), told)
        assert set(watches.tasks) == {("v1", "ConfigMap", "a"), ("v1", "ConfigMap", "b")} and watches.full
        try:
            await told.until(("started", "ConfigMap", "a"))
            await told.until(("started", "ConfigMap", "b"))
            for namespace in ("c", "a"):  # c's change is told nobody: c is not watched
                await kube.request("POST", f"/api/v1/namespaces/{namespace}/configmaps", {
                    "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"k": "v"}})
            await told.until(("ADDED", "ConfigMap", "a/x"))
            assert ("ADDED", "ConfigMap", "c/x") not in told.said
        finally:
            await watches.close()
            await kube.close()
        assert {("lost", "ConfigMap", "a"), ("lost", "ConfigMap", "b")} <= set(told.said)
        watches.follow(("v1", "ConfigMap", "c"), told)
        assert not watches.tasks
