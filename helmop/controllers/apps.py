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
from helmop.api.kinds import HELMRELEASE, REQUESTED_AT, Kind
from helmop.api.objects import ObjectKey, Resource
from helmop.api.status import parse
from helmop.api.status.app import AppStatus
from helmop.api.status.helmrelease import HelmReleaseStatus
from helmop.decisions.settle import app as settle
from helmop.helm.apps import release_spec
from helmop.helm.inputs import InputError
from helmop.infra.kube import KubeError

from .context import Context
from .outcome import DONE, FAILED, Outcome, after
from .status import requested
from .turn import Turn

MANAGER = "helmop-apps"
# The app's own status fields (settle.app.mirrored says which) — or SpecError / InputError
Prepare = Callable[[Context, dict[str, Any]], Awaitable[dict[str, str]]]


@dataclass
class App:
    """An app kind's controller: its object becomes a HelmRelease it owns, whose status it mirrors."""

    kind: AppKind
    prepare: Prepare

    def read(self, _kind: Kind, this: Resource) -> dict[str, Any]:
        """The spec of the HelmRelease the app becomes (SpecError when the app's spec is refused)."""
        return release_spec(self.kind, this.name, this.spec)

    async def reconcile(self, turn: Turn[dict[str, Any], AppStatus]) -> Outcome:
        ctx, this, kind = turn.ctx, turn.this, self.kind
        extra = await self.prepare(ctx, turn.body)
        namespace, hr_name = this.namespace, kind.release_object_name(this.name)
        asked = requested(turn.body)
        obj = {"apiVersion": HELMRELEASE.api_version, "kind": HELMRELEASE.kind,
               "metadata": {"name": hr_name, "namespace": namespace, "ownerReferences": [this.owner_reference()],
                            "labels": {"helmop.dev/app-kind": kind.kind.lower(), "helmop.dev/app-name": this.name},
                            # asked of the app: of its release
                            "annotations": {REQUESTED_AT: asked} if asked else {}},
               "spec": turn.spec}
        turn.refer([ObjectKey(HELMRELEASE.kind, namespace, hr_name)])
        try:
            await ctx.services.kube.apply(HELMRELEASE.path(namespace, hr_name), obj, MANAGER)
        except KubeError as exc:
            await turn.report(False, "HelmReleaseRejected", exc.message, stalled=exc.status == 422)
            return DONE if exc.status == 422 else FAILED
        live = await ctx.services.kube.get(HELMRELEASE.path(namespace, hr_name)) or {}
        mirrored = settle.mirrored(turn.status, this.generation, this.name, live,
                                   parse(HelmReleaseStatus, live.get("status")), extra)
        # the app's request is handled when its HelmRelease handled it (mirrored), not by this write
        await turn.write(mirrored, outcome=False)
        return DONE

    async def finalize(self, turn: Turn[dict[str, Any] | None, AppStatus]) -> Outcome:
        """Delete the owned HelmRelease and wait for its uninstall, so the app goes last (whatever its spec says
        now: the release is named after the app)."""
        kube = turn.ctx.services.kube
        path = HELMRELEASE.path(turn.namespace, self.kind.release_object_name(turn.name))
        try:
            await kube.request("DELETE", path)
        except KubeError as exc:
            if exc.status != 404:
                return FAILED
        limits = turn.ctx.settings.limits
        for _ in range(round(limits.uninstall_wait / limits.uninstall_poll)):
            if await kube.get(path) is None:
                return DONE
            await asyncio.sleep(limits.uninstall_poll)
        return after(turn.ctx.settings.intervals.cleanup_wait)


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
