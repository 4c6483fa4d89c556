"""What ``helmop try`` applies, read from the revision's files: the cluster folder (``--path``, else found),
its objects built as a Kustomization over it builds them (``flux bootstrap`` applies that folder the same way),
whether Flux's kinds are there, which GitRepositories are the repository itself (fetched from the private copy
through ``--git-mirror``), and the few objects a cluster would already hold that the repository does not.

The rule for "the repository itself": a GitRepository (helmop's or Flux's) anywhere in the tree whose URL names
the repository tried (host and path compared: the URL given, or the local clone's remotes or its own path), or
which is named ``flux-system`` (``flux bootstrap``'s name) or like the repository (``fleet`` for
``github.com/org/fleet``). The revision tried is published under every branch, tag and reference these ask for.

The rule for Flux's own install (``flux bootstrap``'s gotk-components.yaml, every object of it labelled
``app.kubernetes.io/part-of: flux``): what the repository's syncs rely on is applied - its Namespaces,
ServiceAccounts, Roles, ClusterRoles and their bindings (``cluster-reconciler-flux-system`` binds
``kustomize-controller`` to cluster-admin) - and the rest is left out: Flux's controllers (Deployments, Services,
NetworkPolicies, a ResourceQuota), which helmop replaces, and the CRDs of the kinds helmop serves (by their exact
names: a third party's CRD under a ``fluxcd.io`` group is applied), of the cluster folder's build (what other
folders apply is applied as written). The deletes are written into the cluster folder's kustomization in the
private copy, so that every build of it leaves them out (flux-system's own reconciles too). Flux's multi-tenancy
lockdown, set by the args of the controllers left out (``--no-cross-namespace-refs``,
``--default-service-account``), is the operator's. A repository whose gotk-components.yaml is left to bootstrap
to write (a placeholder) gets, in Flux's install namespace (that of the sync applying the cluster folder, else
flux-system), the ServiceAccounts of Flux's controllers its syncs of that namespace impersonate, bound to
cluster-admin as ``flux install`` binds them; nowhere else, as on a cluster."""

from __future__ import annotations

import base64
import functools
import os
import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from helmop.api import k8syaml, yamlc
from helmop.api.flux import crds as flux_crds
from helmop.api.kinds import FLUX_GROUPS, FLUX_HELM, FLUX_KUSTOMIZE, FLUX_SOURCE, GROUP
from helmop.api.manifests import Manifest, parse
from helmop.sources.decryption.keys import Keys
from helmop.sources.generated import FILES, generate
from helmop.sources.kustomize import folder_of

from .. import builds, releases
from ..errors import Failed
from .repository import Served, identity

MADE = {"helmop.dev/try": "made"}  # the label of what `helmop try` made beside the repository's objects
SYNCS = (("Kustomization", FLUX_KUSTOMIZE), ("ConfigSync", GROUP))
PART_OF = "app.kubernetes.io/part-of"  # "flux" on every object `flux install` writes
RBAC = "rbac.authorization.k8s.io"
KEPT = {("Namespace", ""), ("ServiceAccount", ""), ("Role", RBAC), ("ClusterRole", RBAC), ("RoleBinding", RBAC),
        ("ClusterRoleBinding", RBAC)}  # what syncs rely on of Flux's install: where they run, as whom
RECONCILERS = ("kustomize-controller", "helm-controller")  # bound to cluster-admin by `flux install`
INSTALL = "flux-system"  # Flux's install namespace when the cluster folder's sync does not say
ACCOUNT = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")  # a ServiceAccount's name


class Broken(Exception):
    """The cluster folder does not build: the message names the file and why."""


@dataclass
class Plan:
    path: str  # the cluster folder ("" for the repository's root)
    flux: bool  # Flux's kinds in the tree: the operator serves them (--flux-api)
    applied: list[Manifest] = field(default_factory=list)  # the cluster folder's objects, then what try made
    git_mirrors: list[tuple[str, str]] = field(default_factory=list)  # the repository's URLs -> the private copy
    branches: set[str] = field(default_factory=set)  # names the revision is published under
    tags: set[str] = field(default_factory=set)
    refs: set[str] = field(default_factory=set)
    made: list[str] = field(default_factory=list)  # what try made, said to the user
    left_out: list[str] = field(default_factory=list)  # the objects of Flux's install not applied
    lockdown: list[str] = field(default_factory=list)  # the operator's flags of Flux's multi-tenancy lockdown
    copy: dict[str, bytes] = field(default_factory=dict)  # files of the private copy rewritten (repository paths)


def group_of(item: Manifest) -> str:
    return item.api_version.rpartition("/")[0]


def file_of(item: Manifest) -> str:
    return item.origin.rpartition(":")[0]


def tree_objects(tree: Path) -> list[Manifest]:
    """Every object of the tree's YAML files (charts' templates left out; a broken file is its sync's to say)."""
    return parse(releases.read_tree([tree]))[0]


def is_sync(item: Manifest) -> bool:
    return (item.kind, group_of(item)) in SYNCS


def _spec(item: Manifest) -> dict[str, Any]:
    spec = item.obj.get("spec")
    return spec if isinstance(spec, dict) else {}


def _namespace(item: Manifest) -> str:
    return str((item.obj.get("metadata") or {}).get("namespace") or "default")


def cluster_folder(found: list[Manifest], tree: Path, given: str | None, subfolder: str) -> str:
    """``given`` (--path); else the folder given inside a working tree (``helmop try clusters/dev`` in a clone);
    else the folder a sync in it applies (Flux's bootstrap: clusters/dev/flux-system/gotk-sync.yaml applies
    ./clusters/dev); else the one folder under clusters/; else the root. Several candidates: the user chooses."""
    if given is not None:
        path = folder_of(given)
        if path.startswith("../") or path == ".." or not (tree / path).is_dir():
            raise Failed(f"--path {given}: no such folder in the repository")
        return path
    if subfolder:
        return subfolder
    own = sorted({folder for item in found if is_sync(item)
                  for folder in [folder_of(str(_spec(item).get("path") or ""))]
                  if file_of(item).startswith(f"{folder}/" if folder else "")})
    clusters = sorted(p.relative_to(tree).as_posix() for p in (tree / "clusters").glob("*") if p.is_dir()) \
        if (tree / "clusters").is_dir() else []
    for candidates in (own, clusters):
        if len(candidates) == 1:
            return candidates[0]
        if candidates:
            raise Failed(f"several cluster folders: {', '.join(candidates)}; choose one with --path")
    return ""


@functools.cache
def served_crds() -> frozenset[str]:
    """The names of the CRDs of Flux's kinds that helmop serves (with --flux-api)."""
    return frozenset(str(crd["metadata"]["name"]) for crd in flux_crds.definitions())


def of_flux_install(item: Manifest) -> bool:
    """Whether an object is of Flux's install that helmop replaces (see the module's rule): left out."""
    if item.kind == "CustomResourceDefinition" and group_of(item) == "apiextensions.k8s.io":
        return item.name in served_crds()
    labels = (item.obj.get("metadata") or {}).get("labels")
    return (isinstance(labels, dict) and labels.get(PART_OF) == "flux" and (item.kind, group_of(item)) not in KEPT
            and not group_of(item).endswith(FLUX_GROUPS))


def is_repository(item: Manifest, served: Served) -> bool:
    """Whether a GitRepository is the repository tried (see the module's rule)."""
    if item.kind != "GitRepository" or group_of(item) not in (GROUP, FLUX_SOURCE):
        return False
    url = str(_spec(item).get("url") or "")
    return item.name in ("flux-system", served.name) or (bool(url) and identity(url) in served.identities)


async def build(tree: Path, path: str, cache: Path, keys: Keys | None) -> list[Manifest]:
    """The cluster folder's objects, as a Kustomization over it applies them (no variables: bootstrap has none)."""
    try:
        return (await builds.build(tree / path if path else tree, {}, cache, keys=keys)).objects
    except Failed as exc:
        raise Broken(f"{path or '.'}: {str(exc).replace(str(tree) + '/', '')}") from None


def plan(served: Served, found: list[Manifest], path: str, objects: list[Manifest],
         keys: dict[str, bytes]) -> Plan:
    """What is applied and served, from the tree's objects ``found`` and the cluster folder's ``objects``."""
    out = Plan(path, any(group_of(item).endswith(FLUX_GROUPS) for item in found),
               [item for item in objects if not of_flux_install(item)])
    left = [item for item in objects if of_flux_install(item)]
    _left_out(out, left, served.tree)
    _lockdown(out, left)
    sources = [item for item in found if is_repository(item, served)]
    for item in sources:
        spec, ref = _spec(item), _spec(item).get("ref") or {}
        if spec.get("url") and (str(spec["url"]), served.url) not in out.git_mirrors:
            out.git_mirrors.append((str(spec["url"]), served.url))
        for key, names in (("branch", out.branches), ("tag", out.tags), ("name", out.refs)):
            if isinstance(ref, dict) and ref.get(key):
                names.add(str(ref[key]))
    declared = {(item.kind, group_of(item), _namespace(item), item.name) for item in found}
    _placeholders(out, sources, declared)
    _missing_sources(out, served, declared)
    _reconcilers(out, _reached(found, objects, path), objects)
    if keys:
        _decryption_secrets(out, found, declared, keys)
    return out


def title(item: Manifest) -> str:
    namespace = (item.obj.get("metadata") or {}).get("namespace")
    return f"{item.kind} {namespace}/{item.name}" if namespace else f"{item.kind} {item.name}"


def _left_out(out: Plan, left: list[Manifest], tree: Path) -> None:
    """Flux's install left out of what is applied, and of every build of the cluster folder (the first apply's
    and those of the syncs applying it, flux-system's, whose spec.patches the repository may set: an atomic list):
    a ``$patch: delete`` of each object added to the patches of the cluster folder's kustomization in the private
    copy (Flux's generated one written out when it has none)."""
    out.left_out = [title(item) for item in left]
    if not left:
        return
    deletes = [_deleted(item) for item in left]
    name, body, given = _kustomization(tree, out.path)
    out.copy[name] = k8syaml.dump_all([{**body, "patches": [*(given or []), *deletes]}]).encode()
    out.made.append(f"{name} (in the private copy): patches deleting the {len(left)} objects of Flux's install left "
                    "out, from every build of the cluster folder")


def _deleted(item: Manifest) -> dict[str, str]:
    """A kustomize patch deleting the object."""
    namespace = (item.obj.get("metadata") or {}).get("namespace")
    meta = {"name": item.name, **({"namespace": namespace} if namespace else {})}
    return {"patch": yaml.safe_dump({"$patch": "delete", "apiVersion": item.api_version, "kind": item.kind,
                                     "metadata": meta})}


def _kustomization(tree: Path, path: str) -> tuple[str, dict[str, Any], list[Any] | None]:
    """The cluster folder's kustomization: its file's name, its body and its patches; when it has none, the one
    Flux generates over the folder (to be written)."""
    folder = tree / path if path else tree
    name = next((posixpath.join(path, n) for n in FILES if (folder / n).is_file()), "")
    if not name:
        return posixpath.join(path, "kustomization.yaml"), _generated(tree, folder, path), None
    try:
        body = yamlc.load((tree / name).read_bytes())  # kustomize has built it: bounded, a mapping
    except yaml.YAMLError as exc:
        raise Broken(f"{name}: {exc}") from None
    given = body.get("patches") if isinstance(body, dict) else None
    if not isinstance(body, dict) or not isinstance(given, list | None):
        raise Broken(f"{name}: patches is not a list")
    return name, body, given


def _generated(tree: Path, folder: Path, path: str) -> dict[str, Any]:
    """The kustomization Flux generates over a folder that has none: every manifest under it."""
    files = [Path(top, file).relative_to(tree).as_posix() for top, _, names in os.walk(folder) for file in names]
    return {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": [
        posixpath.relpath(resource, path or ".") for resource in
        generate([file for file in files if ".git" not in file.split("/")], path).resources]}


def _words(container: Any) -> list[str]:
    """A container's command and args (anything else: none)."""
    if not isinstance(container, dict):
        return []
    lists = [container.get(key) or [] for key in ("command", "args")]
    return [str(word) for words in lists if isinstance(words, list) for word in words]


def controller_flags(item: Manifest) -> dict[str, str]:
    """The flags a Deployment's containers are given, as Go's flag package reads them (``-name`` or ``--name``,
    ``=value``, else the next argument for the one flag read here that takes a value, else "true")."""
    template = _spec(item).get("template")
    pod = template.get("spec") if isinstance(template, dict) else None
    containers = pod.get("containers") if isinstance(pod, dict) else None
    out: dict[str, str] = {}
    for container in containers if isinstance(containers, list) else []:
        words = _words(container)
        for i, word in enumerate(words):
            name, equals, value = word.lstrip("-").partition("=")
            if not word.startswith("-") or not name:
                continue
            if not equals:
                valued = name == "default-service-account" and i + 1 < len(words)
                value = words[i + 1] if valued else "true"
            out[name] = value
    return out


def _lockdown(out: Plan, left: list[Manifest]) -> None:
    """The operator's flags of Flux's multi-tenancy lockdown, read from the args of Flux's kustomize-controller and
    helm-controller left out (their patches applied): --no-cross-namespace-refs, --default-service-account (the
    kustomize-controller's when both set one). helmop refuses remote bases always (--no-remote-bases)."""
    controllers = sorted((item for item in left if (item.kind, group_of(item)) == ("Deployment", "apps")
                          and item.name in RECONCILERS), key=lambda item: RECONCILERS.index(item.name))
    cross = [title(item) for item in controllers
             if controller_flags(item).get("no-cross-namespace-refs", "false").lower() in ("1", "t", "true")]
    accounts = [(title(item), flags["default-service-account"]) for item in controllers
                for flags in [controller_flags(item)] if flags.get("default-service-account")]
    if cross:
        out.lockdown.append("--no-cross-namespace-refs")
    if accounts:
        where, account = accounts[0]
        if not ACCOUNT.fullmatch(account):
            raise Broken(f"{where}: --default-service-account={account[:80]!r} is not a ServiceAccount name")
        out.lockdown.append(f"--default-service-account={account}")
    if out.lockdown:
        out.made.append(f"the operator runs with {' '.join(out.lockdown)}: Flux's multi-tenancy lockdown, as the "
                        f"args of {', '.join(dict.fromkeys([*cross, *(w for w, _ in accounts)]))} (left out) set it")


def _made(out: Plan, obj: dict[str, Any], why: str) -> None:
    made = Manifest({**obj, "metadata": {**obj["metadata"], "labels": MADE}}, "(made by helmop try)")
    out.applied.append(made)
    out.made.append(f"{title(made)}: {why}")


def _placeholders(out: Plan, sources: list[Manifest], declared: set[tuple[str, str, str, str]]) -> None:
    """An empty Secret for the credentials the repository's GitRepositories name (bootstrap's deploy key): the
    private copy is read without any."""
    for item in sources:
        ref = _spec(item).get("secretRef") or {}
        name = str(ref.get("name") or "") if isinstance(ref, dict) else ""
        where = ("Secret", "", _namespace(item), name)
        if name and where not in declared:
            declared.add(where)
            _made(out, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": where[2]}},
                  f"empty, for {item.kind} {where[2]}/{item.name}'s secretRef (the private copy needs no "
                  "credentials)")


def _missing_sources(out: Plan, served: Served, declared: set[tuple[str, str, str, str]]) -> None:
    """A GitRepository, pointing at the repository, for each one the cluster folder's syncs name that the tree
    does not declare."""
    for item in [i for i in out.applied if is_sync(i)]:
        ref = _spec(item).get("sourceRef") or {}
        if not isinstance(ref, dict) or (ref.get("kind") or "GitRepository") != "GitRepository":
            continue
        group = FLUX_SOURCE if group_of(item) == FLUX_KUSTOMIZE else GROUP
        namespace = str(ref.get("namespace") or _namespace(item))
        where = ("GitRepository", group, namespace, str(ref.get("name") or ""))
        if where[3] and where not in declared:
            declared.add(where)
            version = "v1" if group == FLUX_SOURCE else "v1alpha1"
            _made(out, {"apiVersion": f"{group}/{version}", "kind": "GitRepository",
                        "metadata": {"name": where[3], "namespace": namespace},
                        "spec": {"interval": "1h", "url": served.url, "ref": {"branch": "main"}}},
                  f"named by {item.kind} {_namespace(item)}/{item.name}, not in the repository: the repository")


def _under(file: str, folder: str) -> bool:
    return not folder or file.startswith(f"{folder}/")


def _reached(found: list[Manifest], objects: list[Manifest], path: str) -> list[Manifest]:
    """The cluster folder's ``objects``, and those of the tree the Kustomizations and ConfigSyncs among them apply,
    at any depth (other clusters' folders are not reached unless a sync applies them)."""
    reached, folders, todo = list(objects), {path}, objects
    while todo:
        new = {folder_of(str(_spec(item).get("path") or "")) for item in todo if is_sync(item)} - folders
        folders |= new
        todo = [item for item in found if any(_under(file_of(item), folder) for folder in new)]
        reached += todo
    return reached


def _reconcilers(out: Plan, reached: list[Manifest], objects: list[Manifest]) -> None:
    """The ServiceAccounts of Flux's controllers that the syncs ``reached`` of Flux's install namespace impersonate
    (``serviceAccountName: kustomize-controller``) and the cluster folder does not declare (bootstrap writes
    gotk-components.yaml), bound to cluster-admin as ``flux install``'s ``cluster-reconciler-<namespace>`` binds
    them. A sync of another namespace naming them finds none, as on a cluster."""
    install = next((_namespace(item) for item in objects if (item.kind, group_of(item)) == ("Kustomization",
                    FLUX_KUSTOMIZE) and folder_of(str(_spec(item).get("path") or "")) == out.path), None) \
        or next((_namespace(item) for item in objects if (item.kind, group_of(item), item.name) == (
                 "GitRepository", FLUX_SOURCE, "flux-system")), INSTALL)
    here = {(item.kind, group_of(item), _namespace(item), item.name) for item in objects}
    names: list[str] = []
    for item in reached:
        name = str(_spec(item).get("serviceAccountName") or "")
        flux = (item.kind, group_of(item)) in (("Kustomization", FLUX_KUSTOMIZE), ("HelmRelease", FLUX_HELM))
        if flux and name in RECONCILERS and _namespace(item) == install and name not in names \
                and ("ServiceAccount", "", install, name) not in here:
            names.append(name)
            _made(out, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": install}},
                  f"the identity {item.kind} {install}/{item.name} takes, which flux bootstrap's "
                  "gotk-components.yaml makes (the repository's declares none)")
    binding = f"cluster-reconciler-{install}"
    if names and ("ClusterRoleBinding", RBAC, "default", binding) not in here:
        _made(out, {"apiVersion": f"{RBAC}/v1", "kind": "ClusterRoleBinding", "metadata": {"name": binding},
                    "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "cluster-admin"},
                    "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": install} for name in names]},
              f"cluster-admin for {', '.join(names)}, as flux install binds them")


def _decryption_secrets(out: Plan, found: list[Manifest], declared: set[tuple[str, str, str, str]],
                        keys: dict[str, bytes]) -> None:
    """The SOPS keys given (--decrypt) as each Secret the syncs' spec.decryption names that the tree lacks."""
    for item in [i for i in found if is_sync(i)]:
        decryption = _spec(item).get("decryption") or {}
        ref = decryption.get("secretRef") if isinstance(decryption, dict) else None
        name = str(ref.get("name") or "") if isinstance(ref, dict) else ""
        where = ("Secret", "", _namespace(item), name)
        if name and where not in declared:
            declared.add(where)
            data = {key: base64.b64encode(value).decode() for key, value in keys.items()}
            _made(out, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": where[2]},
                        "data": data}, f"the --decrypt keys, for {item.kind} {where[2]}/{item.name}'s decryption")


def key_entries(files: list[str]) -> dict[str, bytes]:
    """The --decrypt files by the names SOPS key Secrets and --decryption-keys use (.agekey, .asc)."""
    out = {}
    for i, name in enumerate(files):
        data = Path(name).read_bytes()
        out[f"{i}.agekey" if b"AGE-SECRET-KEY-" in data else f"{i}.asc"] = data
    return out
