"""``helmop why KIND/NAME``: what an object waits for, down to the root causes (:mod:`helmop.views.why`), as a
table drawn as a tree or as JSON."""

from __future__ import annotations

import json

from helmop.infra.kube import Kube
from helmop.infra.worker import Worker
from helmop.views.why import MISSING, READY, Link, root_causes, why

from . import verbs
from .errors import Failed
from .show import table

OUTPUTS = ("table", "json")


def split(kind: str, name: str | None) -> tuple[str, str]:
    """KIND and NAME from ``KIND/NAME`` or ``KIND NAME``, as kubectl takes them."""
    if name is None:
        kind, slash, name = kind.partition("/")
        if not slash:
            raise Failed(f"give KIND/NAME (or KIND NAME), not {kind!r}")
    if not kind or not name or "/" in name:
        raise Failed(f"give KIND/NAME (or KIND NAME), not {kind}/{name}")
    return kind, name


async def run(kube: Kube, kind: str, namespace: str, name: str, output: str) -> str:
    """What ``why`` prints for the object; Failed when it cannot be read."""
    ref = await verbs.reference(kube, kind, namespace, name)
    cel = Worker()
    try:
        top = await why(kube, ref, cel)
    finally:
        await cel.close()
    if top.state == MISSING:
        raise Failed(top.message)
    if output == "json":
        return json.dumps({"object": top.json(), "rootCauses": [link.json(below=False) for link in root_causes(top)]},
                          indent=2)
    return text(top)


def text(top: Link) -> str:
    """The chain as a table whose first column is drawn as a tree, then the root causes."""
    if top.state == READY and not top.waits_for:
        return f"{top.title} is Ready and waits for nothing" + (f" ({top.message})" if top.message else "")
    rows = [["OBJECT", "VIA", "STATE", "REASON", "MESSAGE"], *_rows(top, "", "")]
    causes = [f"root cause: {link.title} is {link.state}" + (f": {link.reason}" if link.reason else "")
              + (f": {link.message}" if link.message else "") for link in root_causes(top)]
    return "\n".join([table(rows), "", *causes]).rstrip()


def _rows(link: Link, prefix: str, child_prefix: str) -> list[list[str]]:
    out = [[prefix + link.title, link.via or "-", link.state, link.reason or "-",
            link.message.replace("\n", " ") or "-"]]
    for i, below in enumerate(link.waits_for):
        last = i == len(link.waits_for) - 1
        out += _rows(below, child_prefix + ("└── " if last else "├── "), child_prefix + ("    " if last else "│   "))
    return out
