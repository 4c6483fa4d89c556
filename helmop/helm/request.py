"""The helm request of a HelmRelease: one function builds it for the operator, ``helmop diff`` and
``helmop render``, so what is previewed is what gets deployed (values, flags, labels, identity)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helmop.api.actions import Action
from helmop.api.helmrelease import HelmReleaseSpec, UpgradeOptions
from helmop.api.tenancy import Tenancy

from . import storage
from .engine import UpgradeRequest


def upgrade_request(spec: HelmReleaseSpec, namespace: str, name: str, *, chart: Path, values: dict[str, Any],
                    digest: str, action: Action, tenancy: Tenancy | None = None) -> UpgradeRequest:
    """``helm upgrade --install`` for HelmRelease ``namespace/name``: the install or the upgrade options,
    the ownership and config-digest labels stored on the release record, and the identity helm acts as."""
    opts = spec.install if action is Action.INSTALL else spec.upgrade
    forced = isinstance(opts, UpgradeOptions) and opts.force
    return UpgradeRequest(
        release=spec.release_name, namespace=spec.target_namespace, chart=chart, values=values,
        timeout=opts.timeout or spec.timeout, wait=not opts.disable_wait, disable_hooks=opts.disable_hooks,
        force=forced, cleanup_on_fail=isinstance(opts, UpgradeOptions) and opts.cleanup_on_fail,
        create_namespace=spec.install.create_namespace,
        max_history=spec.max_history,
        labels={storage.OWNER_LABEL: storage.owner_token(namespace, name),
                storage.DIGEST_LABEL: storage.digest_token(digest)},
        # spec.serviceAccountName (or the operator's default one): helm acts as that ServiceAccount of the
        # HelmRelease's namespace, so a namespace's releases get only that namespace's rights.
        impersonate=(tenancy or Tenancy()).acting_as(namespace, spec.service_account_name),
        post_render=spec.post_render)
