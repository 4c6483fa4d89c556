"""What ``helmop try`` shows: the live progress view (stderr: one line per object, in dependency order, redrawn in
place on a terminal, else a line per change), and the final report (stdout: a table, or ``-o json``)."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, TextIO

from .states import PATIENCE, SETTLED, Tracked, ordered, titles

ICONS = {"Ready": "✔", "Suspended": "‖", "Progressing": "…", "Waiting": "…"}  # anything else: ✗
MESSAGE = 160  # characters of a message in a progress line or a table cell (the failures say it whole)


def _clip(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[:width - 1] + "…"


def line(item: Tracked, table: dict[str, Tracked]) -> str:
    words = f"{ICONS.get(item.state, '✗')} {item.title}  {item.state}"
    said = ": ".join(part for part in (item.reason, _clip(item.message, MESSAGE)) if part)
    after = f"  (after {', '.join(titles(table, item.after))})" if item.after else ""
    return words + (f"  {said}" if said else "") + after


class Live:
    """The progress view: redrawn in place on a terminal; elsewhere (a CI log), a line each time an object's state
    or reason changes."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        self.drawn = 0
        self.said: dict[str, tuple[str, str]] = {}

    def __call__(self, table: dict[str, Tracked], elapsed: float) -> None:
        items = ordered(table)
        if self.tty:
            size = shutil.get_terminal_size()
            ready = sum(item.state in SETTLED for item in items)
            if len(items) > size.lines - 2:  # what is not Ready yet, as much of it as the screen holds
                items = [item for item in items if item.state not in SETTLED][:max(1, size.lines - 3)]
            width = size.columns - 1
            lines = [text if len(text) <= width else text[:width - 1] + "…" for text in (line(i, table) for i in items)]
            lines.append(f"  {elapsed:.0f}s: {ready} of {len(table)} Ready")
            up = f"\x1b[{self.drawn}F" if self.drawn else ""
            self.stream.write(up + "".join(f"\x1b[2K{text}\n" for text in lines) + "\x1b[J")
            self.drawn = len(lines)
        else:
            for item in items:
                now = (item.state, item.reason)
                if self.said.get(item.key) != now:
                    self.said[item.key] = now
                    self.stream.write(f"{elapsed:6.1f}s {line(item, table)}\n")
        self.stream.flush()


@dataclass
class Result:
    source: str  # what was tried: the path or URL, the ref, the commit
    commit: str
    path: str  # the cluster folder
    flux: bool
    verdict: str  # converged, stuck, failing (ended early), timeout, empty (nothing followed), broken (the folder)
    seconds: float
    table: dict[str, Tracked] = field(default_factory=dict)
    made: list[str] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)  # the objects of Flux's install not applied
    lockdown: list[str] = field(default_factory=list)  # the operator's flags of Flux's lockdown
    broken: str = ""  # why the cluster folder does not build
    kept: dict[str, str] = field(default_factory=dict)  # --keep: kubeconfig, log file, stop script
    ui: str = ""
    patience: float = PATIENCE  # --patience: what ended_early counts on

    @property
    def converged(self) -> bool:
        return self.verdict == "converged"

    @property
    def ended_early(self) -> str | None:
        """Why it ended before the timeout while objects could still be retried (verdict "failing")."""
        if self.verdict != "failing":
            return None
        roots = [item.title for item in ordered(self.table) if item.state in ("Failed", "Waiting")]
        return (f"ended before the timeout: nothing could progress. {', '.join(roots)} kept failing (or waiting for "
                f"what the cluster does not have) with the same reason for {self.patience:.0f}s or more (two of its "
                "retryIntervals when longer), and everything else not Ready waits for it or is stuck; "
                "--wait-for-transient waits for the whole --timeout instead")

    def failures(self) -> list[dict[str, str]]:
        """What is not Ready, the causes first (what is Blocked waits for one of them)."""
        if self.broken:
            return [{"object": f"{self.path or '.'} (the cluster folder)", "state": "Broken",
                     "reason": "BuildFailed", "message": self.broken}]
        bad = [item for item in ordered(self.table) if not item.ok]
        bad.sort(key=lambda item: item.state == "Blocked")
        out = [{"object": item.title, "state": item.state, "reason": item.reason, "message": item.message}
               for item in bad]
        if self.verdict == "empty":
            out.append({"object": f"{self.path or '.'} (the cluster folder)", "state": "Empty",
                        "reason": "NothingToFollow",
                        "message": "it holds no object helmop reconciles (HelmRelease, ConfigSync, Kustomization, "
                                   "a source): choose another with --path"})
        return out


def as_json(result: Result) -> str:
    objects = [{"kind": item.kind, "group": item.group, "namespace": item.namespace, "name": item.name,
                "state": item.state, "ready": item.ok, "reason": item.reason, "message": item.message,
                "readyAfter": item.ready_after, "dependsOn": titles(result.table, item.after),
                "appliedBy": titles(result.table, [item.parent])[0] if item.parent else None}
               for item in ordered(result.table)]
    out: dict[str, Any] = {"source": result.source, "commit": result.commit, "path": result.path or ".",
                           "fluxApi": result.flux, "converged": result.converged, "verdict": result.verdict,
                           "seconds": round(result.seconds, 1), "objects": objects, "failures": result.failures(),
                           "endedEarly": result.ended_early, "made": result.made, "leftOut": result.left_out,
                           "lockdown": result.lockdown}
    if result.ui:
        out["ui"] = result.ui
    if result.kept:
        out["kept"] = result.kept
    return json.dumps(out, indent=2) + "\n"


def as_table(result: Result) -> str:
    rows = [("OBJECT", "STATE", "READY AFTER", "DEPENDS ON", "REASON")]
    rows += [(item.title, item.state, f"{item.ready_after:.1f}s" if item.ready_after is not None else "-",
              ", ".join(titles(result.table, item.after)) or "-", item.reason or "-")
             for item in ordered(result.table)]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    text = "".join("  ".join(cell.ljust(width) for cell, width in zip(row[:4], widths, strict=True)) + "  "
                   + row[4] + "\n" for row in rows) if len(rows) > 1 else ""
    return text + _summary(result)


def _summary(result: Result) -> str:
    where = f"{result.source}, {result.path or '.'}"
    total = len(result.table)
    if result.converged:
        text = f"\n✔ {total} objects Ready in {result.seconds:.1f}s ({where})\n"
    else:
        failures = result.failures()
        text = f"\n✗ not converged ({result.verdict}, {result.seconds:.1f}s; {where}):\n"
        text += f"  {result.ended_early}\n" if result.ended_early else ""
        text += "".join(
            f"  ✗ {f['object']}: {f['state']} {f['reason']}: {f['message']}\n" for f in failures)
    text += "".join(f"  (made: {made})\n" for made in result.made)
    if result.left_out:
        kinds = Counter(title.partition(" ")[0] for title in result.left_out)
        text += (f"  (left out of Flux's install: {', '.join(f'{n} {kind}' for kind, n in sorted(kinds.items()))}: "
                 "helmop replaces Flux's controllers and serves Flux's kinds)\n")
    if result.ui:
        text += f"web UI: {result.ui}\n"
    return text
