"""Waking the resources that read a ConfigMap or Secret when it changes, without holding either.

Through kopf, every ConfigMap and Secret of the cluster would stream through the operator whole,
helm's release records (a Secret per revision of every release) included. Here the watches ask
for metadata only (``PartialObjectMetadata``: names and versions, never data) and leave helm's
release Secrets out with a field selector; an event only wakes the HelmReleases (and other kinds)
that said they read that object. The watch starts from a list of one item (for its
resourceVersion), so starting does not wake everything; after 410 Gone it starts again that way.
"""

from __future__ import annotations

import asyncio
import logging

from .context import Context
from .kube import KubeError

log = logging.getLogger(__name__)
_ONE = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
WATCHED = (("ConfigMap", "configmaps", ""), ("Secret", "secrets", "type!=helm.sh/release.v1"))


async def watch(ctx: Context, namespaces: list[str]) -> None:
    """Watch ConfigMaps and Secrets (in ``namespaces``, or all) until cancelled."""
    paths = [(kind, f"/api/v1/namespaces/{ns}/{plural}" if ns else f"/api/v1/{plural}", selector)
             for kind, plural, selector in WATCHED for ns in (namespaces or [""])]
    await asyncio.gather(*(_follow(ctx, kind, path, selector) for kind, path, selector in paths))


async def _follow(ctx: Context, kind: str, path: str, selector: str) -> None:
    params = {"fieldSelector": selector} if selector else {}
    version, pause = "", 1.0
    while True:
        try:
            if not version:
                listed = await ctx.kube.request("GET", path, params={**params, "limit": "1"}, accept=_LIST)
                version = listed["metadata"]["resourceVersion"]
            async for event in ctx.kube.watch(path, {**params, "resourceVersion": version,
                                                     "allowWatchBookmarks": "true", "timeoutSeconds": "300"},
                                              accept=_ONE):
                obj = event.get("object") or {}
                if event.get("type") == "ERROR":
                    version = ""  # 410 Gone (or worse): list again
                    break
                meta = obj.get("metadata") or {}
                version = meta.get("resourceVersion") or version
                if event.get("type") != "BOOKMARK":
                    ctx.wake_referrers(meta.get("namespace", ""), kind, meta.get("name", ""))
            pause = 1.0
        except (KubeError, ValueError, KeyError) as exc:  # ValueError, KeyError: a body that is not an event
            if isinstance(exc, KubeError) and exc.status == 410:
                version = ""
            log.warning("watching %s failed (%s); again in %.0f s", path, exc, pause)
            await asyncio.sleep(pause)
            pause = min(pause * 2, 30.0)
