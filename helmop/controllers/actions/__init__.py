"""The actions a HelmRelease reconcile carries out, one module per action with behaviour of its own
(Flux's small atomic actions): deploy (install and upgrade: one ``helm upgrade --install``), test,
rollback, uninstall, unlock, correct (drift). Each action's ``run`` does the I/O (helm, or the API) and
returns a :class:`~.job.Result`; ``decisions.settle.helmrelease`` says what status that result leads to;
``decisions.decide`` picks the action. Adding one means a module here, a row in :data:`RUNS` and rows in
the decision table.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from helmop.api.actions import Action

from . import correct, deploy, rollback, test, uninstall, unlock
from .job import Job, Result

RUNS: dict[Action, Callable[[Job], Awaitable[Result]]] = {
    Action.INSTALL: deploy.install, Action.UPGRADE: deploy.upgrade, Action.TEST: test.run,
    Action.ROLLBACK: rollback.run, Action.UNINSTALL: uninstall.run, Action.UNLOCK: unlock.run,
    Action.CORRECT: correct.run}
