"""Image automation below the operator, on loopback: a registry's tags scanned page after page (bounded, never
shared across credentials), and a git repository's setter markers set, committed and pushed - only under
update.path, retried on top of a branch that moved during the push, signed so that `git verify-commit` agrees."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pysequoia
import pytest

from helmop.api.images import parse_image
from helmop.api.status.images import ImageRef
from helmop.images import automation
from helmop.images.registry import MAX_TAGS, Scanner
from helmop.sources.errors import SourceError
from helmop.sources.git import GitAuth, GitCache, GitRef
from helmop.sources.repositories import Credentials, Repositories
from tests.gitserver import GitServer, Repo
from tests.registry import Registry

ROBOT = Credentials(username="robot", password="secret", scope="ns/robot")


@pytest.fixture
def registry() -> Iterator[Registry]:
    yield Registry({})


async def test_tags_are_listed_page_after_page_and_kept_per_credentials(registry: Registry, tmp_path: Path) -> None:
    registry.tags = [f"1.{i}.0" for i in range(2500)] + ["../../x"]
    registry.page = 1000
    repos, scanner = Repositories(tmp_path), Scanner()
    image = parse_image(f"127.0.0.1:{registry.port}/charts/app")
    scan = await scanner.scan(repos, image, ROBOT, True, 30)
    assert len(scan.tags) == 2500 and scan.invalid == 1 and "../../x" not in scan.tags
    assert registry.listed == 3  # three pages
    kept = await scanner.scan(repos, image, ROBOT, True, 30, wanted=lambda s: True)
    assert kept is scan and registry.listed == 3
    # what a Secret listed never answers a request without it: listed again, and refused
    with pytest.raises(SourceError) as anonymous:
        await scanner.scan(repos, image, Credentials(), True, 30, wanted=lambda s: True)
    assert anonymous.value.reason == "AuthenticationFailed"


async def test_a_hostile_registry_is_a_reason_not_a_crash(registry: Registry, tmp_path: Path) -> None:
    repos, scanner = Repositories(tmp_path), Scanner()
    image = parse_image(f"127.0.0.1:{registry.port}/charts/app")
    registry.tags = [str(i) for i in range(MAX_TAGS * 2)]  # 10^5 tags
    with pytest.raises(SourceError) as many:
        await scanner.scan(repos, image, ROBOT, True, 30)
    assert many.value.reason == "TooManyTags"
    registry.tags, registry.page, registry.next_page = ["a", "b", "c"], 1, "http://elsewhere.example/v2/x/tags/list"
    with pytest.raises(SourceError) as elsewhere:
        await scanner.scan(repos, image, ROBOT, True, 30)
    assert "another address" in str(elsewhere.value)


DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web  # the shop's front
  namespace: apps
spec:
  template:
    spec:
      containers:
      - name: web
        image: "reg.example/web:1.0.0" # {"$imagepolicy": "apps:web"}
        ports: [{containerPort: 80}]
"""
KUSTOMIZATION = """\
resources: [deployment.yaml]
images:
  - name: web
    newName: reg.example/web  # {"$imagepolicy": "apps:web:name"}
    newTag: 1.0.0  # {"$imagepolicy": "apps:web:tag"}
"""
OUTSIDE = 'image: reg.example/web:1.0.0 # {"$imagepolicy": "apps:web"}\n'
TEMPLATE = """Automated image update by {{ .AutomationObject }} for {{ .Values.cluster }}

{{ range $file, $_ := .Changed.FileChanges -}}
- {{ $file }}
{{ end -}}
{{ range .Changed.Changes }}{{ .OldValue }} -> {{ .NewValue }}
{{ end }}"""


@pytest.fixture
def server(tmp_path: Path) -> Iterator[GitServer]:
    (tmp_path / "srv").mkdir()
    server = GitServer(tmp_path / "srv")
    yield server
    server.close()


@pytest.fixture
def repo(server: GitServer, tmp_path: Path) -> Repo:
    repo = Repo(server, "config", tmp_path / "work")
    repo.commit({"apps/deployment.yaml": DEPLOYMENT, "apps/kustomization.yaml": KUSTOMIZATION,
                 "outside/deployment.yaml": OUTSIDE})
    os.symlink("../outside/deployment.yaml", tmp_path / "work" / "apps" / "link.yaml")
    os.symlink("../outside", tmp_path / "work" / "apps" / "elsewhere")  # a folder link: never walked into
    repo.commit({}, "links to a file and a folder outside update.path")
    return repo


def plan(repo: Repo, tag: str, **changes: object) -> automation.Plan:
    fields: dict[str, object] = dict(
        url=repo.url, auth=GitAuth(), checkout=GitRef(branch="main"), push_branch="", refspec="", options=(),
        path="apps", author=("helmop", "bot@example.com"), template=TEMPLATE, values={"cluster": "prod"},
        namespace="apps", name="web", refs={"web": ImageRef(name="reg.example/web", tag=tag)}, timeout=30.0)
    return automation.Plan(**{**fields, **changes})  # type: ignore[arg-type]


def git_out(repo: Repo, *args: str, env: dict[str, str] | None = None) -> str:
    return subprocess.run(["git", "-C", str(repo.bare), *args], capture_output=True, text=True, check=True,
                          env={**os.environ, **(env or {})}).stdout


def shown(repo: Repo, path: str, ref: str = "main") -> str:
    return git_out(repo, "show", f"{ref}:{path}")


async def test_markers_under_the_path_are_set_committed_and_pushed(repo: Repo, tmp_path: Path) -> None:
    git = GitCache(tmp_path / "cache")
    done = await automation.run(git, plan(repo, "1.2.0"))
    assert done.commit and done.revision.startswith("main@sha1:")
    assert shown(repo, "apps/deployment.yaml") == DEPLOYMENT.replace("web:1.0.0", "web:1.2.0")  # comments kept
    assert shown(repo, "apps/kustomization.yaml") == KUSTOMIZATION.replace("newTag: 1.0.0", "newTag: 1.2.0")
    assert shown(repo, "outside/deployment.yaml") == OUTSIDE  # a marker outside update.path: untouched
    assert git_out(repo, "ls-tree", "main", "apps/link.yaml").startswith("120000")  # a symlink, never followed
    message = git_out(repo, "log", "-1", "--format=%an <%ae>%n%B", "main")
    assert message.startswith("helmop <bot@example.com>\nAutomated image update by apps/web for prod\n")
    assert "- deployment.yaml\n- kustomization.yaml\n" in message
    assert "reg.example/web:1.0.0 -> reg.example/web:1.2.0\n1.0.0 -> 1.2.0\n" in message
    assert git_out(repo, "ls-tree", "main", "apps/elsewhere").startswith("120000")
    again = await automation.run(git, plan(repo, "1.2.0"))
    assert again.commit == "" and again.revision == f"main@sha1:{done.commit}"  # up to date: nothing pushed


async def test_a_branch_that_moved_during_the_push_is_updated_on_its_new_head(server: GitServer, repo: Repo,
                                                                              tmp_path: Path) -> None:
    theirs: list[str] = []

    def race(_path: str) -> None:
        if not theirs:  # the first push only: someone else's commit lands just before it
            theirs.append(repo.commit({"README.md": "someone else's change\n"}, "a person's commit"))

    server.on_receive = race
    done = await automation.run(GitCache(tmp_path / "cache"), plan(repo, "1.3.0"))
    server.on_receive = None
    assert theirs and done.commit
    assert git_out(repo, "log", "--format=%H", "-2", "main").split() == [done.commit, theirs[0]]  # both kept
    assert shown(repo, "README.md") == "someone else's change\n"
    assert "web:1.3.0" in shown(repo, "apps/deployment.yaml")


async def test_a_push_that_keeps_losing_is_a_reason(server: GitServer, repo: Repo, tmp_path: Path) -> None:
    server.on_receive = lambda _path: repo.commit({"README.md": os.urandom(4).hex()}, "always first")
    with pytest.raises(SourceError) as lost:
        await automation.run(GitCache(tmp_path / "cache"), plan(repo, "1.3.0"))
    server.on_receive = None
    assert lost.value.reason == "GitPushRejected"
    assert "web:1.0.0" in shown(repo, "apps/deployment.yaml")


async def test_commits_are_signed_so_that_git_verifies_them(repo: Repo, tmp_path: Path) -> None:
    key = pysequoia.Tsk.generate("Bot <bot@example.com>")
    signer = key.signer()

    async def sign(payload: bytes) -> str:
        return bytes(pysequoia.sign(signer, payload, mode=pysequoia.SignatureMode.DETACHED)).decode()

    done = await automation.run(GitCache(tmp_path / "cache"), plan(repo, "1.4.0", sign=sign))
    home = tmp_path / "gnupg"
    home.mkdir(mode=0o700)
    subprocess.run(["gpg", "--batch", "--import"], input=str(key.extract_certificate()).encode(), check=True,
                   capture_output=True, env={**os.environ, "GNUPGHOME": str(home)})
    verified = subprocess.run(["git", "-C", str(repo.bare), "verify-commit", "--raw", done.commit],
                              capture_output=True, encoding="utf-8", errors="replace",
                              env={**os.environ, "GNUPGHOME": str(home)})
    assert verified.returncode == 0 and "GOODSIG" in verified.stderr

    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "pw", "-C", "bot", "-f", str(tmp_path / "id")],
                   check=True)
    ssh, _ = await _ssh_signer(tmp_path / "id")
    done = await automation.run(GitCache(tmp_path / "cache2"), plan(repo, "1.5.0", sign=ssh))
    public = (tmp_path / "id.pub").read_text().split()
    (tmp_path / "allowed").write_text(f"bot@example.com {public[0]} {public[1]}\n")
    verified = subprocess.run(["git", "-C", str(repo.bare), "-c", "gpg.format=ssh", "-c",
                               f"gpg.ssh.allowedSignersFile={tmp_path / 'allowed'}", "verify-commit", done.commit],
                              capture_output=True, text=True)
    assert verified.returncode == 0 and "Good \"git\" signature" in verified.stderr


async def _ssh_signer(key: Path) -> tuple[object, list[str]]:
    from helmop.images.signing import _ssh

    identity = key.read_text()

    async def sign(payload: bytes) -> str:
        return await _ssh(identity, "pw", payload)

    return sign, []


async def test_a_path_that_leaves_the_repository_is_a_reason(repo: Repo, tmp_path: Path) -> None:
    for path in ("../outside", "apps/../../x", "/etc"):
        with pytest.raises(SourceError) as leaves:
            await automation.run(GitCache(tmp_path / "cache"), plan(repo, "1.2.0", path=path))
        assert leaves.value.reason == "InvalidPath"
    with pytest.raises(SourceError) as refspec:
        await automation.run(GitCache(tmp_path / "cache"), plan(repo, "1.2.0", refspec="+refs/heads/main:refs/heads/x"))
    assert "never forces" in str(refspec.value)
    assert "web:1.0.0" in shown(repo, "apps/deployment.yaml")  # nothing was pushed


async def test_a_push_branch_refspec_and_options_as_fluxs(repo: Repo, tmp_path: Path) -> None:
    """push.branch made from the checkout and then built on (never overwritten), push.refspec pushed too, and
    push.options handed to the server's hooks."""
    git_out(repo, "config", "receive.advertisePushOptions", "true")
    hook = repo.bare / "hooks" / "pre-receive"
    hook.write_text(f'#!/bin/sh\nenv | grep GIT_PUSH_OPTION_ | sort >> {tmp_path / "options"}\ncat >/dev/null\n')
    hook.chmod(0o755)
    cache = GitCache(tmp_path / "cache")
    first = await automation.run(cache, plan(repo, "1.2.0", push_branch="auto", refspec="refs/heads/auto:refs/for/main",
                                            options=(("topic", "images"), ("ci.skip", ""))))
    assert git_out(repo, "rev-parse", "auto", "refs/for/main").split() == [first.commit, first.commit]
    assert "web:1.0.0" in shown(repo, "apps/deployment.yaml")  # main itself untouched
    assert "GIT_PUSH_OPTION_0=topic=images" in (tmp_path / "options").read_text()
    second = await automation.run(cache, plan(repo, "1.3.0", push_branch="auto"))
    assert git_out(repo, "log", "--format=%H", "-2", "auto").split() == [second.commit, first.commit]
