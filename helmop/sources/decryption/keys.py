"""The keys one build may decrypt with, as kustomize-controller takes them from a Kustomization's
``spec.decryption.secretRef``: entries named ``*.agekey`` (age X25519 identities, one or more per entry, ``#``
comments) and ``*.asc`` (armored OpenPGP private keys, one or more per entry); or, for objects that name no
Secret, the operator's own key folder (``--decryption-keys``). Held in memory only: an age identity in pyrage,
an OpenPGP key in Sequoia, in this process (no keyring or agent on disk, no child process given a key).

A file is decrypted with the first of its master keys these keys open (age first, then OpenPGP, as SOPS
orders them). One encrypted only for a cloud KMS, Vault/OpenBao, or with Shamir key groups is refused by name;
so are post-quantum and plugin age identities, which pyrage cannot use.

OpenPGP as gpg decrypts: each secret key of an OpenPGP key (its primary and every subkey) is tried on its own,
when the message's recipients (its PKESK packets) name its key id, or name none (hidden recipients). Sequoia's
``Tsk.decryptor()`` uses only the first encryption-capable secret key of a certificate: for a key made by gpg
whose primary can encrypt and which has an encryption subkey, that is the primary, while gpg (and SOPS through
it) encrypts to the subkey. Each secret key is therefore held as a certificate whose only secret it is. SOPS's
``fp`` (the key it was told to encrypt for, often the primary's) only names the key in messages."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pyrage
import pysequoia
from pysequoia.packet import Packet, PacketPile, Tag

from .sops import MasterKey, Metadata, SopsError

MAX_ENTRY = 256 << 10  # one *.agekey or *.asc entry
MAX_KEYS = 64  # identities and OpenPGP keys in all
MAX_WRAPPED = 64 << 10  # one master key's wrapped data key (an age file of a few hundred stanzas at most)
MAX_MASTER_KEYS = 64  # in a file's key group
MAX_SUBKEYS = 32  # secret subkeys of one OpenPGP key
MAX_ATTEMPTS = 64  # secret keys tried on one wrapped key, times its recipients (hidden ones name every key)
_UNSUPPORTED = {"kms": "AWS KMS", "gcp_kms": "GCP KMS", "azure_kv": "Azure Key Vault", "hc_vault": "Vault/OpenBao",
                "hckms": "Huawei Cloud KMS"}
_ARMOR = re.compile(rb"-----BEGIN PGP [A-Z ]+-----.*?-----END PGP [A-Z ]+-----", re.S)


class KeyInvalid(ValueError):
    """A key entry that cannot be used (the message names the entry, never its content)."""


class KeysNotAllowed(SopsError):
    """The keys a file would need are not for this object's namespace (the operator's, under multi-tenancy)."""

    reason = "DecryptionKeysNotAllowed"


@dataclass(frozen=True)
class SecretKey:
    """One secret key of an OpenPGP key (its primary or a subkey): a certificate whose only secret it is."""

    key_id: str  # 16 lower-case hex digits, as a v3 PKESK names its recipient
    fingerprint: str  # lower-case hex, as a v6 PKESK names it
    tsk: pysequoia.Tsk


@dataclass(frozen=True)
class Keys:
    age: tuple[pyrage.x25519.Identity, ...] = ()
    pgp: tuple[SecretKey, ...] = ()
    source: str = ""  # where they came from: "Secret team/sops-keys", "the operator's key folder"
    refusal: str = ""  # why this object has no keys although some exist (KeysNotAllowed when a file needs them)

    @classmethod
    def of_entries(cls, entries: Mapping[str, bytes], source: str) -> Keys:
        """The keys of a Secret's entries (or a folder's files) by their names; other entries are not keys."""
        age: list[pyrage.x25519.Identity] = []
        pgp: list[list[SecretKey]] = []
        for name, data in sorted(entries.items()):
            if not name.endswith((".agekey", ".asc")):
                continue
            if len(data) > MAX_ENTRY:
                raise KeyInvalid(f"{source}: {name} is larger than {MAX_ENTRY >> 10} KiB")
            if name.endswith(".agekey"):
                age += _age(data, f"{source}: {name}")
            else:
                pgp += _openpgp(data, f"{source}: {name}")
            if len(age) + len(pgp) > MAX_KEYS:
                raise KeyInvalid(f"{source}: more than {MAX_KEYS} keys")
        return cls(tuple(age), tuple(k for key in pgp for k in key), source)

    @classmethod
    def of_folder(cls, folder: Path) -> Keys:
        """The operator's own keys: the ``*.agekey`` and ``*.asc`` files of a folder (a mounted Secret's)."""
        entries = {}
        for path in sorted(folder.iterdir()) if folder.is_dir() else []:
            if path.name.endswith((".agekey", ".asc")) and path.is_file() and path.stat().st_size <= MAX_ENTRY:
                entries[path.name] = path.read_bytes()
        return cls.of_entries(entries, "the operator's key folder")

    def __bool__(self) -> bool:
        return bool(self.age or self.pgp)

    def data_key(self, md: Metadata) -> bytes:
        """The file's 32-byte data key, from the first of its master keys these keys open."""
        if len(md.groups) > 1:
            raise SopsError(f"it splits its key over {len(md.groups)} key groups (Shamir), which helmop does not "
                            "decrypt; encrypt it for one group of age or OpenPGP keys")
        group = md.groups[0]
        if len(group) > MAX_MASTER_KEYS:
            raise SopsError(f"it has more than {MAX_MASTER_KEYS} master keys")
        usable = sorted((k for k in group if k.type in ("age", "pgp")), key=lambda k: k.type != "age")
        if not usable:
            kinds = sorted({_UNSUPPORTED.get(k.type, k.type) for k in group})
            raise SopsError(f"it is encrypted only for {', '.join(kinds)}, which helmop does not use: add an age or "
                            "OpenPGP recipient (sops updatekeys)")
        if self.refusal and not self:
            raise KeysNotAllowed(self.refusal)
        notes: list[str] = []
        for master in usable:
            key = self._unwrap(master, notes)
            if key is not None:
                return key
        wanted = "; ".join(f"{k.type} {k.recipient}" for k in usable[:5])
        raise SopsError(f"none of its keys ({wanted}) is among those of {self.source or 'this build'}"
                        + "".join(f"; {note}" for note in notes[:3]))

    def _unwrap(self, master: MasterKey, notes: list[str]) -> bytes | None:
        if len(master.enc) > MAX_WRAPPED:
            raise SopsError(f"its wrapped {master.type} key is larger than {MAX_WRAPPED >> 10} KiB")
        try:
            if master.type == "age" and self.age:
                key = pyrage.decrypt(master.enc.encode(), list(self.age))
            elif master.type == "pgp" and self.pgp:
                key = _pgp_unwrap(master.enc.encode(), self.pgp, notes) or b""
            else:
                return None
        except pyrage.DecryptError:
            return None
        if key and len(key) != 32:
            raise SopsError(f"its {master.type} key does not hold a 32-byte data key (a Shamir share?)")
        return key or None


def _pgp_unwrap(message: bytes, keys: tuple[SecretKey, ...], notes: list[str]) -> bytes | None:
    """The message's content, opened by the first secret key among ``keys`` its recipients name, as gpg does
    (every one of them: primary and subkeys alike); ``notes`` gets why a named key could not be used."""
    named, recipients = _recipients(message)
    tried = [k for k in keys if "*" in named or k.key_id in named or k.fingerprint in named]
    if len(tried) * recipients > MAX_ATTEMPTS:
        raise SopsError(f"its pgp key is for {recipients} recipients, hidden or named, that {len(tried)} OpenPGP "
                        f"keys of this build would each be tried on: more than {MAX_ATTEMPTS} attempts")
    for key in tried:
        try:
            decryptor = key.tsk.decryptor()
        except Exception as exc:  # Sequoia's: no usable secret (a passphrase, expired, revoked, policy)
            notes.append(f"OpenPGP key {key.key_id.upper()} is held but cannot decrypt: "
                         + ("its secret is protected by a passphrase, which helmop does not use, or is not there "
                            "(gpg --export-secret-subkeys leaves the primary's out)" if "encrypted" in str(exc).lower()
                            else "it is expired, revoked or not valid for encryption under Sequoia's standard policy"))
            continue
        try:
            return bytes(pysequoia.decrypt(message, decryptor=decryptor).bytes or b"")
        except Exception:  # Sequoia raises plain exceptions: not this key, or not a message it can read
            continue
    return None


def _recipients(message: bytes) -> tuple[set[str], int]:
    """The key ids and fingerprints (lower-case hex) a message's PKESK packets name ("*": a hidden recipient),
    and how many PKESK packets it has."""
    try:
        packets = [p for p in PacketPile.from_bytes(message) if p.tag == Tag.PKESK]
    except Exception:  # not an OpenPGP message: nothing opens it
        return set(), 0
    named: set[str] = set()
    for packet in packets:
        body = bytes(packet.body)
        if body[:1] == b"\x03" and len(body) >= 9:  # v3: the recipient's key id, zeros when hidden
            named.add(body[1:9].hex() if any(body[1:9]) else "*")
        elif body[:1] == b"\x06" and len(body) >= 2:  # v6: a length, then key version and fingerprint
            named.add(body[3:2 + body[1]].hex() if body[1] else "*")
    return named, len(packets)


def _age(data: bytes, where: str) -> list[pyrage.x25519.Identity]:
    out = []
    for line in data.decode(errors="replace").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("AGE-SECRET-KEY-PQ-1") or line.startswith("AGE-PLUGIN-"):
            raise KeyInvalid(f"{where}: post-quantum and plugin age identities are not supported")
        try:
            out.append(pyrage.x25519.Identity.from_str(line))
        except pyrage.IdentityError:
            raise KeyInvalid(f"{where}: a line is not an age identity (AGE-SECRET-KEY-1...)") from None
    if not out:
        raise KeyInvalid(f"{where}: no age identity")
    return out


def _openpgp(data: bytes, where: str) -> list[list[SecretKey]]:
    """Every private key of the entry's armored blocks (a block may hold several), each as its secret keys."""
    out = []
    for block in _ARMOR.findall(data) or [data]:
        try:
            packets = list(PacketPile.from_bytes(block))
        except Exception:  # Sequoia's parse errors
            raise KeyInvalid(f"{where}: not an OpenPGP key") from None
        keys: list[list[Packet]] = []
        for packet in packets:
            if packet.tag in (Tag.SecretKey, Tag.PublicKey):
                keys.append([])
            if keys:
                keys[-1].append(packet)
        for key in keys:
            if key[0].tag == Tag.SecretKey:
                out.append(_secret_keys(key, where))
    if not out:
        raise KeyInvalid(f"{where}: no OpenPGP private key")
    return out


def _secret_keys(packets: list[Packet], where: str) -> list[SecretKey]:
    """One OpenPGP key's secret keys, each alone: its certificate with only that key's packet secret."""
    try:
        public = list(PacketPile.from_bytes(bytes(pysequoia.Tsk.from_packets(packets).extract_certificate())))
    except Exception:  # Sequoia's parse errors
        raise KeyInvalid(f"{where}: a private key that does not parse") from None
    secrets = [p for p in packets if p.tag in (Tag.SecretKey, Tag.SecretSubkey)]
    if len(secrets) > MAX_SUBKEYS + 1:
        raise KeyInvalid(f"{where}: a private key with more than {MAX_SUBKEYS} secret subkeys")
    out = []
    for secret in secrets:
        mixed = [secret if p.fingerprint == secret.fingerprint else p for p in public]
        if secret.fingerprint is None or secret.key_id is None or secret not in mixed:
            continue  # a subkey Sequoia leaves out of the certificate (unbound): not one gpg would use either
        try:
            out.append(SecretKey(secret.key_id.lower(), secret.fingerprint.lower(), pysequoia.Tsk.from_packets(mixed)))
        except Exception:
            raise KeyInvalid(f"{where}: a private key that does not parse") from None
    return out
