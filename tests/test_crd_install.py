"""The CRDs an operator installs at start (``--install-crds``, ``run --sandbox``): one list read, each CRD written
only where it differs from what helmop applied last, so that an operator restarting on a cluster that has them
writes nothing."""

from __future__ import annotations

import asyncio

from helmop_sandbox import Sandbox

from helmop.api import crds
from helmop.api.flux import crds as flux_crds
from helmop.controllers.operator import install_crds
from helmop.infra.kube import Connection, Kube

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


async def _versions(kube: Kube) -> dict[str, str]:
    return {c["metadata"]["name"]: c["metadata"]["resourceVersion"] for c in await kube.list(CRDS)}


async def _installs(kube: Kube) -> None:
    wanted = {c["metadata"]["name"] for c in crds.definitions() + flux_crds.definitions()}
    await install_crds(kube, flux=True)
    first = await _versions(kube)
    assert wanted <= set(first)
    await install_crds(kube, flux=True)
    assert await _versions(kube) == first  # the same definitions: nothing written

    edited, gone = "helmreleases.helmop.dev", "configsyncs.helmop.dev"
    await kube.merge_patch(f"{CRDS}/{edited}", {"metadata": {"annotations": {"helmop.dev/definition": "edited"}}})
    await kube.request("DELETE", f"{CRDS}/{gone}")
    while gone in await _versions(kube):  # the sandbox finalizes a CRD's removal at once, or nearly
        await asyncio.sleep(0.05)
    before = await _versions(kube)
    await install_crds(kube, flux=True)
    after = await _versions(kube)
    assert {name for name in after if after[name] != before.get(name)} == {edited, gone}
    live = await kube.get(f"{CRDS}/{edited}") or {}
    assert live["metadata"]["annotations"]["helmop.dev/definition"] != "edited"


def test_crds_are_written_only_where_they_changed() -> None:
    with Sandbox(ready_delay=0.05) as sandbox:
        async def run() -> None:
            kube = Kube(Connection.from_kubeconfig(sandbox.kubeconfig))
            try:
                await _installs(kube)
            finally:
                await kube.close()

        asyncio.run(run())
