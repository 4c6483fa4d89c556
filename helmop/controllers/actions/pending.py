"""What a change waiting for an approval would do: the release's objects as they run (helm's record) against what the
desired configuration renders now (a server-side dry run, as the upgrade would run it), object by object, as
``helmop preview`` says it (helmop.api.changes): a Secret's values as digests, every secret string the turn read
masked. Run once per revision waiting (its summary is in Ready, its diff in the Event), so an approver sees what
they approve; never an action of the release's."""

from __future__ import annotations

import os

import yaml

from helmop.api import rendered, yamlc
from helmop.api.actions import Action
from helmop.api.changes import compare
from helmop.api.errors import HelmopError
from helmop.api.redaction import redact

from .deploy import deploy_request
from .job import Job

MAX_OBJECTS = 20  # named in the summary
MAX_LINES = 60  # of the diff in the Event


async def pending(job: Job) -> tuple[str, str]:
    """(summary, diff) of the change ``job``'s desired configuration makes to the release; a change that cannot be
    rendered is said so, with its reason."""
    action = Action.UPGRADE if job.state.latest is not None else Action.INSTALL
    salt, seen = os.urandom(16), list(job.ctx.memory.secrets.get(job.key, []))
    try:
        # the chart's CRDs are not applied for a look (helm renders them, as an install would apply them)
        wanted = await job.ctx.services.engine.rendered(deploy_request(job, action, skip_crds=True, helm_waits=False))
    except HelmopError as exc:
        return f"what it changes could not be rendered: {redact(str(exc), seen)}", ""
    group = f"HelmRelease {job.namespace}/{job.name}"
    sides = []
    try:
        made = [obj for obj in yamlc.load_all(wanted) if isinstance(obj, dict) and obj.get("kind")]
    except yaml.YAMLError as exc:  # a chart's output, as hostile as the chart
        return f"what it changes could not be read: {redact(str(exc)[:300], seen)}", ""
    for objects in (job.state.manifest(), made):
        side = rendered.Rendering(secrets=seen)
        side.groups[group] = {_label(obj, job.spec.target_namespace): rendered.as_yaml(obj, seen, salt, canonical=True)
                              for obj in objects}
        sides.append(side)
    found = compare(sides[0], sides[1], max_lines=MAX_LINES, max_objects=MAX_OBJECTS)
    named = ", ".join(f"{c.object} ({c.change})" for c in found.objects)
    more = f", and {found.left_out} more" if found.left_out else ""
    summary = f"{found.summary} object(s)" + (f": {named}{more}" if named else "")
    return redact(summary, seen), redact("".join(c.diff for c in found.objects), seen)


def _label(obj: dict[str, object], namespace: str) -> str:
    """kind/namespace/name, the release's namespace for an object whose manifest names none (as helm applies it)."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    return f"{obj.get('kind')}/{meta.get('namespace') or namespace}/{meta.get('name')}"
