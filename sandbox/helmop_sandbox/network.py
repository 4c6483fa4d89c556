"""What answers for a webhook named by a Service (admission webhooks, CRD conversion webhooks).

The sandbox has no cluster network and runs no webhook server, yet it reports Deployments (and the other
workloads) Ready without Pods, and charts ship webhooks served by their own Deployment (ingress-nginx,
cert-manager, kyverno, prometheus-operator). Consistently with that readiness, a Service that selects a
workload the sandbox reports Ready (:func:`.endpoints.backends`) answers: the sandbox takes the webhook as
having allowed the request without changes (a conversion webhook: the stored object served as it is), says
so in a ``Warning`` to the client, and logs it (logger ``helmop_sandbox.network``, at INFO). A Service that
selects nothing Ready fails as kube-apiserver's endpoint resolver fails (``no endpoints available for
service "x"``), and so do a missing Service or port. With ``cluster_network=False``
(``--no-cluster-network``) no Service is reachable at all, as the sandbox had it before.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from .endpoints import backends
from .selection import SERVICES, Selection
from .store import Store

log = logging.getLogger(__name__)


class Unreachable(Exception):
    """A webhook's Service cannot be called; the message is what kube-apiserver's HTTP client reports."""


@dataclass
class Network:
    store: Store
    selection: Selection
    enabled: bool = True  # False: no Service answers ("the sandbox has no cluster network")

    def reach(self, service: dict[str, Any], timeout: int) -> str:
        """Who answers for ``service`` (a webhook's ``clientConfig.service``), e.g. "service ns/hook selects
        Deployment hook"; raises :class:`Unreachable` worded as kube-apiserver's client, which POSTs to the
        URL below (``timeout``: the webhook's, in seconds)."""
        name, namespace, port = str(service.get("name", "")), str(service.get("namespace", "")), \
            int(service.get("port") or 443)
        url = f'https://{name}.{namespace}.svc:{port}{service.get("path") or "/"}?timeout={timeout}s'
        if not self.enabled:
            raise Unreachable(f'Post "{url}": the sandbox has no cluster network: services are not reachable')
        found = self.store.get(SERVICES, namespace, name)
        if found is None:
            raise Unreachable(f'Post "{url}": service "{name}" not found')
        spec = found.get("spec") or {}
        served = next((p for p in spec.get("ports") or [] if p.get("port") == port), None)
        if served is None:
            raise Unreachable(f'Post "{url}": no service port {port} found for service "{name}"')
        if spec.get("type", "ClusterIP") not in ("ClusterIP", "NodePort", "LoadBalancer"):
            raise Unreachable(f'Post "{url}": unsupported service type "{spec.get("type")}"')
        ready = [b for b in backends(self.selection, found)
                 if b.ready and any(p[0] == served.get("name", "") for p in b.ports)]
        if not ready:
            raise Unreachable(f'Post "{url}": no endpoints available for service "{name}"')
        return f"service {namespace}/{name} selects {ready[0].owner}, which the sandbox reports Ready"

    @staticmethod
    def not_run(webhook: str, answered_by: str, outcome: str) -> str:
        """The warning for a webhook the sandbox answered for without running it; logged too (the audit)."""
        text = f"the sandbox did not run {webhook} ({answered_by}): {outcome}"
        log.info("%s", text)
        return text
