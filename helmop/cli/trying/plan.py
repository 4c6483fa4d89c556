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
NetworkPolicies, a ResourceQuota), which helmop replaces, and Flux's CRDs, wherever they are, whose kinds helmop
serves. A repository whose gotk-components.yaml is left to bootstrap to write (an empty placeholder) gets the
ServiceAccounts of Flux's controllers its syncs impersonate, bound to cluster-admin as ``flux install`` binds
them."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from helmop.api.kinds import FLUX_GROUPS, FLUX_HELM, FLUX_KUSTOMIZE, FLUX_SOURCE, GROUP
from helmop.api.manifests import Manifest, parse
from helmop.sources.decryption.keys import Keys
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


def of_flux_install(item: Manifest) -> bool:
    """Whether an object is of Flux's install that helmop replaces (see the module's rule): left out."""
    if item.kind == "CustomResourceDefinition" and group_of(item) == "apiextensions.k8s.io":
        return str(_spec(item).get("group") or "").endswith(FLUX_GROUPS)
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
    _left_out(out, [item for item in objects if of_flux_install(item)])
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
    _reconcilers(out, found, declared)
    if keys:
        _decryption_secrets(out, found, declared, keys)
    return out


def title(item: Manifest) -> str:
    namespace = (item.obj.get("metadata") or {}).get("namespace")
    return f"{item.kind} {namespace}/{item.name}" if namespace else f"{item.kind} {item.name}"


def _left_out(out: Plan, left: list[Manifest]) -> None:
    """Flux's install left out of what is applied, and of what the syncs of the cluster folder apply at their
    reconciles (flux-system's): a ``$patch: delete`` of each object added to their spec.patches."""
    out.left_out = [title(item) for item in left]
    if not left:
        return
    deletes = []
    for item in left:
        namespace = (item.obj.get("metadata") or {}).get("namespace")
        meta = {"name": item.name, **({"namespace": namespace} if namespace else {})}
        deletes.append({"patch": yaml.safe_dump({"$patch": "delete", "apiVersion": item.api_version,
                                                 "kind": item.kind, "metadata": meta})})
    for index, item in enumerate(out.applied):
        spec = _spec(item)
        if (item.kind, group_of(item)) != ("Kustomization", FLUX_KUSTOMIZE) \
                or folder_of(str(spec.get("path") or "")) != out.path:
            continue
        given = spec.get("patches")
        patches = [*(given if isinstance(given, list) else []), *deletes]
        out.applied[index] = Manifest({**item.obj, "spec": {**spec, "patches": patches}}, item.origin)
        out.made.append(f"{title(item)}: spec.patches deleting the {len(left)} objects of Flux's install left out "
                        "from what it applies")


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


def _reconcilers(out: Plan, found: list[Manifest], declared: set[tuple[str, str, str, str]]) -> None:
    """The ServiceAccounts of Flux's controllers that Flux's syncs impersonate (``serviceAccountName:
    kustomize-controller``) and the tree does not declare (bootstrap writes gotk-components.yaml), bound to
    cluster-admin as ``flux install``'s ``cluster-reconciler-<namespace>`` binds them."""
    missing: dict[str, list[str]] = {}
    for item in found:
        name = str(_spec(item).get("serviceAccountName") or "")
        flux = (item.kind, group_of(item)) in (("Kustomization", FLUX_KUSTOMIZE), ("HelmRelease", FLUX_HELM))
        where = ("ServiceAccount", "", _namespace(item), name)
        if flux and name in RECONCILERS and where not in declared:
            declared.add(where)
            missing.setdefault(where[2], []).append(name)
            _made(out, {"apiVersion": "v1", "kind": "ServiceAccount",
                        "metadata": {"name": name, "namespace": where[2]}},
                  f"the identity {item.kind} {where[2]}/{item.name} takes, which flux bootstrap's "
                  "gotk-components.yaml makes (the repository's declares none)")
    for namespace, names in missing.items():
        binding = f"cluster-reconciler-{namespace}"
        if ("ClusterRoleBinding", RBAC, "default", binding) in declared:
            continue
        _made(out, {"apiVersion": f"{RBAC}/v1", "kind": "ClusterRoleBinding", "metadata": {"name": binding},
                    "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "cluster-admin"},
                    "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace} for name in names]},
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
