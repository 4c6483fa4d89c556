"""How image automation's statuses change: a scan, a choice, a run (failures: :func:`..settle.outcome`)."""

from __future__ import annotations

from helmop.api.status.images import (
    ImagePolicyStatus,
    ImageRef,
    ImageRepositoryStatus,
    ImageUpdateAutomationStatus,
    ScanResult,
)

from . import outcome

LATEST = 10  # tags a scan result shows (Flux's)


def scanned(status: ImageRepositoryStatus, generation: int, canonical: str, tags: tuple[str, ...], revision: str,
            at: str, exclusions: tuple[str, ...], message: str) -> ImageRepositoryStatus:
    """A scan made at ``at``: the tags after the exclusion list counted, the ten that sort last (in reverse order
    of characters, as Flux shows them), Ready."""
    latest = tuple(sorted(tags, reverse=True)[:LATEST])
    out = status.but(canonical_image_name=canonical, observed_exclusion_list=exclusions,
                     last_scan_result=ScanResult(tag_count=len(tags), latest_tags=latest, scan_time=at,
                                                 revision=revision))
    return outcome(out, generation, True, "Succeeded", message)


def chosen(status: ImagePolicyStatus, generation: int, ref: ImageRef) -> ImagePolicyStatus:
    """``ref`` chosen: the previous choice kept as observedPreviousRef when it changed; Ready with Flux's message."""
    out = status
    if status.latest_ref != ref:
        out = status.but(latest_ref=ref, observed_previous_ref=status.latest_ref)
    message = f"Latest image tag for {ref.name} resolved to {ref.tag}" + (
        f" with digest {ref.digest}" if ref.digest else "")
    previous = out.observed_previous_ref
    if previous is not None and previous != ref:
        message += f" (previously {previous})"
    return outcome(out, generation, True, "Succeeded", message)


def ran(status: ImageUpdateAutomationStatus, generation: int, at: str, revision: str, policies: dict[str, ImageRef],
        pushed: str, message: str) -> ImageUpdateAutomationStatus:
    """A run at ``at`` that read ``revision`` with ``policies``' choices; ``pushed``: the commit pushed ("": none)."""
    out = status.but(last_automation_run_time=at, observed_source_revision=revision, observed_policies=policies)
    if pushed:
        out = out.but(last_push_commit=pushed, last_push_time=at)
    return outcome(out, generation, True, "Succeeded", message)
