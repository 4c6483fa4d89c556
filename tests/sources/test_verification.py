"""Signed commits and tags (helmop.sources.verification), against real repositories: commits and tags signed
by the real git with SSH keys (ssh-keygen, ed25519, ECDSA and RSA), and commits carrying an OpenPGP signature
made with Sequoia; each verified as Flux's source-controller verifies them, and refused when unsigned, signed by
another key, or changed after signing."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pysequoia
import pytest

from helmop.sources.errors import SourceError
from helmop.sources.git import GitAuth, GitCache, GitRef
from helmop.sources.verification import ssh
from helmop.sources.verification.commits import Signed, TrustedKeys, commit_payload, tag_payload, verify
from tests.gitserver import GitServer, Repo

ANON = GitAuth()


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    (tmp_path / "srv").mkdir()
    server = GitServer(tmp_path / "srv")
    return Repo(server, "signed", tmp_path / "work")


def ssh_key(where: Path, kind: str) -> tuple[Path, str]:
    """A new SSH key pair (its private key file, its authorized_keys line)."""
    path = where / f"id_{kind}"
    extra = ["-b", "3072"] if kind == "rsa" else []
    subprocess.run(["ssh-keygen", "-q", "-t", kind, *extra, "-N", "", "-C", "signer@test", "-f", str(path)],
                   check=True, capture_output=True)
    return path, path.with_suffix(".pub").read_text().strip()


def ssh_signed(repo: Repo, key: Path, *args: str) -> str:
    """``git ARGS`` signing with the SSH key (as a user with gpg.format=ssh would); the new HEAD."""
    repo.git("-c", "gpg.format=ssh", "-c", f"user.signingkey={key}", *args)
    repo.git("push", "-q", "--force", "--tags", "origin", "HEAD:refs/heads/main")
    return repo.git("rev-parse", "HEAD")


def pgp_signed(repo: Repo, tsk: pysequoia.Tsk, message: str) -> str:
    """A commit whose gpgsig is a detached OpenPGP signature of the commit without it, as git writes one."""
    (repo.work / "file.txt").write_text(message)
    repo.git("add", "-A")
    tree = repo.git("write-tree")
    parents = [f"parent {repo.git('rev-parse', 'HEAD')}\n"] if repo.git("rev-list", "--all") else []
    body = (f"tree {tree}\n{''.join(parents)}author t <t@x> 1700000000 +0000\ncommitter t <t@x> 1700000000 +0000\n"
            f"\n{message}\n")
    signature = pysequoia.sign(tsk.signer(), body.encode(), mode=pysequoia.SignatureMode.DETACHED).decode().strip()
    header, _, rest = body.partition("\n\n")
    raw = header + "\ngpgsig " + signature.replace("\n", "\n ") + "\n\n" + rest
    sha = subprocess.run(["git", "-C", str(repo.work), "hash-object", "-t", "commit", "-w", "--stdin"],
                         input=raw, text=True, capture_output=True, check=True).stdout.strip()
    repo.git("reset", "-q", "--hard", sha)
    repo.git("push", "-q", "--force", "origin", "HEAD:refs/heads/main")
    return sha


async def signed(repo: Repo, tmp_path: Path, ref: GitRef) -> tuple[GitCache, Signed]:
    cache = GitCache(tmp_path / "cache")
    await cache.fetch(repo.url, ANON)
    revision, sha = await cache.resolve(repo.url, ref, ANON)
    tag = revision.rsplit("@sha1:", 1)[0] if ref.tag or ref.semver else ""
    return cache, await cache.signed(repo.url, ANON, sha, tag)


@pytest.mark.parametrize("kind", ["ed25519", "ecdsa", "rsa"])
async def test_a_commit_signed_with_an_ssh_key_is_verified_by_that_key_only(repo: Repo, tmp_path: Path,
                                                                          kind: str) -> None:
    key, line = ssh_key(tmp_path, kind)
    (tmp_path / "o").mkdir()
    _, other = ssh_key(tmp_path / "o", kind)
    (repo.work / "a.txt").write_text("one")
    repo.git("add", "-A")
    sha = ssh_signed(repo, key, "commit", "-q", "-S", "-m", "signed")
    _, found = await signed(repo, tmp_path, GitRef(branch="main"))
    said = verify(found, "HEAD", TrustedKeys.of_entries({"author.sshpub": f"# the author\n{line}\n".encode()}, "s"))
    assert said.startswith(f"verified signature of\n\t- commit '{sha}' with key 'SHA256:")
    with pytest.raises(SourceError) as refused:
        verify(found, "HEAD", TrustedKeys.of_entries({"other.sshpub": other.encode()}, "Secret shop/keys"))
    assert refused.value.reason == "InvalidCommitSignature" and "not among the trusted keys" in str(refused.value)


async def test_a_commit_signed_with_an_openpgp_key(repo: Repo, tmp_path: Path) -> None:
    tsk, stranger = pysequoia.Tsk.generate("Signer <s@test>"), pysequoia.Tsk.generate("Stranger <x@test>")
    sha = pgp_signed(repo, tsk, "pgp signed")
    _, found = await signed(repo, tmp_path, GitRef(branch="main"))
    public = str(tsk.extract_certificate()).encode()
    said = verify(found, "HEAD", TrustedKeys.of_entries({"author.asc": public}, "s"))
    key_id = tsk.extract_certificate().fingerprint[-16:].upper()
    assert said == f"verified signature of\n\t- commit '{sha}' with key '{key_id}'"
    with pytest.raises(SourceError, match="not among the trusted keys"):
        verify(found, "HEAD", TrustedKeys.of_entries({"x.asc": str(stranger.extract_certificate()).encode()}, "s"))


async def test_unsigned_changed_and_wrongly_typed_commits_are_refused(repo: Repo, tmp_path: Path) -> None:
    key, line = ssh_key(tmp_path, "ed25519")
    keys = TrustedKeys.of_entries({"k.sshpub": line.encode()}, "s")
    repo.commit({"plain.txt": "no signature"})
    _, unsigned = await signed(repo, tmp_path, GitRef(branch="main"))
    with pytest.raises(SourceError, match="it is not signed"):
        verify(unsigned, "HEAD", keys)
    (repo.work / "b.txt").write_text("two")
    repo.git("add", "-A")
    ssh_signed(repo, key, "commit", "-q", "-S", "-m", "signed")
    _, good = await signed(repo, tmp_path / "again", GitRef(branch="main"))
    payload, armored = commit_payload(good.commit)
    assert armored.startswith("-----BEGIN SSH SIGNATURE-----") and b"gpgsig" not in payload
    with pytest.raises(ssh.SignatureError, match="does not match"):
        ssh.verify(armored, payload.replace(b"signed", b"forged"), [ssh.authorized_keys(line)[0]])


async def test_tag_mode_verifies_the_tag_object(repo: Repo, tmp_path: Path) -> None:
    key, line = ssh_key(tmp_path, "ed25519")
    keys = TrustedKeys.of_entries({"k.sshpub": line.encode()}, "s")
    repo.commit({"c.txt": "release"})
    ssh_signed(repo, key, "tag", "-s", "v1.0.0", "-m", "release 1.0.0")
    repo.git("tag", "v2.0.0")  # lightweight
    repo.git("push", "-q", "--force", "--tags", "origin", "HEAD:refs/heads/main")
    _, tagged = await signed(repo, tmp_path, GitRef(tag="v1.0.0"))
    payload, armored = tag_payload(tagged.tag_object)
    assert payload.endswith(b"release 1.0.0\n") and armored.startswith("-----BEGIN SSH SIGNATURE-----")
    said = verify(tagged, "Tag", keys)
    assert said.startswith(f"verified signature of\n\t- tag 'v1.0.0@{tagged.tag_sha}'")
    with pytest.raises(SourceError) as unsigned_commit:  # the tag is signed, the commit it names is not
        verify(tagged, "TagAndHEAD", keys)
    assert unsigned_commit.value.reason == "InvalidCommitSignature"
    _, light = await signed(repo, tmp_path / "light", GitRef(tag="v2.0.0"))
    with pytest.raises(SourceError) as lightweight:
        verify(light, "Tag", keys)
    assert lightweight.value.reason == "InvalidGitObject" and "since it is not signed" in str(lightweight.value)
    _, branch = await signed(repo, tmp_path / "branch", GitRef(branch="main"))
    with pytest.raises(SourceError) as no_tag:
        verify(branch, "Tag", keys)
    assert no_tag.value.reason == "InvalidVerificationMode" and not no_tag.value.transient


def test_keys_that_do_not_parse_are_passed_over_and_none_at_all_is_said() -> None:
    with pytest.raises(SourceError, match="holds no OpenPGP"):
        TrustedKeys.of_entries({"bad.sshpub": b"not a key", "bad.asc": b"nor this"}, "Secret shop/keys")
