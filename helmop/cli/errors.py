"""The errors a verb ends with for the user: their messages are printed as they are."""

from __future__ import annotations

import errno
import os
import shutil


class Failed(Exception):
    """A verb could not do what was asked; the message is for the user."""


def missing_tool(verb: str, exc: FileNotFoundError) -> str | None:
    """The one line that says ``verb`` needs a program that is not there, when ``exc`` is a child process of helm,
    kubectl or git that could not start: helm and kubectl as helmop finds them (``$HELMOP_HELM``,
    ``$HELMOP_KUBECTL``, else on the PATH). None for any other missing file (a path the user gave, say)."""
    started = str(exc.filename or "")
    named = {"helm": os.environ.get("HELMOP_HELM"), "kubectl": os.environ.get("HELMOP_KUBECTL"), "git": None}
    for tool, variable in named.items():
        if started == (variable or tool):
            where = f"$HELMOP_{tool.upper()} names {started}, which does not exist" if variable \
                else f"{tool} is not on the PATH"
            return f"✗ helmop {verb} needs {tool}: {where} (scripts/setup puts helm and kubectl in .tools/bin)"
    return None


def program(tool: str) -> str:
    """The path of ``tool`` (helm or kubectl, as :func:`missing_tool` finds them) for a verb that hands it on to
    something else to start; FileNotFoundError, as starting it would raise, where it is not there."""
    started = os.environ.get(f"HELMOP_{tool.upper()}") or tool
    found = shutil.which(started)
    if found is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), started)
    return found
