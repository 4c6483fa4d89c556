"""Which commit of a git repository to take, as a GitRepository's spec.ref and an ImageUpdateAutomation's
spec.git.checkout.ref say it (Flux's fields). Pure."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GitRef:
    """Which commit to take, Flux's precedence: commit, then name (any reference), tag, semver, branch."""

    branch: str = ""
    tag: str = ""
    semver: str = ""
    commit: str = ""
    name: str = ""  # a full reference (refs/pull/7/head), fetched on its own: a mirror holds heads and tags

    @property
    def given(self) -> bool:
        """Whether any field is set (an automation without one checks out its GitRepository's)."""
        return any((self.branch, self.tag, self.semver, self.commit, self.name))

    @property
    def fetched(self) -> str:
        """The reference ``name`` names, once peeled of a trailing ``^{}``."""
        return self.name.removesuffix("^{}")
