"""The operator's log lines about one object, as ``helmop logs`` and the web UI read them: from the operator's
pods (``app.kubernetes.io/name=helmop``, the chart's label), with the reader's own rights.

Lines are matched by the kind, namespace and name a JSON line carries (the chart logs JSON), else by
``namespace/name`` in the text."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from typing import Any

from helmop.infra.kube import Kube, KubeError

POD_SELECTOR = "app.kubernetes.io/name=helmop"


def about(line: str, kind: str, namespace: str, name: str) -> bool:
    """Whether a log line is about the object (every line when no name is given)."""
    if not name:
        return True
    try:
        record = json.loads(line)
    except ValueError:
        record = None
    if isinstance(record, dict) and record.get("name"):
        return (record.get("name") == name and record.get("namespace", namespace) == namespace
                and (not record.get("kind") or str(record["kind"]).lower() == kind.lower()))
    # the name as a whole word: shop/web is not about shop/web2 or myshop/web
    return re.search(rf"(?<![\w.-]){re.escape(namespace)}/{re.escape(name)}(?![\w.-])", line) is not None


def readable(line: str) -> str:
    """A JSON line as text (time level [kind namespace/name] message); a text line as it is."""
    try:
        record: Any = json.loads(line)
    except ValueError:
        return line
    if not isinstance(record, dict) or "message" not in record:
        return line
    who = f" {record.get('kind', '')} {record.get('namespace', '')}/{record['name']}:" if record.get("name") else ""
    error = f"\n{record['error']}" if record.get("error") else ""
    return f"{record.get('time', '')} {record.get('level', '')}{who} {record['message']}{error}"


async def pod_lines(kube: Kube, pods: list[dict[str, Any]], follow: bool, tail: int) -> AsyncIterator[str]:
    """The helmop container's log of each pod (followed together: lines as they come)."""
    queue: asyncio.Queue[str | None] = asyncio.Queue()

    async def read(pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        params = {"container": "helmop", **({"follow": "true"} if follow else {}),
                  **({"tailLines": str(tail)} if tail >= 0 else {})}
        try:
            async for raw in kube.stream(f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/log", params,
                                         idle=3600 if follow else 60):
                await queue.put(raw.decode(errors="replace").rstrip("\n"))
        except KubeError as exc:
            await queue.put(f"helmop logs: pod {meta['namespace']}/{meta['name']}: {exc.message}")
        finally:
            await queue.put(None)

    readers = [asyncio.create_task(read(pod)) for pod in pods]
    try:
        running = len(readers)
        while running:
            line = await queue.get()
            if line is None:
                running -= 1
            else:
                yield line
    finally:
        for task in readers:
            task.cancel()


async def operator_pods(kube: Kube, namespace: str | None) -> list[dict[str, Any]]:
    path = f"/api/v1/namespaces/{namespace}/pods" if namespace else "/api/v1/pods"
    try:
        return await kube.list(path, POD_SELECTOR)
    except KubeError as exc:
        if exc.status in (403, 404):
            return []
        raise
