"""Reading a kubeconfig as kubectl does, and the in-cluster service account, into what a client needs.

Why not the ``kubernetes`` package's loader: reading kubeconfigs was all helmop used that package for,
and kopf imports it whenever it is installed (12 MiB of the operator's memory and a fifth of a second of
its start). What kubectl reads is read here: the files of ``$KUBECONFIG`` merged (the first file to name a
cluster, user or context wins, and the first current-context), paths relative to the file that names
them, ``*-data`` fields, a token file (re-read as it rotates), and exec credential plugins
(client.authentication.k8s.io). The legacy auth-provider and basic-auth users, which kube-apiserver 1.35
and kubectl no longer accept, are reported as such.
"""

from __future__ import annotations

import atexit
import base64
import binascii
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

DEFAULT = "~/.kube/config"
SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
MAX_FILE = 4 << 20  # a kubeconfig is a few KiB; bound what is parsed
EXEC_TIMEOUT = 60.0  # an exec plugin that hangs (waiting for a browser login) is an error, not a stall
EXEC_OUTPUT_MAX = 1 << 20


class KubeconfigError(Exception):
    """No usable kubeconfig (or in-cluster account); the message names the file or says what is missing."""


@dataclass(frozen=True)
class Credentials:
    server: str
    token: str = ""
    token_file: str = ""  # a token that rotates on disk: read again by the client as it may change
    ca_file: str = ""
    cert_file: str = ""
    key_file: str = ""
    insecure: bool = False
    namespace: str = ""  # the context's (in a pod: the pod's own), as kubectl defaults to it


def files(path: str | Path | None) -> list[Path]:
    """The kubeconfig files to merge: the one named, else those of $KUBECONFIG that exist, else the
    default file if it exists (empty: there is none; a file named that does not exist is an error)."""
    if path:
        if not Path(path).is_file():
            raise KubeconfigError(f"kubeconfig {path} does not exist")
        return [Path(path)]
    listed = [Path(p).expanduser() for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    if listed:
        existing = [p for p in listed if p.is_file()]
        if not existing:
            raise KubeconfigError(f"KUBECONFIG names {', '.join(map(str, listed))}, which does not exist")
        return existing
    default = Path(DEFAULT).expanduser()
    return [default] if default.is_file() else []


def load(path: str | Path | None = None, context: str | None = None) -> Credentials:
    """The credentials of ``context`` (default: the current-context) of the kubeconfig kubectl would read,
    else of the pod's service account; KubeconfigError says which file or entry is missing or wrong."""
    found = files(path)
    if not found:
        if context:
            raise KubeconfigError(f"context {context!r}: there is no kubeconfig (pass --kubeconfig)")
        return in_cluster()
    merged = _Merged.of(found)
    name = context or merged.current
    where = f"kubeconfig {', '.join(map(str, found))}"
    if not name:
        raise KubeconfigError(f"{where} has no current-context (pass --context)")
    ctx, _ = merged.entry("contexts", name, where)
    cluster, cluster_dir = merged.entry("clusters", str(ctx.get("cluster") or ""), where)
    user, user_dir = merged.entry("users", str(ctx.get("user") or ""), where) if ctx.get("user") else ({}, Path())
    if not cluster.get("server"):
        raise KubeconfigError(f"{where}: cluster {ctx.get('cluster')!r} has no server")
    ca_file = _file(cluster, "certificate-authority", cluster_dir, where)
    creds = Credentials(server=str(cluster["server"]), ca_file=ca_file,
                        insecure=bool(cluster.get("insecure-skip-tls-verify")),
                        namespace=str(ctx.get("namespace") or ""))
    return _user(creds, user, user_dir, cluster, where)


def in_cluster() -> Credentials:
    """The pod's service account, as client-go's in-cluster config reads it."""
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST", ""), os.environ.get("KUBERNETES_SERVICE_PORT", "")
    token_file = SERVICE_ACCOUNT / "token"
    if not host or not port or not token_file.is_file():
        raise KubeconfigError("no kubeconfig: ~/.kube/config does not exist, $KUBECONFIG is not set, and this is "
                              "not a pod in a cluster (pass --kubeconfig)")
    host = f"[{host}]" if ":" in host else host
    return Credentials(server=f"https://{host}:{port}", token=token_file.read_text().strip(),
                       token_file=str(token_file), ca_file=str(SERVICE_ACCOUNT / "ca.crt"),
                       namespace=in_cluster_namespace())


def in_cluster_namespace() -> str:
    """The namespace of the pod this runs in, from its service account ("" outside a pod)."""
    try:
        return (SERVICE_ACCOUNT / "namespace").read_text().strip()
    except OSError:
        return ""


@dataclass
class _Merged:
    entries: dict[str, dict[str, tuple[dict[str, Any], Path]]]  # section -> name -> (entry, its file's folder)
    current: str

    @classmethod
    def of(cls, paths: list[Path]) -> _Merged:
        merged = cls({"clusters": {}, "users": {}, "contexts": {}}, "")
        for path in paths:
            doc = _read(path)
            merged.current = merged.current or str(doc.get("current-context") or "")
            for section, entries in merged.entries.items():
                for item in doc.get(section) or []:
                    key = section[:-1]  # clusters: [{name, cluster: {...}}]
                    if isinstance(item, dict) and isinstance(item.get(key) or {}, dict):
                        entries.setdefault(str(item.get("name")), (item.get(key) or {}, path.parent))
        return merged

    def entry(self, section: str, name: str, where: str) -> tuple[dict[str, Any], Path]:
        if name not in self.entries[section]:
            raise KubeconfigError(f"{where}: no {section[:-1]} named {name!r}")
        return self.entries[section][name]


def _read(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            text = handle.read(MAX_FILE + 1)
        if len(text) > MAX_FILE:
            raise KubeconfigError(f"kubeconfig {path} is larger than {MAX_FILE >> 20} MiB")
        doc = yaml.safe_load(text) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise KubeconfigError(f"kubeconfig {path} cannot be read: {exc}") from None
    if not isinstance(doc, dict):
        raise KubeconfigError(f"kubeconfig {path} is not a mapping")
    return doc


def _user(creds: Credentials, user: dict[str, Any], folder: Path, cluster: dict[str, Any],
          where: str) -> Credentials:
    if user.get("auth-provider"):
        provider = user["auth-provider"]
        name = provider.get("name", "") if isinstance(provider, dict) else ""
        raise KubeconfigError(f"{where}: auth-provider {name!r} is not supported (kubectl's built-in providers were "
                              "removed; use its exec credential plugin)")
    if user.get("username") or user.get("password"):
        raise KubeconfigError(f"{where}: basic authentication (username/password) is not accepted by Kubernetes "
                              "since 1.19; use a token, a client certificate or an exec plugin")
    token, token_file = str(user.get("token") or ""), ""
    if not token and user.get("tokenFile"):
        token_file = str(_resolve(str(user["tokenFile"]), folder))
        try:
            token = Path(token_file).read_text().strip()
        except OSError as exc:
            raise KubeconfigError(f"{where}: tokenFile cannot be read: {exc.strerror}") from None
    cert = _file(user, "client-certificate", folder, where)
    key = _file(user, "client-key", folder, where)
    if user.get("exec"):
        issued = _exec(user["exec"], folder, cluster, where)
        token = str(issued.get("token") or token)
        if issued.get("clientCertificateData"):
            cert = _materialise(str(issued["clientCertificateData"]).encode())
            key = _materialise(str(issued.get("clientKeyData") or "").encode())
    return Credentials(server=creds.server, token=token, token_file=token_file, ca_file=creds.ca_file,
                       cert_file=cert, key_file=key, insecure=creds.insecure, namespace=creds.namespace)


def _file(entry: dict[str, Any], field: str, folder: Path, where: str) -> str:
    """A file a client reads: ``<field>`` (relative to the kubeconfig that names it) or ``<field>-data``
    (base64, written to a private file)."""
    if entry.get(f"{field}-data"):
        try:
            return _materialise(base64.b64decode(str(entry[f"{field}-data"]), validate=True))
        except (binascii.Error, ValueError):
            raise KubeconfigError(f"{where}: {field}-data is not base64") from None
    return str(_resolve(str(entry[field]), folder)) if entry.get(field) else ""


def _resolve(name: str, folder: Path) -> Path:
    path = Path(name).expanduser()
    return path if path.is_absolute() else folder / path


def _exec(spec: Any, folder: Path, cluster: dict[str, Any], where: str) -> dict[str, Any]:
    """Run an exec credential plugin (client.authentication.k8s.io) and return its ExecCredential's status."""
    args = (spec.get("args") or []) if isinstance(spec, dict) else None
    if not isinstance(spec, dict) or not isinstance(args, list) or not isinstance(spec.get("env") or [], list):
        raise KubeconfigError(f"{where}: the exec plugin is not a mapping with a list of args and of env entries")
    command = str(spec.get("command") or "")
    if not command:
        raise KubeconfigError(f"{where}: the exec plugin names no command")
    if os.sep in command:  # as client-go: a relative path is the kubeconfig's, a bare name is looked up
        command = str(_resolve(command, folder))
    env = {**os.environ, **{str(e.get("name")): str(e.get("value", "")) for e in spec.get("env") or []
                            if isinstance(e, dict)}, "KUBERNETES_EXEC_INFO": json.dumps(_exec_info(spec, cluster))}
    done = _run_plugin([command, *map(str, args)], env, where)
    try:
        credential = json.loads(done.stdout[:EXEC_OUTPUT_MAX])
        status = credential["status"]
        if not isinstance(status, dict):
            raise TypeError
    except (ValueError, KeyError, TypeError):
        raise KubeconfigError(f"{where}: the exec plugin {Path(command).name} did not print an ExecCredential "
                              "with a status") from None
    return status


def _exec_info(spec: dict[str, Any], cluster: dict[str, Any]) -> dict[str, Any]:
    """The ExecCredential request a plugin reads from KUBERNETES_EXEC_INFO (with the cluster when it asks)."""
    request: dict[str, Any] = {"apiVersion": spec.get("apiVersion") or "client.authentication.k8s.io/v1",
                               "kind": "ExecCredential", "spec": {"interactive": False}}
    if spec.get("provideClusterInfo"):
        request["spec"]["cluster"] = {k: cluster[k] for k in (
            "server", "certificate-authority-data", "insecure-skip-tls-verify", "tls-server-name") if k in cluster}
    return request


def _run_plugin(argv: list[str], env: dict[str, str], where: str) -> subprocess.CompletedProcess[bytes]:
    """The plugin's run; KubeconfigError when it cannot start, times out or fails."""
    name = Path(argv[0]).name
    try:
        done = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=EXEC_TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise KubeconfigError(f"{where}: the exec plugin {name} failed: {exc}") from None
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or [""]
        raise KubeconfigError(f"{where}: the exec plugin {name} exited {done.returncode}: {said[0][:200]}")
    return done


_private: list[Path] = []  # this process's folder of materialised *-data files


def _materialise(content: bytes) -> str:
    """A file holding ``content``, readable by this user only, removed when the process ends (TLS
    libraries read certificates and keys from files)."""
    if not _private:
        _private.append(Path(tempfile.mkdtemp(prefix="helmop-kubeconfig-")))
        atexit.register(shutil.rmtree, _private[0], True)
    path = _private[0] / hashlib.sha256(content).hexdigest()
    if not path.exists():  # written aside and renamed: a reader in another thread never sees half of it
        fd, partial = tempfile.mkstemp(dir=_private[0])
        with os.fdopen(fd, "wb") as handle:
            handle.write(content)
        os.replace(partial, path)
    return str(path)
