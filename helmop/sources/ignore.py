"""Which files of a source its artifact leaves out, as Flux's source-controller decides it: gitignore patterns
(``pathspec``'s, the syntax git documents) from ``.sourceignore`` files and ``spec.ignore``, over Flux's
default exclusions.

* Version-control files (``.git/``, ``.gitignore``, ``.gitmodules``, ``.gitattributes``) are always left out,
  unless a pattern brings one back.
* Flux's other defaults (images and archives, CI folders, ``.sops.yaml``, ``.flux.yaml``...) apply only while
  no pattern is given at all: one ``.sourceignore`` anywhere, or a non-empty ``spec.ignore``, replaces them
  (source-controller's code; its docs say "may overrule").
* A ``.sourceignore`` speaks for its own folder: its patterns match below it, anchored ones from it.
* ``spec.ignore`` comes last, so it wins: the last pattern that matches a path decides, ``!`` brings back.
* An excluded folder does not hide what a later pattern brings back inside it (Flux tests every path, it does
  not prune folders as git does).

A Bucket reads only the ``.sourceignore`` at its root and has no defaults (``defaults=False``)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import pathspec

FILE = ".sourceignore"
VCS = (".git/", ".gitignore", ".gitmodules", ".gitattributes")
DEFAULTS = ("*.jpg", "*.jpeg", "*.gif", "*.png", "*.wmv", "*.flv", "*.tar.gz", "*.zip",
            ".github/", ".circleci/", ".travis.yml", ".gitlab-ci.yml", "appveyor.yml", ".drone.yml", "cloudbuild.yaml",
            "codeship-services.yml", "codeship-steps.yml",
            "**/.goreleaser.yml", "**/.sops.yaml", "**/.flux.yaml")
MAX_PATTERNS = 10_000  # of all files together: a matcher costs per pattern and path


def patterns_of(text: str) -> list[str]:
    """The patterns of a ``.sourceignore`` or ``spec.ignore``: one a line, comments and blank lines left out."""
    return [line.rstrip("\r") for line in text.splitlines() if line.strip() and not line.startswith("#")]


def _scoped(pattern: str, folder: str) -> str:
    """``pattern`` of the ``.sourceignore`` in ``folder``, written for the artifact's root."""
    if not folder:
        return pattern
    negated, body = (pattern[:1] == "!"), pattern.removeprefix("!")
    anchored = "/" in body.rstrip("/")
    scoped = f"{folder}/{body.lstrip('/')}" if anchored else f"{folder}/**/{body}"
    return f"!{scoped}" if negated else scoped


@dataclass(frozen=True)
class Ignore:
    """A compiled decision: :meth:`excludes` a root-relative path or not."""

    spec: pathspec.GitIgnoreSpec
    patterns: tuple[str, ...]

    @classmethod
    def of(cls, files: Mapping[str, str], ignore: str | None, *, defaults: bool = True) -> Ignore:
        """From the ``.sourceignore`` files (folder -> text, "" for the root) and ``spec.ignore`` (None: not
        set). ValueError when a pattern is not one gitignore's syntax accepts, or there are too many."""
        given = [_scoped(p, folder) for folder in sorted(files) for p in patterns_of(files[folder])]
        given += patterns_of(ignore or "")
        if len(given) > MAX_PATTERNS:
            raise ValueError(f"more than {MAX_PATTERNS} ignore patterns")
        lines = [*VCS, *(() if given or not defaults else DEFAULTS), *given]
        try:
            return cls(pathspec.GitIgnoreSpec.from_lines(lines), tuple(lines))
        except (ValueError, TypeError, re.error) as exc:  # pathspec's pattern errors are ValueErrors, or re's
            raise ValueError(f"an ignore pattern is not valid: {exc}") from None

    @classmethod
    def exactly(cls, patterns: tuple[str, ...]) -> Ignore:
        """These patterns and no others (``flux push artifact``'s --ignore-paths)."""
        return cls(pathspec.GitIgnoreSpec.from_lines(patterns), patterns)

    def excludes(self, path: str) -> bool:
        return bool(self.spec.match_file(path))
