"""A GitRepository's ``spec.verify``, as Flux's source-controller checks it: the commit a revision names
(``HEAD``), the annotated tag it was reached by (``Tag``), or both (``TagAndHEAD``), each signed by one of the
keys of a Secret of the object's namespace (entries ``*.sshpub``: SSH keys in ``authorized_keys`` form; any
other entry: an armored OpenPGP key ring). An entry that does not parse is skipped, as Flux skips it.

What a signature covers is what git signs: a commit object with its ``gpgsig`` (and ``gpgsig-sha256``) header
lines taken out; an annotated tag object up to the signature appended to its message."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pysequoia

from ..errors import SourceError
from . import openpgp, ssh

_ARMORS = (b"-----BEGIN PGP SIGNATURE-----", b"-----BEGIN PGP MESSAGE-----", b"-----BEGIN SSH SIGNATURE-----",
           b"-----BEGIN CERTIFICATE-----", b"-----BEGIN SIGNED MESSAGE-----")


def commit_payload(raw: bytes) -> tuple[bytes, str]:
    """(what is signed, the armored signature) of a raw commit object (``git cat-file commit``)."""
    header, sep, message = raw.partition(b"\n\n")
    kept, signature, dropping, collecting = [], [], False, False
    for line in header.split(b"\n"):
        if line.startswith(b" ") and dropping:
            if collecting:
                signature.append(line[1:])
            continue
        dropping = line.startswith((b"gpgsig ", b"gpgsig-sha256 "))
        collecting = line.startswith(b"gpgsig ")
        if collecting:
            signature.append(line[len(b"gpgsig "):])
        if not dropping:
            kept.append(line)
    return b"\n".join(kept) + sep + message, b"\n".join(signature).decode(errors="replace")


def tag_payload(raw: bytes) -> tuple[bytes, str]:
    """(what is signed, the armored signature) of a raw annotated tag object (``git cat-file tag``): the
    signature is the last armored block that starts a line."""
    starts = [i for armor in _ARMORS for i in _line_starts(raw, armor)]
    if not starts:
        return raw, ""
    at = max(starts)
    return raw[:at], raw[at:].decode(errors="replace")


def _line_starts(raw: bytes, armor: bytes) -> list[int]:
    found, at = [], raw.find(armor)
    while at >= 0:
        if at == 0 or raw[at - 1:at] == b"\n":
            found.append(at)
        at = raw.find(armor, at + 1)
    return found


@dataclass(frozen=True)
class TrustedKeys:
    pgp: tuple[pysequoia.Cert, ...]
    ssh: tuple[bytes, ...]
    source: str

    @classmethod
    def of_entries(cls, entries: Mapping[str, bytes], source: str) -> TrustedKeys:
        pgp: list[pysequoia.Cert] = []
        keys: list[bytes] = []
        for name, data in sorted(entries.items()):
            try:
                if name.endswith(".sshpub"):
                    keys += ssh.authorized_keys(data.decode(errors="replace"))
                else:
                    pgp += openpgp.keys(data)
            except ssh.SignatureError:
                continue  # as Flux: an entry that does not parse is passed over
        if not pgp and not keys:
            raise SourceError("VerificationError", f"{source} holds no OpenPGP (*.asc) or SSH (*.sshpub) public "
                                                   "key", transient=True)
        return cls(tuple(pgp), tuple(keys), source)

    def signer(self, armored: str, payload: bytes) -> str:
        """Who of these keys signed ``payload`` (a key ID, an SSH fingerprint); SignatureError otherwise."""
        text = armored.strip()
        if not text:
            raise ssh.SignatureError("it is not signed")
        if text.startswith("-----BEGIN PGP SIGNATURE-----"):
            if not self.pgp:
                raise ssh.SignatureError(f"an OpenPGP signature, and {self.source} has no OpenPGP key (*.asc)")
            return openpgp.verify(text, payload, list(self.pgp))
        if text.startswith("-----BEGIN SSH SIGNATURE-----"):
            if not self.ssh:
                raise ssh.SignatureError(f"an SSH signature, and {self.source} has no SSH key (*.sshpub)")
            return ssh.verify(text, payload, list(self.ssh))
        raise ssh.SignatureError("a signature of a type helmop does not verify (OpenPGP and SSH only)")


@dataclass(frozen=True)
class Signed:
    """What one revision offers to verify: its commit, and the tag it was reached by (if any)."""

    sha: str
    commit: bytes  # the raw commit object
    tag: str = ""  # the tag's name
    tag_sha: str = ""  # its tag object ("" for a lightweight tag)
    tag_object: bytes = b""


def verify(signed: Signed, mode: str, keys: TrustedKeys) -> str:
    """The SourceVerified message for ``signed`` under ``mode``; SourceError with Flux's reason otherwise."""
    lines = []
    if mode in ("Tag", "TagAndHEAD"):
        if not signed.tag:
            raise SourceError("InvalidVerificationMode", "cannot verify tag object's signature if a tag reference "
                                                         "is not specified", transient=False)
        payload, armored = tag_payload(signed.tag_object)
        if not signed.tag_sha or not armored:
            raise SourceError("InvalidGitObject", f"cannot verify signature of tag '{signed.tag}' since it is not "
                                                  "signed", transient=True)
        try:
            lines.append(f"tag '{signed.tag}@{signed.tag_sha}' with key '{keys.signer(armored, payload)}'")
        except ssh.SignatureError as exc:
            raise SourceError("InvalidTagSignature", f"signature verification of tag '{signed.tag}@"
                                                     f"{signed.tag_sha}' failed: {exc}", transient=True) from None
    if mode in ("HEAD", "TagAndHEAD"):
        payload, armored = commit_payload(signed.commit)
        try:
            lines.append(f"commit '{signed.sha}' with key '{keys.signer(armored, payload)}'")
        except ssh.SignatureError as exc:
            raise SourceError("InvalidCommitSignature", f"signature verification of commit '{signed.sha}' failed: "
                                                        f"{exc}", transient=True) from None
    return "verified signature of\n" + "\n".join(f"\t- {line}" for line in lines)
