"""PersistentVolumes as a cluster with a default dynamic StorageClass provides them (kind's local-path).

The default class ``standard`` (provisioner ``rancher.io/local-path``, reclaim policy ``Delete``) is there
from the start. A claim naming no class gets it; a claim of a class that exists gets a volume of its own,
``pvc-<claim uid>``, bound both ways (the volume's ``claimRef``, the claim's ``volumeName``), with the class's
reclaim policy. A claim that names a volume (``spec.volumeName``: re-attaching a kept one) is bound to it when
the volume is free for it: no ``claimRef``, or one naming this claim. When a claim is deleted, its volume is
deleted with it (``Delete``) or kept as ``Released`` (``Retain``), as the persistent-volume controller does.
One difference, said here: kind's class binds when a Pod first uses the claim (``WaitForFirstConsumer``);
the sandbox binds at once, so a chart's lone claim does not hold ``helm --wait``.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from .apiserver import DeleteOptions
from .errors import ApiError

if TYPE_CHECKING:
    from .controllers import Controllers

Obj = dict[str, Any]
CLAIMS, VOLUMES = ("", "persistentvolumeclaims"), ("", "persistentvolumes")
CLASSES = ("storage.k8s.io", "storageclasses")
DEFAULT_CLASS = "standard"
PROVISIONER = "rancher.io/local-path"
DEFAULT_ANNOTATION = "storageclass.kubernetes.io/is-default-class"


class Volumes:
    def __init__(self, controllers: Controllers) -> None:
        self.controllers = controllers
        self.api = controllers.api

    def default_class(self) -> None:
        """The cluster's default StorageClass, as kind installs it."""
        if self.api.store.get(CLASSES, "", DEFAULT_CLASS) is None:
            self.api.create(self.api.type_of(CLASSES), "", {
                "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                "metadata": {"name": DEFAULT_CLASS, "annotations": {DEFAULT_ANNOTATION: "true"}},
                "provisioner": PROVISIONER, "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate"},
                self.controllers.manager)

    def claim(self, obj: Obj) -> None:
        """Bind a claim: to the volume it names, or to a new one of its class."""
        meta, spec = obj["metadata"], obj.get("spec") or {}
        if (obj.get("status") or {}).get("phase") == "Bound":
            return
        name = spec.get("volumeName")
        volume = self.api.store.get(VOLUMES, "", name) if name else self._provision(obj)
        if volume is None or not self._free_for(volume, obj):
            self._set_claim_status(obj, {"phase": "Pending"})
            return
        volume = self._bind_volume(volume, obj)
        if not name:
            claims = self.api.type_of(CLAIMS)
            annotations = {**(meta.get("annotations") or {}), "pv.kubernetes.io/bind-completed": "yes",
                           "pv.kubernetes.io/bound-by-controller": "yes"}
            obj = self.api.update(claims, meta["namespace"], meta["name"], {
                **obj, "metadata": {**meta, "annotations": annotations},
                "spec": {**spec, "volumeName": volume["metadata"]["name"]}}, self.controllers.manager)
        self._set_claim_status(obj, {"phase": "Bound", "accessModes": volume["spec"].get("accessModes", []),
                                     "capacity": volume["spec"].get("capacity", {})})

    def released(self, claim: Obj) -> None:
        """A deleted claim's volume: deleted with it, or kept Released, by its reclaim policy."""
        name = str((claim.get("spec") or {}).get("volumeName") or "")
        volume = self.api.store.get(VOLUMES, "", name) if name else None
        if volume is None or ((volume.get("spec") or {}).get("claimRef") or {}).get("uid") != claim["metadata"]["uid"]:
            return
        volumes = self.api.type_of(VOLUMES)
        if volume["spec"].get("persistentVolumeReclaimPolicy", "Retain") == "Delete":
            with contextlib.suppress(ApiError):
                self.api.delete(volumes, "", name, DeleteOptions())
        else:
            self.controllers.write_status(volumes, volume, {"phase": "Released"})

    def _provision(self, claim: Obj) -> Obj | None:
        spec, meta = claim.get("spec") or {}, claim["metadata"]
        class_name = spec.get("storageClassName", DEFAULT_CLASS)
        storage_class = self.api.store.get(CLASSES, "", class_name) if class_name else None
        if storage_class is None:
            return None  # no such class (or "": only a volume made by hand): the claim waits
        name = f"pvc-{meta['uid']}"
        existing = self.api.store.get(VOLUMES, "", name)
        if existing is not None:
            return existing
        size = ((spec.get("resources") or {}).get("requests") or {}).get("storage", "1Gi")
        return self.api.create(self.api.type_of(VOLUMES), "", {
            "apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": name, "annotations": {"pv.kubernetes.io/provisioned-by": PROVISIONER}},
            "spec": {"capacity": {"storage": size}, "accessModes": spec.get("accessModes", ["ReadWriteOnce"]),
                     "persistentVolumeReclaimPolicy": storage_class.get("reclaimPolicy", "Delete"),
                     "storageClassName": class_name, "volumeMode": spec.get("volumeMode", "Filesystem"),
                     "hostPath": {"path": f"/var/local-path-provisioner/{name}_{meta['namespace']}_{meta['name']}",
                                  "type": "DirectoryOrCreate"}}},
            self.controllers.manager)

    @staticmethod
    def _free_for(volume: Obj, claim: Obj) -> bool:
        ref = (volume.get("spec") or {}).get("claimRef") or {}
        meta = claim["metadata"]
        if not ref:
            return True
        return ref.get("namespace") == meta["namespace"] and ref.get("name") == meta["name"] and \
            ref.get("uid") in (None, "", meta["uid"])

    def _bind_volume(self, volume: Obj, claim: Obj) -> Obj:
        meta = claim["metadata"]
        ref = {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": meta["namespace"],
               "name": meta["name"], "uid": meta["uid"], "resourceVersion": meta.get("resourceVersion", "")}
        volumes = self.api.type_of(VOLUMES)
        if (volume.get("spec") or {}).get("claimRef") != ref:
            volume = self.api.update(volumes, "", volume["metadata"]["name"],
                                     {**volume, "spec": {**volume["spec"], "claimRef": ref}}, self.controllers.manager)
        self.controllers.write_status(volumes, volume, {"phase": "Bound"})
        return volume

    def _set_claim_status(self, claim: Obj, status: dict[str, Any]) -> None:
        if {k: v for k, v in (claim.get("status") or {}).items() if k in status} != status:
            self.controllers.write_status(self.api.type_of(CLAIMS), claim, status)
