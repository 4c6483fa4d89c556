"""Watches hold connections (a shared collection is watched for a minute after its last reader, one per kind and
namespace), against the sandbox over HTTP: however many are open, requests still go through; and how many are
kept without a reader is bounded."""

from __future__ import annotations

import asyncio

from helmop_sandbox import Sandbox

from helmop.infra.kube import REQUEST_CONNECTIONS, Connection, Kube
from helmop.infra.watches import Collections


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
