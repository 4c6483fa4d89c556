"""``helmop logs [KIND NAME]``: the operator's log lines (about one object, when named), from the operator's
pods in a cluster (``app.kubernetes.io/name=helmop``, the chart's label) or, for an operator that is
not a pod (``helmop run --log-file``, the demo), from its log file; ``--follow`` keeps reading.

Lines are matched as ``views.operator_logs`` matches them."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TextIO

from helmop.infra.kube import Kube
from helmop.views.operator_logs import POD_SELECTOR, about, operator_pods, pod_lines, readable

from .errors import Failed

LOG_FILE_ENV = "HELMOP_LOG_FILE"  # read by `helmop run --log-file` and `helmop logs` alike
POLL = 0.5  # a followed file is read again this often


def log_file_default() -> str | None:
    return os.environ.get(LOG_FILE_ENV) or None


async def file_lines(path: Path, follow: bool) -> AsyncIterator[str]:
    """The file's lines; following, also those written later (across a rotation, as tail -F)."""
    try:
        handle = path.open(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise Failed(f"log file {path}: {exc.strerror}") from None
    try:
        while True:
            line = handle.readline()
            if line:
                yield line.rstrip("\n")
                continue
            if not follow:
                return
            await asyncio.sleep(POLL)
            try:
                rotated = path.stat().st_ino != os.fstat(handle.fileno()).st_ino
            except FileNotFoundError:
                continue
            if rotated:
                handle.close()
                handle = path.open(encoding="utf-8", errors="replace")
    finally:
        handle.close()


async def logs(kube: Kube, *, kind: str, namespace: str, name: str, log_file: str | None, follow: bool,
               tail: int, operator_namespace: str | None, out: TextIO | None = None) -> None:
    out = out or sys.stdout  # the stream of the moment (not of import time)
    if log_file:
        lines = file_lines(Path(log_file), follow)
    else:
        pods = await operator_pods(kube, operator_namespace)
        if not pods:
            raise Failed(f"no operator pods ({POD_SELECTOR}) in {operator_namespace or 'any namespace'}, and no "
                         f"log file: give --log-file (or ${LOG_FILE_ENV}) for an operator run with --log-file")
        lines = pod_lines(kube, pods, follow, tail)
    shown: list[str] = []
    async for line in lines:
        if about(line, kind, namespace, name):
            if follow:
                print(readable(line), file=out, flush=True)
            else:
                shown.append(readable(line))
    if log_file and tail >= 0:  # a pod's log is cut by the API server (tailLines)
        shown = shown[max(0, len(shown) - tail):]
    if shown:
        print("\n".join(shown), file=out)
