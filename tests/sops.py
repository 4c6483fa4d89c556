"""A small SOPS encryptor for the tests' fixtures, written from the format (AES-256-GCM values bound to their
key path, the data key wrapped for age recipients with pyrage, for OpenPGP certificates with Sequoia, and for
keys made by Debian's gpg with gpg itself, as SOPS does; a SHA-512 MAC over the plaintext values): files that
helmop must decrypt, and tampered copies of them. Files made by the real sops come only from the folder named
by HELMOP_SOPS_FILES (set by .ci/run when it has them)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyrage
import pysequoia
import yaml
from cryptography.hazmat.decrepit.ciphers.modes import CFB
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

STAMP = "2026-11-01T10:00:00Z"


def armor_age(binary: bytes) -> str:
    body = base64.b64encode(binary).decode()
    lines = [body[i:i + 64] for i in range(0, len(body), 64)]
    return "-----BEGIN AGE ENCRYPTED FILE-----\n" + "\n".join(lines) + "\n-----END AGE ENCRYPTED FILE-----\n"


def _plain(value: Any) -> bytes:
    """A value as Go's SOPS hashes it (the kinds these fixtures use)."""
    if isinstance(value, bool):
        return b"True" if value else b"False"
    return str(value).encode()


def _kind(value: Any) -> str:
    return "bool" if isinstance(value, bool) else "int" if isinstance(value, int) else "str"


@dataclass
class Sops:
    """Encrypts for ``age`` recipients (``age1...``) and OpenPGP ``pgp`` certificates; ``regex``: Flux's usual
    ``encrypted_regex`` (else SOPS's default, everything but keys ending _unencrypted)."""

    age: list[str] = field(default_factory=list)
    pgp: list[pysequoia.Cert] = field(default_factory=list)
    gpg: list[GpgKey] = field(default_factory=list)  # wrapped by gpg itself, for the key's primary fingerprint
    regex: str = ""
    key: bytes = field(default_factory=lambda: os.urandom(32))

    def value(self, plain: Any, path: list[str]) -> str:
        data = _plain(plain)
        if not data:
            return ""
        iv = os.urandom(32)
        sealed = AESGCM(self.key).encrypt(iv, data, (":".join(path) + ":").encode())
        b64 = [base64.b64encode(x).decode() for x in (sealed[:-16], iv, sealed[-16:])]
        return f"ENC[AES256_GCM,data:{b64[0]},iv:{b64[1]},tag:{b64[2]},type:{_kind(plain)}]"

    def _encrypts(self, path: list[str]) -> bool:
        if self.regex:
            return any(re.search(self.regex, p) for p in path)
        return not any(p.endswith("_unencrypted") for p in path)

    def tree(self, node: Any, path: list[str], mac: Any) -> Any:
        if isinstance(node, dict):
            return {k: self.tree(v, [*path, k], mac) for k, v in node.items()}
        if isinstance(node, list):
            return [self.tree(v, path, mac) for v in node]
        if node is None:
            return None
        mac.update(_plain(node))
        return self.value(node, path) if self._encrypts(path) else node

    def metadata(self, mac: Any) -> dict[str, Any]:
        meta: dict[str, Any] = {}
        if self.age:
            encrypted = pyrage.encrypt(self.key, [pyrage.x25519.Recipient.from_str(r) for r in self.age])
            meta["age"] = [{"recipient": r, "enc": armor_age(encrypted)} for r in self.age]
        if self.pgp or self.gpg:
            meta["pgp"] = [{"created_at": STAMP, "fp": c.fingerprint.upper(),
                            "enc": pysequoia.encrypt(recipients=[c], bytes=self.key).decode().strip()}
                           for c in self.pgp]
            meta["pgp"] += [{"created_at": STAMP, "fp": k.fingerprint, "enc": k.encrypt(self.key)} for k in self.gpg]
        meta["lastmodified"] = STAMP
        meta["mac"] = self._mac(mac.hexdigest().upper())
        meta["encrypted_regex" if self.regex else "unencrypted_suffix"] = self.regex or "_unencrypted"
        meta["version"] = "3.13.1"
        return meta

    def _mac(self, text: str) -> str:
        iv = os.urandom(32)
        sealed = AESGCM(self.key).encrypt(iv, text.encode(), STAMP.encode())
        b64 = [base64.b64encode(x).decode() for x in (sealed[:-16], iv, sealed[-16:])]
        return f"ENC[AES256_GCM,data:{b64[0]},iv:{b64[1]},tag:{b64[2]},type:str]"

    def documents(self, docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """One sops run over a multi-document file: every document carries the same metadata."""
        mac = hashlib.sha512()
        encrypted = [self.tree(doc, [], mac) for doc in docs]
        meta = self.metadata(mac)
        return [{**doc, "sops": meta} for doc in encrypted]

    def yaml(self, *docs: dict[str, Any]) -> str:
        return yaml.safe_dump_all(self.documents(list(docs)), sort_keys=False)

    def json(self, doc: dict[str, Any]) -> str:
        return json.dumps(self.documents([doc])[0], indent="\t")

    def dotenv(self, pairs: dict[str, str]) -> str:
        mac = hashlib.sha512()
        lines = [f"{k}={self.tree(v, [k], mac)}" for k, v in pairs.items()]
        for key, value in _flat(self.metadata(mac)).items():
            lines.append(f"sops_{key}={value.replace(chr(10), chr(92) + 'n')}")
        return "\n".join(lines) + "\n"

    def binary(self, data: bytes) -> str:
        mac = hashlib.sha512(data)
        return json.dumps({"data": self.value(data.decode(), ["data"]), "sops": self.metadata(mac)})


def _flat(meta: dict[str, Any], prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in meta.items():
        name = f"{prefix}__map_{key}" if prefix else key
        if isinstance(value, list):
            for i, item in enumerate(value):
                out.update(_flat(item, f"{name}__list_{i}"))
        else:
            out[name] = str(value)
    return out


def age_identity() -> tuple[str, str]:
    """A new age identity: (AGE-SECRET-KEY-1..., its recipient age1...)."""
    identity = pyrage.x25519.Identity.generate()
    return str(identity), str(identity.to_public())


def pgp_key(user: str = "helmop test <test@helmop.dev>",
            profile: pysequoia.Profile | None = None) -> tuple[str, pysequoia.Cert]:
    """A new OpenPGP key (``profile``: RFC9580 for a v6 key): (its armored private key, its certificate)."""
    tsk = pysequoia.Tsk.generate(user, profile=profile)
    return str(tsk), tsk.extract_certificate()


GPG_SHAPES: dict[str, tuple[tuple[str, str], tuple[tuple[str, ...], ...]]] = {
    # (primary: algorithm, usage), then the subkeys gpg --quick-add-key adds (algorithm, usage[, its own expiry])
    "primary-only": (("rsa2048", "cert,sign,encr"), ()),
    "primary-and-subkey": (("rsa2048", "cert,sign,encr"), (("rsa2048", "encr"),)),  # Flux's own test key's shape
    "subkey-only": (("ed25519", "cert,sign"), (("cv25519", "encr"),)),  # gpg's default shape
    # gpg encrypts to the newest encryption subkey; an older one only when told (--recipient KEYID!)
    "several-subkeys": (("ed25519", "cert,sign"), (("cv25519", "encr"), ("rsa2048", "encr"), ("cv25519", "encr"))),
    # made in the past (gpg_keys's ``when``): two subkeys expired a day and two days after, the third never does
    # (two: in whatever order a certificate lists them, one is not its last key)
    "expired-subkey": (("ed25519", "cert,sign"), (("cv25519", "encr", "1d"), ("cv25519", "encr", "2d"),
                                                  ("cv25519", "encr"))),
    # the first two subkeys to be revoked by the test (GpgKey.revoke_subkey): gpg makes no key revoked in part
    "revoked-subkey": (("ed25519", "cert,sign"), (("cv25519", "encr"), ("cv25519", "encr"), ("cv25519", "encr"))),
}


@dataclass(frozen=True)
class GpgKey:
    """A key Debian's gpg made, in a GNUPGHOME of its own: what gpg users export and encrypt with."""

    home: Path
    fingerprint: str  # the primary's, upper case: what SOPS records as ``fp``

    def gpg(self, *args: str, data: bytes = b"") -> bytes:
        found = shutil.which("gpg")
        assert found, "gpg (Debian's gnupg package) is needed by these tests"
        return subprocess.run([found, "--batch", "--no-tty", "--pinentry-mode", "loopback", "--trust-model",
                               "always", *args], input=data, capture_output=True, check=True, timeout=60,
                              env={"GNUPGHOME": str(self.home), "PATH": os.environ.get("PATH", "")}).stdout

    def secret(self, passphrase: str = "", *, subkeys_only: bool = False) -> bytes:
        """The armored private key, as `gpg --export-secret-keys --armor` writes it (``subkeys_only``: as
        --export-secret-subkeys does, the primary's secret left out)."""
        how = "--export-secret-subkeys" if subkeys_only else "--export-secret-keys"
        return self.gpg("--passphrase", passphrase, how, "--armor", self.fingerprint)

    def encrypt(self, data: bytes, *, when: str = "", hidden: bool = False, to: str = "") -> str:
        """``data`` encrypted by gpg for this key (to the encryption key gpg chooses, as SOPS's gpg does, or to
        the one whose key id is ``to``: gpg's --recipient KEYID!; ``hidden``: its key id left out of the message,
        gpg's --hidden-recipient)."""
        faked = ["--faked-system-time", when] if when else []
        recipient = "--hidden-recipient" if hidden else "--recipient"
        return self.gpg(*faked, "--encrypt", "--armor", recipient, f"{to.upper()}!" if to else self.fingerprint,
                        data=data).decode().strip()

    def session_key(self, message: str) -> bytes:
        """The session key gpg finds in ``message`` (--show-session-key): what its encrypted data is sealed with."""
        status = self.gpg("--status-fd", "1", "--show-session-key", "--output", "/dev/null", "--decrypt",
                          data=message.encode()).decode()
        return bytes.fromhex(re.search(r"SESSION_KEY \d+:([0-9A-Fa-f]+)", status)[1])  # type: ignore[index]

    def revoke(self) -> None:
        """Revoke the whole key with the certificate gpg made with it (its openpgp-revocs.d)."""
        made = (self.home / "openpgp-revocs.d" / f"{self.fingerprint}.rev").read_text()
        self.gpg("--import", data=made.replace(":-----BEGIN", "-----BEGIN").encode())

    def revoke_subkey(self, key_id: str) -> None:
        """Revoke one subkey by --edit-key's revkey, its prompts answered over --command-fd (gpg 2.2 has no
        --quick-revoke for a subkey): key N, revkey, sure, reason 0 (none given), no description, okay, save."""
        index = self.key_ids().index(key_id)
        self.gpg("--command-fd", "0", "--edit-key", self.fingerprint,
                 data=f"key {index}\nrevkey\ny\n0\n\ny\nsave\n".encode())
        assert self.validity(key_id) == "r", f"gpg did not revoke subkey {key_id}"

    def validity(self, key_id: str) -> str:
        """What gpg says of one of its keys now (--with-colons: "u" ultimately trusted, "e" expired, "r" revoked)."""
        lines = self.gpg("--with-colons", "--list-keys", self.fingerprint).decode().splitlines()
        return next(fields[1] for fields in (line.split(":") for line in lines)
                    if fields[0] in ("pub", "sub") and fields[4].lower() == key_id)

    def key_ids(self) -> list[str]:
        """The key ids of its primary and subkeys, in gpg's order (lower-case hex)."""
        listed = self.gpg("--with-colons", "--list-secret-keys", self.fingerprint).decode().splitlines()
        return [line.split(":")[4].lower() for line in listed if line.startswith(("sec:", "ssb:"))]


def packet(tag: int, body: bytes) -> bytes:
    """An OpenPGP packet in the new format (RFC 9580 §4.2), its length in five octets."""
    return bytes([0xC0 | tag, 0xFF]) + len(body).to_bytes(4, "big") + body


def zeros_compressed(mib: int, layers: int) -> bytes:
    """A literal data packet of ``mib`` MiB of zeros inside ``layers`` nested compressed packets: a compression
    bomb of a few KiB. The innermost is raw DEFLATE (ZIP), a MiB of zeros' block repeated, so it is made at once."""
    raw = zlib.compressobj(9, zlib.DEFLATED, -15)
    header = bytes([0xCB, 0xFF]) + ((mib << 20) + 6).to_bytes(4, "big") + b"b" + bytes(5)
    head = raw.compress(header) + raw.flush(zlib.Z_FULL_FLUSH)
    block = raw.compress(bytes(1 << 20)) + raw.flush(zlib.Z_FULL_FLUSH)
    out = packet(8, b"\x01" + head + block * mib + raw.flush())
    for _ in range(layers - 1):
        out = packet(8, b"\x02" + zlib.compress(out, 9))
    return out


def seipd(session_key: bytes, content: bytes) -> bytes:
    """A version 1 SEIPD packet of ``content`` sealed with ``session_key``, as gpg writes one (RFC 9580
    §5.13.1): AES in CFB mode from a zero IV, a random prefix repeating its last two octets, and a modification
    detection code (SHA-1 of all of it)."""
    prefix = os.urandom(16)
    plain = prefix + prefix[-2:] + content + b"\xd3\x14"
    sealer = Cipher(algorithms.AES(session_key), CFB(bytes(16))).encryptor()
    return packet(18, b"\x01" + sealer.update(plain + hashlib.sha1(plain).digest()) + sealer.finalize())


@contextmanager
def gpg_keys(*shapes: str, passphrase: str = "", when: str = "", expire: str = "never") -> Iterator[list[GpgKey]]:
    """New keys of these GPG_SHAPES made by gpg --quick-gen-key and --quick-add-key in a temporary GNUPGHOME
    (``when``: gpg's clock then, for keys made in the past); its agent stopped afterwards."""
    home = Path(tempfile.mkdtemp(prefix="gpg"))  # short: the agent's socket path is bounded
    home.chmod(0o700)
    try:
        keys = []
        for i, shape in enumerate(shapes):
            (algorithm, usage), subkeys = GPG_SHAPES[shape]
            maker = GpgKey(home, "")
            faked = ["--faked-system-time", when] if when else []
            maker.gpg(*faked, "--passphrase", passphrase, "--quick-gen-key", f"helmop {shape} <k{i}@helmop.dev>",
                      algorithm, usage, expire)
            listed = maker.gpg("--with-colons", "--list-keys", f"k{i}@helmop.dev").decode().splitlines()
            key = GpgKey(home, next(line.split(":")[9] for line in listed if line.startswith("fpr:")))
            for sub_algorithm, sub_usage, *own_expiry in subkeys:
                key.gpg(*faked, "--passphrase", passphrase, "--quick-add-key", key.fingerprint, sub_algorithm,
                        sub_usage, own_expiry[0] if own_expiry else expire)
            keys.append(key)
        yield keys
    finally:
        subprocess.run(["gpgconf", "--kill", "gpg-agent"], env={"GNUPGHOME": str(home), "PATH": os.environ["PATH"]},
                       capture_output=True, timeout=30, check=False)
        shutil.rmtree(home, ignore_errors=True)
