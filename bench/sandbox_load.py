"""Sandbox capacity: many objects, many watches, many requests; prints rates and memory.

    .venv/bin/python bench/sandbox_load.py [--objects 20000] [--namespaces 100] [--watches 40]

Creates the objects over HTTP with concurrent clients while the watches run, then times gets and
label-selected lists in one namespace (which must not slow down with the total object count).
Not a test: it prints numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import ssl
import time

import aiohttp
from helmop_sandbox import Sandbox


async def _main(args: argparse.Namespace) -> None:
    with Sandbox() as sb:
        tls = ssl.create_default_context(cafile=str(sb.ca_file))
        headers = {"Authorization": f"Bearer {sb.token}"}
        conn = aiohttp.TCPConnector(ssl=tls, limit=args.concurrency + args.watches)
        async with aiohttp.ClientSession(sb.url, headers=headers, connector=conn) as http:
            for n in range(args.namespaces):
                async with http.post("/api/v1/namespaces", json={"metadata": {"name": f"ns{n}"}}) as r:
                    assert r.status == 201, await r.text()
            seen = [0] * args.watches

            async def watch(i: int) -> None:
                ns = f"ns{i % args.namespaces}"
                async with http.get(f"/api/v1/namespaces/{ns}/configmaps", params={"watch": "1"},
                                    timeout=aiohttp.ClientTimeout(total=None)) as r:
                    async for _line in r.content:
                        seen[i] += 1

            watchers = [asyncio.create_task(watch(i)) for i in range(args.watches)]
            queue: asyncio.Queue[int] = asyncio.Queue()
            for i in range(args.objects):
                queue.put_nowait(i)

            async def writer() -> None:
                while not queue.empty():
                    i = queue.get_nowait()
                    body = {"metadata": {"name": f"cm{i}", "labels": {"n": str(i % 10)}}, "data": {"k": "v" * 200}}
                    async with http.post(f"/api/v1/namespaces/ns{i % args.namespaces}/configmaps", json=body) as r:
                        assert r.status == 201, await r.text()

            start = time.perf_counter()
            await asyncio.gather(*(writer() for _ in range(args.concurrency)))
            took = time.perf_counter() - start
            print(f"created {args.objects} objects in {took:.1f}s: {args.objects / took:.0f} creates/s "
                  f"({args.concurrency} clients, {args.watches} watches open)")

            reads = 2000
            start = time.perf_counter()

            async def reader(k: int) -> None:
                for j in range(k, reads, args.concurrency):
                    async with http.get(f"/api/v1/namespaces/ns{j % args.namespaces}/configmaps/cm{j}") as r:
                        await r.read()

            await asyncio.gather(*(reader(k) for k in range(args.concurrency)))
            took = time.perf_counter() - start
            print(f"{reads} gets in {took:.1f}s: {reads / took:.0f} gets/s")
            start = time.perf_counter()
            for _ in range(200):
                async with http.get("/api/v1/namespaces/ns1/configmaps", params={"labelSelector": "n=1"}) as r:
                    await r.read()
            took = time.perf_counter() - start
            print(f"200 label-selected lists of one namespace in {took:.2f}s: {200 / took:.0f} lists/s")
            await asyncio.sleep(0.5)
            for task in watchers:
                task.cancel()
            print(f"watch events delivered: {sum(seen)} (expected {args.objects * args.watches // args.namespaces}"
                  f" plus initial ADDED)")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS of this process (sandbox + clients): {peak:.0f} MiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--objects", type=int, default=20_000)
    parser.add_argument("--namespaces", type=int, default=100)
    parser.add_argument("--watches", type=int, default=40)
    parser.add_argument("--concurrency", type=int, default=16)
    asyncio.run(_main(parser.parse_args()))


if __name__ == "__main__":
    main()
