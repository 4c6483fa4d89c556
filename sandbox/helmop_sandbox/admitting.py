"""Admission control after the built-in checks, as kube-apiserver runs it: mutating admission webhooks,
then ValidatingAdmissionPolicies (CEL) and validating admission webhooks.

- Matching: ``rules`` / ``resourceRules`` (operations, apiGroups, apiVersions, resources with
  subresources, scope), ``excludeResourceRules``, ``namespaceSelector`` (the namespace's labels; a
  Namespace is matched by its own), ``objectSelector`` (new or old object's labels), ``matchConditions``
  (CEL). The admissionregistration kinds themselves never go to webhooks, as upstream keeps them out.
- Policies: a binding names its policy and ``validationActions`` (Deny, Warn, Audit); ``variables``,
  ``validations`` (``expression``, ``message``/``messageExpression``, ``reason``), ``failurePolicy`` for
  errors. Policies with ``paramKind`` are not evaluated (parameters are not emulated).
- CEL variables: ``object``, ``oldObject``, ``request``, ``namespaceObject``, ``params`` (null),
  ``variables``, and ``authorizer`` with ``authorizer.requestResource`` (:mod:`.celauthz`): checks of the
  requesting user's (or a ServiceAccount's) rights, answered by the sandbox's RBAC. Everywhere a policy or
  a webhook's ``matchConditions`` has CEL, as upstream.
- Webhooks: an AdmissionReview v1 POSTed to ``clientConfig.url`` (trusting ``caBundle``) within
  ``timeoutSeconds`` (default 10). A service reference is answered by :mod:`.network`: allowed without
  changes, with a warning, when the Service selects a workload the sandbox reports Ready; otherwise a call
  failure worded as kube-apiserver's. ``failurePolicy`` (default Fail) decides what a failure means;
  JSONPatch responses of mutating webhooks are applied; ``warnings`` become Warning headers.
"""

from __future__ import annotations

import base64
import json
import ssl
import uuid
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from . import celauthz, celrules
from .errors import ApiError
from .kinds import ResourceType
from .network import Network, Unreachable
from .patching import TestFailed, json_patch
from .rbac import Authorizer, Identity
from .selectors import selector_matches
from .store import Obj, Store

GROUP = "admissionregistration.k8s.io"
POLICIES, BINDINGS = (GROUP, "validatingadmissionpolicies"), (GROUP, "validatingadmissionpolicybindings")
MUTATING, VALIDATING = (GROUP, "mutatingwebhookconfigurations"), (GROUP, "validatingwebhookconfigurations")
# how an expression fails at run time; RuntimeError is the cel package's wrapping of a failed library function
CEL_ERRORS = (KeyError, ValueError, TypeError, RuntimeError)
# who made requests the server makes itself (no user): upstream's loopback identity
LOOPBACK = Identity("system:apiserver", ("system:masters",))


@dataclass
class Request:
    operation: str  # CREATE, UPDATE, DELETE
    rt: ResourceType
    namespace: str
    name: str
    obj: Obj | None
    old: Obj | None
    user: Identity | None
    dry_run: bool = False
    subresource: str = ""
    warnings: list[str] = field(default_factory=list)

    def review(self) -> dict[str, Any]:
        """The ``request`` of an AdmissionReview, also CEL's ``request`` variable."""
        gvk = {"group": self.rt.group, "version": self.rt.version, "kind": self.rt.kind}
        gvr = {"group": self.rt.group, "version": self.rt.version, "resource": self.rt.plural}
        who = self.user or LOOPBACK
        user = {"username": who.user, "groups": list(who.groups)}
        out: dict[str, Any] = {"uid": str(uuid.uuid4()), "kind": gvk, "resource": gvr, "requestKind": gvk,
                               "requestResource": gvr, "name": self.name, "namespace": self.namespace,
                               "operation": self.operation, "userInfo": user, "object": self.obj,
                               "oldObject": self.old, "dryRun": self.dry_run}
        if self.subresource:
            out["subResource"] = out["requestSubResource"] = self.subresource
        return out


def _rule_matches(rule: dict[str, Any], req: Request) -> bool:
    def has(values: list[str], wanted: str) -> bool:
        return "*" in values or wanted in values

    resource = f"{req.rt.plural}/{req.subresource}" if req.subresource else req.rt.plural
    resources = rule.get("resources") or []
    scope = rule.get("scope", "*")
    return (has(rule.get("operations") or [], req.operation) and has(rule.get("apiGroups") or [], req.rt.group)
            and has(rule.get("apiVersions") or [], req.rt.version)
            and (resource in resources or "*/*" in resources or (not req.subresource and "*" in resources)
                 or (bool(req.subresource) and f"*/{req.subresource}" in resources))
            and (scope == "*" or (scope == "Namespaced") == req.rt.namespaced))


class Admission:
    def __init__(self, store: Store, network: Network) -> None:
        self.store = store
        self.network = network
        # not the server's Authorizer: these checks are not requests, so the audit does not see them
        self.functions = celauthz.functions(Authorizer(store))

    def active(self) -> bool:
        """Anything to do at all (the common case, no configuration, costs nothing)."""
        return any(next(self.store.items(key), None) is not None for key in (BINDINGS, MUTATING, VALIDATING))

    def _labels_match(self, req: Request, namespace_selector: Any, object_selector: Any) -> bool:
        if req.rt.storage_key == ("", "namespaces"):
            ns_labels = ((req.obj or req.old or {}).get("metadata") or {}).get("labels") or {}
        elif req.rt.namespaced:
            ns = self.store.get(("", "namespaces"), "", req.namespace)
            ns_labels = ((ns or {}).get("metadata") or {}).get("labels") or {}
        else:
            ns_labels = None  # cluster-scoped: the namespace selector does not apply
        if ns_labels is not None and not selector_matches(namespace_selector, ns_labels):
            return False
        labels = [((o.get("metadata") or {}).get("labels") or {}) for o in (req.obj, req.old) if o is not None]
        return any(selector_matches(object_selector, one) for one in labels or [{}])

    def _context(self, req: Request) -> dict[str, Any]:
        ns = self.store.get(("", "namespaces"), "", req.namespace) if req.namespace else None
        authorizer = celauthz.variable(req.user or LOOPBACK, req.rt.group, req.rt.plural, req.subresource,
                                       req.namespace, req.name)
        return {"object": req.obj, "oldObject": req.old, "request": req.review(), "namespaceObject": ns,
                "params": None, "authorizer": authorizer, **self.functions}

    def _conditions_hold(self, conditions: list[dict[str, Any]], context: dict[str, Any]) -> bool:
        return all(celrules.program(str(c.get("expression", "false"))).execute(context) is True
                   for c in conditions)

    # --- mutating webhooks -------------------------------------------------------------------------

    async def mutate(self, req: Request) -> Obj | None:
        """The object after every matching mutating webhook (``req.obj`` when none changed it)."""
        if req.rt.group == GROUP or req.obj is None:
            return req.obj
        for config in sorted(self.store.items(MUTATING), key=lambda c: c["metadata"]["name"]):
            for hook in config.get("webhooks") or []:
                if not self._hook_matches(hook, req):
                    continue
                response = await self._call(hook, req)
                if response is not None and response.get("patch"):
                    # The same JSON patch the API applies to PATCH requests (one implementation in the sandbox).
                    try:
                        req.obj = json_patch(req.obj, json.loads(base64.b64decode(response["patch"])))
                    except (ApiError, TestFailed, ValueError) as exc:
                        raise ApiError("InternalError", f'Internal error occurred: admission webhook '
                                       f'"{hook.get("name")}" attempted to modify the object, which is not '
                                       f"supported for this operation: {exc}") from None
        return req.obj

    # --- validation --------------------------------------------------------------------------------

    async def validate(self, req: Request) -> None:
        self._policies(req)
        if req.rt.group == GROUP:
            return
        for config in sorted(self.store.items(VALIDATING), key=lambda c: c["metadata"]["name"]):
            for hook in config.get("webhooks") or []:
                if self._hook_matches(hook, req):
                    await self._call(hook, req)

    def _policies(self, req: Request) -> None:
        for binding in self.store.items(BINDINGS):
            spec = binding.get("spec") or {}
            policy = self.store.get(POLICIES, "", spec.get("policyName", ""))
            if policy is None or (policy.get("spec") or {}).get("paramKind"):
                continue
            pspec = policy.get("spec") or {}
            if not (self._resources_match(pspec.get("matchConstraints"), req)
                    and self._resources_match(spec.get("matchResources"), req, default=True)):
                continue
            self._evaluate(policy, binding, req)

    def _resources_match(self, match: dict[str, Any] | None, req: Request, default: bool = False) -> bool:
        if not match:
            return default
        if not any(_rule_matches(r, req) for r in match.get("resourceRules") or []) and \
                match.get("resourceRules") is not None:
            return False
        if any(_rule_matches(r, req) for r in match.get("excludeResourceRules") or []):
            return False
        return self._labels_match(req, match.get("namespaceSelector"), match.get("objectSelector"))

    def _evaluate(self, policy: Obj, binding: Obj, req: Request) -> None:
        pspec, name, bname = policy.get("spec") or {}, policy["metadata"]["name"], binding["metadata"]["name"]
        actions = (binding.get("spec") or {}).get("validationActions") or ["Deny"]
        context = self._context(req)
        try:
            if not self._conditions_hold(pspec.get("matchConditions") or [], context):
                return
            variables: dict[str, Any] = {}
            context["variables"] = variables
            for var in pspec.get("variables") or []:
                variables[var["name"]] = celrules.program(str(var["expression"])).execute(context)
            for check in pspec.get("validations") or []:
                expression = str(check.get("expression", ""))
                if celrules.program(expression).execute(context) is True:
                    continue
                message = str(check.get("message") or "")
                if check.get("messageExpression"):
                    message = str(celrules.program(str(check["messageExpression"])).execute(context)) or message
                self._deny(name, bname, actions, message or f"failed expression: {expression}",
                           str(check.get("reason") or "Invalid"), req)
        except CEL_ERRORS as exc:
            if pspec.get("failurePolicy", "Fail") == "Fail":
                self._deny(name, bname, actions, f"expression evaluation failed: {exc}", "Invalid", req)

    @staticmethod
    def _deny(name: str, binding: str, actions: list[str], message: str, reason: str, req: Request) -> None:
        if "Warn" in actions:
            req.warnings.append(f"Validation failed for ValidatingAdmissionPolicy '{name}' with binding "
                                f"'{binding}': {message}")
        if "Deny" in actions:
            raise ApiError(reason if reason in ("Forbidden", "Invalid", "Unauthorized", "RequestEntityTooLarge")
                           else "Invalid", f"ValidatingAdmissionPolicy '{name}' with binding '{binding}' denied "
                           f"request: {message}")

    # --- webhooks ----------------------------------------------------------------------------------

    def _hook_matches(self, hook: dict[str, Any], req: Request) -> bool:
        if not any(_rule_matches(r, req) for r in hook.get("rules") or []):
            return False
        if not self._labels_match(req, hook.get("namespaceSelector"), hook.get("objectSelector")):
            return False
        try:
            return self._conditions_hold(hook.get("matchConditions") or [], self._context(req))
        except CEL_ERRORS:
            return bool(hook.get("failurePolicy", "Fail") == "Fail")

    async def _call(self, hook: dict[str, Any], req: Request) -> dict[str, Any] | None:
        name = str(hook.get("name", ""))
        try:
            response = await self._post(hook, req)
        except (aiohttp.ClientError, TimeoutError, OSError, ValueError, Unreachable) as exc:
            if hook.get("failurePolicy", "Fail") == "Ignore":
                return None
            raise ApiError("InternalError", f'Internal error occurred: failed calling webhook "{name}": failed to '
                           f"call webhook: {exc or type(exc).__name__}") from None
        req.warnings.extend(str(w) for w in response.get("warnings") or [])
        if not response.get("allowed"):
            status = response.get("status") or {}
            text = f'admission webhook "{name}" denied the request'
            explained = status.get("message") or status.get("reason")
            text = f"{text}: {explained}" if explained else f"{text} without explanation"
            code = int(status.get("code") or 400)
            reason = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 409: "Conflict",
                      422: "Invalid", 429: "TooManyRequests"}.get(code, "BadRequest")
            raise ApiError(reason, text)
        return response

    async def _post(self, hook: dict[str, Any], req: Request) -> dict[str, Any]:
        client = hook.get("clientConfig") or {}
        url = client.get("url")
        if not url:
            answered_by = self.network.reach(client.get("service") or {}, int(hook.get("timeoutSeconds", 10)))
            return {"allowed": True, "warnings": [self.network.not_run(
                f'admission webhook "{hook.get("name", "")}"', answered_by, "allowed without changes")]}
        context: ssl.SSLContext | bool = False if url.startswith("http://") else ssl.create_default_context()
        if client.get("caBundle") and isinstance(context, ssl.SSLContext):
            context.load_verify_locations(cadata=base64.b64decode(client["caBundle"]).decode())
        review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req.review()}
        timeout = aiohttp.ClientTimeout(total=float(hook.get("timeoutSeconds", 10)))
        async with aiohttp.ClientSession(timeout=timeout) as session, \
                session.post(url, json=review, ssl=context) as reply:
            if reply.status != 200:
                raise ValueError(f"the server responded with status {reply.status}")
            body = await reply.json(content_type=None)
        response = body.get("response") if isinstance(body, dict) else None
        if not isinstance(response, dict):
            raise ValueError("the webhook's AdmissionReview has no response")
        return response


async def admit(admission: Admission, req: Request) -> Obj | None:
    """Mutations, then validation; the object to store (None for a DELETE)."""
    if req.operation != "DELETE":
        req.obj = await admission.mutate(req)
    await admission.validate(req)
    return req.obj
