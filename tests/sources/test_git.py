"""The git source against real repositories over loopback HTTP: refs, incremental fetch, security."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from helmop.sources import git as git_source
from helmop.sources.errors import SourceError
from helmop.sources.git import GitAuth, GitCache, GitRef, check_url, clean_path
from helmop.sources.gitobjects import Objects
from tests.gitserver import GitServer, Repo

ANON = GitAuth()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[GitServer]:
    (tmp_path / "srv").mkdir()
    srv = GitServer(tmp_path / "srv")
    yield srv
    srv.close()


@pytest.fixture
def repo(server: GitServer, tmp_path: Path) -> Repo:
    return Repo(server, "config", tmp_path / "work")


async def test_refs_resolve_and_fetch_is_incremental(repo: Repo, tmp_path: Path) -> None:
    first = repo.commit({"app/a.yaml": "a: 1\n"})
    repo.tag("v1.0.0")
    second = repo.commit({"app/a.yaml": "a: 2\n"})
    repo.tag("v1.2.0")
    repo.tag("v2.0.0-rc.1")
    other = repo.commit({"other.txt": "x"}, branch="feature")
    cache = GitCache(tmp_path / "cache")
    mirror = await cache.fetch(repo.url, GitAuth())
    assert (await cache.resolve(repo.url, GitRef(branch="main"), ANON))[1] == second
    assert await cache.resolve(repo.url, GitRef(tag="v1.0.0"), ANON) == (f"v1.0.0@sha1:{first}", first)
    assert await cache.resolve(repo.url, GitRef(semver="^1"), ANON) == (f"v1.2.0@sha1:{second}", second)
    assert (await cache.resolve(repo.url, GitRef(commit=first), ANON))[1] == first
    assert (await cache.resolve(repo.url, GitRef(branch="feature"), ANON))[1] == other
    assert await cache.files(repo.url, first, "app", ANON) == {"a.yaml": b"a: 1\n"}
    # A force-pushed branch: the mirror follows it.
    repo.git("reset", "-q", "--hard", first)
    rewritten = repo.commit({"app/b.yaml": "b: 1\n"}, "rewrite")
    objects_before = sum(1 for _ in (mirror / "objects").rglob("*"))
    await cache.fetch(repo.url, GitAuth())
    assert (await cache.resolve(repo.url, GitRef(branch="main"), ANON))[1] == rewritten
    assert await cache.files(repo.url, rewritten, "app", ANON) == {"a.yaml": b"a: 1\n", "b.yaml": b"b: 1\n"}
    assert sum(1 for _ in (mirror / "objects").rglob("*")) > objects_before  # fetched into the same mirror
    with pytest.raises(SourceError) as missing:
        await cache.resolve(repo.url, GitRef(branch="nope"), ANON)
    assert missing.value.reason == "RefNotFound"
    with pytest.raises(SourceError) as no_path:
        await cache.files(repo.url, rewritten, "missing/dir", ANON)
    assert no_path.value.reason == "PathNotFound"


@pytest.mark.parametrize("url", ["ext::sh -c touch% /tmp/pwned", "fd::17", "--upload-pack=touch /tmp/pwned",
                                 "-oProxyCommand=x", "http://example.com/repo.git", "ftp://host/repo",
                                 "file:///etc", "https://host/repo with space"])
def test_dangerous_urls_are_refused(url: str) -> None:
    with pytest.raises(SourceError) as err:
        check_url(url)
    assert err.value.reason == "InvalidURL"


async def test_option_injection_through_refs_and_paths_is_refused(repo: Repo, tmp_path: Path) -> None:
    repo.commit({"x/a": "1"})
    cache = GitCache(tmp_path / "cache")
    await cache.fetch(repo.url, GitAuth())
    for ref in (GitRef(branch="--upload-pack=touch /tmp/pwned"), GitRef(tag="-x"), GitRef(branch="a..b"),
                GitRef(commit="--all")):
        with pytest.raises(SourceError) as err:
            await cache.resolve(repo.url, ref, ANON)
        assert err.value.reason == "InvalidRef"
    for path in ("../outside", "/etc", "a/../../b"):
        with pytest.raises(SourceError) as err:
            clean_path(path)
        assert err.value.reason == "InvalidPath"
    # A symlink in the repository that points outside it is refused, one inside is followed.
    (repo.work / "x" / "out").symlink_to("../../../etc/passwd")
    sha = repo.commit({}, "symlink out")
    with pytest.raises(SourceError) as err:
        await _files(cache, repo, sha)
    assert err.value.reason == "InvalidPath"
    (repo.work / "x" / "out").unlink()
    (repo.work / "x" / "in").symlink_to("a")
    sha = repo.commit({}, "symlink in")
    await cache.fetch(repo.url, GitAuth())
    assert await cache.files(repo.url, sha, "x", ANON) == {"a": b"1", "in": b"1"}


async def _files(cache: GitCache, repo: Repo, sha: str) -> dict[str, bytes]:
    await cache.fetch(repo.url, GitAuth())
    return await cache.files(repo.url, sha, "x", ANON)


async def test_credentials_stay_out_of_urls_config_and_messages(tmp_path: Path) -> None:
    (tmp_path / "srv").mkdir()
    server = GitServer(tmp_path / "srv", credentials=("robot", "s3cr3t-pass"))
    try:
        repo = Repo(server, "private", tmp_path / "work")
        sha = repo.commit({"a": "1"})
        cache = GitCache(tmp_path / "cache")
        robot = GitAuth(username="robot", password="s3cr3t-pass", scope="team/robot")
        mirror = await cache.fetch(repo.url, robot)
        assert (await cache.resolve(repo.url, GitRef(branch="main"), robot))[1] == sha
        with pytest.raises(SourceError):  # what was fetched with credentials is not read without them
            await cache.resolve(repo.url, GitRef(branch="main"), ANON)
        config = (mirror / "config").read_text()
        assert "s3cr3t" not in config and "robot" not in config
        with pytest.raises(SourceError) as err:
            await GitCache(tmp_path / "other").fetch(repo.url, GitAuth(username="robot", password="wrong-pass"))
        assert err.value.reason == "AuthenticationFailed" and "wrong-pass" not in str(err.value)
    finally:
        server.close()


async def test_unreachable_server(tmp_path: Path) -> None:
    with pytest.raises(SourceError) as err:
        await GitCache(tmp_path).fetch("http://127.0.0.1:9/none.git", GitAuth())
    assert err.value.reason == "RepositoryUnreachable" and err.value.transient


async def test_file_urls_need_the_allow_flag(repo: Repo, tmp_path: Path) -> None:
    sha = repo.commit({"a": "1"})
    url = f"file://{repo.bare}"
    with pytest.raises(SourceError):
        await GitCache(tmp_path / "c1").fetch(url, GitAuth())
    cache = GitCache(tmp_path / "c2", file_roots=(repo.bare.parent,))
    await cache.fetch(url, GitAuth())
    assert (await cache.resolve(url, GitRef(branch="main"), ANON))[1] == sha


@pytest.fixture
def silent_server() -> Iterator[str]:
    """An HTTP URL on loopback whose server accepts connections and never answers."""
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    yield f"http://127.0.0.1:{listener.getsockname()[1]}/stuck.git"
    listener.close()


async def test_timeout_is_per_fetch_not_process_wide(silent_server: str, repo: Repo, tmp_path: Path) -> None:
    import asyncio
    import time

    repo.commit({"a": "1"})
    cache = GitCache(tmp_path / "cache")
    started = time.monotonic()
    stuck, fine = await asyncio.gather(cache.fetch(silent_server, GitAuth(), timeout=1),
                                       cache.fetch(repo.url, GitAuth(), timeout=30), return_exceptions=True)
    assert isinstance(stuck, SourceError) and stuck.reason == "Timeout" and "within 1s" in str(stuck)
    assert time.monotonic() - started < 20
    assert isinstance(fine, Path)  # the other repository's fetch was not cut short by the first's timeout
    assert cache.timeout == 60.0  # the default for other repositories is untouched


async def test_clear_messages_for_dns_and_authentication(tmp_path: Path) -> None:
    cache = GitCache(tmp_path / "cache")
    with pytest.raises(SourceError) as dns:
        await cache.fetch("https://helmop-test.invalid/team/config.git", GitAuth())
    assert dns.value.reason == "RepositoryUnreachable" and dns.value.transient
    assert str(dns.value) == ("the name helmop-test.invalid could not be resolved (DNS) for "
                              "https://helmop-test.invalid/team/config.git")
    (tmp_path / "srv").mkdir()
    server = GitServer(tmp_path / "srv", credentials=("robot", "right-pass"))
    try:
        private = Repo(server, "private", tmp_path / "work")
        private.commit({"a": "1"})
        with pytest.raises(SourceError) as auth:
            await cache.fetch(private.url, GitAuth(username="robot", password="wrong-pass"))
        assert auth.value.reason == "AuthenticationFailed" and not auth.value.transient
        assert str(auth.value).startswith(f"authentication failed for {private.url}")
        assert "wrong-pass" not in str(auth.value)
    finally:
        server.close()


async def test_a_tree_is_read_by_one_git_process_and_again_by_none(repo: Repo, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    files = {f"chart/templates/t{i}.yaml": f"n: {i}\n" for i in range(20)}
    files |= {"chart/Chart.yaml": "name: c\n", "chart/sub/deeper/x.txt": "x\n", "elsewhere.txt": "no\n"}
    sha = repo.commit(files)
    cache = GitCache(tmp_path / "cache")
    await cache.fetch(repo.url, GitAuth())
    log = tmp_path / "git.log"
    wrapper = tmp_path / "bin" / "git"
    wrapper.parent.mkdir()
    real = next(p for d in os.environ["PATH"].split(os.pathsep) if (p := Path(d) / "git").is_file())
    wrapper.write_text(f'#!/bin/sh\necho "$1" >> {log}\nexec {real} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapper.parent}{os.pathsep}{os.environ['PATH']}")
    read = await cache.files(repo.url, sha, "chart", ANON)
    assert read == {path.removeprefix("chart/"): text.encode() for path, text in files.items()
                    if path.startswith("chart/")}
    assert log.read_text().split() == ["cat-file"]
    # read again, and its commit asked for twice: answered from what the mirror answered before
    assert await cache.files(repo.url, sha, "chart", ANON) == read
    assert await cache.has_commit(repo.url, sha, ANON) and await cache.has_commit(repo.url, sha, ANON)
    assert log.read_text().split() == ["cat-file"] * 2  # the tree's first read, and the first commit check
    # a path not asked before is resolved by git once; a branch name (it moves) every time
    for _ in range(2):
        assert await cache.files(repo.url, sha, "chart/sub", ANON) == {"deeper/x.txt": b"x\n"}
    assert log.read_text().split() == ["cat-file"] * 3
    for _ in range(2):
        assert await cache.read(repo.url, "main", "elsewhere.txt", ANON) == b"no\n"
    assert log.read_text().split() == ["cat-file"] * 5
    # a mirror dropped takes its answers along
    cache.forget(repo.url)
    assert not await cache.has_commit(repo.url, sha, ANON)
    with pytest.raises(SourceError, match="has not been fetched"):
        await cache.files(repo.url, sha, "chart", ANON)


def test_kept_git_answers_are_per_mirror_immutable_and_bounded() -> None:
    sha, oid = "a" * 40, "b" * 40
    known = Objects(budget=400, largest=100)
    known.keep_info("/m/one/x", f"{sha}:chart", ("tree", 10, oid))
    known.keep_info("/m/one/x", "main:chart", ("tree", 10, oid))  # a branch moves: not kept
    known.keep_contents("/m/one/x", oid, b"tree bytes")
    known.keep_contents("/m/one/x", "c" * 40, b"x" * 101)  # too large to keep
    assert known.info("/m/one/x", f"{sha}:chart") == ("tree", 10, oid) and known.info("/m/one/x", "main:chart") is None
    assert known.contents("/m/one/x", oid) == b"tree bytes" and known.contents("/m/one/x", "c" * 40) is None
    assert known.info("/m/two/x", f"{sha}:chart") is None and known.contents("/m/two/x", oid) is None
    known.keep_commit("/m/two/y", sha)
    known.forget("/m/one")
    assert known.contents("/m/one/x", oid) is None and known.has_commit("/m/two/y", sha)
    for i in range(10):  # the oldest answers go first once the budget is spent
        known.keep_contents("/m/two/y", f"{i:040d}", b"y" * 50)
    assert known.contents("/m/two/y", f"{9:040d}") == b"y" * 50 and known.contents("/m/two/y", f"{0:040d}") is None
    assert not known.has_commit("/m/two/y", sha)


@pytest.mark.parametrize("url", [
    "https://[::ffff:169.254.169.254]/team/config.git", "https://[64:ff9b::a9fe:a9fe]/team/config.git",
    "https://[2002:a9fe:a9fe::1]/team/config.git", "ssh://git@[fe80::1]/team/config.git",
    "https://2852039166/team/config.git", "git@169.254.169.254:team/config.git",
    "https://metadata.google.internal./computeMetadata/v1/",
])
async def test_a_remote_at_an_address_sources_never_reach_is_refused_before_git_runs(
        url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[object] = []
    real = asyncio.create_subprocess_exec

    async def spawn(*args: object, **kwargs: object) -> object:
        if "fetch" in args:
            started.append(args)
        return await real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(asyncio, "create_subprocess_exec", spawn)
    with pytest.raises(SourceError) as refused:
        await GitCache(tmp_path / "cache").fetch(url, GitAuth())
    assert refused.value.reason == "AddressRefused" and not refused.value.transient, str(refused.value)
    assert not started, "git fetch ran"


async def test_git_connects_to_the_addresses_judged_for_the_name(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A name is resolved and judged once, and git connects to what was judged (curl's resolve list), not to
    what the name resolves to when git asks: here the judged address is the only one that answers."""
    (tmp_path / "srv").mkdir()
    server = GitServer(tmp_path / "srv", host="127.0.0.2")
    try:
        sha = Repo(server, "config", tmp_path / "work").commit({"a": "1"})
        port = server.http.server_address[1]
        judged: list[tuple[str, int]] = []

        async def resolved(_policy: object, host: str, port: int) -> list[str]:
            judged.append((host, port))
            return ["127.0.0.2"] if host == "localhost" else [host]

        monkeypatch.setattr(git_source.addresses, "resolved", resolved)
        cache = GitCache(tmp_path / "cache")
        with pytest.raises(SourceError):  # nothing answers where localhost itself leads
            await cache.fetch(f"http://127.0.0.1:{port}/config.git", GitAuth(), timeout=10)
        await cache.fetch(f"http://localhost:{port}/config.git", GitAuth(), timeout=10)
        assert judged[-1] == ("localhost", port)
        assert (await cache.resolve(f"http://localhost:{port}/config.git", GitRef(branch="main"), ANON))[1] == sha
    finally:
        server.close()
