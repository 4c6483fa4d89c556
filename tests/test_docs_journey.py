"""The docs' commands, run as a user would, in one journey: `scripts/demo --keep`, the environment line it
prints, then the getting-started tour, the CLI guide's day-to-day verbs, installing the chart, upgrading it,
locking it down for tenants, and uninstalling everything in the documented order — every block in order, in
one bash with `set -euo pipefail` (any failing command fails the test). The docs therefore cannot drift
from what helmop does."""

from __future__ import annotations

import os
import re
import subprocess

from tests.docs import block, blocks
from tests.tools import ROOT

TOUR = [name for name, _ in blocks("getting-started.md") if name.startswith("tour-") and name != "tour-start"]
# After the tour (in its folder), then from the repository's root, as someone with a clone would type them.
IN_THE_TOUR = [("guides/cli.md", "day-to-day")]
# (the demo's operator made helmop's aggregated ClusterRoles itself, as `--install-crds` does: the chart's
# install then meets the case its page describes)
FROM_THE_CLONE = [("operations/install.md", "roles-made-by-the-operator"), ("operations/install.md", "install"),
                  ("operations/upgrade.md", "upgrade"), ("guides/multi-tenancy.md", "lockdown"),
                  ("operations/uninstall.md", "in-order")]
# What the journey looks at between two blocks (not commands of the docs): the locked-down operator's flags.
LOOK = {"lockdown": "echo \"locked down: $(helm get manifest helmop -n helmop-system | grep -c -- "
                    "'--default-service-account=helmop-tenant')\"\n"}


def test_the_two_commands_are_what_ci_and_this_journey_run() -> None:
    for commands in (block("README.md", "commands"), block("getting-started.md", "commands")):
        assert [line.split("#")[0].strip() for line in commands.splitlines()] == ["scripts/demo", "scripts/test"]
    assert "scripts/test" in (ROOT / ".ci" / "run").read_text()  # CI runs the second; the journey the first
    assert block("getting-started.md", "tour-start").startswith("scripts/demo --keep\n")


def test_the_docs_commands_work(tmp_path: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HELM_", "KUBECONFIG"))}
    demo = subprocess.run([str(ROOT / "scripts" / "demo"), "--keep"], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, env=env)
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    lines = demo.stdout.splitlines()
    exports = next(line for line in lines if line.startswith("export PATH="))
    stop = next(line for line in lines if line.startswith("Stop everything with: ")).split(": ", 1)[1]
    for step in ("venv", "Python dependencies", "helm 4.1.4 and 3.17.2, kubectl 1.35.2"):
        assert any(step in line and line.rstrip().endswith("s") for line in lines), (step, demo.stdout)
    assert "Summary" in demo.stdout
    assert len(TOUR) >= 6, "the tour lost its steps"
    steps = [block("getting-started.md", name) for name in TOUR]
    steps += [block(page, name) for page, name in IN_THE_TOUR]
    steps += [f"cd {ROOT}\n"] + [block(page, name) + LOOK.get(name, "") for page, name in FROM_THE_CLONE]
    try:
        script = "set -euo pipefail\n" + exports + "\n" + "\n".join(steps) + "\n"
        run = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                             env=env)
        assert run.returncode == 0, f"the docs' commands failed:\n{run.stdout[-4000:]}\n{run.stderr[-4000:]}"
        out = run.stdout
        # the tour
        assert "helmrelease/web" in out and "✔ UpgradeSucceeded" in out
        assert "+  replicas: 3" in out and "-  replicas: 2" in out  # the preview
        assert '"ok": true' in out.replace(" ", "").replace('"ok":true', '"ok": true')  # the webhook call
        assert "helmop_resource_ready{" in out and "helmop_helm_actions_total{" in out
        assert re.search(r"^NAME +REVISION +SUSPENDED +READY +REASON +AGE +SOURCE", out, re.M)  # get -o wide, no -n
        assert "── ConfigSync/tour/tour  Ready" in out and "HelmRelease/tour/shop  Ready" in out  # tree
        assert re.search(r"^GitRepository: +tour/tour$", out, re.M)  # trace
        assert re.search(r"Normal +UpgradeSucceeded +helmrelease/shop", out)  # events
        assert re.search(r"INFO HelmRelease tour/shop: .*UpgradeSucceeded", out)  # logs
        # the day-to-day verbs, then the chart installed, upgraded, locked down and everything uninstalled
        assert "kind: HelmRelease" in out and "name: api" in out  # create --export
        assert 'deployment "helmop" successfully rolled out' in out
        assert re.search(r"^locked down: [1-9]", out, re.M), "multitenancy.enabled did not reach the operator"
        assert 'release "helmop" uninstalled' in out
        assert 'customresourcedefinition.apiextensions.k8s.io "helmreleases.helmop.dev" deleted' in out
    finally:
        subprocess.run([stop], timeout=60)
