"""Prometheus metrics and the health endpoint (``/metrics``, ``/healthz``, ``/readyz``).

Series (all prefixed ``helmop_``): reconcile durations by kind and result, helm actions and their
durations by action and result, per-resource readiness and suspension, git fetch durations, the
event loop's lag, chart cache hits and misses, and the reconciles waiting and running. Labels never carry
values or secrets: kinds, names, results. Each operator has a registry of its own (several run in one test
process).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector


@dataclass(frozen=True)
class CacheCounts:
    hits: int
    misses: int
    index_fetches: int
    build_hits: int = 0  # kustomize outputs reused (sources.buildcache)
    build_misses: int = 0


class _CacheCollector(Collector):
    def __init__(self, read: Callable[[], CacheCounts]) -> None:
        self.read = read

    def collect(self) -> Iterator[CounterMetricFamily]:
        counts = self.read()
        family = CounterMetricFamily("helmop_cache_requests", "Lookups in the chart cache (cache=\"charts\") and "
                                     "of kept kustomize builds (\"kustomize-builds\").", labels=["cache", "result"])
        family.add_metric(["charts", "hit"], counts.hits)
        family.add_metric(["charts", "miss"], counts.misses)
        family.add_metric(["kustomize-builds", "hit"], counts.build_hits)
        family.add_metric(["kustomize-builds", "miss"], counts.build_misses)
        yield family
        yield CounterMetricFamily("helmop_repository_index_fetches", "Requests for chart repository indexes "
                                  "(revalidations included; the rest were answered from the cache).",
                                  value=counts.index_fetches)


class Metrics:
    def __init__(self) -> None:
        self.registry = registry = CollectorRegistry(auto_describe=True)
        self.reconcile = Histogram("helmop_reconcile_duration_seconds", "Time spent in one reconcile.",
                                   ["kind", "result"], registry=registry,
                                   buckets=(0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300))
        self.reconcile_errors = Counter("helmop_reconcile_errors_total", "Reconciles and clean-ups that ended in an "
                                        "unexpected error (reported as ReconcileError).", ["kind"], registry=registry)
        self.helm_actions = Counter("helmop_helm_actions_total", "helm actions run.", ["action", "result"],
                                    registry=registry)
        self.helm_duration = Histogram("helmop_helm_action_duration_seconds", "Duration of helm actions.",
                                       ["action", "result"], registry=registry,
                                       buckets=(0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600))
        self.ready = Gauge("helmop_resource_ready", "1 when the resource's Ready condition is True.",
                           ["kind", "namespace", "name"], registry=registry)
        self.suspended = Gauge("helmop_resource_suspended", "1 when the resource is suspended.",
                               ["kind", "namespace", "name"], registry=registry)
        self.git_fetch = Histogram("helmop_git_fetch_duration_seconds", "Duration of git fetches.", ["result"],
                                   registry=registry, buckets=(0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60))
        self.loop_lag = Gauge("helmop_event_loop_lag_seconds", "How late the event loop ran a timer, last measured.",
                              registry=registry)
        self.loop_lag_max = Gauge("helmop_event_loop_lag_max_seconds", "The largest event loop lag since the start.",
                                  registry=registry)
        self.flux_controllers = Gauge("helmop_flux_controllers_running", "Flux controllers whose leader Lease is "
                                      "still renewed (--flux-api: Flux's kinds are not served while it is not 0).",
                                      registry=registry)
        # One series per remote cluster name (a kubeconfig Secret's helmop.dev/cluster label, else host:port): as
        # many as the remotes the operator keeps, which are bounded (infra.clusters.MAX_REMOTES), and removed with them.
        self.cluster_up = Gauge("helmop_remote_cluster_up", "1 when every client of the remote cluster had an answer "
                                "at its last probe.", ["cluster"], registry=registry)
        self.cluster_objects = Gauge("helmop_remote_cluster_objects", "HelmReleases and ConfigSyncs that target the "
                                     "remote cluster (spec.kubeConfig).", ["cluster"], registry=registry)
        self.flux_held = Counter("helmop_flux_turns_held_total", "Turns of Flux objects not taken while Flux's own "
                                 "controllers still run.", ["kind"], registry=registry)
        self.notifications = Counter("helmop_notifications_total", "Notifications by Provider (namespace/name), "
                                     "its type and the result: sent, failed, retried (one more attempt after a "
                                     "timeout, 429 or 5xx), dropped (its queue was full), skipped (nothing to send, "
                                     "or the Provider is suspended or gone).",
                                     ["provider", "type", "result"], registry=registry)
        self.receiver_requests = Counter("helmop_receiver_requests_total", "Webhook requests to Receivers by kind, "
                                         "Receiver (namespace/name; empty for a path no Receiver has) and result: "
                                         "accepted, unauthorized, forbidden, refused, limited, too_large, "
                                         "unavailable, unknown or failed.", ["kind", "receiver", "result"],
                                         registry=registry)
        self.drift_checks = Counter("helmop_drift_checks_total", "Deployed objects looked at for drift: compared "
                                    "(read, and a server-side dry run) or skipped (found as the release wants them "
                                    "before, and unchanged since as the watches saw).", ["result"],
                                    registry=registry)
        # what controller-runtime's workqueue_depth says, and the turns running: both 0 when nothing is to be done
        self.turns_waiting = Gauge("helmop_turns_waiting", "Reconciles due and waiting for a place (the operator's "
                                   "work queue depth).", registry=registry)
        self.turns_running = Gauge("helmop_turns_running", "Reconciles running now.", registry=registry)
        self.turns_open = Gauge("helmop_turns_open", "Reconciles allowed to run at once now (fewer while the event "
                                "loop is late).", registry=registry)
        self.api_reachable = Gauge("helmop_api_reachable", "1 when the last authenticated request to the API "
                                   "server succeeded.", registry=registry)

    def count_caches(self, read: Callable[[], CacheCounts]) -> None:
        self.registry.register(_CacheCollector(read))

    def observe_resource(self, kind: str, body: Mapping[str, Any]) -> None:
        meta = body.get("metadata") or {}
        labels = (kind, meta.get("namespace") or "", meta.get("name") or "")
        conditions = (body.get("status") or {}).get("conditions") or []
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
        self.ready.labels(*labels).set(1 if ready else 0)
        self.suspended.labels(*labels).set(1 if (body.get("spec") or {}).get("suspend") else 0)

    def forget_resource(self, kind: str, namespace: str, name: str) -> None:
        for gauge in (self.ready, self.suspended):
            with contextlib.suppress(KeyError):
                gauge.remove(kind, namespace, name)

    def app(self, not_ready: Callable[[], str]) -> web.Application:
        """``not_ready()`` says why the operator is not ready ("" when it is). Served on the event loop, so
        a stalled loop does not answer ``/healthz`` (which is what a liveness probe should see)."""

        async def metrics(_request: web.Request) -> web.Response:
            # in a thread (prometheus_client's collection is thread-safe, as its own HTTP server uses it): with a
            # few thousand objects' gauges the text takes ~100 ms to render
            body = await asyncio.to_thread(generate_latest, self.registry)
            return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

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
