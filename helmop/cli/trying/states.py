"""Where each object ``helmop try`` follows stands, read from its conditions (helmop's and Flux's shape alike),
and whether the whole has converged or is stuck. Pure: no I/O.

An object is Ready (its Ready condition true, for its current generation), Suspended (spec.suspend: left alone,
and counted as settled), Progressing (no verdict yet for its generation, or the operator is at work), Waiting (for
a dependency), Failed (the operator will try again), Stalled (it will not, until the spec changes: Stalled=True),
Blocked (it waits for something Stalled, Blocked, Refused or failing), Refused (the API server refused to create it)
or TimedOut (not Ready when --timeout ran out).

Failing: Failed with the same reason (for the same generation) for its patience - the longer of PATIENCE (or
try's --patience) and two of its retryIntervals - or Waiting that long for an object the cluster does not have.
The operator retries a failure with a backoff from 2 s doubling, so PATIENCE sees four retries or more say the
same: transient failures (an API server starting, a race between two syncs) are over by then, and what is left
needs a change."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from helmop.api.durations import parse_duration
from helmop.api.helmrelease import DEFAULT_RETRY_INTERVAL
from helmop.api.kinds import FLUX_GROUPS, FLUX_KUSTOMIZE, FLUX_SOURCE, GROUP
from helmop.decisions.sync import OWNER_LABEL

SETTLED = ("Ready", "Suspended")
TERMINAL = ("Stalled", "Blocked", "Refused", "TimedOut")
WAITING_REASONS = ("DependencyNotReady", "DependencyNotFound", "SourceNotReady")
SOURCES = ("GitRepository", "HelmRepository", "OCIRepository", "Bucket", "HelmChart", "ExternalArtifact")
PATIENCE = 60.0  # seconds an unchanged failure is given before it counts as failing (see the module's rule)


@dataclass
class Tracked:
    kind: str
    group: str
    namespace: str
    name: str
    state: str = "Progressing"
    reason: str = ""
    message: str = ""
    after: tuple[str, ...] = ()  # keys of its dependsOn (shown)
    needs: tuple[str, ...] = ()  # keys of what it waits for: its dependsOn and its source
    parent: str = ""  # the key of the ConfigSync or Kustomization that applied it
    ready_after: float | None = None  # seconds from the apply to when it (last) became Ready
    seen: tuple[Any, ...] = ()  # (generation, state, reason) last observed other than Progressing
    since: float = 0.0  # seconds from the apply to when ``seen`` was first observed
    patience: float = PATIENCE

    @property
    def key(self) -> str:
        return key(self.kind, self.group, self.namespace, self.name)

    @property
    def title(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}" if self.namespace else f"{self.kind} {self.name}"

    @property
    def ok(self) -> bool:
        return self.state in SETTLED


def key(kind: str, group: str, namespace: str, name: str) -> str:
    return f"{kind}.{group}/{namespace}/{name}"


def _conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found = (obj.get("status") or {}).get("conditions") or []
    return {str(c.get("type")): c for c in found if isinstance(c, dict)}


def observe(obj: dict[str, Any]) -> tuple[str, str, str]:
    """(state, reason, message) of an object from its spec and conditions."""
    spec, meta = obj.get("spec") or {}, obj.get("metadata") or {}
    if isinstance(spec, dict) and spec.get("suspend") is True:
        return "Suspended", "Suspended", "spec.suspend is true: left alone"
    conditions = _conditions(obj)
    ready, stalled, busy = (conditions.get(t) or {} for t in ("Ready", "Stalled", "Reconciling"))
    if stalled.get("status") == "True":
        return "Stalled", str(stalled.get("reason") or ready.get("reason") or ""), \
            str(stalled.get("message") or ready.get("message") or "")
    seen = ready.get("observedGeneration", (obj.get("status") or {}).get("observedGeneration"))
    if not ready or (seen is not None and seen != meta.get("generation")):
        return "Progressing", str(busy.get("reason") or ""), str(busy.get("message") or "waiting for the operator")
    return _verdict(ready, busy)


def _verdict(ready: dict[str, Any], busy: dict[str, Any]) -> tuple[str, str, str]:
    """(state, reason, message) the Ready condition of the current generation says (Reconciling: whether the
    operator is at work)."""
    reason, message = str(ready.get("reason") or ""), str(ready.get("message") or "")
    if ready.get("status") == "True":
        return "Ready", reason, message
    if reason in WAITING_REASONS:
        return "Waiting", reason, message
    if ready.get("status") == "Unknown" or busy.get("status") == "True":
        return "Progressing", reason, message
    return "Failed", reason, message


def _ref_key(ref: Any, kind: str, group: str, namespace: str) -> str | None:
    if not isinstance(ref, dict) or not ref.get("name"):
        return None
    kind = str(ref.get("kind") or kind)
    if kind in SOURCES:
        group = FLUX_SOURCE if group.endswith(FLUX_GROUPS) else GROUP
    return key(kind, group, str(ref.get("namespace") or namespace), str(ref["name"]))


def _followed(dep: dict[str, Any]) -> bool:
    """Whether a dependsOn entry names what try follows (helmop's and Flux's kinds); a ConfigMap, a CRD, a Job
    waited for are the operator's to judge, and its condition says so."""
    group = str(dep.get("apiVersion") or "").rpartition("/")[0]
    return not dep.get("apiVersion") or group == GROUP or group.endswith(FLUX_GROUPS)


def waits_for(obj: dict[str, Any]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """What an object waits for: its dependsOn (of the kinds try follows), and those with its source (sourceRef, a
    chart's sourceRef, chartRef)."""
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    kind, group = str(obj.get("kind")), str(obj.get("apiVersion", "")).rpartition("/")[0]
    namespace = str((obj.get("metadata") or {}).get("namespace") or "")
    chart = spec.get("chart") if isinstance(spec.get("chart"), dict) else {}
    assert isinstance(chart, dict)
    inner = chart.get("spec") if isinstance(chart.get("spec"), dict) else {}
    assert isinstance(inner, dict)
    depends = [_ref_key(d, kind, str(d["apiVersion"]).rpartition("/")[0] if d.get("apiVersion") else group, namespace)
               for d in spec.get("dependsOn") or [] if isinstance(d, dict) and _followed(d)]
    refs = [(spec.get("sourceRef"), "GitRepository"), (chart.get("sourceRef"), "GitRepository"),
            (inner.get("sourceRef"), "HelmRepository"), (spec.get("chartRef"), "OCIRepository")]
    sources = [_ref_key(ref, default, group, namespace) for ref, default in refs]
    after = tuple(dict.fromkeys(k for k in depends if k))
    return after, tuple(dict.fromkeys(k for k in [*after, *sources] if k))


def applied_by(obj: dict[str, Any]) -> str:
    """The key of the ConfigSync or Kustomization that applied an object (its ownership label), or ""."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    namespace, dot, name = str(labels.get(OWNER_LABEL) or "").partition(".")
    if not dot:
        return ""
    flux = f"{FLUX_KUSTOMIZE}/name" in labels
    return key(*(("Kustomization", FLUX_KUSTOMIZE) if flux else ("ConfigSync", GROUP)), namespace, name)


def patience(obj: dict[str, Any], least: float = PATIENCE) -> float:
    """How long an unchanged failure of ``obj`` is waited for: ``least``, or two of its retryIntervals (a
    Kustomization's or ConfigSync's; a HelmRelease's under the RetryOnFailure strategy) when longer."""
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    intervals = [spec.get("retryInterval")]
    for action in ("install", "upgrade"):
        strategy = (spec.get(action) or {}).get("strategy") if isinstance(spec.get(action), dict) else None
        if isinstance(strategy, dict) and strategy.get("name") == "RetryOnFailure":
            intervals.append(strategy.get("retryInterval") or DEFAULT_RETRY_INTERVAL)
    seconds = [least]
    for interval in intervals:
        try:
            seconds.append(2 * (interval if isinstance(interval, float) else parse_duration(str(interval))))
        except ValueError:  # none, or not a duration: the operator says so on the object
            continue
    return max(seconds)


def failing(table: dict[str, Tracked], elapsed: float) -> set[str]:
    """The keys of what has failed with an unchanged reason for its patience, or waited that long for an object
    the cluster does not have (see the module's rule)."""
    out = set()
    for name, item in table.items():
        missing = item.state == "Waiting" and any(k not in table for k in item.needs)
        if (item.state == "Failed" or missing) and elapsed - item.since >= item.patience:
            out.add(name)
    return out


def block(table: dict[str, Tracked], failed: set[str] | None = None) -> None:
    """Mark Blocked what waits, directly or not, for something that will not become Ready by itself (``failed``:
    the keys of what is failing, see :func:`failing`)."""
    failed = failed or set()
    changed = True
    while changed:
        changed = False
        for item in table.values():
            if item.ok or item.state in TERMINAL or item.key in failed:
                continue
            stuck = [table[k] for k in item.needs if k in table and (table[k].state in TERMINAL or k in failed)]
            if stuck:
                item.state, item.reason = "Blocked", "DependencyStuck"
                item.message = f"waits for {stuck[0].title}, which is {stuck[0].state}"
                changed = True


def verdict(table: dict[str, Tracked], failed: set[str] | None = None) -> str:
    """"converged" (everything Ready or Suspended), "stuck" (what is not can no longer become so), "failing" (what
    is not is stuck or failing: nothing can progress), or ""."""
    if all(item.ok for item in table.values()):
        return "converged"
    if all(item.ok or item.state in TERMINAL for item in table.values()):
        return "stuck"
    if failed and all(item.ok or item.state in TERMINAL or item.key in failed for item in table.values()):
        return "failing"
    return ""


def ordered(table: dict[str, Tracked]) -> list[Tracked]:
    """Objects in dependency order (what an object waits for, and what applied it, come before it; a sync that
    applies its own source, as flux-system does, comes after it), then by kind and name."""
    depth: dict[str, int] = {}
    closures: dict[str, set[str]] = {}

    def needed(name: str) -> set[str]:
        if name not in closures:
            found, todo = set(), [name]
            while todo:
                current = todo.pop()
                for k in table[current].needs if current in table else ():
                    if k not in found:
                        found.add(k)
                        todo.append(k)
            closures[name] = found
        return closures[name]

    def of(name: str, seen: frozenset[str]) -> int:
        if name not in depth:
            item = table[name]
            edges = [k for k in item.needs if k in table and k not in seen]
            if item.parent in table and item.parent not in seen and name not in needed(item.parent):
                edges.append(item.parent)
            depth[name] = 1 + max((of(k, seen | {name}) for k in edges), default=-1)
        return depth[name]

    return sorted(table.values(), key=lambda item: (of(item.key, frozenset()), item.kind, item.namespace, item.name))


def titles(table: dict[str, Tracked], keys: Iterable[str]) -> list[str]:
    """What ``keys`` name, as titles (dependsOn order visible in the view and the report)."""
    return [table[k].title if k in table else k.partition(".")[0] + " " + k.partition("/")[2] for k in keys]
