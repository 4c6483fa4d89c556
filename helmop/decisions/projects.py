"""What a Project is made of, as plain manifests: a pure function of its spec.

Each part belongs to one of the Project's conditions (``NamespaceReady``, ``AccessReady``, ``JenkinsReady``,
``SyncReady``) and to one teardown step; every object carries the ``helmop.dev/project`` label and the
Project as its owner. The config repository is synced as the project's deployer ServiceAccount, bound to
``edit`` in the project namespace only, into that namespace: whatever the repository holds cannot reach
beyond it.
"""

from __future__ import annotations

import fnmatch
import hashlib
import re
from dataclasses import dataclass, replace
from typing import Any

from helmop.api.objects import ObjectRef
from helmop.api.projects import Environments, Member, ProjectSpec

PROJECT_LABEL = "helmop.dev/project"
DEPLOYER = "deployer"
SYNC = "project"  # the GitRepository's and the ConfigSync's name
JENKINS = "jenkins"
RBAC = "rbac.authorization.k8s.io"

NAMESPACE_READY, ACCESS_READY, JENKINS_READY, SYNC_READY = "NamespaceReady", "AccessReady", "JenkinsReady", "SyncReady"
PARTS = (NAMESPACE_READY, ACCESS_READY, JENKINS_READY, SYNC_READY)
# Teardown, in order: stop syncing (and prune what it applied), the Jenkins, access, the namespace last.
STEPS = (SYNC_READY, JENKINS_READY, ACCESS_READY, NAMESPACE_READY)


@dataclass(frozen=True)
class Part:
    condition: str  # which of the Project's conditions it belongs to
    obj: dict[str, Any]

    @property
    def ref(self) -> ObjectRef:
        """How the Project's inventory names it."""
        meta = self.obj["metadata"]
        return ObjectRef(api_version=self.obj["apiVersion"], kind=self.obj["kind"],
                         namespace=meta.get("namespace", ""), name=meta["name"])


def _meta(project: str, uid: str, name: str, namespace: str = "", **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {PROJECT_LABEL: project, **extra.pop("labels", {})},
                            "ownerReferences": [{"apiVersion": "helmop.dev/v1alpha1", "kind": "Project",
                                                 "name": project, "uid": uid, "controller": True,
                                                 "blockOwnerDeletion": False}], **extra}
    if namespace:
        meta["namespace"] = namespace
    return meta


def member_binding(member: Member) -> str:
    """A RoleBinding name per member and role (stable, whatever characters the member's name has)."""
    digest = hashlib.sha256(f"{member.kind}/{member.name}".encode()).hexdigest()[:10]
    return f"helmop-{member.role}-{digest}"


def _subject(member: Member, namespace: str) -> dict[str, str]:
    if member.kind == "ServiceAccount":
        sa_namespace, _, sa_name = member.name.rpartition("/")
        return {"kind": "ServiceAccount", "name": sa_name, "namespace": sa_namespace or namespace}
    return {"kind": member.kind, "apiGroup": RBAC, "name": member.name}


def _binding(project: str, uid: str, namespace: str, name: str, role: str, subjects: list[dict[str, str]]) -> Part:
    return Part(ACCESS_READY, {"apiVersion": f"{RBAC}/v1", "kind": "RoleBinding",
                               "metadata": _meta(project, uid, name, namespace),
                               "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": role},
                               "subjects": subjects})


def parts(project: str, uid: str, spec: ProjectSpec) -> list[Part]:
    ns = spec.namespace
    out = [Part(NAMESPACE_READY, {"apiVersion": "v1", "kind": "Namespace",
                                  "metadata": _meta(project, uid, ns, labels=spec.labels,
                                                    annotations=spec.annotations)})]
    out += [_binding(project, uid, ns, member_binding(m), m.role, [_subject(m, ns)]) for m in spec.members]
    out.append(Part(ACCESS_READY, {"apiVersion": "v1", "kind": "ServiceAccount",
                                   "metadata": _meta(project, uid, DEPLOYER, ns)}))
    out.append(_binding(project, uid, ns, f"helmop-{DEPLOYER}", "edit",
                        [{"kind": "ServiceAccount", "name": DEPLOYER, "namespace": ns}]))
    if spec.quota:
        out.append(Part(ACCESS_READY, {"apiVersion": "v1", "kind": "ResourceQuota",
                                       "metadata": _meta(project, uid, "helmop-project", ns),
                                       "spec": {"hard": dict(spec.quota)}}))
    if spec.limits:
        out.append(Part(ACCESS_READY, {"apiVersion": "v1", "kind": "LimitRange",
                                       "metadata": _meta(project, uid, "helmop-project", ns),
                                       "spec": {"limits": [{"type": "Container", **spec.limits}]}}))
    if spec.isolated:
        sources: list[dict[str, Any]] = [{"podSelector": {}}]
        sources += [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": other}}}
                    for other in spec.allow_from]
        out.append(Part(ACCESS_READY, {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                                       "metadata": _meta(project, uid, "helmop-isolation", ns),
                                       "spec": {"podSelector": {}, "policyTypes": ["Ingress"],
                                                "ingress": [{"from": sources}]}}))
    if spec.jenkins is not None:
        out.append(Part(JENKINS_READY, {"apiVersion": "apps.helmop.dev/v1alpha1", "kind": "Jenkins",
                                        "metadata": _meta(project, uid, JENKINS, ns),
                                        "spec": {"project": project, **spec.jenkins}}))
    if spec.sync is not None:
        sync = spec.sync
        source: dict[str, Any] = {"url": sync.url}
        source.update({k: v for k, v in (("ref", sync.ref), ("interval", sync.interval), ("webhook", sync.webhook),
                                         ("secretRef", {"name": sync.secret_ref} if sync.secret_ref else None))
                       if v})
        out.append(Part(SYNC_READY, {"apiVersion": "helmop.dev/v1alpha1", "kind": "GitRepository",
                                     "metadata": _meta(project, uid, SYNC, ns), "spec": source}))
        config: dict[str, Any] = {"sourceRef": {"kind": "GitRepository", "name": SYNC}, "path": sync.path,
                                  "serviceAccountName": DEPLOYER, "targetNamespace": ns, "prune": True}
        if sync.interval:
            config["interval"] = sync.interval
        out.append(Part(SYNC_READY, {"apiVersion": "helmop.dev/v1alpha1", "kind": "ConfigSync",
                                     "metadata": _meta(project, uid, SYNC, ns), "spec": config}))
    return out


def step_of(ref: ObjectRef) -> str:
    """The teardown step (a condition's name) an inventory entry goes in."""
    kind = ref.kind
    if kind == "Namespace":
        return NAMESPACE_READY
    if kind == "Jenkins":
        return JENKINS_READY
    if kind in ("GitRepository", "ConfigSync"):
        return SYNC_READY
    return ACCESS_READY


def wants_environment(envs: Environments, branch: str) -> bool:
    return any(fnmatch.fnmatchcase(branch, p) for p in envs.include) and \
        not any(fnmatch.fnmatchcase(branch, p) for p in envs.exclude)


def environment_namespace(envs: Environments, project: str, branch: str) -> str:
    """A DNS label for the branch's namespace: the pattern with the branch as a slug (``feature/login`` ->
    ``feature-login``, as GitLab's ref slug); when other characters had to go (capitals, ``_``, ``.``,
    non-ASCII) or the name is too long, a hash of the branch keeps it unique."""
    slug = re.sub(r"-+", "-", re.sub(r"[^a-z0-9]", "-", branch.lower())).strip("-")
    name = envs.name_pattern.replace("{project}", project).replace("{branch}", slug or "branch")
    name = re.sub(r"-+", "-", re.sub(r"[^a-z0-9-]", "-", name.lower())).strip("-")
    if re.fullmatch(r"[a-z0-9/-]+", branch) and len(name) <= 63:
        return name
    digest = hashlib.sha256(branch.encode()).hexdigest()[:8]
    return f"{name[:63 - 9].rstrip('-')}-{digest}"


def environment_spec(spec: ProjectSpec, branch: str, namespace: str) -> ProjectSpec:
    """A branch's environment: the project's access and confinement in a namespace of its own, syncing that
    branch; the template's quota, a Jenkins only if the template asks for one."""
    envs = spec.environments or Environments()
    assert spec.sync is not None
    return replace(spec, namespace=namespace, quota=envs.quota, jenkins=spec.jenkins if envs.jenkins else None,
                   sync=replace(spec.sync, ref={"branch": branch}), environments=None)
