"""``helmop mcp``'s diff tool: what a HelmRelease's spec would change in its release, as ``helmop diff hr NAME``
prints it (:func:`helmop.cli.releases.diff_live`: the live release's manifest against a server-side dry run).

helm runs as a process with the kubeconfig's identity, not through the caller's client: the tool is offered only
where those are the same person (stdio, and HTTP with ``--auth kubeconfig``), never where each request has its
own caller (``--auth token``), where helm would read releases with the server's own rights."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helmop.api.settings import default_helm
from helmop.helm.engine import Engine

from .reads import CUT, MAX_ITEMS, MAX_SPEC, Caller, bounded, masked, read_object

MAX_DIFFS = 4 * MAX_SPEC  # characters of all the objects' diffs of one answer together


@dataclass
class Diffs:
    kubeconfig: Path | None  # what helm acts with: the same kubeconfig (and context) as the caller's client
    cache: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="helmop-mcp-")))  # charts, repositories
    _engine: Engine | None = None

    async def engine(self) -> Engine:
        if self._engine is None:  # helm is asked its version once, at the first diff
            self._engine = await asyncio.to_thread(Engine.start, default_helm(), self.kubeconfig)
        return self._engine

    async def diff(self, caller: Caller, namespace: str, name: str) -> dict[str, Any]:
        from .. import releases  # helm's client (pyhelm3): for this tool only

        _, obj = await read_object(caller, "hr", namespace, name)
        where = namespace or caller.namespace
        found = await releases.diff_live(caller.kube, await self.engine(), self.cache, where, name)
        objects = [o for d in found for o in d.json()["objects"]]
        answer = await masked(caller, obj, {"helmRelease": f"{where}/{name}", "changed": bool(objects),
                                            "objects": objects})
        return bounded({**answer, "objects": []}) | {"objects": _cut_diffs(answer["objects"])}

    def close(self) -> None:
        shutil.rmtree(self.cache, ignore_errors=True)


def _cut_diffs(objects: list[dict[str, Any]]) -> list[Any]:
    """The objects' diffs within :data:`MAX_DIFFS` characters together (the first ones whole), each cut said."""
    left, kept = MAX_DIFFS, list[Any]()
    for one in objects[:MAX_ITEMS]:
        diff = str(one["diff"])
        kept.append(bounded({**one, "diff": ""}) | {"diff": diff if len(diff) <= left else diff[:left] + CUT})
        left = max(0, left - len(diff))
    return kept + ([f"{CUT}: {len(objects) - MAX_ITEMS} more"] if len(objects) > MAX_ITEMS else [])
