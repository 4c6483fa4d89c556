"""The keys one build may decrypt with, as kustomize-controller takes them from a Kustomization's
``spec.decryption.secretRef``: entries named ``*.agekey`` (age X25519 identities, one or more per entry, ``#``
comments) and ``*.asc`` (armored OpenPGP private keys, one or more per entry); or, for objects that name no
Secret, the operator's own key folder (``--decryption-keys``). Held in memory only: an age identity in pyrage,
an OpenPGP key in Sequoia (no keyring or agent on disk; a secret key goes, over a pipe, only to helmop's own
bounded child process that opens one wrapped data key with it).

A file is decrypted with the first of its master keys these keys open (age first, then OpenPGP, as SOPS
orders them). One encrypted only for a cloud KMS, Vault/OpenBao, or with Shamir key groups is refused by name;
so are post-quantum and plugin age identities, which pyrage cannot use.

OpenPGP as gpg decrypts: each secret key of an OpenPGP key (its primary and every subkey) is tried on its own,
when the message's recipients (its PKESK packets) name its key id, or name none (hidden recipients). Sequoia's
``Tsk.decryptor()`` uses only the first encryption-capable secret key of a certificate: for a key made by gpg
whose primary can encrypt and which has an encryption subkey, that is the primary, while gpg (and SOPS through
it) encrypts to the subkey. Each secret key is therefore held as a certificate whose only secret it is. SOPS's
``fp`` (the key it was told to encrypt for, often the primary's) only names the key in messages. A key entry and
a wrapped key are read by their packet headers before Sequoia parses them, and the wrapped key is opened in a
bounded child process (:mod:`.openpgp`: compressed data is inflated by parsing). Unlike gpg, an expired or
revoked key does not decrypt: Sequoia's decryptor takes only keys valid now, and pysequoia offers no other time
or policy; the refusal names the key and when it expired."""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pyrage
import pysequoia
from pysequoia.packet import Packet, PacketPile, SignatureType, Tag

from . import openpgp
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
# The operator's key folder as last parsed: (its files' name, inode, mtime and size; what they gave). A reconcile
# of every object naming no Secret reads it: parsed again only when a file changed (a mounted Secret's update
# replaces its files).
_FOLDERS: dict[Path, tuple[tuple[tuple[str, int, int, int], ...], Keys | KeyInvalid]] = {}
_FOLDERS_LOCK = threading.Lock()


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
    tsk: bytes  # that certificate, binary: what the child that opens a wrapped key is given
    expires: datetime | None = None  # when it (or its primary) expires, by its self-signatures
    revoked: bool = False  # it or its primary, by a revocation signature of its own


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
        """The operator's own keys: the ``*.agekey`` and ``*.asc`` files of a folder (a mounted Secret's), parsed
        again only when one of them changed; KeyInvalid names the file. Blocking: call it off the event loop."""
        files = []
        for path in sorted(folder.iterdir()) if folder.is_dir() else []:
            if path.name.endswith((".agekey", ".asc")) and path.is_file():
                stat = path.stat()
                files.append((path, (path.name, stat.st_ino, stat.st_mtime_ns, stat.st_size)))
        stamp = tuple(found for _path, found in files)
        with _FOLDERS_LOCK:
            cached = _FOLDERS.get(folder)
        if cached is None or cached[0] != stamp:
            entries = {}
            for path, _found in files:
                with path.open("rb") as f:
                    entries[path.name] = f.read(MAX_ENTRY + 1)  # one larger is named, not read whole
            try:
                parsed: Keys | KeyInvalid = cls.of_entries(entries, "the operator's key folder")
            except KeyInvalid as exc:
                parsed = exc
            with _FOLDERS_LOCK:
                cached = _FOLDERS[folder] = (stamp, parsed)
        if isinstance(cached[1], KeyInvalid):
            raise KeyInvalid(str(cached[1]))
        return cached[1]

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
                key = _pgp_unwrap(master, self.pgp, notes) or b""
            else:
                return None
        except pyrage.DecryptError:
            return None
        if key and len(key) != 32:
            raise SopsError(f"its {master.type} key does not hold a 32-byte data key (a Shamir share?)")
        return key or None


def _pgp_unwrap(master: MasterKey, keys: tuple[SecretKey, ...], notes: list[str]) -> bytes | None:
    """The wrapped key's content, opened by the first secret key among ``keys`` its recipients name, as gpg does
    (every one of them: primary and subkeys alike), in the bounded child; ``notes`` gets why it was not: the
    message is not one, it would take too many attempts, a named key cannot decrypt."""
    try:
        message, pkesks = openpgp.encrypted_message(master.enc.encode())
    except openpgp.FramingError as exc:
        notes.append(f"its pgp key for {master.recipient} is not opened: {exc}")
        return None
    named = _recipients(pkesks)
    tried = [k for k in keys if "*" in named or k.key_id in named or k.fingerprint in named]
    if len(tried) * len(pkesks) > MAX_ATTEMPTS:
        notes.append(f"its pgp key for {master.recipient} is for {len(pkesks)} recipients, hidden or named, that "
                     f"{len(tried)} OpenPGP keys of this build would each be tried on: more than {MAX_ATTEMPTS} "
                     "attempts, not tried")
        return None
    if not tried:
        return None
    try:
        opened = openpgp.open_message(message, [k.tsk for k in tried])
    except openpgp.UnwrapFailed as exc:  # hostile: a bomb encrypted for one of the keys
        raise SopsError(f"its pgp key for {master.recipient} {exc}: refused") from None
    notes += [_cannot_decrypt(tried[i], why) for i, why in sorted(opened.refused.items()) if i < len(tried)]
    return opened.key


def _cannot_decrypt(key: SecretKey, why: str) -> str:
    """Why a secret key a message names cannot decrypt: ``why`` is the child's "locked" or "unusable"."""
    held = f"OpenPGP key {key.key_id.upper()} is held but cannot decrypt: "
    if why == "locked":
        return held + ("its secret is protected by a passphrase, which helmop does not use, or is not there (gpg "
                       "--export-secret-subkeys leaves the primary's out)")
    if key.revoked:
        return held + "it is revoked (gpg would still decrypt with it, helmop does not)"
    if key.expires is not None and key.expires <= datetime.now(UTC):
        return held + (f"it expired on {key.expires:%Y-%m-%d %H:%M} UTC; gpg (and so Flux's SOPS) still decrypts "
                       "with an expired key, helmop cannot (Sequoia takes only keys valid now): extend it (gpg "
                       "--quick-set-expire FINGERPRINT 1y '*') and give the key again")
    return held + "it is not valid for encryption under Sequoia's standard policy (a weak algorithm?)"


def _recipients(pkesks: list[bytes]) -> set[str]:
    """The key ids and fingerprints (lower-case hex) PKESK packets name ("*": a hidden recipient)."""
    named: set[str] = set()
    for body in pkesks:
        if body[:1] == b"\x03" and len(body) >= 9:  # v3: the recipient's key id, zeros when hidden
            named.add(body[1:9].hex() if any(body[1:9]) else "*")
        elif body[:1] == b"\x06" and len(body) >= 2:  # v6: a length, then key version and fingerprint
            named.add(body[3:2 + body[1]].hex() if body[1] else "*")
    return named


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
            packets = list(PacketPile.from_bytes(openpgp.uncompressed(block)))
        except openpgp.FramingError as exc:
            raise KeyInvalid(f"{where}: not an OpenPGP key: {exc}") from None
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
        cert = pysequoia.Tsk.from_packets(packets).extract_certificate()
        public = list(PacketPile.from_bytes(bytes(cert)))
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
        expires, revoked = _validity(public, secret, _expiration(cert))
        try:
            tsk = bytes(pysequoia.Tsk.from_packets(mixed))
        except Exception:
            raise KeyInvalid(f"{where}: a private key that does not parse") from None
        out.append(SecretKey(secret.key_id.lower(), secret.fingerprint.lower(), tsk, expires,
                             revoked or cert.is_revoked))
    return out


def _expiration(cert: pysequoia.Cert) -> datetime | None:
    """When the key expires, as Sequoia says; None where its policy will not say (an RSA-1024 key, as the real
    sops's test key is, which it still decrypts with): only the refusal's words need it."""
    try:
        expires: datetime | None = cert.expiration
    except Exception:  # Sequoia's policy errors are plain RuntimeErrors
        return None
    return expires


def _validity(public: list[Packet], key: Packet, primary_expires: datetime | None) -> tuple[datetime | None, bool]:
    """When ``key`` expires (its primary's expiry, or a subkey's own by its newest binding signature, whichever
    comes first) and whether a signature after it revokes it: what to say when Sequoia will not use it."""
    own: list[Packet] = []  # the signatures after its key packet, up to the next key's (it need not be the last)
    mine = False
    for packet in public:
        if packet.tag in (Tag.PublicKey, Tag.PublicSubkey):
            mine = packet.fingerprint == key.fingerprint
        elif mine and packet.tag == Tag.Signature:
            own.append(packet)
    bindings = sorted((p for p in own if p.signature_type == SignatureType.SubkeyBinding),
                      key=lambda p: p.signature_created or datetime.min.replace(tzinfo=UTC))
    period = bindings[-1].key_validity_period if bindings and key.tag == Tag.SecretSubkey else None
    expiries = [t for t in (primary_expires, key.key_created + period if period and key.key_created else None) if t]
    revoked = any(p.signature_type == SignatureType.SubkeyRevocation for p in own)
    return min(expiries, default=None), revoked
