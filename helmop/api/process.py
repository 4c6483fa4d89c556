"""The environment helmop gives the programs it runs (helm, git): what they need to reach a network and
a cluster, and nothing else of the operator's. A tenant's chart or repository can make them run code
(a post-renderer, a git helper) or print their environment into a message; the operator's own variables
(tokens, cloud credentials, configuration) are not theirs to see."""

from __future__ import annotations

import functools
import os
import shutil

# Variables a program may need to reach its servers: where to find programs and certificates, proxies,
# the locale, and the cluster helm acts on (the in-cluster API address, or the kubeconfig's path).
PASSED = ("PATH", "LANG", "LC_ALL", "TZ", "SSL_CERT_FILE", "SSL_CERT_DIR", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY",
          "http_proxy", "https_proxy", "no_proxy", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT",
          "KUBECONFIG")


def minimal_env(home: str, **extra: str) -> dict[str, str]:
    """The passed-on variables that are set, a scratch ``HOME`` (no dotfiles of the operator's user are
    read), and ``extra``."""
    env = {key: os.environ[key] for key in PASSED if key in os.environ}
    env.setdefault("PATH", os.defpath)
    env["HOME"] = home
    env.update(extra)
    return env


# What helmop runs on tenants' behalf (helm, git, CEL) runs at a lower CPU priority than the operator: in a
# pod they share its CPU, and a reconcile loop waiting for CPU behind them answers probes and watches late.
# (nice execs the program, so all of its threads have the priority.) Looked up when first asked, not at import.
# Each such process gets a process group of its own (``process_group=0``: stopped as one with killpg) in the
# operator's session: a session of its own is a scheduling group of its own where Linux's autogroup is on
# (most distributions), as heavy as the whole operator whatever its nice; ten helm processes then took the CPU
# from the operator's event loop for 100-250 ms at a time.
@functools.cache
def niced() -> tuple[str, ...]:
    """The prefix that runs a program at the lower priority (nothing where ``nice`` is missing)."""
    return ("nice", "-n", "10") if shutil.which("nice") else ()
