"""Injected API faults, for reliability tests: what an overloaded or flaky control plane does.

A spec is comma-separated ``key=value`` pairs, e.g.
``seed=7,error=0.05,conflict=0.05,timeout=0.02,latency=0.1:0.5,drop=0.1,verbs=create|update,resources=secrets``:

- ``error=RATE``: 500, 503 (with Retry-After: 1) or 504 before anything is done;
- ``conflict=RATE``: 409 Conflict where a real server could give one: an update, or a patch or delete
  that names a resourceVersion or preconditions (a lost optimistic-concurrency race);
- ``timeout=RATE``: a write is done, but the reply is 504 (the client cannot tell whether it happened);
- ``latency=RATE:SECONDS``: the reply waits up to SECONDS more;
- ``drop=RATE``: a watch connection is cut (no clean end of stream) within 5 s;
- ``verbs=...``, ``resources=...`` (plural names), separated by ``|``: which requests may get faults
  (default all resource requests; discovery, /healthz and /version never do).

Each decision is a function of the seed and the request (verb, resource, namespace, name, and how many
alike came before), not of arrival order across requests, so a run with the same seed and the same
client behaviour meets the same faults.
"""

from __future__ import annotations

import logging
import random
from collections import Counter
from dataclasses import dataclass, field

from .errors import ApiError

WRITES = frozenset({"create", "update", "patch", "delete", "deletecollection"})
_CONFLICTING = frozenset({"update", "patch", "delete"})
_RATES = ("error", "conflict", "timeout", "latency", "drop")
log = logging.getLogger(__name__)


@dataclass
class Decision:
    delay: float = 0.0
    error: ApiError | None = None  # answer this instead of doing anything
    lose_reply: bool = False  # do it, then answer 504
    cut_after: float | None = None  # end the watch abruptly after this many seconds


@dataclass
class Faults:
    seed: int = 0
    error: float = 0.0
    conflict: float = 0.0
    timeout: float = 0.0
    latency: float = 0.0
    max_delay: float = 0.5
    drop: float = 0.0
    verbs: frozenset[str] | None = None
    resources: frozenset[str] | None = None
    injected: Counter[str] = field(default_factory=Counter)  # what was injected, by kind
    _seen: Counter[str] = field(default_factory=Counter)

    @classmethod
    def parse(cls, spec: str) -> Faults:
        faults = cls()
        for item in filter(None, (part.strip() for part in spec.split(","))):
            key, sep, value = item.partition("=")
            if not sep:
                raise ValueError(f"fault spec item {item!r} is not key=value")
            try:
                if key == "seed":
                    faults.seed = int(value)
                elif key in ("verbs", "resources"):
                    setattr(faults, key, frozenset(v for v in value.split("|") if v))
                elif key == "latency":
                    rate, _, delay = value.partition(":")
                    faults.latency = float(rate)
                    faults.max_delay = float(delay.removesuffix("s")) if delay else faults.max_delay
                elif key in _RATES:
                    setattr(faults, key, float(value))
                else:
                    raise ValueError(f"unknown fault {key!r} (known: seed, {', '.join(_RATES)}, verbs, resources)")
            except ValueError as exc:
                raise ValueError(f"fault spec item {item!r}: {exc}") from None
        for name in _RATES:
            if not 0.0 <= getattr(faults, name) <= 1.0:
                raise ValueError(f"fault rate {name}={getattr(faults, name)} is not between 0 and 1")
        return faults

    def decide(self, verb: str, resource: str, namespace: str, name: str, *, preconditioned: bool = True) -> Decision:
        """``preconditioned``: the write names a resourceVersion or preconditions, so a real server could
        answer it 409 (a merge patch without one never conflicts: clients rightly do not expect that)."""
        if (self.verbs is not None and verb not in self.verbs) or (
                self.resources is not None and resource not in self.resources):
            return Decision()
        request = f"{verb}|{resource}|{namespace}|{name}"
        self._seen[request] += 1
        rng = random.Random(f"{self.seed}|{request}|{self._seen[request]}")
        decision = Decision()
        if rng.random() < self.latency:
            decision.delay = rng.uniform(0, self.max_delay)
            self.injected["latency"] += 1
        if verb == "watch":
            if rng.random() < self.drop:
                decision.cut_after = rng.uniform(0.1, 5.0)
                self.injected["drop"] += 1
                log.info("sandbox fault: dropped watch on %s %s %s", verb, resource, namespace)
            return decision
        draw = rng.random()
        conflict = self.conflict if verb in _CONFLICTING and preconditioned else 0.0
        timeout = self.timeout if verb in WRITES else 0.0
        if draw < self.error:
            code = rng.choice(("InternalError", "ServiceUnavailable", "Timeout"))
            decision.error = ApiError(code, _MESSAGES[code], details={"retryAfterSeconds": 1}
                                      if code == "ServiceUnavailable" else {})
            self.injected["error"] += 1
        elif draw < self.error + conflict:
            decision.error = ApiError("Conflict", f'Operation cannot be fulfilled on {resource} "{name}": the '
                                      "object has been modified; please apply your changes to the latest "
                                      "version and try again", details={"name": name, "kind": resource})
            self.injected["conflict"] += 1
        elif draw < self.error + conflict + timeout:
            decision.lose_reply = True
            self.injected["timeout"] += 1
        if decision.error is not None or decision.lose_reply or decision.cut_after is not None:
            what = "lost reply" if decision.lose_reply else "dropped watch" if decision.cut_after is not None \
                else f"{decision.error.code if decision.error else ''}"
            log.info("sandbox fault: %s on %s %s %s/%s", what, verb, resource, namespace, name)
        return decision


_MESSAGES = {
    "InternalError": "Internal error occurred: etcdserver: leader changed",
    "ServiceUnavailable": "the server is currently unable to handle the request",
    "Timeout": "Timeout: request did not complete within requested timeout - context deadline exceeded",
}
LOST_REPLY = ApiError("Timeout", "The request is being processed; the server was unable to return a response in "
                      "the time allotted, but may still be processing the request")
