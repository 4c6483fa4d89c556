"""Prometheus metrics and the health endpoint (``/metrics``, ``/healthz``, ``/readyz``).

Series (all prefixed ``helmop_``): reconcile durations by kind and result, helm actions and their
durations by action and result, per-resource readiness and suspension, git fetch durations, and
chart/git cache hits and misses. Labels never carry values or secrets: kinds, names, results.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from .context import Context

REGISTRY = CollectorRegistry(auto_describe=True)
RECONCILE = Histogram("helmop_reconcile_duration_seconds", "Time spent in one reconcile.", ["kind", "result"],
                      registry=REGISTRY, buckets=(0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300))
RECONCILE_ERRORS = Counter("helmop_reconcile_errors_total", "Reconciles and clean-ups that ended in an unexpected "
                           "error (reported as ReconcileError).", ["kind"], registry=REGISTRY)
HELM_ACTIONS = Counter("helmop_helm_actions_total", "helm actions run.", ["action", "result"], registry=REGISTRY)
HELM_DURATION = Histogram("helmop_helm_action_duration_seconds", "Duration of helm actions.", ["action", "result"],
                          registry=REGISTRY, buckets=(0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600))
READY = Gauge("helmop_resource_ready", "1 when the resource's Ready condition is True.",
              ["kind", "namespace", "name"], registry=REGISTRY)
SUSPENDED = Gauge("helmop_resource_suspended", "1 when the resource is suspended.", ["kind", "namespace", "name"],
                  registry=REGISTRY)
GIT_FETCH = Histogram("helmop_git_fetch_duration_seconds", "Duration of git fetches.", ["result"],
                      registry=REGISTRY, buckets=(0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60))


def observe_resource(kind: str, body: Mapping[str, Any]) -> None:
    meta = body.get("metadata") or {}
    labels = (kind, meta.get("namespace") or "", meta.get("name") or "")
    conditions = (body.get("status") or {}).get("conditions") or []
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    READY.labels(*labels).set(1 if ready else 0)
    SUSPENDED.labels(*labels).set(1 if (body.get("spec") or {}).get("suspend") else 0)


def forget_resource(kind: str, namespace: str, name: str) -> None:
    for gauge in (READY, SUSPENDED):
        with contextlib.suppress(KeyError):
            gauge.remove(kind, namespace, name)


class CacheCollector(Collector):
    """Cache hit/miss counters read from the live caches of one operator."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily("helmop_cache_requests", "Chart cache lookups.", labels=["cache", "result"])
        family.add_metric(["charts", "hit"], self.ctx.repos.hits)
        family.add_metric(["charts", "miss"], self.ctx.repos.misses)
        yield family
        yield CounterMetricFamily("helmop_repository_index_fetches", "Requests for chart repository indexes "
                                  "(revalidations included; the rest were answered from the cache).",
                                  value=self.ctx.repos.index_fetches)


def app(not_ready: Callable[[], str]) -> web.Application:
    """``not_ready()`` says why the operator is not ready ("" when it is). Served on the event loop, so
    a stalled loop does not answer ``/healthz`` (which is what a liveness probe should see)."""

    async def metrics(_request: web.Request) -> web.Response:
        return web.Response(body=generate_latest(REGISTRY), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def healthz(_request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(_request: web.Request) -> web.Response:
        problem = not_ready()
        return web.Response(text=problem, status=503) if problem else web.Response(text="ok")

    application = web.Application()
    application.router.add_get("/metrics", metrics)
    application.router.add_get("/healthz", healthz)
    application.router.add_get("/readyz", readyz)
    return application
