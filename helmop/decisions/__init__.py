"""The decision at the heart of a reconcile, as a pure function of plain data.

Given what the spec asks for (:class:`Desired`) and what is there (:class:`Observed`: the release
records from helm's storage and the last attempt from status), :func:`decide` returns exactly one
:class:`Action`, in the spirit of Flux's small atomic actions. As helm-controller does, it first names the
state of the release (:func:`~.states.classify`: a :class:`~.states.ReleaseStatus` and its reason), then
takes the action for that state (:data:`~.choice.CHOICES`). No I/O happens here, so every rule is
unit-testable; the controllers gather the inputs, carry the action out, observe again and ask again
until the turn ends (:func:`~.choice.ends_turn`: nothing to do, stalled, waiting) or an action failed.

The rules, in order (docs/guides/helmrelease.md, "When things fail", says the same in words):

1. Deleting: uninstall the release if it is there and ours (a suspended HelmRelease leaves it).
2. Suspended: nothing. Someone else's release: refuse (a Flux HelmRelease adopts one that no helmop
   HelmRelease installed, as Flux does). A release stuck ``pending-*``: unlock it.
   A dependency (spec.dependsOn) not Ready: wait, running nothing.
3. The last attempt with this very configuration failed. With the strategy RetryOnFailure: tried again
   as it is once its retryInterval has passed (a failed release is upgraded; nothing is remediated and
   nothing stalls). Otherwise, when it left a failed release (or failed tests that are not ignored):
   remediate it — a failed install is uninstalled, a failed upgrade rolled back to the last successful
   revision (or uninstalled) — unless the retries are used up and the last failure is not to be remediated.
4. Retries used up for this configuration: stalled (``RetriesExceeded``) until the spec or values
   change, or ``helmop.dev/resetAt`` asks for a fresh count.
5. No release: install. A deployed release of a chart of another name is uninstalled first
   (upgrade.chartNameChangeStrategy Reinstall, Flux's default). A release never deployed successfully
   is installed again, not upgraded.
6. Deployed with this configuration: objects that drifted from it are re-applied (driftDetection
   enabled; warn only reports them); the tests run if they are enabled and have not run; else
   nothing (``helmop.dev/forceAt`` asks for one forced upgrade all the same).
7. Otherwise: upgrade.
"""

from .choice import CHOICES, Stop, decide, ends_turn
from .release import Decision, Desired, Observed, Reason, Release
from .states import ReleaseStatus, State, classify, drift_matters

__all__ = ["CHOICES", "Decision", "Desired", "Observed", "Reason", "Release", "ReleaseStatus", "State", "Stop",
           "classify", "decide", "drift_matters", "ends_turn"]
