"""The helm requests of a HelmRelease, built from its spec in one place: the upgrade for the operator,
``helmop diff`` and ``helmop render`` (what is previewed is what gets deployed: values, flags, labels,
identity), and the rollback of a remediation. A spec option reaches helm through here."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from helmop.api.actions import Action
from helmop.api.helmrelease import HelmReleaseSpec, UpgradeOptions
from helmop.api.kinds import HELMRELEASE
from helmop.api.tenancy import Tenancy

from . import storage
from .engine import RollbackRequest, TestRequest, UninstallRequest, UpgradeRequest
from .releases import ReleaseState

# Flux's words for helm 4's --server-side (words, not booleans, against YAML's boolean conversion)
SERVER_SIDE = {"enabled": "true", "disabled": "false", "auto": "auto"}


def upgrade_request(spec: HelmReleaseSpec, namespace: str, name: str, *, chart: Path, values: dict[str, Any],
                    digest: str, action: Action, tenancy: Tenancy | None = None,
                    helm_waits: bool = True, kind: str = HELMRELEASE.key) -> UpgradeRequest:
    """``helm upgrade --install`` for HelmRelease ``namespace/name``: the install or the upgrade options,
    the ownership and config-digest labels stored on the release record, and the identity helm acts as.
    ``helm_waits``: False when helmop judges the objects' readiness itself (helm then waits for hooks only);
    ``kind``: the HelmRelease's kind key (helmop's, or Flux's)."""
    opts = spec.install if action is Action.INSTALL else spec.upgrade
    upgrading = opts if isinstance(opts, UpgradeOptions) else None
    return UpgradeRequest(
        release=spec.release_name, namespace=spec.target_namespace, chart=chart, values=values,
        timeout=opts.timeout or spec.timeout, wait=helm_waits and not opts.disable_wait,
        disable_hooks=opts.disable_hooks, server_side=SERVER_SIDE[opts.server_side_apply],
        wait_for_jobs=not opts.disable_wait_for_jobs, legacy_wait=spec.wait_strategy == "legacy",
        take_ownership=opts.take_ownership, schema_validation=opts.schema_validation,
        reuse_values=bool(upgrading and upgrading.preserve_values), force=bool(upgrading and upgrading.force),
        cleanup_on_fail=bool(upgrading and upgrading.cleanup_on_fail),
        create_namespace=spec.install.create_namespace,
        max_history=spec.max_history,
        labels={storage.OWNER_LABEL: storage.owner_token(namespace, name, kind),
                storage.DIGEST_LABEL: storage.digest_token(digest)},
        # spec.serviceAccountName (or the operator's default one): helm acts as that ServiceAccount of the
        # HelmRelease's namespace, so a namespace's releases get only that namespace's rights.
        impersonate=(tenancy or Tenancy()).acting_as(namespace, spec.service_account_name),
        post_render=spec.post_render)


def resolved(request: UpgradeRequest, state: ReleaseState) -> UpgradeRequest:
    """``request`` with server-side apply ``auto`` resolved as helm would (the latest revision's method), so that
    conflicts are forced exactly when it applies server-side (helm refuses them otherwise), as helm-controller
    does; the operator's upgrade and ``helmop diff`` alike."""
    return replace(request, server_side=state.server_side()) if request.server_side == "auto" else request


def rollback_request(spec: HelmReleaseSpec, revision: int, acting_as: str) -> RollbackRequest:
    """``helm rollback`` to ``revision`` with spec.rollback's options, as ``acting_as``."""
    opts = spec.rollback
    return RollbackRequest(spec.release_name, spec.target_namespace, revision, opts.timeout or spec.timeout,
                           wait=not opts.disable_wait, disable_hooks=opts.disable_hooks, force=opts.force,
                           cleanup_on_fail=opts.cleanup_on_fail, max_history=spec.max_history, impersonate=acting_as,
                           server_side=SERVER_SIDE[opts.server_side_apply],
                           wait_for_jobs=not opts.disable_wait_for_jobs, legacy_wait=spec.wait_strategy == "legacy",
                           recreate=opts.recreate)


def uninstall_request(spec: HelmReleaseSpec, acting_as: str) -> UninstallRequest:
    """``helm uninstall`` with spec.uninstall's options, as ``acting_as``."""
    opts = spec.uninstall
    return UninstallRequest(spec.release_name, spec.target_namespace, opts.timeout or spec.timeout,
                            wait=not opts.disable_wait, keep_history=opts.keep_history,
                            disable_hooks=opts.disable_hooks, cascade=opts.deletion_propagation, impersonate=acting_as)


def helm_test_request(spec: HelmReleaseSpec, acting_as: str) -> TestRequest:
    """``helm test`` with spec.test's timeout and filters, as ``acting_as``."""
    return TestRequest(spec.release_name, spec.target_namespace, spec.test.timeout or spec.timeout,
                       spec.test.filters, impersonate=acting_as)
