"""One reconcile of an ImagePolicy: its ImageRepository's tags (as the repository's last scan reported them), the
tag the policy chooses, its digest when asked, the choice reported. A new choice is said in an Event (which Alerts
send on) and wakes the ImageUpdateAutomations that read the policy."""

from __future__ import annotations

from helmop.api.images import (
    ANY_POLICY,
    ImagePolicySpec,
    ImageRepositorySpec,
    parse_image_repository,
)
from helmop.api.objects import ObjectKey
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
    turn.refer([ObjectKey(turn.images.repository.key, where, spec.repository)])
    ref = await _choose(turn, where)
    await turn.write(settle.chosen(status, turn.generation, ref))
    if status.latest_ref != ref:  # the namespace's automations read every policy of it
        turn.ctx.memory.notify_referrers(ObjectKey(kind.key, turn.namespace, ANY_POLICY))
    if status.latest_ref is not None and status.latest_ref != ref:
        await turn.events.normal("ImageUpdated", f"{status.latest_ref} is now {ref}")
    return DONE


async def _choose(turn: Turn[ImagePolicySpec, ImagePolicyStatus], where: str) -> ImageRef:
    ctx, spec = turn.ctx, turn.spec
    repository, scanned = await _repository(turn, where)
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


async def _repository(turn: Turn[ImagePolicySpec, ImagePolicyStatus], where: str) -> tuple[ImageRepositorySpec, str]:
    """The ImageRepository the policy reads (its spec, and the revision of its last scan), when it exists, has
    been scanned, and (from another namespace) grants this one access."""
    name, namespace, kube = turn.spec.repository, turn.namespace, turn.ctx.services.kube
    spec, obj = await turn.read_other(turn.images.repository, where, name, parse_image_repository,
                                      "DependencyNotReady", invalid_transient=True)
    what = f"{turn.images.repository.kind} {where}/{name}"
    if where != namespace:
        found = await kube.get(f"/api/v1/namespaces/{namespace}")
        labels = ((found or {}).get("metadata") or {}).get("labels") or {}
        if not spec.grants({str(k): str(v) for k, v in labels.items()}):
            raise SourceError("AccessDenied", f"{what} does not grant namespace {namespace} access (its "
                                              "spec.accessFrom selects no namespace with its labels)", transient=False)
    scan = parse(ImageRepositoryStatus, obj.get("status")).last_scan_result
    if scan is None or not scan.revision:
        raise SourceError("DependencyNotReady", f"{what} has not been scanned yet", transient=True)
    return spec, scan.revision
