"""How a Project's status changes: its parts' conditions and Ready, its inventory and environments, and
the teardown's progress while it is deleted."""

from __future__ import annotations

from helmop.api.objects import ObjectRef
from helmop.api.status.project import Environment, ProjectStatus, Teardown

from . import outcome

Answer = tuple[bool, str, str]  # a part's (ready, reason, message)


def parts(status: ProjectStatus, generation: int, namespace: str, inventory: list[ObjectRef],
          environments: list[Environment], jenkins_url: str, answers: dict[str, Answer]) -> ProjectStatus:
    """Each part's condition (``answers``, in their order), what the Project made, and Ready once every part
    is."""
    out = status.but(namespace=namespace, inventory=tuple(inventory), environments=tuple(environments),
                     jenkins_url=jenkins_url)
    for kind, (ok, reason, message) in answers.items():
        out = out.with_condition(kind, ok, reason, message, generation)
    waiting = [message for ok, _, message in answers.values() if not ok]
    message = "; ".join(waiting) if waiting else "every part of the project is Ready"
    return outcome(out, generation, not waiting, "Progressing" if waiting else "Ready", message)


def retained(status: ProjectStatus, volumes: list[str]) -> ProjectStatus:
    """``volumes`` switched to Retain, with those before."""
    teardown = status.teardown or Teardown()
    return status.but(teardown=teardown.but(retained=tuple(sorted({*teardown.retained, *volumes}))))


def step_done(status: ProjectStatus, step: str) -> ProjectStatus:
    teardown = status.teardown or Teardown()
    return status.but(teardown=teardown.but(done=(*teardown.done, step), waiting_for=""))


def waiting(status: ProjectStatus, step: str, waiting_for: str, now: float) -> ProjectStatus:
    """``step`` waits for ``waiting_for`` (since ``now`` when it is a new step)."""
    teardown = status.teardown or Teardown()
    if teardown.step != step:
        teardown = teardown.but(step=step, since=now, reported=False)
    return status.but(teardown=teardown.but(waiting_for=waiting_for))


def reported(status: ProjectStatus) -> ProjectStatus:
    """The current step's TeardownStuck Event was posted (once per step)."""
    return status.but(teardown=(status.teardown or Teardown()).but(reported=True))
