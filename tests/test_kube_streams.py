"""The API client against the sandbox over HTTP: watches last (a shared collection is watched for a minute
after its last reader, one per kind and namespace), so however many are open, requests still go through."""

from __future__ import annotations

import asyncio

from helmop_sandbox import Sandbox

from helmop.infra.kube import REQUEST_CONNECTIONS, Connection, Kube


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
