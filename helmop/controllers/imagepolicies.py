"""One reconcile of an ImagePolicy: its ImageRepository's tags (as the repository's last scan reported them), the
tag the policy chooses, its digest when asked, the choice reported. A new choice is said in an Event (which Alerts
send on) and wakes the ImageUpdateAutomations that read the policy."""

from __future__ import annotations

from typing import Any

from helmop.api.errors import HelmopError, SpecError
from helmop.api.images import (
    ANY_POLICY,
    ImageKinds,
    ImagePolicySpec,
    ImageRepositorySpec,
    parse_image_policy,
    parse_image_repository,
)
from helmop.api.objects import Resource
from helmop.api.status import parse
from helmop.api.status.images import ImagePolicyStatus, ImageRef, ImageRepositoryStatus
from helmop.decisions.settle import images as settle
from helmop.images import policies, registry
from helmop.images.access import registry_credentials
from helmop.images.registry import Scan, kept, revision_of
from helmop.sources.errors import SourceError
from helmop.sources.repositories import Credentials

from .context import Context
from .outcome import DONE, FAILED, Outcome
from .status import read_status, report, write_status


async def reconcile(ctx: Context, kinds: ImageKinds, body: dict[str, Any]) -> Outcome:
    kind, this = kinds.policy, Resource(body)
    status = read_status(kind, ImagePolicyStatus, body)
    try:
        spec = parse_image_policy(body.get("spec") or {})
        policies.check(spec)
        where = spec.repository_namespace or this.namespace
        ctx.tenancy.check_reference(this.namespace, where, "spec.imageRepositoryRef.namespace")
    except SpecError as exc:
        reason = "AccessDenied" if exc.reason == "CrossNamespaceRef" else exc.reason
        await report(ctx, kind, body, status, False, reason, str(exc), stalled=True)
        return DONE
    if spec.suspend:
        return DONE
    key = (kind.key, this.namespace, this.name)
    ctx.memory.refer(key, [(where, kinds.repository.key, spec.repository)])
    try:
        ref = await _choose(ctx, kinds, this.namespace, where, spec, status, key)
    except HelmopError as exc:
        await report(ctx, kind, body, status, False, exc.reason, str(exc), stalled=not exc.transient)
        return FAILED if exc.transient else DONE
    after = settle.chosen(status, this.generation, ref)
    await write_status(ctx, kind, body, after)
    if status.latest_ref != ref:  # the namespace's automations read every policy of it
        ctx.memory.notify_referrers(this.namespace, kind.key, ANY_POLICY)
    if status.latest_ref is not None and status.latest_ref != ref:
        await ctx.services.events.normal(body, "ImageUpdated", f"{status.latest_ref} is now {ref}")
    return DONE


async def _choose(ctx: Context, kinds: ImageKinds, namespace: str, where: str, spec: ImagePolicySpec,
                  status: ImagePolicyStatus, key: tuple[str, str, str]) -> ImageRef:
    repository, scanned = await _repository(ctx, kinds, namespace, where, spec.repository)
    creds = await registry_credentials(ctx.services.kube, where, repository)
    ctx.memory.secrets[key] = creds.secrets()
    exclusions = repository.compiled()

    def reported(scan: Scan) -> bool:
        return revision_of(kept(scan, exclusions)) == scanned

    scan = await ctx.services.images.scan(ctx.services.repos, repository.image, creds, repository.insecure,
                                          repository.timeout, wanted=reported)
    tag = policies.choose(spec, kept(scan, exclusions))
    name = repository.image.written  # as its ImageRepository's spec.image says, Flux's latestRef.name
    return ImageRef(name=name, tag=tag, digest=await _digest(ctx, spec, status, repository, creds, name, tag))


async def _digest(ctx: Context, spec: ImagePolicySpec, status: ImagePolicyStatus, repository: ImageRepositorySpec,
                  creds: Credentials, name: str, tag: str) -> str:
    """digestReflectionPolicy: Never (none), IfNotPresent (the digest already found for this image and tag, else
    looked up), Always (looked up at every reconcile)."""
    if spec.reflect_digest == "Never":
        return ""
    before = status.latest_ref
    if spec.reflect_digest == "IfNotPresent" and before is not None and (before.name, before.tag) == (name, tag) \
            and before.digest:
        return before.digest
    return await registry.digest(ctx.services.repos, repository.image, tag, creds, repository.insecure,
                                 repository.timeout)


async def _repository(ctx: Context, kinds: ImageKinds, namespace: str, where: str,
                      name: str) -> tuple[ImageRepositorySpec, str]:
    """The ImageRepository the policy reads (its spec, and the revision of its last scan), when it exists, has
    been scanned, and (from another namespace) grants this one access."""
    obj = await ctx.services.kube.get(kinds.repository.path(where, name))
    what = f"{kinds.repository.kind} {where}/{name}"
    if obj is None:
        raise SourceError("DependencyNotReady", f"{what} does not exist", transient=True)
    try:
        spec = parse_image_repository(obj.get("spec") or {})
    except SpecError as exc:
        raise SourceError("DependencyNotReady", f"{what}: {exc}", transient=True) from None
    if where != namespace:
        found = await ctx.services.kube.get(f"/api/v1/namespaces/{namespace}")
        labels = ((found or {}).get("metadata") or {}).get("labels") or {}
        if not spec.grants({str(k): str(v) for k, v in labels.items()}):
            raise SourceError("AccessDenied", f"{what} does not grant namespace {namespace} access (its "
                                              "spec.accessFrom selects no namespace with its labels)", transient=False)
    scan = parse(ImageRepositoryStatus, obj.get("status")).last_scan_result
    if scan is None or not scan.revision:
        raise SourceError("DependencyNotReady", f"{what} has not been scanned yet", transient=True)
    return spec, scan.revision
