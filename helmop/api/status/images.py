"""The status of image automation's kinds, in Flux's shape (image.toolkit.fluxcd.io/v1)."""

from __future__ import annotations

import msgspec

from . import Status, Struct


class ScanResult(Struct, frozen=True):
    """An ImageRepository's last scan: how many tags (after the exclusion list), the ten that sort last, when,
    and a digest of the whole list (its revision: a policy's turn follows it)."""

    tag_count: int = 0
    latest_tags: tuple[str, ...] = ()
    scan_time: str = ""
    revision: str = ""


class ImageRepositoryStatus(Status, frozen=True):
    canonical_image_name: str = ""
    last_scan_result: ScanResult | None = None
    observed_exclusion_list: tuple[str, ...] = ()


class ImageRef(Struct, frozen=True):
    """An image as a policy chose it: the repository as its ImageRepository names it, the tag, the digest (with
    digestReflectionPolicy)."""

    name: str
    tag: str
    digest: str = ""

    def __str__(self) -> str:
        return f"{self.name}:{self.tag}" + (f"@{self.digest}" if self.digest else "")


class ImagePolicyStatus(Status, frozen=True):
    latest_ref: ImageRef | None = None
    observed_previous_ref: ImageRef | None = None


class ImageUpdateAutomationStatus(Status, frozen=True):
    last_automation_run_time: str = ""
    last_push_commit: str = ""
    last_push_time: str = ""
    observed_source_revision: str = ""
    observed_policies: dict[str, ImageRef] = msgspec.field(default_factory=dict)
