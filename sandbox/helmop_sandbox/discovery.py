"""Discovery documents: the legacy ones (``APIGroupList``, ``APIResourceList`` per group version) and
the aggregated ``apidiscovery.k8s.io/v2`` list kube-apiserver serves since 1.30 to a client that asks for
it in ``Accept``.

Without the aggregated form, client-go (helm, kubectl) fetches every group version on its own, in
parallel and over HTTP/1.1, so every helm process opened ~20 TLS connections to the sandbox where a real
API server answers two requests: every figure measured against the sandbox paid for that.
"""

from __future__ import annotations

from typing import Any

from . import reviews
from .kinds import Registry

AGGREGATED_VERSIONS = ("v2", "v2beta1")  # what kube-apiserver 1.35 serves, the GA version preferred


def group_versions(registry: Registry) -> dict[str, list[str]]:
    """group -> versions, preferred first, in kube-apiserver's order; the review-only groups included."""
    served = registry.group_versions()
    for group, version in reviews.DISCOVERY:
        served.setdefault(group, [version])
    return served


def group_list(registry: Registry) -> dict[str, Any]:
    groups = []
    for group, versions in group_versions(registry).items():
        if not group:
            continue
        entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        groups.append({"name": group, "versions": entries, "preferredVersion": entries[0]})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def resources(registry: Registry, group: str, version: str) -> list[dict[str, Any]] | None:
    """The APIResource entries of a group version (subresources as ``plural/sub``); None if not served."""
    types = [rt for rt in registry.all() if rt.group == group and rt.version == version]
    virtual = reviews.DISCOVERY.get((group, version), [])
    if not types and not virtual:
        return None
    entries = [entry for rt in sorted(types, key=lambda r: r.plural) for entry in rt.discovery()]
    return sorted(entries + virtual, key=lambda e: str(e["name"]))


def resource_list(registry: Registry, group: str, version: str) -> dict[str, Any] | None:
    entries = resources(registry, group, version)
    if entries is None:
        return None
    return {"kind": "APIResourceList", "apiVersion": "v1",
            "groupVersion": f"{group}/{version}" if group else version, "resources": entries}


def aggregated_version(accept: str) -> str | None:
    """The aggregated discovery version ``Accept`` asks for before anything else it accepts, or None (the
    legacy documents). Media types are taken in the client's order, as client-go lists them."""
    for media in accept.split(","):
        base, *params = (part.strip() for part in media.split(";"))
        if base not in ("application/json", "*/*", "application/*"):
            continue
        options = dict(p.partition("=")[::2] for p in params)
        if options.get("g") != "apidiscovery.k8s.io" or options.get("as") != "APIGroupDiscoveryList":
            return None  # plain JSON comes first: the legacy document
        if options.get("v") in AGGREGATED_VERSIONS:
            return options["v"]
    return None


def media_type(version: str) -> str:
    return f"application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList"


def aggregated(registry: Registry, version: str, *, core: bool) -> dict[str, Any]:
    """The ``APIGroupDiscoveryList`` of ``/api`` (``core``) or of ``/apis``."""
    items = []
    for group, versions in group_versions(registry).items():
        if (group == "") != core:
            continue
        items.append({"metadata": {"name": group} if group else {},
                      "versions": [{"version": v, "resources": _aggregated_resources(registry, group, v),
                                    "freshness": "Current"} for v in versions]})
    return {"kind": "APIGroupDiscoveryList", "apiVersion": f"apidiscovery.k8s.io/{version}", "metadata": {},
            "items": items}


def _aggregated_resources(registry: Registry, group: str, version: str) -> list[dict[str, Any]]:
    entries = resources(registry, group, version) or []
    out: list[dict[str, Any]] = []
    by_name: dict[str, dict[str, Any]] = {}
    for entry in entries:
        main, _, sub = str(entry["name"]).partition("/")
        # a response kind in the resource's own group version leaves group and version empty, as upstream
        kind = {"group": entry.get("group", ""), "version": entry.get("version", ""), "kind": entry["kind"]}
        if sub:
            parent = by_name.get(main)
            if parent is not None:
                parent.setdefault("subresources", []).append(
                    {"subresource": sub, "responseKind": kind, "verbs": list(entry["verbs"])})
            continue
        resource: dict[str, Any] = {"resource": main, "responseKind": kind,
                                    "scope": "Namespaced" if entry["namespaced"] else "Cluster",
                                    "singularResource": entry.get("singularName", ""), "verbs": list(entry["verbs"])}
        for field in ("shortNames", "categories"):
            if entry.get(field):
                resource[field] = list(entry[field])
        by_name[main] = resource
        out.append(resource)
    return out
