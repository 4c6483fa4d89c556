"""The README's tour, run as a user would: `scripts/demo --keep`, the environment line it prints, then
every command of the tour in order, in one bash with `set -euo pipefail` (any failing command fails
the test). The tour therefore cannot drift from what helmop does."""

from __future__ import annotations

import os
import re
import subprocess
import textwrap

from tests.tools import ROOT


def tour_commands() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## A five-minute tour"):]
    section = section[:section.index("\n## ", 3)]
    blocks = [textwrap.dedent(b) for b in re.findall(r"^ *```bash\n(.*?)^ *```", section, re.S | re.M)]
    commands = [b for b in blocks if "scripts/demo --keep" not in b]
    assert len(commands) >= 5, "the tour lost its steps"
    return "\n".join(commands)


def test_the_readme_tour_works(tmp_path: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HELM_", "KUBECONFIG"))}
    demo = subprocess.run([str(ROOT / "scripts" / "demo"), "--keep"], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, env=env)
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    lines = demo.stdout.splitlines()
    exports = next(line for line in lines if line.startswith("export PATH="))
    stop = next(line for line in lines if line.startswith("Stop everything with: ")).split(": ", 1)[1]
    for step in ("venv", "Python dependencies", "helm 4.1.4 and kubectl", "helm 3.17.2"):
        assert any(step in line and line.rstrip().endswith("s") for line in lines), (step, demo.stdout)
    assert "Summary" in demo.stdout
    try:
        script = f"set -euo pipefail\n{exports}\n{tour_commands()}\n"
        tour = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                              env=env)
        assert tour.returncode == 0, f"tour failed:\n{tour.stdout[-4000:]}\n{tour.stderr[-4000:]}"
        out = tour.stdout
        assert "helmrelease/web" in out and "✔ UpgradeSucceeded" in out
        assert "+  replicas: 3" in out and "-  replicas: 2" in out  # the preview
        assert '"ok": true' in out.replace(" ", "").replace('"ok":true', '"ok": true')  # the webhook call
        assert "helmop_resource_ready{" in out and "helmop_helm_actions_total{" in out
        assert re.search(r"^NAME +REVISION +SUSPENDED +READY +REASON +AGE +SOURCE", out, re.M)  # get -o wide, no -n
        assert "── ConfigSync/tour/tour  Ready" in out and "HelmRelease/tour/shop  Ready" in out  # tree
        assert re.search(r"^GitRepository: +tour/tour$", out, re.M)  # trace
        assert re.search(r"Normal +UpgradeSucceeded +helmrelease/shop", out)  # events
        assert re.search(r"INFO HelmRelease tour/shop: .*UpgradeSucceeded", out)  # logs
    finally:
        subprocess.run([stop], timeout=60)
