"""A Project's status: its namespace, parts, branch environments, and the teardown under way."""

from __future__ import annotations

from helmop.api.objects import ObjectRef

from . import Status, Struct


class Environment(Struct, frozen=True):
    branch: str
    namespace: str
    commit: str = ""
    ready: bool = False
    message: str = ""
    inventory: tuple[ObjectRef, ...] = ()


class Teardown(Struct, frozen=True):
    step: str = ""  # the step under way (its condition's name)
    since: float = 0.0  # when that step started waiting (epoch seconds)
    reported: bool = False  # its TeardownStuck Event was posted
    waiting_for: str = ""
    done: tuple[str, ...] = ()  # the steps finished
    retained: tuple[str, ...] = ()  # volumes switched to Retain


class ProjectStatus(Status, frozen=True):
    namespace: str = ""
    jenkins_url: str = ""
    inventory: tuple[ObjectRef, ...] = ()
    environments: tuple[Environment, ...] = ()
    teardown: Teardown | None = None
