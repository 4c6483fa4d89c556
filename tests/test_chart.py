"""deploy/helmop, helmop's own chart: it installs into a cluster (the sandbox) with helm 4 and 3, and
what it deploys would start the operator as tested elsewhere."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from helmop.api import crds
from helmop.cli import runflags
from helmop.cli.main import parser
from tests.tools import ROOT, Run

CHART = ROOT / "deploy" / "helmop"


@pytest.mark.parametrize("helm", ["helm", "helm3"])
def test_chart_installs_crds_rbac_and_a_hardened_deployment(helm: str, run: Run, namespace: str) -> None:
    run(helm, "install", "helmop", str(CHART), "-n", namespace, "--wait", "--timeout", "60s",
        "--set", "rbac.releasesClusterRole=")
    for crd in crds.definitions():
        run("kubectl", "get", "crd", crd["metadata"]["name"])
    deploy = json.loads(run("kubectl", "-n", namespace, "get", "deploy", "helmop", "-o", "json").stdout)
    assert deploy["status"]["readyReplicas"] == 2  # a leader and a standby
    pod = deploy["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["serviceAccountName"] == "helmop"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    parser().parse_args(["run", *container["args"]])  # the operator accepts what the chart passes
    assert "--leader-elect" in container["args"] and deploy["spec"]["replicas"] == 2
    assert container["env"][0]["name"] == "POD_NAMESPACE"
    lease_role = json.loads(run("kubectl", "-n", namespace, "get", "role", "helmop-leader-election", "-o",
                                "json").stdout)
    assert lease_role["rules"] == [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                                    "verbs": ["get", "list", "create", "update", "delete"]}]
    role = json.loads(run("kubectl", "get", "clusterrole", "helmop", "-o", "json").stdout)
    granted = {(g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]
               for v in rule["verbs"]}
    for needed in [("helmop.dev", "helmreleases", "watch"), ("helmop.dev", "helmreleases/status", "patch"),
                   ("apps.helmop.dev", "jenkins", "watch"), ("", "secrets", "list"), ("", "events", "create")]:
        assert needed in granted
    bindings = run("kubectl", "get", "clusterrolebinding", "-o", "name").stdout.split()
    assert "clusterrolebinding.rbac.authorization.k8s.io/helmop" in bindings
    assert "clusterrolebinding.rbac.authorization.k8s.io/helmop-releases" not in bindings  # disabled above
    services = {s["metadata"]["name"] for s in
                json.loads(run("kubectl", "-n", namespace, "get", "svc", "-o", "json").stdout)["items"]}
    assert services == {"helmop-metrics", "helmop-webhook"}
    run(helm, "uninstall", "helmop", "-n", namespace, "--wait")
    run("kubectl", "delete", "clusterrole", "helmop", "--ignore-not-found")


def test_chart_runs_one_deployment_per_shard(run: Run) -> None:
    rendered = run("helm", "template", "h", str(CHART), "--set", "shards={blue,green}").stdout
    deployments = [d for d in yaml.safe_load_all(rendered) if d and d["kind"] == "Deployment"]
    shards = {d["metadata"]["name"]: [a for a in d["spec"]["template"]["spec"]["containers"][0]["args"]
                                      if a.startswith("--shard")] for d in deployments}
    assert shards == {"h-helmop": [], "h-helmop-blue": ["--shard=blue"], "h-helmop-green": ["--shard=green"]}
    selectors = [d["spec"]["selector"]["matchLabels"]["helmop.dev/shard-name"] for d in deployments]
    assert sorted(selectors) == ["blue", "default", "green"]  # the Deployments do not adopt each other's pods


def test_chart_mounts_the_operators_decryption_keys_only_when_named(run: Run) -> None:
    def pod(*flags: str) -> dict[str, Any]:
        rendered = run("helm", "template", "h", str(CHART), *flags).stdout
        deployment = next(d for d in yaml.safe_load_all(rendered) if d and d["kind"] == "Deployment")
        return dict(deployment["spec"]["template"]["spec"])

    default = pod()
    assert not any(a.startswith("--decryption-keys") for a in default["containers"][0]["args"])
    assert "decryption-keys" not in {v["name"] for v in default["volumes"]}
    keyed = pod("--set", "decryption.keysSecret=sops-keys")
    assert "--decryption-keys=/etc/helmop/decryption-keys" in keyed["containers"][0]["args"]
    volume = next(v for v in keyed["volumes"] if v["name"] == "decryption-keys")
    assert volume["secret"] == {"secretName": "sops-keys", "defaultMode": 0o440}
    mount = next(m for m in keyed["containers"][0]["volumeMounts"] if m["name"] == "decryption-keys")
    assert mount["readOnly"] is True and mount["mountPath"] == "/etc/helmop/decryption-keys"
    # the namespaces they serve: the operator's default unless listed (none under multitenancy: docs)
    assert not any(a.startswith("--decryption-keys-namespaces") for a in keyed["containers"][0]["args"])
    listed = pod("--set", "decryption.keysSecret=k", "--set", "decryption.namespaces={team-a,team-b}")
    assert "--decryption-keys-namespaces=team-a,team-b" in listed["containers"][0]["args"]


def test_chart_crds_are_helmops_own() -> None:
    shipped = sorted(p.name for p in (CHART / "crds").glob("*.yaml"))
    assert shipped == sorted(f"{c['metadata']['name']}.yaml" for c in crds.definitions())
    for path in (CHART / "crds").glob("*.yaml"):
        assert yaml.safe_load(path.read_text()) in crds.definitions()


def test_the_chart_grants_reading_flux_leases_only_with_the_flux_api(run: Run) -> None:
    """The operator reads Flux's leader Leases by name (never writes them), and only with fluxAPI.enabled."""
    rendered = run("helm", "template", "helmop", str(CHART), "--set", "fluxAPI.enabled=true",
                   "--set", "fluxAPI.namespace=gitops").stdout
    role = next(d for d in yaml.safe_load_all(rendered) if d and d["kind"] == "ClusterRole"
                and d["metadata"]["name"] == "helmop")
    leases = [r for r in role["rules"] if "leases" in r["resources"]]
    assert leases == [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get"],
                       "resourceNames": ["helm-controller-leader-election", "source-controller-leader-election",
                                         "kustomize-controller-leader-election",
                                         "image-reflector-controller-leader-election",
                                         "image-automation-controller-leader-election"]}]
    assert "--flux-namespace=gitops" in rendered
    plain = run("helm", "template", "helmop", str(CHART)).stdout
    assert "leader-election]" not in plain and "flux-namespace" not in plain


def test_chart_passes_the_addresses_tokens_may_go_to_only_when_listed(run: Run) -> None:
    def args(*flags: str) -> list[str]:
        rendered = run("helm", "template", "h", str(CHART), *flags).stdout
        deployment = next(d for d in yaml.safe_load_all(rendered) if d and d["kind"] == "Deployment")
        return list(deployment["spec"]["template"]["spec"]["containers"][0]["args"])

    # unset: the operator's default (any, or none under multitenancy: docs)
    assert not any(a.startswith("--kubeconfig-token-addresses") for a in args("--set", "multitenancy.enabled=true"))
    listed = args("--set", "remoteClusters.tokenAddresses={api.east.example,https://10.0.0.7:6443}")
    assert "--kubeconfig-token-addresses=api.east.example,https://10.0.0.7:6443" in listed
    assert "--kubeconfig-token-addresses=" in args("--set-json", "remoteClusters.tokenAddresses=[]"), "none"


def test_chart_refuses_decryption_namespaces_given_as_a_string(run: Run) -> None:
    """`--set decryption.namespaces=team-a` is a string, not a list: rendered as none it would leave the keys
    serving every namespace (broader than asked), so the install fails saying how to list them."""
    refused = run("helm", "template", "h", str(CHART), "--set", "decryption.keysSecret=k",
                  "--set", "decryption.namespaces=team-a", check=False)
    assert refused.returncode != 0
    assert "decryption.namespaces must be null or a list of namespaces" in refused.stderr
    for flags, listed in ((["--set", "decryption.namespaces={team-a}"], "team-a"),
                          (["--set-json", "decryption.namespaces=[]"], "")):
        rendered = run("helm", "template", "h", str(CHART), "--set", "decryption.keysSecret=k", *flags).stdout
        assert f"--decryption-keys-namespaces={listed}\n" in rendered


# Chart values that differ from the operator's defaults on purpose: in a pod, the servers are on.
CHART_OWN = {"metrics.port", "webhook.port"}


def test_the_charts_values_and_args_agree_with_the_operators_settings(run: Run) -> None:
    """Each flag the chart gives from a value of its own (runflags.chart_values, from the settings' metadata):
    the value is in values.yaml and read by the template next to the flag; every flag the template passes is one
    of `helmop run`'s; and a value the template always passes defaults to the operator's own default."""
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    template = (CHART / "templates" / "deployment.yaml").read_text()
    cli = parser()
    unset = runflags.built(cli.parse_args(["run"]))
    for path, flag in runflags.chart_values():
        default: Any = values
        for key in path.split("."):
            assert isinstance(default, dict) and key in default, f"values.yaml has no {path} ({flag})"
            default = default[key]
        assert f".Values.{path}" in template and flag.removeprefix("--") in template, (path, flag)
        if isinstance(default, str | int) and not isinstance(default, bool) and default != "" and \
                f"- {flag}={{{{ .Values.{path} }}}}" in template and path not in CHART_OWN:
            assert runflags.built(cli.parse_args(["run", f"{flag}={default}"])) == unset, (path, default)
    rendered = run("helm", "template", "h", str(CHART)).stdout
    deployment = next(d for d in yaml.safe_load_all(rendered) if d and d["kind"] == "Deployment")
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    runflags.built(cli.parse_args(["run", *args]))  # every flag known, every value taken


def test_chart_runs_the_ui_with_single_sign_on_from_its_values(run: Run) -> None:
    """ui.auth=oidc: the flags from ui.oidc, the client's Secret and a session key the chart makes mounted where
    the flags say, and no TokenReview right (a viewer's token is never reviewed)."""
    sso = ["--set", "ui.enabled=true", "--set", "ui.auth=oidc", "--set", "ui.oidc.issuer=https://dex.example.com",
           "--set", "ui.oidc.clientID=helmop", "--set", "ui.oidc.redirectURL=https://helmop.example.com/oauth2/cb",
           "--set", "ui.oidc.groupsPrefix=oidc:", "--set", "ui.oidc.clientSecret.name=helmop-oidc"]
    rendered = {d["kind"]: d for d in yaml.safe_load_all(run("helm", "template", "h", str(CHART), *sso,
                                                             "--show-only", "templates/ui.yaml").stdout) if d}
    pod = rendered["Deployment"]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    args = parser().parse_args(container["args"])  # the UI accepts what the chart passes
    assert (args.auth, args.oidc_issuer, args.oidc_client_id, args.oidc_groups_prefix, args.oidc_username_claim) == (
        "oidc", "https://dex.example.com", "helmop", "oidc:", "email")
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    secrets = {v["name"]: v["secret"]["secretName"] for v in pod["volumes"]}
    assert args.oidc_client_secret_file == f"{mounts['oidc-client']}/client-secret"
    assert secrets["oidc-client"] == "helmop-oidc"
    assert args.session_key_file == f"{mounts['session-key']}/session-key"
    made = rendered["Secret"]
    assert secrets["session-key"] == made["metadata"]["name"] and len(made["data"]["session-key"]) >= 64
    assert not any("tokenreviews" in rule["resources"] for rule in rendered["ClusterRole"]["rules"])
    # a Secret of the administrator's own: none made
    kept = run("helm", "template", "h", str(CHART), *sso, "--set", "ui.oidc.sessionKeySecret=ui-session",
               "--show-only", "templates/ui.yaml").stdout
    assert "kind: Secret" not in kept and "secretName: ui-session" in kept
    # an issuer missing is said at install time
    done = run("helm", "template", "h", str(CHART), "--set", "ui.enabled=true", "--set", "ui.auth=oidc", check=False)
    assert done.returncode != 0 and "ui.oidc.issuer is needed" in done.stderr
    token = run("helm", "template", "h", str(CHART), "--set", "ui.enabled=true", "--show-only",
                "templates/ui.yaml").stdout
    assert "--auth=token" in token and "tokenreviews" in token and "kind: Secret" not in token
