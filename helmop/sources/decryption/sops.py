"""The SOPS format: the metadata of an encrypted file, its values (``ENC[AES256_GCM,data:...,iv:...,tag:...,
type:...]``, each bound to its place by AAD: the map keys down to it joined with ``:``, and a trailing ``:``),
and its MAC (SHA-512 over the plaintext values in order, as Go prints them; stored encrypted with the
``lastmodified`` time as AAD). The MAC is checked, always: a value swapped, moved or edited after encryption,
or a file truncated, is refused.

Which values are encrypted follows the file's own rule (``unencrypted_suffix``, by default ``_unencrypted``;
``encrypted_suffix``; ``unencrypted_regex``; ``encrypted_regex``, RE2 as Go's); a file whose rule is about
comments (which the stores do not keep) has every ``ENC[...]`` value decrypted, and the MAC says whether that
was right."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import re2
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from .stores import Branch, GoTime, Loaded

ENCRYPTED = re.compile(r"ENC\[AES256_GCM,data:(.+),iv:(.+),tag:(.+),type:(.+)\]")
MAX_DEPTH = 64  # of maps and lists in one encrypted document
RULES = ("unencrypted_suffix", "encrypted_suffix", "unencrypted_regex", "encrypted_regex",
         "unencrypted_comment_regex", "encrypted_comment_regex")
KEY_TYPES = ("age", "pgp", "kms", "gcp_kms", "azure_kv", "hc_vault", "hckms")
_SOPS_HASH_START = hashlib.sha256(b"sops").digest()  # mac_only_encrypted: what the hash starts with


class SopsError(ValueError):
    """The file cannot be decrypted (the message names why, never a value)."""

    reason = "DecryptionFailed"  # the condition's reason


@dataclass(frozen=True)
class MasterKey:
    """One wrapping of the data key: its type (age, pgp, kms, ...), the wrapped key, and whom it is for."""

    type: str
    enc: str
    recipient: str  # an age recipient, a PGP fingerprint, a KMS key's name


@dataclass(frozen=True)
class Metadata:
    lastmodified: str
    mac: str
    rule: tuple[str, str]  # the one rule for what is encrypted, and its value
    mac_only_encrypted: bool
    groups: tuple[tuple[MasterKey, ...], ...]


def metadata(raw: dict[str, Any]) -> Metadata:
    """The metadata of an encrypted file, checked."""
    stamp = raw.get("lastmodified")
    if not isinstance(stamp, str) or not stamp:
        raise SopsError("its metadata has no lastmodified time")
    rules = [(name, str(raw[name])) for name in RULES if raw.get(name) not in (None, "")]
    if len(rules) > 1:
        raise SopsError(f"its metadata sets more than one of {', '.join(name for name, _ in rules)}")
    mac_only = raw.get("mac_only_encrypted") in (True, "true", "True")
    return Metadata(stamp, str(raw.get("mac") or ""), rules[0] if rules else ("unencrypted_suffix", "_unencrypted"),
                    mac_only, _groups(raw))


def _groups(raw: dict[str, Any]) -> tuple[tuple[MasterKey, ...], ...]:
    """The key groups: the top-level key lists (one group), else ``key_groups``."""
    top = _keys(raw)
    if top:
        return (top,)
    groups = raw.get("key_groups") or []
    found = tuple(_keys(group) for group in groups if isinstance(group, dict)) if isinstance(groups, list) else ()
    if not any(found):
        raise SopsError("its metadata names no key")
    return found


def _keys(group: dict[str, Any]) -> tuple[MasterKey, ...]:
    out = []
    for kind in KEY_TYPES:
        entries = group.get(kind) or []
        for entry in entries if isinstance(entries, list) else []:
            if isinstance(entry, dict) and isinstance(entry.get("enc"), str):
                name = next((str(entry[k]) for k in ("recipient", "fp", "arn", "resource_id", "vault_url", "key_id",
                                                     "vault_address") if entry.get(k)), "")
                out.append(MasterKey(kind, entry["enc"], name))
    return tuple(out)


def decrypt_value(text: str, key: bytes, aad: str) -> tuple[bytes, str]:
    """The plaintext of one encrypted value, and its type."""
    match = ENCRYPTED.match(text)
    if match is None:
        raise SopsError("a value meant to be encrypted is not an ENC[...] value")
    try:
        data, iv, tag = (base64.b64decode(match[i], validate=True) for i in (1, 2, 3))
    except binascii.Error:
        raise SopsError("an encrypted value is not valid base64") from None
    if len(tag) != 16 or not 8 <= len(iv) <= 128:
        raise SopsError("an encrypted value has a malformed IV or tag")
    try:
        return AESGCM(key).decrypt(iv, data + tag, aad.encode()), match[4]
    except InvalidTag:
        raise SopsError("a value does not decrypt with the file's key (it was changed, or moved to another "
                        "place in the file)") from None


_BOOLS = {**dict.fromkeys(("1", "t", "T", "TRUE", "true", "True"), True),
          **dict.fromkeys(("0", "f", "F", "FALSE", "false", "False"), False)}


def typed(plain: bytes, kind: str, *, binary: bool) -> Any:
    """A decrypted value as SOPS types it (``binary``: a str stays the bytes it is)."""
    if kind == "bytes" or (kind == "str" and binary):
        return plain
    try:
        text = plain.decode()
    except UnicodeDecodeError:
        raise SopsError("a decrypted value is not UTF-8 text") from None
    if kind == "str":
        return text
    if kind == "int" and re.fullmatch(r"[+-]?[0-9]+", text):
        return int(text)
    if kind == "float":
        try:
            return float(text)
        except ValueError:
            pass
    if kind == "bool" and text in _BOOLS:
        return _BOOLS[text]
    if kind == "time":
        return text
    raise SopsError(f"a decrypted value is not of its type {kind!r}")


def go_bytes(value: Any) -> bytes:
    """How Go's SOPS writes a value into the MAC."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, bool):
        return b"True" if value else b"False"
    if isinstance(value, int):
        return str(value).encode()
    if isinstance(value, float):
        return _go_float(value).encode()
    if isinstance(value, GoTime):
        return value.go().encode()
    return str(value).encode()


def _go_float(value: float) -> str:
    """strconv.FormatFloat(v, 'f', -1, 64): the shortest digits that read back, never an exponent."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "+Inf" if value > 0 else "-Inf"
    text = format(Decimal(repr(value)), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def go_rfc3339(stamp: str) -> str:
    """``lastmodified`` as Go's time.Format(RFC3339) writes what time.Parse read (the MAC's AAD)."""
    match = re.fullmatch(r"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(\.\d+)?(Z|[+-]\d{2}:\d{2})", stamp)
    if match is None:
        raise SopsError("its lastmodified time is not an RFC 3339 time")
    zone = "Z" if match[3] in ("+00:00", "-00:00") else match[3]
    return match[1] + zone


@dataclass
class _Walk:
    """One pass over a file's branches: each value decrypted (or kept) and hashed into the MAC, in order."""

    key: bytes
    md: Metadata
    binary: bool
    hashed: Any = field(default_factory=hashlib.sha512)
    plaintexts: list[str] = field(default_factory=list)  # what was decrypted: to be masked in every message
    pattern: Any = None  # the rule's regular expression, compiled

    def __post_init__(self) -> None:
        if self.md.mac_only_encrypted:
            self.hashed.update(_SOPS_HASH_START)
        kind, value = self.md.rule
        if kind.endswith("_regex") and "comment" not in kind:
            try:
                self.pattern = re2.compile(value)
            except re2.error:
                raise SopsError(f"its {kind} is not a valid regular expression") from None

    def encrypted(self, path: list[str], value: Any) -> bool:
        kind, rule = self.md.rule
        if kind == "unencrypted_suffix":
            return not any(p.endswith(rule) for p in path)
        if kind == "encrypted_suffix":
            return any(p.endswith(rule) for p in path)
        if kind == "unencrypted_regex":
            return not any(self.pattern.search(p) for p in path)
        if kind == "encrypted_regex":
            return any(self.pattern.search(p) for p in path)
        # a rule about comments, which are not kept: what is written encrypted is decrypted (the MAC judges)
        return isinstance(value, str) and ENCRYPTED.match(value) is not None

    def node(self, value: Any, path: list[str], depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise SopsError(f"it is nested more than {MAX_DEPTH} levels deep")
        if isinstance(value, dict):
            return {k: self.node(v, [*path, k], depth + 1) for k, v in value.items()}
        if isinstance(value, list):
            return [self.node(v, path, depth + 1) for v in value]
        if value is None:
            return None  # never encrypted, never hashed
        if not self.encrypted(path, value):
            if not self.md.mac_only_encrypted:
                self.hashed.update(go_bytes(value))
            return value
        if not isinstance(value, str):
            raise SopsError(f"the value at {':'.join(path)} should be encrypted and is not")
        if not value:
            return value
        plain, kind = decrypt_value(value, self.key, ":".join(path) + ":")
        result = typed(plain, kind, binary=self.binary)
        self.hashed.update(plain if kind in ("str", "bytes") else go_bytes(result))
        text = result.decode(errors="replace") if isinstance(result, bytes) else result
        if isinstance(text, str) and len(text) >= 3:
            self.plaintexts.append(text)
        return result

    def check_mac(self) -> None:
        if not self.md.mac:
            raise SopsError("it has no MAC")
        stored, _ = decrypt_value(self.md.mac, self.key, go_rfc3339(self.md.lastmodified))
        if not hmac.compare_digest(stored, self.hashed.hexdigest().upper().encode()):
            raise SopsError("its MAC does not match: it was changed after it was encrypted")


def decrypt(loaded: Loaded, data_key: Callable[[Metadata], bytes], *, binary: bool = False
            ) -> tuple[list[Branch], list[str]]:
    """The plaintext branches of an encrypted file (``data_key``: the file's data key from its metadata), its MAC
    checked; and the plaintext strings (to mask)."""
    md = metadata(loaded.metadata)
    walk = _Walk(data_key(md), md, binary)
    branches = [walk.node(branch, [], 0) for branch in loaded.branches]
    walk.check_mac()
    return branches, walk.plaintexts
