"""The API verbs and object semantics, independent of HTTP.

This is where create/update/patch/apply/delete get their Kubernetes meaning: schema validation and
pruning, defaulting, uid/resourceVersion/generation, optimistic concurrency, status subresources,
field ownership, finalizers and deletionTimestamp, namespaces that must exist and may be
terminating, dry runs, and CRDs that change the served types. :mod:`.server` maps HTTP onto it;
:mod:`.controllers` use it the way kube-controller-manager uses a real server.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from . import admission, celrules, fieldmanager, roles, structural
from .errors import ApiError, Cause, already_exists, bad_request, conflict, invalid, not_found
from .kinds import Registry, ResourceType, types_of_crd
from .patching import TestFailed, json_patch, merge_patch, strategic_merge
from .selection import Selection
from .selectors import Matcher
from .state import StateDir
from .store import HISTORY, Event, Key, Obj, Store, Watcher, clone

CRD_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"
CRD_KEY: Key = ("apiextensions.k8s.io", "customresourcedefinitions")
NAMESPACE_KEY: Key = ("", "namespaces")


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class WriteOptions:
    """Query parameters of a write request."""

    manager: str = ""
    dry_run: bool = False
    field_validation: str = "Warn"  # Strict | Warn | Ignore
    force: bool = False
    warnings: list[str] = field(default_factory=list)
    # managedFields of the new object were computed already (server-side apply)
    managed_computed: bool = False


@dataclass
class DeleteOptions:
    propagation: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    dry_run: bool = False


def _spec_part(obj: Obj, rt: ResourceType) -> Obj:
    """What counts for metadata.generation: everything but metadata (and status when separate)."""
    skip = {"metadata", "apiVersion", "kind"}
    if "status" in rt.subresources:
        skip.add("status")
    return {k: v for k, v in obj.items() if k not in skip}


def _tracks_generation(rt: ResourceType) -> bool:
    return rt.custom or "status" in rt.subresources or rt.kind in ("PodDisruptionBudget", "NetworkPolicy")


class ApiServer:
    def __init__(self, history: int = HISTORY, state: StateDir | None = None) -> None:
        self.registry = Registry.with_builtins()
        self.store = Store(history)
        if state is not None and state.restore(self.store):
            for crd in self.store.items(CRD_KEY):
                self.registry.set_crd(crd["metadata"]["name"], types_of_crd(crd))
        else:
            self._bootstrap()
        if state is not None:
            state.record(self.store)
        self.selection = Selection(self.store)  # what Service selectors pick: the endpoints and the network

    def _bootstrap(self) -> None:
        boot = WriteOptions(manager="kube-apiserver")
        for name in ("default", "kube-system", "kube-public", "kube-node-lease"):
            self.create(self.type_of(NAMESPACE_KEY), "", {"metadata": {"name": name}}, boot)
        # The bootstrap ClusterRole charts and operators bind to (upstream creates it at start too).
        everything = [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                      {"nonResourceURLs": ["*"], "verbs": ["*"]}]
        cluster_roles = self.type_of(("rbac.authorization.k8s.io", "clusterroles"))
        self.create(cluster_roles, "",
                    {"metadata": {"name": "cluster-admin", "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}},
                     "rules": everything}, boot)
        for role in roles.bootstrap():  # admin, edit, view (aggregated by the controllers)
            self.create(cluster_roles, "", role, boot)

    # --- lookups ---------------------------------------------------------------------------------

    def type_of(self, key: Key, version: str | None = None) -> ResourceType:
        versions = self.registry.versions_of(*key)
        for rt in versions:
            if version is None or rt.version == version:
                return rt
        raise ApiError("NotFound", f"the server could not find the requested resource ({key})")

    def view(self, obj: Obj, rt: ResourceType) -> Obj:
        """The stored object as the requested version sees it (versions share one storage)."""
        if obj.get("apiVersion") == rt.api_version:
            return obj
        return {**obj, "apiVersion": rt.api_version}

    def get(self, rt: ResourceType, namespace: str, name: str) -> Obj:
        obj = self.store.get(rt.storage_key, namespace, name)
        if obj is None:
            raise not_found(rt.group, rt.plural, name)
        return self.view(obj, rt)

    def list_objects(self, rt: ResourceType, namespace: str | None, labels: Matcher | None,
                     fields: Matcher | None, required: dict[str, str] | None = None) -> tuple[list[Obj], str]:
        """The objects ``labels`` and ``fields`` pick; ``required``: labels they all carry (narrows the scan)."""
        with self.store.lock:
            rv = str(self.store.rv)
            found = [self.view(o, rt) for o in self.store.items(rt.storage_key, namespace, required)
                     if (labels is None or labels(o)) and (fields is None or fields(o))]
        return found, rv

    def watch(self, rt: ResourceType, watcher: Watcher, since: str | None,
              initial: bool) -> tuple[str, list[Event]]:
        """Register a watch. Returns the resourceVersion it starts from and the synthetic ADDED
        events of the current state (sent first) when there is no resourceVersion or ``initial``."""
        since_rv: int | None = None
        if since not in (None, "", "0"):
            try:
                since_rv = int(str(since))
            except ValueError:
                raise bad_request(f'invalid resource version "{since}"') from None
        with self.store.lock:
            current: list[Event] = []
            if since_rv is None or initial:
                current = [Event(int(o["metadata"]["resourceVersion"]), "ADDED", o)
                           for o in self.store.items(rt.storage_key, watcher.namespace) if watcher.matches(o)]
                since_rv = self.store.rv
            if not self.store.watch(rt.storage_key, watcher, since_rv):
                raise ApiError("Expired", f"too old resource version: {since} ({self.store.rv})")
            return str(self.store.rv), current

    # --- writes ----------------------------------------------------------------------------------

    def _namespace_ready(self, rt: ResourceType, namespace: str) -> None:
        if not rt.namespaced:
            return
        if not namespace:
            raise bad_request("the server could not find the requested resource: a namespace is required")
        ns = self.store.get(NAMESPACE_KEY, "", namespace)
        if ns is None:
            raise not_found("", "namespaces", namespace)
        if ns["metadata"].get("deletionTimestamp"):
            raise ApiError("Forbidden", f'{rt.plural} "" is forbidden: unable to create new content in '
                                        f"namespace {namespace} because it is being terminated",
                           {"kind": rt.plural, "group": rt.group,
                            "causes": [{"reason": "NamespaceTerminating", "field": "metadata.namespace",
                                        "message": f"namespace {namespace} is being terminated"}]})

    def _check_body(self, rt: ResourceType, body: Any, namespace: str) -> Obj:
        if not isinstance(body, dict):
            raise bad_request("the body of the request was in an unknown format: expected a JSON object")
        obj: Obj = clone(body)  # validation prunes and defaults in place: never the caller's object
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        if kind and kind != rt.kind:
            raise bad_request(f"the kind in the data ({kind}) does not match the expected kind ({rt.kind})")
        if api_version and api_version.rpartition("/")[0] != rt.group:
            raise bad_request(f"the API version in the data ({api_version}) does not match the expected "
                              f"API version ({rt.api_version})")
        obj["apiVersion"], obj["kind"] = rt.api_version, rt.kind
        meta = obj.get("metadata")
        if meta is None:
            meta = obj["metadata"] = {}
        if not isinstance(meta, dict):
            raise bad_request("metadata must be an object")
        if rt.namespaced:
            if meta.get("namespace") and meta["namespace"] != namespace:
                raise bad_request("the namespace of the provided object does not match the namespace sent "
                                  "on the request")
            meta["namespace"] = namespace
        return obj

    def _validate(self, rt: ResourceType, obj: Obj, opts: WriteOptions, *, partial: bool = False,
                  old: Obj | None = None) -> None:
        """Schema, metadata and kind-specific checks; ``partial`` (an apply configuration) checks only
        what a partial object can show: unknown and mistyped fields."""
        found = structural.check(obj, rt.schema or {}, custom=rt.custom)
        name = obj["metadata"].get("name", "")
        if found.type_errors and not rt.custom:
            first = found.type_errors[0]
            raise bad_request(f"{rt.kind} in version \"{rt.version}\" cannot be handled as a {rt.kind}: "
                              f"{first.field}: {first.message}")
        if found.unknown:
            listed = ", ".join(f'unknown field "{p}"' for p in found.unknown)
            if opts.field_validation == "Strict":
                raise bad_request(f"strict decoding error: {listed}")
            if opts.field_validation == "Warn":
                opts.warnings.extend(f'unknown field "{p}"' for p in found.unknown)
        if partial:
            if found.type_errors:
                raise invalid(rt.kind, rt.group, name, found.type_errors)
            return
        causes = found.type_errors + found.invalid
        if not rt.custom:
            causes += admission.metadata_problems(obj, rt.kind, rt.namespaced)
        else:
            causes += admission.metadata_problems({"metadata": {**obj["metadata"], "labels": obj["metadata"]
                                                   .get("labels")}}, "", rt.namespaced)
            if not causes and rt.schema:  # rules see a valid object only, as upstream's
                causes += celrules.violations(obj, old, rt.schema)
        if rt.storage_key == CRD_KEY:
            causes += _crd_problems(obj)
        if causes:
            raise invalid(rt.kind, rt.group, name, causes)

    def _store(self, rt: ResourceType, old: Obj | None, new: Obj, opts: WriteOptions) -> Obj:
        if opts.dry_run:
            return new
        meta = new["metadata"]
        if old is not None and old["metadata"].get("deletionTimestamp") and _finalized(new):
            gone = self.store.remove(rt.storage_key, new)
            self._after_removal(rt, gone)
            return self.view(gone, rt)
        stored = self.store.put(rt.storage_key, new)
        if rt.storage_key == CRD_KEY:
            self.registry.set_crd(meta["name"], types_of_crd(stored))
        return self.view(stored, rt)

    def _after_removal(self, rt: ResourceType, obj: Obj) -> None:
        if rt.storage_key == CRD_KEY:
            spec = obj.get("spec") or {}
            self.registry.set_crd(obj["metadata"]["name"], [])
            self.store.close_watchers((spec.get("group", ""), (spec.get("names") or {}).get("plural", "")))

    def create(self, rt: ResourceType, namespace: str, body: Any, opts: WriteOptions) -> Obj:
        obj = self._check_body(rt, body, namespace)
        meta = obj["metadata"]
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        if meta.get("resourceVersion"):
            raise bad_request("resourceVersion should not be set on objects to be created")
        self._namespace_ready(rt, namespace)
        if "status" in rt.subresources:
            obj.pop("status", None)
        if not rt.custom:
            admission.apply_defaults(obj, rt.kind, None)
        self._validate(rt, obj, opts)
        with self.store.lock:
            if self.store.get(rt.storage_key, meta.get("namespace", ""), meta["name"]) is not None:
                raise already_exists(rt.group, rt.plural, meta["name"])
            for server_field in ("deletionTimestamp", "deletionGracePeriodSeconds"):
                meta.pop(server_field, None)
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = now()
            if _tracks_generation(rt):
                meta["generation"] = 1
            if rt.storage_key == CRD_KEY:
                _establish(obj)
            if opts.manager:
                fieldmanager.track_update(None, obj, opts.manager, rt.api_version, rt.schema,
                                          skip_status="status" in rt.subresources)
            return self._store(rt, None, obj, opts)

    def _current(self, rt: ResourceType, namespace: str, name: str) -> Obj:
        obj = self.store.get(rt.storage_key, namespace, name)
        if obj is None:
            raise not_found(rt.group, rt.plural, name)
        return obj

    def update(self, rt: ResourceType, namespace: str, name: str, body: Any, opts: WriteOptions,
               subresource: str = "") -> Obj:
        with self.store.lock:
            obj = self._check_body(rt, body, namespace)
            if obj["metadata"].get("name", name) != name:
                raise bad_request("the name of the object does not match the name on the URL")
            obj["metadata"]["name"] = name
            old = self.store.get(rt.storage_key, namespace, name)
            if old is None:
                raise not_found(rt.group, rt.plural, name)
            wanted_rv = obj["metadata"].get("resourceVersion")
            if wanted_rv and wanted_rv != old["metadata"]["resourceVersion"]:
                raise conflict(rt.group, rt.plural, name, "the object has been modified; please apply your "
                                                          "changes to the latest version and try again")
            return self._replace(rt, old, obj, opts, subresource)

    def _replace(self, rt: ResourceType, old: Obj, new: Obj, opts: WriteOptions, subresource: str) -> Obj:
        """Store ``new`` in place of ``old`` with server-owned fields carried over."""
        if subresource == "status":
            new = clone({**old, "status": new.get("status")})
            if new["status"] is None:
                new.pop("status")
        elif "status" in rt.subresources:
            if "status" in old:
                new["status"] = clone(old["status"])
            else:
                new.pop("status", None)
        meta, old_meta = new["metadata"], old["metadata"]
        for server_field in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
                             "generation"):
            if server_field in old_meta:
                meta[server_field] = old_meta[server_field]
            else:
                meta.pop(server_field, None)
        if old_meta.get("deletionTimestamp"):
            added = set(meta.get("finalizers") or []) - set(old_meta.get("finalizers") or [])
            if added:
                raise invalid(rt.kind, rt.group, meta["name"], [Cause(
                    "FieldValueForbidden", "Forbidden: no new finalizers can be added if the object is being "
                                           "deleted", "metadata.finalizers")])
        if not rt.custom:
            admission.apply_defaults(new, rt.kind, old)
            causes = admission.immutable_problems(old, new, rt.kind)
            if causes:
                raise invalid(rt.kind, rt.group, meta["name"], causes)
        self._validate(rt, new, opts, old=old)
        if rt.storage_key == CRD_KEY:
            _establish(new)
        if _tracks_generation(rt) and _spec_part(old, rt) != _spec_part(new, rt):
            meta["generation"] = int(old_meta.get("generation", 1)) + 1
        # managedFields the request sets (a non-empty list other than the stored one) replace those stored, as upstream
        requested, base = meta.get("managedFields"), old
        if not opts.managed_computed and requested and requested != old_meta.get("managedFields"):
            base = {**old, "metadata": {**old_meta, "managedFields": requested}}
        if opts.manager:
            fieldmanager.track_update(base, new, opts.manager, rt.api_version, rt.schema,
                                      skip_status="status" in rt.subresources)
        elif not opts.managed_computed:
            meta["managedFields"] = base["metadata"].get("managedFields")
            if meta["managedFields"] is None:
                meta.pop("managedFields")
        meta["resourceVersion"] = old_meta["resourceVersion"]
        if new == old:
            return self.view(old, rt)  # a no-op write does not bump resourceVersion, as upstream
        return self._store(rt, old, new, opts)

    def patch(self, rt: ResourceType, namespace: str, name: str, patch_type: str, body: Any,
              opts: WriteOptions, subresource: str = "") -> Obj:
        if patch_type == "apply":
            return self.apply(rt, namespace, name, body, opts, subresource)
        with self.store.lock:
            old = self._current(rt, namespace, name)
            current = self.view(old, rt)
            if patch_type == "json":
                try:
                    patched = json_patch(current, body)
                except TestFailed as failed:
                    raise ApiError("Invalid", f"the server rejected our request due to an error in our "
                                              f"request: testing value {failed.path} failed", {}) from None
            elif patch_type == "merge":
                if not isinstance(body, dict):
                    raise bad_request("merge patch must be a JSON object")
                patched = merge_patch(current, body)
            elif patch_type == "strategic":
                if rt.custom:
                    raise ApiError("UnsupportedMediaType", "the body of the request was in an unknown format - "
                                   "accepted media types include: application/json-patch+json, "
                                   "application/merge-patch+json, application/apply-patch+yaml")
                if not isinstance(body, dict):
                    raise bad_request("strategic merge patch must be a JSON object")
                patched = strategic_merge(current, body, rt.schema)
            else:
                raise ApiError("UnsupportedMediaType", f"unsupported patch type {patch_type}")
            if not isinstance(patched, dict):
                raise bad_request("the patch did not result in an object")
            wanted_rv = (patched.get("metadata") or {}).get("resourceVersion")
            if wanted_rv and wanted_rv != old["metadata"]["resourceVersion"]:
                raise conflict(rt.group, rt.plural, name, "the object has been modified; please apply your "
                                                          "changes to the latest version and try again")
            new = self._check_body(rt, patched, namespace)
            new["metadata"]["name"] = name
            return self._replace(rt, old, new, opts, subresource)

    def apply(self, rt: ResourceType, namespace: str, name: str, body: Any, opts: WriteOptions,
              subresource: str = "") -> Obj:
        if not opts.manager:
            raise bad_request("PATCH, application/apply-patch+yaml requires fieldManager to be set")
        cfg = self._check_body(rt, body, namespace)
        if cfg["metadata"].get("name", name) != name:
            raise bad_request("the name of the object does not match the name on the URL")
        cfg["metadata"]["name"] = name
        self._validate(rt, clone(cfg), opts, partial=True)
        with self.store.lock:
            old = self.store.get(rt.storage_key, namespace, name)
            skip_status = "status" in rt.subresources and subresource != "status"
            merged = fieldmanager.apply(self.view(old, rt) if old else None, cfg, opts.manager,
                                        rt.api_version, rt.schema, force=opts.force, skip_status=skip_status)
            # Unknown fields were reported above; the merged object is checked in full below.
            quiet = WriteOptions(dry_run=opts.dry_run, field_validation="Ignore", managed_computed=True)
            if old is None:
                return self.create(rt, namespace, merged, quiet)
            return self._replace(rt, old, merged, quiet, subresource)

    # --- scale subresource -------------------------------------------------------------------------

    def _scale_paths(self, rt: ResourceType) -> tuple[str, str, str]:
        """(spec replicas, status replicas, label selector) paths, dotted, for the scale subresource."""
        if not rt.custom:
            return "spec.replicas", "status.replicas", ""
        crd = self.store.get(CRD_KEY, "", f"{rt.plural}.{rt.group}") or {}
        for version in (crd.get("spec") or {}).get("versions", []):
            scale = ((version.get("subresources") or {}).get("scale") or {})
            if version.get("name") == rt.version and scale:
                return (scale.get("specReplicasPath", ".spec.replicas").lstrip("."),
                        scale.get("statusReplicasPath", ".status.replicas").lstrip("."),
                        scale.get("labelSelectorPath", "").lstrip("."))
        raise ApiError("NotFound", "the server could not find the requested resource")

    def get_scale(self, rt: ResourceType, namespace: str, name: str) -> Obj:
        obj = self._current(rt, namespace, name)
        spec_path, status_path, selector_path = self._scale_paths(rt)
        meta = obj["metadata"]
        selector = _dig(obj, selector_path) if selector_path else None
        if selector is None and not rt.custom:
            labels = ((obj.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
            selector = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
        status: dict[str, Any] = {"replicas": _dig(obj, status_path) or 0}
        if selector:
            status["selector"] = selector
        return {"kind": "Scale", "apiVersion": "autoscaling/v1",
                "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion",
                                                  "creationTimestamp") if k in meta},
                "spec": {"replicas": _dig(obj, spec_path) or 0}, "status": status}

    def set_scale(self, rt: ResourceType, namespace: str, name: str, scale: Any, opts: WriteOptions) -> Obj:
        if not isinstance(scale, dict) or not isinstance((scale.get("spec") or {}).get("replicas"), int):
            raise bad_request("a Scale with spec.replicas (an integer) is required")
        with self.store.lock:
            old = self._current(rt, namespace, name)
            wanted_rv = (scale.get("metadata") or {}).get("resourceVersion")
            if wanted_rv and wanted_rv != old["metadata"]["resourceVersion"]:
                raise conflict(rt.group, rt.plural, name, "the object has been modified; please apply your "
                                                          "changes to the latest version and try again")
            new = clone(old)
            spec_path = self._scale_paths(rt)[0].split(".")
            node = new
            for part in spec_path[:-1]:
                node = node.setdefault(part, {})
            node[spec_path[-1]] = scale["spec"]["replicas"]
            self._replace(rt, old, new, opts, "")
        return self.get_scale(rt, namespace, name)

    # --- deletion --------------------------------------------------------------------------------

    def delete(self, rt: ResourceType, namespace: str, name: str, options: DeleteOptions) -> tuple[Obj, bool]:
        """Delete or mark for deletion; returns (object, deleted now)."""
        with self.store.lock:
            old = self._current(rt, namespace, name)
            meta = old["metadata"]
            if options.uid and options.uid != meta.get("uid"):
                raise conflict(rt.group, rt.plural, name, f"Precondition failed: UID in precondition: "
                                                          f"{options.uid}, UID in object meta: {meta.get('uid')}")
            if options.resource_version and options.resource_version != meta.get("resourceVersion"):
                raise conflict(rt.group, rt.plural, name, f"Precondition failed: ResourceVersion in "
                               f"precondition: {options.resource_version}, ResourceVersion in object meta: "
                               f"{meta.get('resourceVersion')}")
            new = {**old, "metadata": {**meta}}  # only what is set below changes: the rest is shared
            finalizers = list(meta.get("finalizers") or [])
            if options.propagation == "Foreground" and "foregroundDeletion" not in finalizers:
                finalizers.append("foregroundDeletion")
            elif options.propagation == "Orphan" and "orphan" not in finalizers:
                finalizers.append("orphan")
            if rt.storage_key == CRD_KEY and CRD_FINALIZER not in finalizers and not meta.get(
                    "deletionTimestamp"):
                finalizers.append(CRD_FINALIZER)
            terminating_ns = rt.storage_key == NAMESPACE_KEY and (old.get("spec") or {}).get("finalizers")
            if not finalizers and not terminating_ns:
                if options.dry_run:
                    return self.view(old, rt), True
                gone = self.store.remove(rt.storage_key, old)
                self._after_removal(rt, gone)
                return self.view(gone, rt), True
            if meta.get("deletionTimestamp") and finalizers == list(meta.get("finalizers") or []):
                return self.view(old, rt), False
            new["metadata"]["finalizers"] = finalizers
            new["metadata"].setdefault("deletionTimestamp", now())
            new["metadata"].setdefault("deletionGracePeriodSeconds", 0)
            if "generation" in meta and not meta.get("deletionTimestamp"):
                new["metadata"]["generation"] = int(meta["generation"]) + 1
            if terminating_ns:
                new["status"] = {**(old.get("status") or {}), "phase": "Terminating"}
            if not new["metadata"]["finalizers"]:
                new["metadata"].pop("finalizers")
            if options.dry_run:
                return self.view(new, rt), False
            return self.view(self.store.put(rt.storage_key, new), rt), False

    def finish_namespace(self, name: str) -> None:
        """The namespace controller's last step: clear spec.finalizers so the namespace goes."""
        with self.store.lock:
            ns = self.store.get(NAMESPACE_KEY, "", name)
            if ns is None:
                return
            new = {**ns, "metadata": {**ns["metadata"]}, "spec": {**(ns.get("spec") or {}), "finalizers": []}}
            if new["metadata"].get("finalizers"):
                self.store.put(NAMESPACE_KEY, new)
            else:
                self.store.remove(NAMESPACE_KEY, new)

    def remove_finalizer(self, rt: ResourceType, obj: Obj, finalizer: str) -> None:
        """What a controller does when its cleanup is done (GC, CRD cleanup)."""
        meta = obj["metadata"]
        with self.store.lock:
            current = self.store.get(rt.storage_key, meta.get("namespace", ""), meta["name"])
            if current is None or finalizer not in (current["metadata"].get("finalizers") or []):
                return
            kept = [f for f in current["metadata"]["finalizers"] if f != finalizer]
            new = {**current, "metadata": {**current["metadata"], "finalizers": kept}}
            self._store(rt, current, new, WriteOptions())

    def write_status(self, rt: ResourceType, obj: Obj, status: dict[str, Any]) -> None:
        """A controller's status update: no validation, no ownership change, skipped when unchanged."""
        meta = obj["metadata"]
        with self.store.lock:
            current = self.store.get(rt.storage_key, meta.get("namespace", ""), meta["name"])
            if current is None or current.get("status") == status:
                return
            # The store sets a new resourceVersion in the metadata: a copy of it; the rest is shared.
            self.store.put(rt.storage_key, {**current, "metadata": {**current["metadata"]}, "status": status})


def _dig(obj: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        obj = obj.get(part) if isinstance(obj, dict) else None
    return obj


def _finalized(obj: Obj) -> bool:
    """Nothing holds the object back any more (a namespace also waits for its spec.finalizers)."""
    if obj["metadata"].get("finalizers"):
        return False
    return not (obj.get("kind") == "Namespace" and (obj.get("spec") or {}).get("finalizers"))


def _establish(crd: Obj) -> None:
    """A CRD is served as soon as it is stored: report that as its status conditions."""
    spec = crd.get("spec") or {}
    stamp = now()
    previous = {c.get("type"): c for c in (crd.get("status") or {}).get("conditions") or []}

    def condition(kind: str, reason: str, message: str) -> dict[str, str]:
        since = previous.get(kind, {}).get("lastTransitionTime", stamp)
        return {"type": kind, "status": "True", "reason": reason, "message": message,
                "lastTransitionTime": since}

    crd["status"] = {
        "acceptedNames": spec.get("names", {}),
        "conditions": [condition("NamesAccepted", "NoConflicts", "no conflicts found"),
                       condition("Established", "InitialNamesAccepted",
                                 "the initial names have been accepted")],
        "storedVersions": sorted({v["name"] for v in spec.get("versions", []) if v.get("storage")}),
    }


def _crd_problems(crd: Obj) -> list[Cause]:
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    causes = []
    expected = f"{names.get('plural', '')}.{spec.get('group', '')}"
    if crd["metadata"].get("name") != expected:
        causes.append(Cause("FieldValueInvalid", f'Invalid value: "{crd["metadata"].get("name")}": must be '
                            f"spec.names.plural+\".\"+spec.group", "metadata.name"))
    versions = spec.get("versions") or []
    if sum(1 for v in versions if v.get("storage")) != 1:
        causes.append(Cause("FieldValueInvalid", "Invalid value: must have exactly one version marked as "
                            "storage version", "spec.versions"))
    for i, version in enumerate(versions):
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        if schema is not None and schema.get("type") != "object":
            causes.append(Cause("FieldValueRequired", "Required value: must be object at the root",
                                f"spec.versions[{i}].schema.openAPIV3Schema.type"))
        if isinstance(schema, dict):
            causes += celrules.compile_problems(schema, f"spec.versions[{i}].schema.openAPIV3Schema")
        for j, column in enumerate(version.get("additionalPrinterColumns") or []):
            if not str(column.get("jsonPath", "")).startswith("."):
                causes.append(Cause("FieldValueInvalid", "Invalid value: must be a simple json path starting "
                                    "with .", f"spec.versions[{i}].additionalPrinterColumns[{j}].jsonPath"))
    return causes


def parse_body(raw: bytes, content_type: str) -> Any:
    """JSON or YAML (apply patches) request bodies; protobuf is decoded in :mod:`.protobuf`."""
    import yaml

    if not raw:
        return None
    try:
        if "yaml" in content_type:
            if raw.lstrip()[:1] == b"{":  # kubectl and most clients send apply patches as JSON, a YAML subset
                try:
                    return json.loads(raw)
                except ValueError:
                    pass  # YAML in flow style: the YAML parser says what it makes of it
            return yaml.load(raw, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        return json.loads(raw)
    except (ValueError, yaml.YAMLError) as exc:
        kind = "YAML" if "yaml" in content_type else "JSON"
        raise bad_request(f"the body of the request was in an unknown format: invalid {kind}: {exc}") from exc
