"""App kinds (generic ones from an apps file, and Jenkins): each resource owns a generated
HelmRelease and mirrors its conditions, so install/upgrade/no-op/uninstall, retries and errors are
exactly the HelmRelease machinery's, not a copy of it. The mapping from an app's spec to the
HelmRelease's is helm.apps.release_spec, shared with ``helmop render`` and ``helmop diff``.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from helmop.api import jenkins
from helmop.api.apps import AppKind
from helmop.api.errors import SpecError
from helmop.api.kinds import HELMRELEASE, REQUESTED_AT
from helmop.api.objects import Resource
from helmop.api.status import parse
from helmop.api.status.app import AppStatus
from helmop.api.status.helmrelease import HelmReleaseStatus
from helmop.decisions.settle import app as settle
from helmop.helm.apps import release_spec
from helmop.helm.inputs import InputError
from helmop.infra.kube import KubeError

from .context import Context
from .outcome import DONE, FAILED, Outcome, after
from .status import report, requested, write_status

MANAGER = "helmop-apps"
# The app's own status fields (settle.app.mirrored says which) — or SpecError / InputError
Prepare = Callable[[Context, dict[str, Any]], Awaitable[dict[str, str]]]


@dataclass
class App:
    kind: AppKind
    prepare: Prepare


def generic_app(kind: AppKind) -> App:
    async def prepare(_ctx: Context, _body: dict[str, Any]) -> dict[str, str]:
        return {}

    return App(kind, prepare)


def jenkins_app(default_chart: dict[str, Any]) -> App:
    """Jenkins: its admin Secret must exist (a named one) or is generated once (owned by the Jenkins)."""

    async def prepare(ctx: Context, body: dict[str, Any]) -> dict[str, str]:
        obj = Resource(body)
        namespace, spec = obj.namespace, obj.spec
        admin = jenkins.admin_secret(obj.name, spec)
        secret = await ctx.services.kube.get(f"/api/v1/namespaces/{namespace}/secrets/{admin.name}")
        if admin.given:
            if secret is None:
                raise InputError("AdminSecretNotFound", f"Secret {namespace}/{admin.name} named in "
                                                        "spec.adminSecretRef does not exist", transient=True)
            missing = [k for k in (admin.user_key, admin.password_key) if k not in (secret.get("data") or {})]
            if missing:
                raise InputError("AdminSecretInvalid", f"Secret {namespace}/{admin.name} lacks the "
                                                       f"key(s) {', '.join(missing)}", transient=True)
        elif secret is None:
            await ctx.services.kube.request("POST", f"/api/v1/namespaces/{namespace}/secrets", {
                "apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": admin.name, "labels": {jenkins.PROJECT_LABEL: str(spec.get("project", ""))},
                             "ownerReferences": [obj.owner_reference()]},
                "type": "Opaque",
                "stringData": {admin.user_key: "admin", admin.password_key: secrets.token_urlsafe(24)}})
        return {"adminSecret": admin.name, "url": jenkins.url(obj.name, namespace, spec)}

    return App(jenkins.app_kind(default_chart), prepare)


class AppController:
    def __init__(self, ctx: Context, app: App) -> None:
        self.ctx = ctx
        self.app = app

    async def reconcile(self, body: dict[str, Any]) -> Outcome:
        this = Resource(body)
        namespace, name, spec = this.namespace, this.name, this.spec
        kind = self.app.kind
        status = parse(AppStatus, body.get("status"))
        try:
            release = release_spec(kind, name, spec)
            extra = await self.app.prepare(self.ctx, body)
        except (SpecError, InputError) as exc:
            transient = isinstance(exc, InputError) and exc.transient
            await report(self.ctx, kind.resource, body, status, False, exc.reason, str(exc), stalled=not transient)
            return FAILED if transient else DONE
        hr_name = kind.release_object_name(name)
        annotations = {REQUESTED_AT: requested(body)} if requested(body) else {}  # asked of the app: of its release
        obj = {"apiVersion": HELMRELEASE.api_version, "kind": HELMRELEASE.kind,
               "metadata": {"name": hr_name, "namespace": namespace, "ownerReferences": [this.owner_reference()],
                            "labels": {"helmop.dev/app-kind": kind.kind.lower(), "helmop.dev/app-name": name},
                            "annotations": annotations},
               "spec": release}
        self.ctx.memory.refer((kind.kind, namespace, name), [(namespace, HELMRELEASE.kind, hr_name)])
        try:
            await self.ctx.services.kube.apply(HELMRELEASE.path(namespace, hr_name), obj, MANAGER)
        except KubeError as exc:
            await report(self.ctx, kind.resource, body, status, False, "HelmReleaseRejected", exc.message,
                         stalled=exc.status == 422)
            return DONE if exc.status == 422 else FAILED
        live = await self.ctx.services.kube.get(HELMRELEASE.path(namespace, hr_name)) or {}
        await self._mirror(body, status, live, extra)
        return DONE

    async def _mirror(self, body: dict[str, Any], status: AppStatus, hr: dict[str, Any], extra: dict[str, str]) -> None:
        this = Resource(body)
        mirrored = settle.mirrored(status, this.generation, this.name, hr, parse(HelmReleaseStatus, hr.get("status")),
                                   extra)
        # the app's request is handled when its HelmRelease handled it (mirrored), not by this write
        await write_status(self.ctx, self.app.kind.resource, body, mirrored, outcome=False)

    async def finalize(self, body: dict[str, Any]) -> Outcome:
        """Delete the owned HelmRelease and wait for its uninstall, so the app goes last."""
        this = Resource(body)
        path = HELMRELEASE.path(this.namespace, self.app.kind.release_object_name(this.name))
        self.ctx.memory.drop((self.app.kind.kind, this.namespace, this.name))
        try:
            await self.ctx.services.kube.request("DELETE", path)
        except KubeError as exc:
            if exc.status != 404:
                return FAILED
        limits = self.ctx.settings.limits
        for _ in range(round(limits.uninstall_wait / limits.uninstall_poll)):
            if await self.ctx.services.kube.get(path) is None:
                return DONE
            await asyncio.sleep(limits.uninstall_poll)
        return after(self.ctx.settings.intervals.cleanup_wait)
