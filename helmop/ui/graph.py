"""The dependency graph: helmop's resources (its own kinds, Flux's, app kinds) as boxes, ``dependsOn`` and
``sourceRef`` (and an app's HelmRelease) as arrows, laid out in columns (what nothing else needs on the left, each
resource one column right of the last thing it needs) for an SVG the page draws. A reference names a kind of its
own family (a Flux Kustomization's sourceRef a Flux GitRepository), as the operator reads it. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from helmop.api.kinds import HELMRELEASE, Kind, family_of, key_of
from helmop.api.objects import ObjectKey, Resource
from helmop.api.status.app import AppStatus
from helmop.views.cells import health
from helmop.views.statuses import status_of

BOX_W, BOX_H, GAP_X, GAP_Y, MARGIN = 210, 44, 70, 14, 10
MAX_NODES = 500  # more than a screen can show: the page asks for a namespace first
NOT_DRAWN = ("Provider", "Alert", "Receiver")  # notifications and webhooks: nothing depends on them


@dataclass(frozen=True)
class Box:
    key: ObjectKey
    kind: Kind
    health: str
    x: int
    y: int

    @property
    def label(self) -> str:
        return self.key[2] if len(self.key[2]) <= 26 else self.key[2][:25] + "…"


@dataclass(frozen=True)
class Arrow:
    x1: int
    y1: int
    x2: int
    y2: int
    why: str  # dependsOn | sourceRef | release


@dataclass(frozen=True)
class Layout:
    boxes: list[Box]
    arrows: list[Arrow]
    width: int
    height: int


def _needs(obj: dict[str, Any]) -> list[tuple[ObjectKey, str]]:
    """What one resource needs: (kind, namespace, name) and why."""
    this = Resource(obj)
    out: list[tuple[ObjectKey, str]] = []
    source = this.source_ref
    if source.get("name"):
        kind = str(source.get("kind") or "GitRepository")
        found = family_of(this.api_version.rpartition("/")[0]).source(kind)
        out.append((ObjectKey(found.key if found else key_of(this.api_version, kind),
                              str(source.get("namespace") or this.namespace), str(source["name"])), "sourceRef"))
    for dep in this.spec.get("dependsOn") or []:  # of its own kind, or of another (drawn when it is one of these)
        if isinstance(dep, dict) and dep.get("name"):
            same = not dep.get("kind") or (dep.get("kind") == this.kind and not dep.get("apiVersion"))
            kind = this.key.kind if same else key_of(str(dep.get("apiVersion") or ""), str(dep["kind"]))
            out.append((ObjectKey(kind, str(dep.get("namespace") or this.namespace), str(dep["name"])), "dependsOn"))
    status = status_of(obj)
    if isinstance(status, AppStatus) and status.helm_release:  # a Jenkins's, an app resource's
        out.append((ObjectKey(HELMRELEASE.key, this.namespace, status.helm_release), "release"))
    return out


def layout(objects: list[tuple[Kind, dict[str, Any]]]) -> Layout:
    """``objects``: (kind, object) pairs."""
    found = {Resource(o).key: (kind, o) for kind, o in objects}
    needs = {key: [(k, why) for k, why in _needs(obj) if k in found and k != key] for key, (_, obj) in found.items()}
    columns: dict[ObjectKey, int] = {}

    def column(key: ObjectKey, visiting: frozenset[ObjectKey]) -> int:
        if key not in columns:  # a cycle (refused by the operator, but drawn) stops where it closes
            columns[key] = 1 + max((column(k, visiting | {key}) for k, _ in needs[key] if k not in visiting),
                                   default=-1)
        return columns[key]

    rows: dict[int, int] = {}
    boxes: dict[ObjectKey, Box] = {}
    for key in sorted(found, key=lambda k: (column(k, frozenset()), k)):
        col = columns[key]
        row = rows[col] = rows.get(col, -1) + 1
        boxes[key] = Box(key, found[key][0], health(found[key][1]), MARGIN + col * (BOX_W + GAP_X),
                         MARGIN + row * (BOX_H + GAP_Y))
    arrows = [Arrow(boxes[k].x + BOX_W, boxes[k].y + BOX_H // 2, box.x, box.y + BOX_H // 2, why)
              for key, box in boxes.items() for k, why in needs[key]]
    width = max((b.x for b in boxes.values()), default=0) + BOX_W + MARGIN
    height = max((b.y for b in boxes.values()), default=0) + BOX_H + MARGIN
    return Layout(list(boxes.values()), arrows, width, height)
