"""The Jenkins kind (apps.helmop.dev/v1alpha1): a small, validated spec mapped onto the values of
the official Jenkins chart (charts.jenkins.io). Pure: the controller adds the admin Secret.
"""

from __future__ import annotations

import re
from typing import Any

from .helmrelease import SpecError

GROUP = "apps.helmop.dev"
VERSION = "v1alpha1"
KIND = "Jenkins"
PLURAL = "jenkins"
PROJECT_LABEL = "helmop.dev/project"
DEFAULT_CHART = {"repository": {"url": "https://charts.jenkins.io", "name": "jenkins", "version": "5.9.53"}}
# The chart's own installPlugins at the pinned version. spec.plugins is merged into this list by
# plugin name (the user's version wins): the chart refuses a plugin listed in both installPlugins
# and additionalPlugins, so helmop owns the one list.
CHART_PLUGINS = ("kubernetes:4540.v612369217f87", "workflow-aggregator:608.v67378e9d3db_1", "git:5.10.1",
                 "configuration-as-code:2115.vf6de120eef70")
# Used by seed jobs (JCasC `jobs:`); pinned like every plugin helmop adds.
JOB_DSL = "job-dsl:1.93"

_PLUGIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*):(.*)$")
_VERSION = re.compile(r"^[0-9][A-Za-z0-9._+-]*$")
_HOST = re.compile(r"^(?=.{1,253}$)([a-z0-9]([-a-z0-9]*[a-z0-9])?\.)+[a-z]([-a-z0-9]*[a-z0-9])?$")
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9_.]*[a-z0-9])?$")
_JOB = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def check_plugins(plugins: list[Any]) -> list[str]:
    out = []
    for i, raw in enumerate(plugins):
        m = _PLUGIN.match(str(raw))
        if not m:
            raise SpecError("InvalidPlugin", f"spec.plugins[{i}] {raw!r} must be name:version with a pinned version "
                                             "(for example git:5.10.1)")
        version = m.group(2)
        if version.lower() in ("latest", "experimental") or not _VERSION.match(version):
            raise SpecError("InvalidPlugin", f"spec.plugins[{i}] {raw!r}: {version or 'a missing'!r} is not a pinned "
                                             "version; 'latest' breaks reproducible installs, pin one such as "
                                             f"{m.group(1)}:1.0")
        out.append(f"{m.group(1)}:{version}")
    names = [p.split(":")[0] for p in out]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise SpecError("InvalidPlugin", f"spec.plugins names {', '.join(duplicates)} more than once")
    return out


def _seed_jobs(jobs: list[Any]) -> str:
    lines = ["jobs:"]
    for i, job in enumerate(jobs):
        name, repo = str(job.get("name", "")), str(job.get("repo", ""))
        if not _JOB.match(name):
            raise SpecError("InvalidSeedJob", f"spec.seedJobs[{i}].name {name!r} must be letters, digits, '.', '_' "
                                              "or '-'")
        if not re.match(r"^(https://|ssh://|git@)[^\s'\"\\]+$", repo):
            raise SpecError("InvalidSeedJob", f"spec.seedJobs[{i}].repo {repo!r} must be an https://, ssh:// or "
                                              "git@host: URL")
        branch = str(job.get("branch") or "main")
        path = str(job.get("jenkinsfile") or "Jenkinsfile")
        if any(c in branch + path for c in "'\"\\\n"):
            raise SpecError("InvalidSeedJob", f"spec.seedJobs[{i}]: branch and jenkinsfile may not contain quotes")
        lines += [
            "  - script: >",
            f"      pipelineJob('{name}') {{ definition {{ cpsScm {{ scm {{ git {{ remote {{ url('{repo}') }}",
            f"      branch('*/{branch}') }} }} scriptPath('{path}') }} }} }}",
        ]
    return "\n".join(lines) + "\n"


def jenkins_values(name: str, spec: dict[str, Any], admin_secret: str, user_key: str,
                   password_key: str) -> dict[str, Any]:
    """Chart values for a Jenkins spec (SpecError names the field at fault); ``spec.values``, the
    escape hatch, is merged over them by the caller."""
    project = str(spec.get("project") or "")
    if not _LABEL.match(project) or len(project) > 63:
        raise SpecError("InvalidSpec", f"spec.project {project!r} must be a lowercase label value (letters, digits, "
                                       "'-', '_', '.'; at most 63)")
    controller: dict[str, Any] = {
        # createSecret=true is what makes the chart mount an admin Secret; with existingSecret set it
        # mounts that one and creates none of its own.
        "admin": {"createSecret": True, "existingSecret": admin_secret, "userKey": user_key,
                  "passwordKey": password_key},
        "podLabels": {PROJECT_LABEL: project},
        "statefulSetLabels": {PROJECT_LABEL: project},
        "serviceLabels": {PROJECT_LABEL: project},
    }
    if spec.get("image"):
        controller["image"] = {"tag": str(spec["image"])}
    wanted = {p.split(":")[0]: p for p in CHART_PLUGINS}
    wanted.update({p.split(":")[0]: p for p in check_plugins(list(spec.get("plugins") or []))})
    seed = list(spec.get("seedJobs") or [])
    if seed:
        wanted.setdefault("job-dsl", JOB_DSL)
    controller["installPlugins"] = list(wanted.values())
    scripts = {str(k): str(v) for k, v in (spec.get("configAsCode") or {}).items()}
    if seed:
        scripts["helmop-seed-jobs"] = _seed_jobs(seed)
    if scripts:
        controller["JCasC"] = {"configScripts": scripts}
    ingress = spec.get("ingress") or {}
    if ingress:
        host = str(ingress.get("host") or "")
        if not _HOST.match(host):
            raise SpecError("InvalidIngressHost", f"spec.ingress.host {host!r} is not a valid DNS name (such as "
                                                  "ci.example.com)")
        controller["ingress"] = {"enabled": True, "hostName": host, "apiVersion": "networking.k8s.io/v1"}
        if ingress.get("className"):
            controller["ingress"]["ingressClassName"] = str(ingress["className"])
        if ingress.get("tlsSecretName"):
            controller["ingress"]["tls"] = [{"secretName": str(ingress["tlsSecretName"]), "hosts": [host]}]
    if spec.get("resources"):
        controller["resources"] = spec["resources"]
    persistence: dict[str, Any] = {"enabled": True, "labels": {PROJECT_LABEL: project}}
    storage = spec.get("persistence") or {}
    if storage.get("size"):
        persistence["size"] = str(storage["size"])
    if storage.get("storageClass"):
        persistence["storageClass"] = str(storage["storageClass"])
    if storage.get("retainOnDelete"):
        # helm leaves an object with this annotation behind on uninstall; a new Jenkins of the same
        # name renders the same claim name and adopts it.
        persistence["annotations"] = {"helm.sh/resource-policy": "keep"}
    values: dict[str, Any] = {"fullnameOverride": name, "extraLabels": {PROJECT_LABEL: project},
                              "controller": controller, "persistence": persistence}
    agents = spec.get("agents") or {}
    if agents.get("namespace"):
        values["agent"] = {"enabled": True, "namespace": str(agents["namespace"])}
    return values


def url(name: str, namespace: str, spec: dict[str, Any]) -> str:
    ingress = spec.get("ingress") or {}
    if ingress.get("host"):
        scheme = "https" if ingress.get("tlsSecretName") else "http"
        return f"{scheme}://{ingress['host']}"
    return f"http://{name}.{namespace}.svc.cluster.local:8080"
