"""Which cluster and namespace a verb acts on, read as kubectl reads them: ``--kubeconfig`` (else
$KUBECONFIG, ~/.kube/config, in-cluster), ``--context`` (else the current-context), and ``-n`` (else the
context's namespace, else ``default``); ``-A`` for every namespace where a verb lists."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from helmop.infra.kube import Connection, Kube
from helmop.infra.kubeconfig import KubeconfigError

from .argtree import Arg, arg
from .errors import Failed


@dataclass
class Target:
    kube: Kube
    namespace: str  # -n, else the context's, else default
    all_namespaces: bool = False

    @property
    def scope(self) -> str | None:
        """The namespace to list in (None: every namespace)."""
        return None if self.all_namespaces else self.namespace


def connect(args: argparse.Namespace) -> Target:
    """The cluster and namespace the flags name (what a completion has parsed so far will do)."""
    try:
        conn = Connection.from_kubeconfig(getattr(args, "kubeconfig", None), getattr(args, "context", None))
    except KubeconfigError as exc:
        raise Failed(str(exc)) from None
    return Target(Kube(conn), getattr(args, "namespace", None) or conn.namespace or "default",
                  bool(getattr(args, "all_namespaces", False)))


FLAGS = (arg("--kubeconfig", help="kubeconfig to use (default: $KUBECONFIG, ~/.kube/config)"),
         arg("--context", help="kubeconfig context to use (default: its current-context)"),
         arg("--namespace", "-n", help="namespace (default: the context's, else default)"))
EVERY_NAMESPACE = arg("--all-namespaces", "-A", action="store_true", help="in every namespace")


def flags(*, all_namespaces: bool = False) -> tuple[Arg, ...]:
    """The flags every verb that talks to a cluster takes (-A: where it lists)."""
    return (*FLAGS, EVERY_NAMESPACE) if all_namespaces else FLAGS

