"""Every time the operator waits, in one object handed to what waits: production's values are the
defaults; tests shorten them instead of waiting them out."""

from __future__ import annotations

from dataclasses import dataclass, field

# Defaults of the operator's command-line options, shared by `helmop run` and OperatorConfig.
CONCURRENCY = 10  # helm actions at once
HELM_CACHE_TTL = 900.0  # seconds a repository index is used before it is revalidated
HELM_INDEX_MAX_SIZE = 64 << 20
HELM_CHART_MAX_SIZE = 64 << 20
# Intervals of objects whose spec names none: releases (HelmRelease, app kinds) and sources (GitRepository,
# ConfigSync), as Flux's.
RELEASE_INTERVAL = 600.0
SOURCE_INTERVAL = 300.0


@dataclass(frozen=True)
class Backoff:
    first: float
    limit: float

    def after(self, failures: int) -> float:
        """The delay after ``failures`` failures in a row (1 for the first): doubling up to the limit."""
        return float(min(self.limit, self.first * 2 ** max(0, failures - 1)))


@dataclass(frozen=True)
class Tunables:
    # A reconcile that failed (every kind) and an unexpected error (a bug, reported as ReconcileError).
    failure_backoff: Backoff = field(default_factory=lambda: Backoff(2.0, 300.0))
    error_backoff: Backoff = field(default_factory=lambda: Backoff(5.0, 300.0))
    release_interval: float = RELEASE_INTERVAL
    source_interval: float = SOURCE_INTERVAL
    dependency_recheck: float = 30.0  # a release waiting for dependsOn (also woken when they change)
    dependents_wait: float = 2.0  # a deleted release looks again this soon whether its dependents are gone
    # Deleted together: `kubectl delete hr db app` sends one DELETE after the other, so a dependent deleted
    # this much later than what it depends on still goes first.
    deleted_together: float = 5.0
    cleanup_wait: float = 2.0  # a clean-up waiting for what it deleted to go
    progress_after: float = 2.0  # Reconciling=True for a helm action still running after this
    # Turns (reconciles, clean-ups) running at once, every kind together; helm actions are bounded apart
    # (--concurrency). Without a bound, 10 000 objects seen at start would all ask the API at once: the
    # burst's buffers stay in the heap as fragmentation long after it.
    max_turns: int = 100
    lease_duration: float = 15.0  # leader election, controller-runtime's defaults
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    api_check: float = 5.0  # how often readiness asks the API server
    flux_check: float = 10.0  # --flux-api: how often Flux's leader Leases are read (controllers.fluxgate)
    # --flux-api: the versions Flux has removed are served too, their fields read as the served version's
    # (api.flux.upgrade); False with --flux-api=current
    flux_removed_versions: bool = True
    termination_deadline: float = 4.5  # after SIGTERM; a pod's default grace period is 30 s
    cel_timeout: float = 1.0  # one object's health expressions
    yaml_timeout: float = 30.0  # one large YAML document (a few MiB of dense YAML take a few seconds)
    # --strict-substitution: a ConfigSync's ${var} with no value and no default fails the sync (Flux's
    # StrictPostBuildSubstitutions feature gate) instead of becoming "".
    strict_substitution: bool = False
    # Notifications: a receiver that fails is tried again (timeouts, 429, 5xx) with this backoff for this long;
    # each Provider queues at most this many (the oldest dropped); the same event is sent once per rate limit.
    notify_backoff: Backoff = field(default_factory=lambda: Backoff(1.0, 60.0))
    notify_retry_for: float = 600.0
    notify_queue: int = 100
    notify_rate_limit: float = 300.0  # Flux's --rate-limit-interval
