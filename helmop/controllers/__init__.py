"""The operator: kopf handlers that gather inputs, ask :mod:`helmop.decisions` for an action,
perform it with :mod:`helmop.helm` and :mod:`helmop.sources`, and report status and Events."""
