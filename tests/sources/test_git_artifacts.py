"""A GitRepository's artifact shaped as Flux shapes it, read from real repositories over loopback HTTP: Flux's
default exclusions and gitignore rules (.sourceignore per folder, spec.ignore last), any reference by name with
Flux's precedence and revision strings, sparse checkout, submodules at the commits the tree records (another
host's without the superproject's credentials), another artifact mounted by spec.include; fetched through an
HTTP proxy with credentials, and from a --git-mirror."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from helmop.sources.errors import SourceError
from helmop.sources.git import GitAuth, GitCache, GitRef
from helmop.sources.ignore import Ignore
from helmop.sources.proxies import parse_proxy
from helmop.sources.trees import GitArtifact, Mount, Shape, TreeArtifact
from tests.gitserver import GitServer, Repo
from tests.proxy import Proxy

ANON = GitAuth()
MAIN = GitRef(branch="main")


@pytest.fixture
def server(tmp_path: Path) -> GitServer:
    (tmp_path / "srv").mkdir()
    return GitServer(tmp_path / "srv")


async def artifact(cache: GitCache, repo: Repo, ref: GitRef = MAIN, auth: GitAuth = ANON,
                   **shape: object) -> GitArtifact:
    await cache.fetch(repo.url, auth, refs=(ref.fetched,) if ref.name else ())
    revision, sha = await cache.resolve(repo.url, ref, auth)
    return GitArtifact(cache, repo.url, revision, sha, auth, Shape(**shape))  # type: ignore[arg-type]


def test_flux_default_exclusions_give_way_to_any_pattern() -> None:
    defaults = Ignore.of({}, None)
    assert [defaults.excludes(p) for p in ("a/logo.png", ".github/workflows/ci.yml", "apps/.sops.yaml",
                                           ".gitignore", "apps/app.yaml")] == [True, True, True, True, False]
    own = Ignore.of({}, "/docs/\n")  # a pattern: the defaults but version control's are gone
    assert not own.excludes("a/logo.png") and own.excludes("docs/x.md") and own.excludes(".git/config")
    scoped = Ignore.of({"apps": "*.txt\n/local.yaml\n"}, "!apps/keep.txt\n")
    assert scoped.excludes("apps/a/notes.txt") and scoped.excludes("apps/local.yaml")
    assert not scoped.excludes("notes.txt") and not scoped.excludes("apps/a/local.yaml")
    assert not scoped.excludes("apps/keep.txt")  # spec.ignore comes last: it brings back
    reincluded = Ignore.of({}, "/deploy/\n!/deploy/keep.yaml\n")  # Flux tests every path: no pruning
    assert reincluded.excludes("deploy/a.yaml") and not reincluded.excludes("deploy/keep.yaml")


async def test_ignore_rules_shape_the_artifact_and_its_digest(server: GitServer, tmp_path: Path) -> None:
    repo = Repo(server, "shaped", tmp_path / "work")
    repo.commit({"apps/app.yaml": "kind: A\n", "apps/logo.png": "png", ".github/ci.yml": "x",
                 "docs/readme.md": "d", "apps/notes/n.yaml": "kind: N\n"})
    cache = GitCache(tmp_path / "cache")
    defaults = await artifact(cache, repo)
    assert sorted(await defaults.files("")) == ["apps/app.yaml", "apps/notes/n.yaml", "docs/readme.md"]
    repo.commit({"apps/.sourceignore": "notes/\n"})  # a pattern anywhere: Flux's defaults are gone
    scoped = await artifact(cache, repo)
    assert sorted(await scoped.files("")) == [".github/ci.yml", "apps/.sourceignore", "apps/app.yaml",
                                              "apps/logo.png", "docs/readme.md"]
    assert sorted(await scoped.files("apps")) == [".sourceignore", "app.yaml", "logo.png"]
    own = await artifact(cache, repo, ignore="/docs/\n*.png\n")
    assert sorted(await own.files("")) == [".github/ci.yml", "apps/.sourceignore", "apps/app.yaml"]
    assert await scoped.content_digest() != await own.content_digest()
    assert await scoped.content_digest() == await (await artifact(cache, repo)).content_digest()
    with pytest.raises(SourceError) as bad:
        await (await artifact(cache, repo, ignore="[z-a]\n")).files("")
    assert bad.value.reason == "SourceIgnoreError"
    # a thousand readers of one revision compile its rules once: the same rules, whichever artifact asks
    first, second = await artifact(cache, repo, ignore="/docs/\n"), await artifact(cache, repo, ignore="/docs/\n")
    await first.files(""), await second.files("")
    assert first._rules[0] is second._rules[0] and first._rules[0] is not own._rules[0]
    # ...but a set too large for its share of the cache (a tenant's own to make large) is compiled for each
    large = "/docs/\n" + "#" * (256 << 10) + "\n"
    first, second = await artifact(cache, repo, ignore=large), await artifact(cache, repo, ignore=large)
    await first.files(""), await second.files("")
    assert first._rules[0] is not second._rules[0]


async def test_any_reference_by_name_and_flux_precedence(server: GitServer, tmp_path: Path) -> None:
    repo = Repo(server, "refs", tmp_path / "work")
    first = repo.commit({"a.yaml": "1"})
    pull = repo.commit({"a.yaml": "2"}, branch="topic")
    repo.git("push", "-q", "origin", f"{pull}:refs/pull/7/head")
    cache = GitCache(tmp_path / "cache")
    by_name = await artifact(cache, repo, GitRef(branch="main", tag="nope", name="refs/pull/7/head"))
    assert by_name.revision == f"refs/pull/7/head@sha1:{pull}"
    assert await by_name.files("") == {"a.yaml": b"2"}
    assert (await artifact(cache, repo, GitRef(commit=first))).revision == f"sha1:{first}"
    assert (await artifact(cache, repo, GitRef(branch="main", commit=first))).revision == f"main@sha1:{first}"
    assert (await artifact(cache, repo, GitRef(branch="x", name="refs/heads/main"))).revision == \
        f"refs/heads/main@sha1:{first}"
    with pytest.raises(SourceError) as missing:
        await artifact(cache, repo, GitRef(name="refs/pull/8/head"))
    assert missing.value.reason in ("RefNotFound", "GitOperationFailed")


async def test_sparse_checkout_keeps_its_folders_only(server: GitServer, tmp_path: Path) -> None:
    repo = Repo(server, "sparse", tmp_path / "work")
    repo.commit({"apps/a.yaml": "a", "apps-old/b.yaml": "b", "infra/c.yaml": "c", "root.yaml": "r"})
    cache = GitCache(tmp_path / "cache")
    sparse = await artifact(cache, repo, sparse=("apps", "infra"))
    assert sorted(await sparse.files("")) == ["apps/a.yaml", "infra/c.yaml"]
    await sparse.content_digest()
    with pytest.raises(SourceError, match=r"sparse checkout dir 'nowhere' does not exist"):
        await (await artifact(cache, repo, sparse=("nowhere",))).content_digest()


def _submodule(parent: Repo, path: str, url: str) -> None:
    parent.git("-c", "protocol.file.allow=always", "submodule", "add", "-q", url, path)


async def test_submodules_are_read_at_their_recorded_commits(server: GitServer, tmp_path: Path) -> None:
    lib = Repo(server, "lib", tmp_path / "lib")
    old = lib.commit({"lib.yaml": "v1"})
    app = Repo(server, "app", tmp_path / "app")
    app.commit({"app.yaml": "a"})
    _submodule(app, "vendor/lib", str(lib.bare))
    app.git("config", "-f", ".gitmodules", "submodule.vendor/lib.url", "../lib.git")  # relative, as often
    app.commit({}, "add lib")
    lib.commit({"lib.yaml": "v2"})  # a newer lib commit: the tree still records the old one
    cache = GitCache(tmp_path / "cache")
    flat = await artifact(cache, app)
    assert sorted(await flat.files("")) == ["app.yaml"]
    deep = await artifact(cache, app, submodules=True)
    assert await deep.files("") == {"app.yaml": b"a", "vendor/lib/lib.yaml": b"v1"}
    assert await deep.files("vendor") == {"lib/lib.yaml": b"v1"}
    assert await deep.files("vendor/lib") == {"lib.yaml": b"v1"}
    assert await deep.content_digest() != await flat.content_digest()
    assert old in {c for _, c, _ in await cache.submodules(app.url, deep.sha, ANON)}


async def test_a_submodule_on_another_host_gets_no_credentials(server: GitServer, tmp_path: Path) -> None:
    (tmp_path / "private").mkdir()
    private = GitServer(tmp_path / "private", credentials=("robot", "secret"))
    try:
        lib = Repo(private, "lib", tmp_path / "lib")
        lib.commit({"lib.yaml": "v1"})
        app = Repo(server, "app", tmp_path / "app")
        _submodule(app, "lib", str(lib.bare))
        app.git("config", "-f", ".gitmodules", "submodule.lib.url", lib.url)
        app.commit({"app.yaml": "a"})
        auth = GitAuth(username="robot", password="secret", scope="shop/creds")
        deep = await artifact(GitCache(tmp_path / "cache"), app, auth=auth, submodules=True)
        with pytest.raises(SourceError) as refused:  # the tenant's credentials stay with the tenant's host
            await deep.files("")
        assert refused.value.reason == "AuthenticationFailed"
    finally:
        private.close()


async def test_an_include_is_mounted_and_may_not_overwrite(server: GitServer, tmp_path: Path) -> None:
    repo = Repo(server, "main", tmp_path / "work")
    repo.commit({"apps/app.yaml": "a", "base/keep.yaml": "k"})
    cache = GitCache(tmp_path / "cache")
    shared = TreeArtifact({"deploy/x.yaml": b"x", "deploy/y.png": b"y", "other.yaml": b"o"}, "inc", "sha256:1")
    mounted = await artifact(cache, repo, includes=(Mount(shared, "deploy", "shared"),))
    assert await mounted.files("") == {"apps/app.yaml": b"a", "base/keep.yaml": b"k", "shared/x.yaml": b"x"}
    assert await mounted.files("shared") == {"x.yaml": b"x"}
    moved = await artifact(cache, repo, includes=(Mount(TreeArtifact(shared.tree, "inc", "sha256:2"), "deploy",
                                                        "shared"),))
    assert await mounted.content_digest() != await moved.content_digest()  # the include's digest is part of it
    clash = await artifact(cache, repo, includes=(Mount(shared, "deploy", "base"),))
    with pytest.raises(SourceError, match="toPath 'base' already exists") as refused:
        await clash.content_digest()
    assert refused.value.reason == "CopyFailure"


async def test_a_repository_is_fetched_through_its_proxy(server: GitServer, tmp_path: Path) -> None:
    repo = Repo(server, "proxied", tmp_path / "work")
    repo.commit({"a.yaml": "a"})
    proxy = Proxy(credentials=("proxy-user", "proxy-pass"))
    try:
        cache = GitCache(tmp_path / "cache")
        through = GitAuth(proxy=parse_proxy(encoded({"address": proxy.address, "username": "proxy-user",
                                                     "password": "proxy-pass"}), "test"))
        found = await artifact(cache, repo, auth=through)
        assert await found.files("") == {"a.yaml": b"a"}
        assert any(line.startswith(f"GET {repo.url}/info/refs") for line in proxy.seen)
        wrong = GitAuth(proxy=parse_proxy(encoded({"address": proxy.address, "username": "proxy-user",
                                                   "password": "nope"}), "test"))
        with pytest.raises(SourceError) as refused:
            await GitCache(tmp_path / "other").fetch(repo.url, wrong)
        assert refused.value.reason == "AuthenticationFailed" and "proxy" in str(refused.value)
        assert "nope" not in str(refused.value)
        with pytest.raises(SourceError, match="SOCKS is not supported"):
            parse_proxy(encoded({"address": "socks5://127.0.0.1:1080"}), "test")
        with pytest.raises(SourceError, match=r"http\(s\):// repositories only"):
            await GitCache(tmp_path / "ssh").fetch("ssh://git@127.0.0.1/x.git", through)
    finally:
        proxy.close()


def encoded(data: dict[str, str]) -> dict[str, str]:
    return {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}


async def test_a_git_mirror_serves_what_the_url_names(server: GitServer, tmp_path: Path) -> None:
    """--git-mirror: a GitRepository naming a host that does not exist is fetched from the mirror, submodules
    too; the revision and the files are the mirror's, the URL the one written."""
    lib = Repo(server, "lib", tmp_path / "lib")
    lib.commit({"lib.yaml": "l"})
    app = Repo(server, "app", tmp_path / "app")
    _submodule(app, "lib", str(lib.bare))
    app.git("config", "-f", ".gitmodules", "submodule.lib.url", "https://github.example/acme/lib.git")
    head = app.commit({"app.yaml": "a"})
    cache = GitCache(tmp_path / "cache", mirrors=(("https://github.example/acme/", f"{server.base}/"),))
    written = "https://github.example/acme/app.git"
    await cache.fetch(written, ANON)
    revision, sha = await cache.resolve(written, MAIN, ANON)
    assert (revision, sha) == (f"main@sha1:{head}", head)
    found = GitArtifact(cache, written, revision, sha, ANON, Shape(submodules=True))
    assert await found.files("") == {"app.yaml": b"a", "lib/lib.yaml": b"l"}
    with pytest.raises(SourceError) as unmirrored:  # what no mirror covers is fetched as written
        await cache.fetch("https://github.invalid/other.git", ANON)
    assert unmirrored.value.reason in ("RepositoryUnreachable", "AddressRefused")
