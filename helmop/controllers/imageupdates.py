"""One reconcile of an ImageUpdateAutomation: its GitRepository (URL, credentials, ref) and the ImagePolicies of its
namespace it selects read, the run made (:mod:`helmop.images.automation`), the outcome reported. A push is said in
an Event and the GitRepository is woken at once: its ConfigSyncs apply the new commit without waiting for its
interval."""

from __future__ import annotations

from helmop.api.images import ANY_POLICY, ImageKinds, ImageUpdateAutomationSpec
from helmop.api.objects import ObjectKey
from helmop.api.sources import parse_git_repository
from helmop.api.status import now, parse
from helmop.api.status.images import ImagePolicyStatus, ImageRef, ImageUpdateAutomationStatus
from helmop.decisions.settle import images as settle
from helmop.images import automation
from helmop.images.signing import signer
from helmop.sources.readers import git_auth

from .context import Context
from .outcome import DONE, Outcome
from .turn import Turn


async def reconcile(turn: Turn[ImageUpdateAutomationSpec, ImageUpdateAutomationStatus]) -> Outcome:
    spec, kinds = turn.spec, turn.images
    where = spec.source_namespace or turn.namespace
    plan = await _plan(turn, where)
    done = await automation.run(turn.ctx.services.git, plan)
    branch = automation.push_branch(plan.checkout, plan.push_branch)
    message = f"pushed commit '{done.commit[:7]}' to branch '{branch}'" if done.commit else "repository up-to-date"
    await turn.write(settle.ran(turn.status, turn.generation, now(), done.revision, plan.refs, done.commit, message))
    if done.commit:
        await turn.events.normal("Succeeded", f"{message}\n{done.message}")
        turn.ctx.memory.wake(ObjectKey(kinds.gitrepository.key, where, spec.source))
    if done.result.problems:
        await turn.events.warning("UpdateFailed", "files left alone: " + "; ".join(done.result.problems[:10]))
    return DONE


async def _plan(turn: Turn[ImageUpdateAutomationSpec, ImageUpdateAutomationStatus], where: str) -> automation.Plan:
    """What the run does: the GitRepository's URL, credentials and ref; the policies' choices; the signer."""
    ctx, spec, kinds, namespace = turn.ctx, turn.spec, turn.images, turn.namespace
    git, _ = await turn.read_other(kinds.gitrepository, where, spec.source, parse_git_repository,
                                   "InvalidSourceConfiguration", invalid_transient=False)
    refs = await _policies(ctx, kinds, namespace, spec)
    # every policy of the namespace: one that chooses for the first time, or is made later, wakes it too
    turn.refer([ObjectKey(kinds.gitrepository.key, where, spec.source),
                ObjectKey(kinds.policy.key, namespace, ANY_POLICY), *turn.secrets_named(spec.signing_secret)])
    auth = await git_auth(ctx.services.kube, where, git, ctx.services.git.policy)
    secrets = auth.secrets()
    sign = None
    if spec.signing:
        sign, masked = await signer(ctx.services.kube, namespace, spec.signing, spec.signing_secret)
        secrets += masked
    turn.read_secrets(secrets)
    ref = spec.checkout
    checkout = ref if ref.given else git.ref
    return automation.Plan(url=git.url, auth=auth, checkout=checkout, push_branch=spec.push_branch,
                           refspec=spec.refspec, options=spec.push_options, path=spec.path,
                           author=(spec.author_name, spec.author_email), template=spec.message_template,
                           values=dict(spec.template_values), namespace=namespace, name=turn.name, refs=refs,
                           timeout=git.timeout, sign=sign)


async def _policies(ctx: Context, kinds: ImageKinds, namespace: str,
                    spec: ImageUpdateAutomationSpec) -> dict[str, ImageRef]:
    """What each ImagePolicy of the automation's namespace it selects chose (those yet to choose: none). Only its
    own namespace's: a marker naming another namespace's policy is never set, whatever the operator's tenancy."""
    out: dict[str, ImageRef] = {}
    for policy in await ctx.services.kube.list(kinds.policy.path(namespace)):
        meta = policy.get("metadata") or {}
        labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
        if not all(r.matches(labels) for r in spec.selector):
            continue
        latest = parse(ImagePolicyStatus, policy.get("status")).latest_ref
        if latest is not None:
            out[str(meta.get("name"))] = latest
    return out
