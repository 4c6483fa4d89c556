"""What a ConfigSync's sync does, decided from what was observed, without I/O: before anything is applied, whether
it is refused and what it prunes once everything is applied (:func:`planned`); then, stage by stage, what becomes
of each object once it was read and its apply dry-run (:func:`staged`): created, configured, left unchanged,
recreated (forced: an immutable field changed) or skipped (its ssa marks), or refused, which stops the stage and
those after it. The rules are :mod:`.ssa`'s and :mod:`.fieldowners`'s."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from helmop.api.flux import versions
from helmop.api.ignorerules import IgnoreRule, ignored
from helmop.api.status.configsync import AppliedObject

from . import fieldowners, ssa
from .sync import Marks, ObjectId, Refusal, Wanted, claims, id_of, to_prune

MANAGER = "helmop-configsync"  # the field manager of every apply
FORCE = "kustomize.toolkit.fluxcd.io/force"  # on an object: recreate it when an immutable field changed

Live = Mapping[ObjectId, dict[str, Any] | None]


@dataclass(frozen=True)
class Plan:
    """A sync before its apply: refused (nothing applied), or what leaves the cluster once all is applied."""

    refusal: Refusal | None
    prune: tuple[ObjectId, ...] = ()  # what left the source, in prune order


def planned(want: Wanted, live: Live, marks: Marks, inventory: tuple[AppliedObject, ...], *,
            confined: Refusal | None, adopt: bool, prune: bool) -> Plan:
    """The plan of a sync applying ``want`` over ``live`` (the objects as read; none when ``confined``: what
    :func:`.sync.confinement` refused) after ``inventory``; ``adopt``: any object no other sync manages is taken
    over (a Flux Kustomization's way); ``prune`` (spec.prune): what left the source is deleted."""
    if confined is not None:
        return Plan(confined)
    left = frozenset(oid for oid, obj in want.objects.items() if ssa.skipped(obj, live[oid]))
    refusal = claims(want, live, marks, inventory, adopt=adopt, left=left)
    gone = to_prune([id_of(x) for x in inventory], list(want.objects)) if prune else []
    return Plan(refusal, tuple(gone) if refusal is None else ())


@dataclass(frozen=True)
class Rules:
    """What the spec says of every apply: spec.force, spec.ignore."""

    force: bool = False
    ignore: tuple[IgnoreRule, ...] = ()


class Step(Enum):
    """The request of an object's observation that the API server refused."""

    READ = "read"
    TAKE_OVER = "take-over"
    DRY_RUN = "dry-run"


@dataclass(frozen=True)
class Failure:
    step: Step
    status: int
    reason: str
    message: str


@dataclass(frozen=True)
class Seen:
    """One object before its stage is applied: as it is live (None: absent), why it is left alone (then nothing
    else is asked), its apply's dry run, or the request that failed."""

    live: dict[str, Any] | None
    skipped: str = ""
    dry_run: dict[str, Any] = field(default_factory=dict)
    failure: Failure | None = None


def prepared(obj: dict[str, Any], live: dict[str, Any] | None) -> tuple[str, list[dict[str, Any]]]:
    """Before a dry run: why ``obj`` is not applied ("" when it is), and the JSON patch that makes this sync's
    manager own what kubectl wrote of it (none under ``ssa: Merge``, or when there is nothing to take over)."""
    why = ssa.skipped(obj, live)
    if why or live is None or ssa.merges(obj, live):
        return why, []
    return "", fieldowners.taken_over(live, MANAGER)


class Act(Enum):
    CREATE = "create"
    CONFIGURE = "configure"
    UNCHANGED = "unchanged"
    RECREATE = "recreate"  # deleted, then created: an immutable field changed and the apply is forced
    SKIP = "skip"


@dataclass(frozen=True)
class Action:
    """What the apply does with one object, and why."""

    oid: ObjectId
    act: Act
    payload: dict[str, Any]  # what is applied
    why: str
    uid: str = ""  # of the live object left unchanged


@dataclass(frozen=True)
class Stage:
    """A stage's plan: its actions, in apply order, unless an object is refused (each said, with where it is)."""

    actions: tuple[Action, ...]
    refused: tuple[str, ...]


def staged(want: Wanted, stage: list[ObjectId], seen: Mapping[ObjectId, Seen], rules: Rules) -> Stage:
    """The plan of ``stage`` (ids of ``want``), each object ``seen`` as it is and dry-run."""
    actions: list[Action] = []
    refused: list[str] = []
    for oid in stage:
        decided = action(oid, want.objects[oid], seen[oid], rules)
        if isinstance(decided, str):
            refused.append(f"{decided} (apiVersion {oid.api_version}, {want.origins[oid]})")
        else:
            actions.append(decided)
    return Stage(tuple(actions), tuple(refused))


def action(oid: ObjectId, obj: dict[str, Any], seen: Seen, rules: Rules) -> Action | str:
    """What becomes of ``obj``, or why the API server refuses it."""
    failure = seen.failure
    if failure is not None:
        return _failed(oid, obj, seen, failure, rules)
    if seen.skipped:
        return Action(oid, Act.SKIP, obj, seen.skipped)
    if seen.live is None:
        return Action(oid, Act.CREATE, obj, "absent")
    paths = ignored(rules.ignore, seen.dry_run)
    if not ssa.drifted(seen.live, seen.dry_run, paths):
        return Action(oid, Act.UNCHANGED, obj, "as its dry run", str(seen.live["metadata"].get("uid", "")))
    return Action(oid, Act.CONFIGURE, fieldowners.resolved(obj, seen.live, seen.dry_run, paths, MANAGER), "drifted")


def _failed(oid: ObjectId, obj: dict[str, Any], seen: Seen, failure: Failure, rules: Rules) -> Action | str:
    """A forced recreate when the dry run refused a change of an immutable field; else the refusal."""
    said = f"({failure.reason}): {failure.message}"
    if failure.step is Step.READ:
        # a version of Flux's that Flux removed, where it is not served (--flux-api=current): what to write instead
        removed = [r.message for r in versions.refusals(obj) if r.reason == "RemovedAPIVersion"]
        return f"{oid} dry-run failed {said}" + "".join(f": {m}" for m in removed if failure.status == 404)
    if failure.step is Step.TAKE_OVER:
        return f"{oid} metadata.managedFields cleanup failed {said}"
    forced = rules.force or ssa.mark(obj, FORCE) == "enabled"
    if seen.live is not None and failure.status == 422 and "immutable" in failure.message and forced:
        return Action(oid, Act.RECREATE, obj, "an immutable field changed (force)")
    return f"{oid} dry-run failed {said}"
