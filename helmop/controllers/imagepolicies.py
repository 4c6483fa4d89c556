"""One reconcile of an ImagePolicy: its ImageRepository's tags (as the repository's last scan reported them), the
tag the policy chooses, its digest when asked, the choice reported. A new choice is said in an Event (which Alerts
send on) and wakes the ImageUpdateAutomations that read the policy."""

from __future__ import annotations

from helmop.api.errors import SpecError
from helmop.api.images import (
    ANY_POLICY,
    ImageKinds,
    ImagePolicySpec,
    ImageRepositorySpec,
    parse_image_repository,
)
from helmop.api.status import parse
from helmop.api.status.images import ImagePolicyStatus, ImageRef, ImageRepositoryStatus
from helmop.decisions.settle import images as settle
from helmop.images import policies, registry
from helmop.images.access import registry_credentials
from helmop.images.registry import Scan, kept, revision_of
from helmop.sources.errors import SourceError
from helmop.sources.repositories import Credentials

from .context import Context
from .outcome import DONE, Outcome
from .turn import Turn


async def reconcile(turn: Turn[ImagePolicySpec, ImagePolicyStatus]) -> Outcome:
    spec, status, kind = turn.spec, turn.status, turn.kind
    where = spec.repository_namespace or turn.namespace
    turn.refer([(where, turn.images.repository.key, spec.repository)])
    ref = await _choose(turn, where)
    await turn.write(settle.chosen(status, turn.generation, ref))
    if status.latest_ref != ref:  # the namespace's automations read every policy of it
        turn.ctx.memory.notify_referrers(turn.namespace, kind.key, ANY_POLICY)
    if status.latest_ref is not None and status.latest_ref != ref:
        await turn.events.normal("ImageUpdated", f"{status.latest_ref} is now {ref}")
    return DONE


async def _choose(turn: Turn[ImagePolicySpec, ImagePolicyStatus], where: str) -> ImageRef:
    ctx, spec = turn.ctx, turn.spec
    repository, scanned = await _repository(ctx, turn.images, turn.namespace, where, spec.repository)
    creds = await registry_credentials(ctx.services.kube, where, repository)
    turn.read_secrets(creds.secrets())
    exclusions = repository.compiled()

    def reported(scan: Scan) -> bool:
        return revision_of(kept(scan, exclusions)) == scanned

    scan = await ctx.services.images.scan(ctx.services.repos, repository.image, creds, repository.insecure,
                                          repository.timeout, wanted=reported)
    tag = policies.choose(spec, kept(scan, exclusions))
    name = repository.image.written  # as its ImageRepository's spec.image says, Flux's latestRef.name
    return ImageRef(name=name, tag=tag, digest=await _digest(ctx, spec, turn.status, repository, creds, name, tag))


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
