"""`helmop check tenancy -n NS`: can a tenant climb out of its namespace through a ServiceAccount helmop
acts as there?

helmop impersonates a namespace's ServiceAccounts: the one each HelmRelease, ConfigSync, Jenkins or app
resource names (spec.serviceAccountName) and the operator's --default-service-account. Whatever those
may do, the namespace's git repository and HelmReleases may do. Each is asked about, with the API's own
SubjectAccessReview (so RBAC, aggregation and any other authorizer answer as they would for a request):
the verbs that let a subject grant itself more (``escalate`` and ``bind`` on roles, ``impersonate``),
and rights outside its namespace (another namespace's objects, cluster-scoped ones).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from helmop.api.kinds import BUILTIN
from helmop.infra.kube import Kube, KubeError

from .errors import Failed


@dataclass(frozen=True)
class Ask:
    verb: str
    group: str
    resource: str
    namespace: str  # "" asks about every namespace / a cluster-scoped resource
    why: str

    def attributes(self) -> dict[str, str]:
        out = {"verb": self.verb, "group": self.group, "resource": self.resource}
        return {**out, "namespace": self.namespace} if self.namespace else out


def questions(namespace: str) -> list[Ask]:
    """What a confined ServiceAccount of ``namespace`` must not be allowed (any "yes" is reported)."""
    rbac = "rbac.authorization.k8s.io"
    other = f"not-{namespace}-{uuid.uuid4().hex[:6]}"[:63]  # a namespace that is not its own
    asks = [Ask(verb, rbac, resource, where, f"{verb} {resource}: may grant itself more than it holds")
            for verb in ("escalate", "bind") for resource in ("roles", "clusterroles") for where in (namespace, "")]
    asks += [Ask("impersonate", "", resource, "", f"impersonate {resource}: may act as someone else")
             for resource in ("users", "groups", "serviceaccounts")]
    elsewhere = (("", "in every namespace"), (other, "in another namespace"))
    asks += [Ask(verb, group, resource, where, f"{verb} {resource} {what}")
             for verb, group, resource in (("get", "", "secrets"), ("create", "", "pods"),
                                           ("create", rbac, "rolebindings"), ("create", "apps", "deployments"))
             for where, what in elsewhere]
    asks += [Ask(verb, group, resource, "", f"{verb} {resource} (cluster-scoped)")
             for verb, group, resource in (("create", "", "namespaces"), ("delete", "", "namespaces"),
                                           ("create", rbac, "clusterroles"), ("create", rbac, "clusterrolebindings"),
                                           ("create", "apiextensions.k8s.io", "customresourcedefinitions"),
                                           ("create", "admissionregistration.k8s.io",
                                            "validatingwebhookconfigurations"))]
    return asks


OPERATOR = ""  # the "ServiceAccount" of resources that act with the operator's own rights


async def acting_service_accounts(kube: Kube, namespace: str, default: str) -> dict[str, list[str]]:
    """ServiceAccount name -> the resources (kind/name) helmop acts as it for, in ``namespace``; those
    that name none, with no ``default``, under :data:`OPERATOR`."""
    found: dict[str, list[str]] = {default: ["--default-service-account"]} if default else {}
    for kind in (k for k in BUILTIN if k.namespaced):
        try:
            items = await kube.list(kind.path(namespace))
        except KubeError as exc:
            if exc.status == 404:  # the kind is not served
                continue
            raise
        for item in items:
            name = str((item.get("spec") or {}).get("serviceAccountName") or default)
            found.setdefault(name, []).append(f"{kind.kind}/{item['metadata']['name']}")
    return found


async def allowed(kube: Kube, namespace: str, account: str, ask: Ask) -> bool:
    review: dict[str, Any] = {
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": f"system:serviceaccount:{namespace}:{account}",
                 "groups": ["system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"],
                 "resourceAttributes": ask.attributes()}}
    answer = await kube.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", review)
    return bool((answer.get("status") or {}).get("allowed"))


async def check(kube: Kube, namespace: str, default: str) -> tuple[str, bool]:
    """The report to print, and whether it found nothing wrong."""
    accounts = await acting_service_accounts(kube, namespace, default)
    if not accounts:
        return f"no ServiceAccount of {namespace} is acted as by helmop", True
    lines, clean = [], True
    if OPERATOR in accounts:
        clean = False
        lines.append(f"✗ {', '.join(accounts.pop(OPERATOR))} name no ServiceAccount and act with the operator's own "
                     "rights (run the operator with --default-service-account, or name one in spec.serviceAccountName)")
    for account, users in sorted(accounts.items()):
        try:
            found = [ask.why for ask in questions(namespace) if await allowed(kube, namespace, account, ask)]
        except KubeError as exc:
            raise Failed(f"could not ask the API about {namespace}/{account}: {exc.message} (creating "
                         "SubjectAccessReviews needs the right to)") from None
        users_text = ", ".join(users)
        if found:
            clean = False
            lines.append(f"✗ {namespace}/{account} (used by {users_text}) can climb out of its namespace:")
            lines += [f"    {why}" for why in found]
        else:
            lines.append(f"✔ {namespace}/{account} (used by {users_text}): confined to {namespace}")
    return "\n".join(lines), clean
