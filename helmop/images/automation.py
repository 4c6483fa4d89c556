"""One run of an ImageUpdateAutomation: its repository fetched, the files under update.path read at the head of
the branch it updates, their setter markers set to what its policies chose, and what changed committed (with the
templated message, signed when a key is given) and pushed with the GitRepository's credentials.

A push the remote refuses because the branch moved on (another automation, a person) is made again on top of the
new head, a few times; it is never forced. Only regular files under update.path are read, and only those can
change: a symlink is never followed or written, a marker elsewhere in the repository is never touched."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Any

from helmop.api.status.images import ImageRef
from helmop.sources import gitwrite
from helmop.sources.errors import SourceError
from helmop.sources.git import GitAuth, GitCache, GitRef, check_ref, clean_path

from . import setters
from .template import TemplateError, render

ATTEMPTS = 4  # pushes tried while the branch keeps moving
DEFAULT_MESSAGE = "Update from image update automation"  # Flux's


@dataclass(frozen=True)
class Plan:
    """What one run does (the spec resolved: the GitRepository's URL, credentials and ref, the policies' refs)."""

    url: str
    auth: GitAuth
    checkout: GitRef
    push_branch: str  # spec.git.push.branch ("": the checkout's branch)
    refspec: str
    options: tuple[tuple[str, str], ...]
    path: str  # update.path, as written ("" or "./": the root)
    author: tuple[str, str]
    template: str
    values: dict[str, str]
    namespace: str
    name: str
    refs: dict[str, ImageRef]  # policy name -> what it chose
    timeout: float
    sign: gitwrite.Sign | None = None


@dataclass(frozen=True)
class Done:
    revision: str  # the branch's head as read: <branch>@sha1:<sha>
    commit: str  # "" when nothing changed
    message: str
    result: setters.Result


def push_branch(checkout: GitRef, branch: str) -> str:
    """Flux's rule: spec.git.push.branch, else the branch checked out; SourceError when there is neither."""
    chosen = branch or checkout.branch
    if not chosen:
        raise SourceError("InvalidSourceConfiguration", "no branch to push to: set spec.git.push.branch (the checkout "
                                                        "is not a branch)", transient=False)
    return chosen


async def run(git: GitCache, plan: Plan) -> Done:
    check_ref(plan.checkout)
    root = clean_path(plan.path)  # InvalidPath for one that leaves the repository: nothing is read or written
    target = push_branch(plan.checkout, plan.push_branch)
    gitwrite.push_refs(target, plan.refspec, "0" * 40)  # a bad refspec refused before anything is made
    for attempt in range(ATTEMPTS):
        await git.fetch(plan.url, plan.auth, timeout=plan.timeout)
        revision, head = await _base(git, plan, target)
        files = await gitwrite.regular_files(git, plan.url, plan.auth, head, root, setters.candidate)
        under = {posixpath.relpath(rel, root or "."): f.data for rel, f in files.items()}
        changed, result = setters.update(under, plan.refs, plan.namespace)
        if not changed:
            return Done(revision, "", "", result)
        message = _message(plan, result)
        edits = {}
        for rel, data in changed.items():
            path = posixpath.normpath(posixpath.join(root, rel))
            edits[path] = gitwrite.File(files[path].mode, data)
        sha = await gitwrite.commit(git, plan.url, plan.auth, head, edits, plan.author, message, plan.sign)
        try:
            await gitwrite.push(git, plan.url, plan.auth, gitwrite.push_refs(target, plan.refspec, sha), plan.options,
                                plan.timeout)
        except gitwrite.Rejected:
            if attempt == ATTEMPTS - 1:
                raise
            continue
        return Done(revision, sha, message, result)
    raise AssertionError("unreachable")  # the last attempt returns or raises


async def _base(git: GitCache, plan: Plan, target: str) -> tuple[str, str]:
    """(revision, sha) the commit is made on: the push branch's head when it exists and differs from the checkout
    (its commits are kept: nothing is force-pushed), else the checkout's."""
    if target != plan.checkout.branch:
        try:
            return await git.resolve(plan.url, GitRef(branch=target), plan.auth)
        except SourceError as exc:
            if exc.reason != "RefNotFound":
                raise
    return await git.resolve(plan.url, plan.checkout, plan.auth)


def _message(plan: Plan, result: setters.Result) -> str:
    try:
        return render(plan.template or DEFAULT_MESSAGE, template_data(plan, result))
    except TemplateError as exc:
        removed = next((f for f in (".Updated", ".Changed.ImageResult") if f"field {f.rsplit('.', 1)[1]} " in str(exc)),
                       None)
        text = f"template uses removed '{removed}' field: use '.Changed' instead" if removed else str(exc)
        raise SourceError("InvalidMessageTemplate", f"spec.git.commit.messageTemplate: {text}", transient=False) \
            from None


class _Fields:
    """A value a template reads fields of (Go's exported struct fields)."""

    FIELDS: tuple[str, ...] = ()


@dataclass(frozen=True, order=True)
class _Object(_Fields):
    Kind: str
    Namespace: str
    Name: str
    APIVersion: str
    FIELDS = ("Kind", "Namespace", "Name", "APIVersion")

    def __str__(self) -> str:
        return "/".join(p for p in (self.Kind, self.Namespace, self.Name) if p)


@dataclass(frozen=True)
class _Change(_Fields):
    OldValue: str
    NewValue: str
    Setter: str
    FIELDS = ("OldValue", "NewValue", "Setter")


@dataclass(frozen=True)
class _Named(_Fields):
    Name: str
    Namespace: str
    FIELDS = ("Name", "Namespace")

    def __str__(self) -> str:
        return f"{self.Namespace}/{self.Name}"


@dataclass(frozen=True)
class _Changed(_Fields):
    FileChanges: dict[str, dict[_Object, list[_Change]]]
    Objects: dict[_Object, list[_Change]]
    Changes: list[_Change]
    FIELDS = ("FileChanges", "Objects", "Changes")


@dataclass(frozen=True)
class _Data(_Fields):
    AutomationObject: _Named
    Changed: _Changed
    Values: dict[str, str]
    FIELDS = ("AutomationObject", "Changed", "Values")


def template_data(plan: Plan, result: setters.Result) -> Any:
    """Flux's TemplateData: AutomationObject (namespace/name), Changed (FileChanges, Objects, Changes), Values."""
    def objects(found: dict[setters.ObjectId, list[setters.Change]]) -> dict[_Object, list[_Change]]:
        return {_Object(o.kind, o.namespace, o.name, o.api_version): [_Change(c.old_value, c.new_value, c.setter)
                                                                       for c in changes]
                for o, changes in found.items()}

    changed = _Changed({path: objects(found) for path, found in result.files.items()}, objects(result.objects()),
                       [_Change(c.old_value, c.new_value, c.setter) for c in result.changes()])
    return _Data(_Named(plan.name, plan.namespace), changed, dict(plan.values))
