"""App kinds (generic ones from an apps file, and Jenkins): each resource owns a generated
HelmRelease and mirrors its conditions, so install/upgrade/no-op/uninstall, retries and errors are
exactly the HelmRelease machinery's, not a copy of it.
"""

from __future__ import annotations

import asyncio
import copy
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from helmop.api import conditions as cond
from helmop.api import jenkins
from helmop.api.apps import AppKind
from helmop.api.helmrelease import GROUP, PLURAL, VERSION, SpecError
from helmop.helm.values import merge

from .context import Context
from .helmreleases import REQUESTED_AT
from .inputs import InputError
from .kube import KubeError

MANAGER = "helmop-apps"
# values, extra status fields — or SpecError / InputError
Prepare = Callable[[Context, dict[str, Any]], Awaitable[tuple[dict[str, Any], dict[str, Any]]]]


@dataclass
class App:
    kind: AppKind
    prepare: Prepare

    def path(self, namespace: str, name: str) -> str:
        return f"/apis/{self.kind.group}/{self.kind.version}/namespaces/{namespace}/{self.kind.plural}/{name}"


def generic_app(kind: AppKind) -> App:
    async def prepare(_ctx: Context, body: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        return merge(dict(body.get("spec") or {}), kind.override_values), {}

    return App(kind, prepare)


def jenkins_app(default_chart: dict[str, Any]) -> App:
    kind = AppKind(jenkins.GROUP, jenkins.VERSION, jenkins.KIND, jenkins.PLURAL, default_chart)

    async def prepare(ctx: Context, body: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        meta, spec = body["metadata"], body.get("spec") or {}
        ref = spec.get("adminSecretRef") or {}
        user_key = str(ref.get("userKey") or "jenkins-admin-user")
        password_key = str(ref.get("passwordKey") or "jenkins-admin-password")
        secret_name = str(ref.get("name") or f"{meta['name']}-admin")
        path = f"/api/v1/namespaces/{meta['namespace']}/secrets/{secret_name}"
        secret = await ctx.kube.get(path)
        if ref:
            if secret is None:
                raise InputError("AdminSecretNotFound", f"Secret {meta['namespace']}/{secret_name} named in "
                                                        "spec.adminSecretRef does not exist", transient=True)
            missing = [k for k in (user_key, password_key) if k not in (secret.get("data") or {})]
            if missing:
                raise InputError("AdminSecretInvalid", f"Secret {meta['namespace']}/{secret_name} lacks the "
                                                       f"key(s) {', '.join(missing)}", transient=True)
        elif secret is None:
            await ctx.kube.request("POST", f"/api/v1/namespaces/{meta['namespace']}/secrets", {
                "apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": secret_name, "labels": {jenkins.PROJECT_LABEL: str(spec.get("project", ""))},
                             "ownerReferences": [_owner(body)]},
                "type": "Opaque",
                "stringData": {user_key: "admin", password_key: secrets.token_urlsafe(24)}})
        values = jenkins.jenkins_values(meta["name"], spec, secret_name, user_key, password_key)
        values = merge(values, spec.get("values") or {})
        return values, {"adminSecret": secret_name, "url": jenkins.url(meta["name"], meta["namespace"], spec)}

    return App(kind, prepare)


def _owner(body: dict[str, Any]) -> dict[str, Any]:
    meta = body["metadata"]
    return {"apiVersion": body["apiVersion"], "kind": body["kind"], "name": meta["name"], "uid": meta["uid"],
            "controller": True, "blockOwnerDeletion": True}


def _hr_path(namespace: str, name: str) -> str:
    return f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}/{name}"


class AppController:
    def __init__(self, ctx: Context, app: App) -> None:
        self.ctx = ctx
        self.app = app

    async def reconcile(self, body: dict[str, Any]) -> float | None:
        meta, spec = body["metadata"], body.get("spec") or {}
        namespace, name = meta["namespace"], meta["name"]
        kind = self.app.kind
        status = copy.deepcopy(body.get("status") or {})
        try:
            values, extra = await self.app.prepare(self.ctx, body)
        except (SpecError, InputError) as exc:
            transient = getattr(exc, "transient", False)
            await self._report(body, status, False, exc.reason, str(exc), stalled=not transient)
            return 15.0 if transient else None
        hr_name = kind.release_object_name(name)
        chart = spec.get("chart") if kind.kind == jenkins.KIND and spec.get("chart") else kind.chart
        release = {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "HelmRelease",
            "metadata": {"name": hr_name, "namespace": namespace, "ownerReferences": [_owner(body)],
                         "labels": {"helmop.dev/app-kind": kind.kind.lower(), "helmop.dev/app-name": name},
                         # a reconcile asked of the app is asked of its release
                         "annotations": {REQUESTED_AT: requested} if (requested := (meta.get("annotations")
                                                                                    or {}).get(REQUESTED_AT))
                         else {}},
            "spec": {"releaseName": name, "chart": chart, "values": values,
                     "interval": str(spec.get("interval") or kind.interval) if kind.kind == jenkins.KIND
                     else kind.interval, "suspend": bool(spec.get("suspend", False)) if kind.kind == jenkins.KIND
                     else False},
        }
        self.ctx.refer((kind.kind, namespace, name), [(namespace, "HelmRelease", hr_name)])
        try:
            await self.ctx.kube.apply(_hr_path(namespace, hr_name), release, MANAGER)
        except KubeError as exc:
            await self._report(body, status, False, "HelmReleaseRejected", exc.message, stalled=exc.status == 422)
            return None if exc.status == 422 else 15.0
        live = await self.ctx.kube.get(_hr_path(namespace, hr_name)) or {}
        await self._mirror(body, status, live, extra)
        return None

    async def _mirror(self, body: dict[str, Any], status: dict[str, Any], hr: dict[str, Any],
                      extra: dict[str, Any]) -> None:
        hr_status = hr.get("status") or {}
        current = hr_status.get("observedGeneration") == (hr.get("metadata") or {}).get("generation")
        generation = body["metadata"].get("generation", 0)
        conditions: list[dict[str, Any]] = []
        for c in hr_status.get("conditions") or []:
            conditions = cond.set_condition(conditions, c["type"], c.get("status") == "True", c.get("reason", ""),
                                            c.get("message", ""), generation, c.get("lastTransitionTime"))
        ready = cond.get_condition(conditions, cond.READY)
        if not current or ready is None:
            conditions = cond.set_condition(conditions, cond.READY, False, "Progressing",
                                            "waiting for the HelmRelease to be reconciled", generation)
        history = hr_status.get("history") or [{}]
        if hr_status.get("lastHandledReconcileAt"):
            status["lastHandledReconcileAt"] = hr_status["lastHandledReconcileAt"]
        status.update(extra, conditions=conditions, observedGeneration=generation,
                      helmRelease=hr["metadata"]["name"] if hr else "", releaseName=body["metadata"]["name"],
                      revision=history[0].get("revision", 0), chartVersion=hr_status.get("lastAppliedRevision", ""))
        await self._write(body, status)

    async def _report(self, body: dict[str, Any], status: dict[str, Any], ready: bool, reason: str, message: str,
                      *, stalled: bool) -> None:
        generation = body["metadata"].get("generation", 0)
        conditions = cond.set_condition(status.get("conditions") or [], cond.READY, ready, reason, message,
                                        generation)
        if stalled:
            conditions = cond.set_condition(conditions, cond.STALLED, True, reason, message, generation)
        await self._write(body, {**status, "conditions": conditions, "observedGeneration": generation})
        await self.ctx.events.warning(body, reason, message)

    async def _write(self, body: dict[str, Any], status: dict[str, Any]) -> None:
        if status == body.get("status"):
            return
        meta = body["metadata"]
        try:
            await self.ctx.kube.merge_patch(self.app.path(meta["namespace"], meta["name"]) + "/status",
                                            {"status": status})
        except KubeError as exc:
            if exc.status != 404:
                raise
        body["status"] = status

    async def finalize(self, body: dict[str, Any]) -> bool:
        """Delete the owned HelmRelease and wait for its uninstall, so the app goes last."""
        meta = body["metadata"]
        path = _hr_path(meta["namespace"], self.app.kind.release_object_name(meta["name"]))
        self.ctx.drop((self.app.kind.kind, meta["namespace"], meta["name"]))
        try:
            await self.ctx.kube.request("DELETE", path)
        except KubeError as exc:
            if exc.status != 404:
                return False
        for _ in range(600):
            if await self.ctx.kube.get(path) is None:
                return True
            await asyncio.sleep(0.5)
        return False
