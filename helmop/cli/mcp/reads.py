"""What ``helmop mcp``'s read tools answer, as plain data: the same reads as ``helmop get``, ``why``, ``events`` and
``logs`` and the web UI's object page (``helmop.views``), with the caller's own client.

Every answer is bounded (:func:`bounded`: lists and strings cut, and said to be) and holds no Secret's value: only
helmop's and Flux's kinds (and app kinds) are read whole, never a Secret; what a HelmRelease's valuesFrom Secrets
hold is masked wherever it would appear (:func:`masked`), over what the operator masks itself (status, Events,
logs)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from helmop.api.conditions import condition_of
from helmop.api.errors import SpecError
from helmop.api.helmrelease import parse_spec
from helmop.api.kinds import BUILTIN, FLUX, Kind
from helmop.api.objects import Resource
from helmop.api.redaction import redact_data
from helmop.api.status import to_json
from helmop.helm.inputs import InputError, values_pieces
from helmop.infra.kube import Kube, KubeError
from helmop.infra.worker import Worker
from helmop.views import operator_logs
from helmop.views.cells import cluster, health, last_request, last_seen, revision, source
from helmop.views.statuses import status_of
from helmop.views.tree import tree
from helmop.views.why import MISSING, root_causes, why

from .. import verbs
from ..errors import Failed

MAX_ITEMS = 100  # entries of any list in an answer (objects, Events, inventory, history, log lines)
MAX_TEXT = 4096  # characters of any one string (a message, a log line)
MAX_SPEC = 16 << 10  # characters of a spec, as YAML
CUT = "… (cut)"
LOG_BYTES = 1 << 20  # the end of an operator's log file read


@dataclass
class Caller:
    """Who asks, and where: the client with the caller's identity (never the operator's), the namespace a tool
    means when it names none, and where the operator's log lines are."""

    kube: Kube
    namespace: str
    log_file: str | None = None
    operator_namespace: str | None = None
    cel: Worker = field(default_factory=Worker)  # readyExprs of what an object waits for (why)


def bounded(answer: dict[str, Any]) -> dict[str, Any]:
    """``answer`` with every list cut to :data:`MAX_ITEMS` entries (a last entry saying how many more) and every
    string to :data:`MAX_TEXT` characters: an answer's size has a bound whatever the cluster holds."""
    return {key: _cut(value) for key, value in answer.items()}


def _cut(value: Any) -> Any:
    if isinstance(value, dict):
        return bounded(value)
    if isinstance(value, list | tuple):
        kept = [_cut(v) for v in value[:MAX_ITEMS]]
        return kept + ([f"{CUT}: {len(value) - MAX_ITEMS} more"] if len(value) > MAX_ITEMS else [])
    if isinstance(value, str) and len(value) > MAX_TEXT:
        return value[:MAX_TEXT] + CUT
    return value


async def masked(caller: Caller, obj: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
    """``answer`` with what the HelmRelease's valuesFrom Secrets hold masked, read with the caller's rights (what
    the caller may not read is not theirs to see, nor can it reach them from here)."""
    this = Resource(obj)
    if this.kind != "HelmRelease" or not this.spec.get("valuesFrom"):
        return answer
    try:
        spec = parse_spec(this.spec, this.name, this.namespace, group=this.api_version.rpartition("/")[0])
        _, secrets = await values_pieces(caller.kube, this.namespace, spec)
    except (SpecError, InputError, KubeError):
        return answer
    masked_answer: dict[str, Any] = redact_data(answer, secrets)
    return masked_answer


async def kinds_of(kube: Kube, text: str) -> list[Kind]:
    """KIND, KIND,KIND, or "all": every namespaced kind of helmop's and of Flux's."""
    if not text or text == "all":
        return [k for k in (*BUILTIN, *FLUX.kinds) if k.namespaced]
    return [await verbs.resolve_kind(kube, part.strip()) for part in text.split(",") if part.strip()]


def summary(kind: Kind, obj: dict[str, Any]) -> dict[str, Any]:
    """One object as ``helmop get -o wide`` and the UI's lists show it."""
    this, ready = Resource(obj), condition_of(obj, "Ready")
    return {"kind": kind.kind, "apiVersion": this.api_version, "namespace": this.namespace, "name": this.name,
            "health": health(obj), "ready": {k: ready.get(k, "") for k in ("status", "reason", "message")},
            "revision": revision(obj), "suspended": bool(this.spec.get("suspend")), "source": source(obj),
            "cluster": cluster(obj), "lastRequest": last_request(obj)}


async def list_objects(caller: Caller, kind: str, namespace: str, all_namespaces: bool, selector: str,
                       health_is: str, limit: int) -> dict[str, Any]:
    """The caller's objects of the kinds, in a namespace or all; what the API refused the caller, in its words."""
    scope = None if all_namespaces else namespace or caller.namespace
    found: list[dict[str, Any]] = []
    refused: list[str] = []
    for each in await kinds_of(caller.kube, kind):
        try:
            objs = await caller.kube.list(each.path(scope), selector)
        except KubeError as exc:
            if exc.status != 404:  # (404: not served here, its CRD not installed)
                refused.append(f"{each.plural}.{each.group}: {exc.message}")
            continue
        found += [row for row in (summary(each, o) for o in objs) if not health_is or row["health"] == health_is]
    limit = max(1, min(limit, MAX_ITEMS))
    return bounded({"items": found[:limit], "more": max(0, len(found) - limit), "refused": refused})


async def read_object(caller: Caller, kind: str, namespace: str, name: str) -> tuple[Kind, dict[str, Any]]:
    found = await verbs.resolve_kind(caller.kube, kind)
    where = namespace or caller.namespace
    obj = await caller.kube.get(found.path(where, name))
    if obj is None:
        raise Failed(f"{found.kind} {where}/{name} not found")
    return found, obj


async def get_object(caller: Caller, kind: str, namespace: str, name: str) -> dict[str, Any]:
    """One object: its summary, spec, status as helmop reads it (conditions, history, inventory, pin, approvals,
    the last request and who made it) and what it manages with each one's health."""
    found, obj = await read_object(caller, kind, namespace, name)
    this = Resource(obj)
    status = status_of(obj)
    node = await tree(caller.kube, (found.api_version, found.kind, this.namespace, this.name))
    answer = await masked(caller, obj, {
        **summary(found, obj), "spec": this.spec, "status": to_json(status) if status is not None else this.status,
        "manages": [{"object": n.title, "health": n.health} for n in node.walk()[1:]]})
    # the spec as YAML (masked as data first: a mask in YAML text could break it), bounded as a whole
    spec = yaml.safe_dump(answer["spec"], sort_keys=False)
    return bounded(answer) | {"spec": spec if len(spec) <= MAX_SPEC else spec[:MAX_SPEC] + CUT}


async def events(caller: Caller, kind: str, namespace: str, name: str, limit: int) -> dict[str, Any]:
    """The Events of an object and of everything it manages, oldest first (the newest ``limit``)."""
    found, obj = await read_object(caller, kind, namespace, name)
    this = Resource(obj)
    node = await tree(caller.kube, (found.api_version, found.kind, this.namespace, this.name))
    about = {(n.ref[1], n.ref[2], n.ref[3]) for n in node.walk()}
    seen: list[dict[str, Any]] = []
    for place in sorted({n.ref[2] or "default" for n in node.walk()}):  # (cluster-scoped: kept in default)
        for event in await caller.kube.list(f"/api/v1/namespaces/{place}/events"):
            involved = event.get("involvedObject") or {}
            if (str(involved.get("kind")), str(involved.get("namespace") or ""), str(involved.get("name"))) in about:
                seen.append({"lastSeen": last_seen(event), "type": event.get("type", ""),
                             "reason": event.get("reason", ""), "count": event.get("count", 1),
                             "object": f"{involved.get('kind')}/{involved.get('namespace') or ''}/"
                                       f"{involved.get('name')}".replace("//", "/"),
                             "message": event.get("message", "")})
    seen.sort(key=lambda e: str(e["lastSeen"]))
    limit = max(1, min(limit, MAX_ITEMS))
    return bounded(await masked(caller, obj, {"events": seen[-limit:], "earlier": max(0, len(seen) - limit)}))


async def why_not_ready(caller: Caller, kind: str, namespace: str, name: str) -> dict[str, Any]:
    """What the object waits for, down to the root causes (``helmop why -o json``)."""
    ref = await verbs.reference(caller.kube, kind, namespace or caller.namespace, name)
    top = await why(caller.kube, ref, caller.cel)
    if top.state == MISSING:
        raise Failed(top.message)
    return bounded({"object": top.json(), "rootCauses": [link.json(below=False) for link in root_causes(top)]})


async def logs(caller: Caller, kind: str, namespace: str, name: str, tail: int) -> dict[str, Any]:
    """The operator's last log lines about one object: from its --log-file, else its pods (the caller's rights)."""
    found, obj = await read_object(caller, kind, namespace, name)
    this = Resource(obj)
    if caller.log_file:
        lines = await asyncio.to_thread(_file_end, Path(caller.log_file))
    else:
        pods = await operator_logs.operator_pods(caller.kube, caller.operator_namespace)
        if not pods:
            raise Failed("no operator pod the caller may read (app.kubernetes.io/name=helmop), and no --log-file")
        lines = [line async for line in operator_logs.pod_lines(caller.kube, pods, follow=False, tail=2000)]
    about = [operator_logs.readable(line) for line in lines
             if operator_logs.about(line, found.kind, this.namespace, this.name)]
    tail = max(1, min(tail, MAX_ITEMS))
    return bounded(await masked(caller, obj, {"lines": about[-tail:], "earlier": max(0, len(about) - tail)}))


def _file_end(path: Path) -> list[str]:
    """The last lines of a log file (its end only: it may be large)."""
    try:
        with path.open("rb") as handle:
            handle.seek(max(0, handle.seek(0, 2) - LOG_BYTES))
            return handle.read().decode(errors="replace").splitlines()
    except OSError as exc:
        raise Failed(f"the operator's log file cannot be read: {exc}") from None
