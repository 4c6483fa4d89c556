"""The keys one build may decrypt with, as kustomize-controller takes them from a Kustomization's
``spec.decryption.secretRef``: entries named ``*.agekey`` (age X25519 identities, one or more per entry, ``#``
comments) and ``*.asc`` (armored OpenPGP private keys, one or more per entry); or, for objects that name no
Secret, the operator's own key folder (``--decryption-keys``). Held in memory only: an age identity in pyrage,
an OpenPGP key in Sequoia, in this process (no keyring or agent on disk, no child process given a key).

A file is decrypted with the first of its master keys these keys open (age first, then OpenPGP, as SOPS
orders them). One encrypted only for a cloud KMS, Vault/OpenBao, or with Shamir key groups is refused by name;
so are post-quantum and plugin age identities, which pyrage cannot use."""

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
_UNSUPPORTED = {"kms": "AWS KMS", "gcp_kms": "GCP KMS", "azure_kv": "Azure Key Vault", "hc_vault": "Vault/OpenBao",
                "hckms": "Huawei Cloud KMS"}
_ARMOR = re.compile(rb"-----BEGIN PGP [A-Z ]+-----.*?-----END PGP [A-Z ]+-----", re.S)


class KeyInvalid(ValueError):
    """A key entry that cannot be used (the message names the entry, never its content)."""


@dataclass(frozen=True)
class Keys:
    age: tuple[pyrage.x25519.Identity, ...] = ()
    pgp: tuple[pysequoia.Tsk, ...] = ()
    source: str = ""  # where they came from: "Secret team/sops-keys", "the operator's key folder"

    @classmethod
    def of_entries(cls, entries: Mapping[str, bytes], source: str) -> Keys:
        """The keys of a Secret's entries (or a folder's files) by their names; other entries are not keys."""
        age: list[pyrage.x25519.Identity] = []
        pgp: list[pysequoia.Tsk] = []
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
        return cls(tuple(age), tuple(pgp), source)

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
        for master in usable:
            key = self._unwrap(master)
            if key is not None:
                return key
        wanted = "; ".join(f"{k.type} {k.recipient}" for k in usable[:5])
        raise SopsError(f"none of its keys ({wanted}) is among those of {self.source or 'this build'}")

    def _unwrap(self, master: MasterKey) -> bytes | None:
        if len(master.enc) > MAX_WRAPPED:
            raise SopsError(f"its wrapped {master.type} key is larger than {MAX_WRAPPED >> 10} KiB")
        try:
            if master.type == "age" and self.age:
                key = pyrage.decrypt(master.enc.encode(), list(self.age))
            elif master.type == "pgp" and self.pgp:
                key = next((k for k in (_pgp_open(master.enc, tsk) for tsk in self.pgp) if k is not None), b"")
            else:
                return None
        except pyrage.DecryptError:
            return None
        if key and len(key) != 32:
            raise SopsError(f"its {master.type} key does not hold a 32-byte data key (a Shamir share?)")
        return key or None


def _pgp_open(enc: str, tsk: pysequoia.Tsk) -> bytes | None:
    try:
        return bytes(pysequoia.decrypt(enc.encode(), decryptor=tsk.decryptor()).bytes or b"")
    except Exception:  # Sequoia raises plain exceptions: not this key, or not a message it can read
        return None


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


def _openpgp(data: bytes, where: str) -> list[pysequoia.Tsk]:
    """Every private key of the entry's armored blocks (a block may hold several)."""
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
                try:
                    out.append(pysequoia.Tsk.from_packets(key))
                except Exception:
                    raise KeyInvalid(f"{where}: a private key that does not parse") from None
    if not out:
        raise KeyInvalid(f"{where}: no OpenPGP private key")
    return out
