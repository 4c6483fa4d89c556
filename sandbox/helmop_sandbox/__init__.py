"""An embedded Kubernetes API server for tests and demos: real clients (kubectl, helm, kopf, the
Python client) work against it unmodified. :class:`Sandbox` starts one; see ``embedded``."""

from .embedded import Sandbox

__all__ = ["Sandbox"]
