"""One pull request previewed: its head and its merge base with the base branch read from the repository's mirror into
private folders (within the limits of any fetched tree), both rendered as the operator would
(:mod:`helmop.helm.previews`: the same build stage, ``helm template``, helmop's and Flux's HelmReleases) within
spec.timeout and one of the operator's helm slots, and compared (:func:`helmop.api.changes.compare`). Nothing is
applied, nothing read from the cluster."""

from __future__ import annotations

import asyncio
import tempfile
from dataclasses import dataclass
from pathlib import Path

from helmop.api.changes import Changes, compare, heading, markdown
from helmop.api.previews import MAX_CHARS, PreviewSpec
from helmop.api.rendered import Rendering
from helmop.decisions.previews import Open
from helmop.helm.previews import Inputs, Tree, Unbuildable, both, paths_of
from helmop.sources.build import Builder
from helmop.sources.errors import SourceError
from helmop.sources.git import write_tree

from ..context import Context
from .observe import World


@dataclass(frozen=True)
class Previewed:
    number: int
    head: str
    base: str  # the merge base compared with ("" when none was found)
    changes: Changes | None  # None: not rendered
    problem: str = ""  # why not (or why some releases were not: changes says the rest)

    def text(self, branch: str, about: str) -> str:
        """The comment: what changes (or why nothing could be rendered), as markdown."""
        base, head = f"{branch}@{self.base[:12]}" if self.base else branch, f"#{self.number}@{self.head[:12]}"
        footer = f"\n<sub>{about}: rendered as helmop would apply it; nothing was applied.</sub>\n"
        if self.changes is None:
            return f"{heading(base, head)}\n✗ The pull request could not be previewed: {self.problem}\n{footer}"
        return markdown(self.changes, base, head, max_chars=MAX_CHARS - len(footer)) + footer


async def previewed(ctx: Context, seen: World, spec: PreviewSpec, pr: Open, salt: bytes) -> Previewed:
    """``pr`` rendered and compared with its merge base (``salt`` keys the Secrets' digests)."""
    base = ""
    try:
        base = await ctx.services.git.merge_base(seen.url, seen.base_sha, pr.head, seen.auth)
        async with ctx.services.slots:
            sides = await asyncio.wait_for(_rendered(ctx, seen, spec, pr, base, salt), spec.timeout)
    except (Unbuildable, SourceError) as exc:
        return Previewed(pr.number, pr.head, base, None, str(exc))
    except TimeoutError:
        return Previewed(pr.number, pr.head, base, None, f"rendering took longer than spec.timeout "
                                                         f"({spec.timeout:g}s)")
    changes = compare(*sides, max_lines=spec.max_lines, max_objects=spec.max_objects)
    unrendered = [line for u in changes.unrendered
                  for line in u.lines(f"the base ({seen.base}@{base[:12]})", f"the head ({pr.head[:12]})")]
    return Previewed(pr.number, pr.head, base, changes, "; ".join(unrendered))


async def _rendered(ctx: Context, seen: World, spec: PreviewSpec, pr: Open, base: str,
                    salt: bytes) -> tuple[Rendering, Rendering]:
    with tempfile.TemporaryDirectory(prefix="helmop-preview-") as work:
        trees = [await _tree(ctx, seen, base, Path(work) / "base", f"the base ({seen.base}@{base[:12]})"),
                 await _tree(ctx, seen, pr.head, Path(work) / "head", f"the head ({pr.head[:12]})")]
        paths = paths_of(list(spec.paths), *trees)
        if not paths:
            raise Unbuildable("no ConfigSync or Kustomization in either revision names a folder: name them in "
                              "spec.paths")
        given = Inputs(dict(spec.substitute), seen.keys, ctx.services.engine, ctx.services.repos,
                       Builder(ctx.services.kustomize, ctx.services.yaml), salt)
        return await both(trees[0], trees[1], paths, given)


async def _tree(ctx: Context, seen: World, sha: str, folder: Path, ref: str) -> Tree:
    """The files of commit ``sha`` (every one, within the mirror's limits), also written under ``folder``."""
    files = await ctx.services.git.files(seen.url, sha, "", seen.auth)
    folder.mkdir()
    await asyncio.to_thread(write_tree, files, folder)
    return Tree(ref, folder, files)
