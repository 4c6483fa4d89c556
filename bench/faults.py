"""The long fault-injection run (the test suite runs a short one: tests/operations/test_faults.py).

`python bench/faults.py [--cycles 50] [--seed 1] [--faults SPEC]`: two operator replicas with leader
election SIGKILLed at random moments (the whole process group, or the operator alone with its helm left
running) across install / upgrade / rolled-back upgrade / uninstall cycles and ConfigSync pushes that
prune (announced by a flood of signed webhooks), the git server and chart repository down for a while,
the sandbox injecting
API faults all along and killed and restarted once. Prints the figures, the problems found, then one JSON
line with kills, converged, stuck, orphaned, pending, leaks, double_actions.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from operator_process import ROOT, TOOLS

sys.path.insert(0, str(ROOT))

from tests.chartrepo import ChartRepo
from tests.operations.chaos import Chaos, chart_source

DEFAULT_FAULTS = "error=0.05,conflict=0.05,timeout=0.02,latency=0.1:0.5,drop=0.1"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cycles", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--releases", type=int, default=6, help="HelmReleases the cycles act on")
    parser.add_argument("--faults", default=DEFAULT_FAULTS, help="the sandbox's --faults (the seed is added)")
    parser.add_argument("--settle", type=float, default=300, help="seconds to converge after the last kill")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="helmop-faults-"))
    subprocess.run([str(TOOLS / "helm"), "version"], check=True, capture_output=True)
    charts = ChartRepo(work, chart_source(work), str(TOOLS / "helm"))
    charts.publish("chaos", "0.1.0")
    try:
        chaos = Chaos(work, charts, seed=args.seed, faults=f"seed={args.seed},{args.faults}",
                      releases=args.releases)
        report = chaos.run(args.cycles, args.settle)
    finally:
        charts.close()
    injected = ", ".join(f"{n} {kind}" for kind, n in sorted(report.faults.items())) or "none"
    print(f"{report.cycles} cycles, {report.kills} kills, {report.sandbox_restarts} sandbox restart(s), "
          f"{report.seconds:.0f} s; API faults injected: {injected} (log: {work}/sandbox.log)")
    print(f"converged {report.settle_s:.0f} s after the last kill (the HelmReleases' interval: 30 s); "
          f"memory growth over three more rounds of the same work: {report.memory_growth_mib:.1f} MiB")
    print(f"HelmReleases: {report.releases}, converged {report.converged}; stuck {report.stuck}, orphaned "
          f"{report.orphaned}, pending {report.pending}, leaks {report.leaks}, double actions {report.double_actions}")
    print(f"GitOps: {report.outages} outage(s) of the git server and chart repository, {report.webhook_calls} "
          f"webhook calls, {report.unsynced} differences between the repository and the ConfigSync's objects")
    for problem in report.problems:
        print(f"  problem: {problem}")
    print(report.json())


if __name__ == "__main__":
    main()
