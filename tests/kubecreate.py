"""What ``kubectl create`` (a namespace, serviceaccount, generic secret, configmap, rolebinding or clusterrolebinding)
and ``kubectl apply -f -`` of objects that do not exist yet send, as kubectl sends it: the tests create about two
thousand objects a run that way, and a kubectl process for each was most of the suite's kubectl CPU
(:class:`tests.tools.Runner` posts them in-process). Only the plain forms are read here (for ``create`` a name,
``--from-literal``, for Secrets ``--type``, for bindings their role and ``--user``, ``--group``,
``--serviceaccount``; for ``apply`` documents exactly as ``json.dumps`` or PyYAML's ``safe_dump`` wrote them, so no
YAML reads differently here and in kubectl); anything else, an object that exists (a three-way merge) and every
refusal are kubectl's."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

RBAC = "rbac.authorization.k8s.io"
# what kubectl creates: its apiVersion, kind and resource, and whether it is namespaced
KINDS = {"namespace": ("v1", "Namespace", "namespaces", False),
         "serviceaccount": ("v1", "ServiceAccount", "serviceaccounts", True),
         "secret": ("v1", "Secret", "secrets", True), "configmap": ("v1", "ConfigMap", "configmaps", True),
         "rolebinding": (f"{RBAC}/v1", "RoleBinding", "rolebindings", True),
         "clusterrolebinding": (f"{RBAC}/v1", "ClusterRoleBinding", "clusterrolebindings", False)}


@dataclass(frozen=True)
class Creation:
    path: str  # the collection posted to
    body: dict[str, Any]
    said: str  # what kubectl prints: "secret/<name> created"


def _kubectl(args: tuple[str, ...]) -> tuple[str, list[str]]:
    """The namespace (``-n`` first, else the default) and the rest of a kubectl command line ([] for another
    command)."""
    rest = list(args[1:]) if args[:1] == ("kubectl",) else []
    if rest[:1] == ["-n"] and len(rest) > 1:
        return rest[1], rest[2:]
    return "default", rest


def creation(args: tuple[str, ...]) -> Creation | None:
    """What ``kubectl <args>`` would create, when it is one of the plain forms; None otherwise."""
    namespace, rest = _kubectl(args)
    if rest[:1] != ["create"] or len(rest) < 3:
        return None
    what, rest = rest[1], rest[2:]
    if what == "secret":
        if rest[:1] != ["generic"] or len(rest) < 2:
            return None
        rest = rest[1:]
    if what not in KINDS or rest[0].startswith("-"):
        return None
    name, flags = rest[0], rest[1:]
    api_version, kind, plural, namespaced = KINDS[what]
    if what in ("secret", "configmap"):
        data = _data(flags, what)
    else:
        data = _binding(flags, what) if what.endswith("rolebinding") else None if flags else {}
    if data is None:
        return None
    body: dict[str, Any] = {"apiVersion": api_version, "kind": kind, "metadata": {"name": name}, **data}
    if what == "namespace":
        body.update(spec={}, status={})
    path = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
    if namespaced:
        path += f"/namespaces/{namespace}"
        body["metadata"]["namespace"] = namespace
    return Creation(f"{path}/{plural}?fieldManager=kubectl-create&fieldValidation=Strict", body,
                    f"{what}/{name} created")


def _binding(flags: list[str], what: str) -> dict[str, Any] | None:
    """roleRef and subjects, as kubectl lists them (users, then groups, then ServiceAccounts)."""
    roles, subjects = [], {"--user": [], "--group": [], "--serviceaccount": []}
    for flag in flags:
        option, _, value = flag.partition("=")
        if option in ("--clusterrole", "--role") and value and (option == "--clusterrole" or what == "rolebinding"):
            roles.append({"apiGroup": RBAC, "kind": "ClusterRole" if option == "--clusterrole" else "Role",
                          "name": value})
        elif option in subjects and value and (option != "--serviceaccount" or value.count(":") == 1):
            subjects[option].append(value)
        else:
            return None
    if len(roles) != 1:
        return None
    listed = [{"apiGroup": RBAC, "kind": kind, "name": name}
              for kind, option in (("User", "--user"), ("Group", "--group")) for name in subjects[option]]
    listed += [{"kind": "ServiceAccount", "namespace": account.split(":")[0], "name": account.split(":")[1]}
               for account in subjects["--serviceaccount"]]
    return {"roleRef": roles[0], **({"subjects": listed} if listed else {})}


def _data(flags: list[str], what: str) -> dict[str, Any] | None:
    data: dict[str, str] = {}
    extra: dict[str, Any] = {}
    for flag in flags:
        option, _, value = flag.partition("=")
        if option == "--from-literal" and "=" in value:
            key, _, text = value.partition("=")
            if key in data:
                return None  # kubectl refuses a key given twice: its own error
            data[key] = base64.b64encode(text.encode()).decode() if what == "secret" else text
        elif option == "--type" and what == "secret" and value:
            extra["type"] = value
        else:
            return None
    return {**extra, **({"data": data} if data else {})}


def plain(kubeconfig: Path | str) -> bool:
    """Whether the kubeconfig names one cluster (by its CA), one user (by a token) and the default namespace, as the
    sandbox's does: the identity and namespace the in-process client (:class:`tests.kubeapi.Api`) takes are then the
    ones kubectl would."""
    config = yaml.safe_load(Path(kubeconfig).read_text()) or {}
    clusters, users, contexts = config.get("clusters") or [], config.get("users") or [], config.get("contexts") or []
    return (len(clusters) == len(users) == len(contexts) == 1
            and (contexts[0].get("context") or {}).get("namespace") in (None, "", "default")
            and "certificate-authority-data" in (clusters[0].get("cluster") or {})
            and set(users[0].get("user") or {}) == {"token"})


LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def applied(args: tuple[str, ...], stdin: str) -> tuple[str, list[dict[str, Any]]] | None:
    """(namespace, documents) of a plain ``kubectl [-n NS] apply -f -``; None otherwise."""
    namespace, rest = _kubectl(args)
    if rest != ["apply", "-f", "-"]:
        return None
    docs = _documents(stdin)
    if not docs or not all(isinstance(doc, dict) and isinstance(doc.get("apiVersion"), str) and isinstance(
            doc.get("kind"), str) and isinstance((doc.get("metadata") or {}).get("name"), str) for doc in docs):
        return None
    if any(doc["kind"].endswith("List") or _floats(doc) for doc in docs):
        return None
    return namespace, docs


def _documents(text: str) -> list[Any] | None:
    try:
        doc = json.loads(text)
        return [doc] if json.dumps(doc) == text else None
    except ValueError:
        pass
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError:
        return None
    return docs if docs and yaml.safe_dump_all(docs) == text and all(_go_strings(d) for d in docs) else None


# What kubectl's YAML (go-yaml v2, YAML 1.1) reads as something other than a string when it is written plain, which
# PyYAML writes plain some of (``y``, ``0o17``, ``1e3``, ``017``)
_GO_WORDS = {"y", "Y", "yes", "Yes", "YES", "on", "On", "ON", "n", "N", "no", "No", "NO", "off", "Off", "OFF", "true",
             "True", "TRUE", "false", "False", "FALSE", "", "~", "null", "Null", "NULL", "<<"}
_GO_SCALAR = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?"  # a float
                        r"|[-+]?(0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)"  # an int, base 0
                        r"|[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN)")
_GO_DATE = re.compile(r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}")


def _scalars(value: Any) -> Iterator[Any]:
    """Every key and leaf of a document."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _scalars(item)
    elif isinstance(value, list):
        for item in value:
            yield from _scalars(item)
    else:
        yield value


def _go_strings(value: Any) -> bool:
    """Whether every string in ``value`` (keys too) is one go-yaml reads as a string however it is written."""
    return not any(isinstance(s, str) and (s in _GO_WORDS or _GO_SCALAR.fullmatch(s.replace("_", ""))
                                           or _GO_DATE.match(s)) for s in _scalars(value))


def _floats(value: Any) -> bool:
    """Whether a float is in it (Go writes them in other forms: kubectl's annotation would differ)."""
    return any(isinstance(s, float) for s in _scalars(value))


def with_last_applied(doc: dict[str, Any], namespace: str) -> dict[str, Any]:
    """``doc`` as kubectl's client-side apply creates it: in ``namespace`` ("" for a cluster-scoped kind), with the
    annotation of what was applied (Go's JSON of it: keys sorted, HTML characters escaped, a newline after)."""
    meta = dict(doc["metadata"])
    if namespace:
        meta["namespace"] = namespace
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k != LAST_APPLIED}
    bare = {**doc, "metadata": {**meta, "annotations": annotations}}
    text = json.dumps(bare, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"),
                          ("\u2029", "\\u2029")):
        text = text.replace(char, escaped)
    return {**doc, "metadata": {**meta, "annotations": {**annotations, LAST_APPLIED: text + "\n"}}}
