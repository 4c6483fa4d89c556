"""A small SOPS encryptor for the tests' fixtures, written from the format (AES-256-GCM values bound to their
key path, the data key wrapped for age recipients with pyrage and for OpenPGP certificates with Sequoia, a
SHA-512 MAC over the plaintext values): files that helmop must decrypt, and tampered copies of them. Files made
by the real sops come only from the folder named by HELMOP_SOPS_FILES (set by .ci/run when it has them)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from typing import Any

import pyrage
import pysequoia
import yaml
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
        if self.pgp:
            meta["pgp"] = [{"created_at": STAMP, "fp": c.fingerprint.upper(),
                            "enc": pysequoia.encrypt(recipients=[c], bytes=self.key).decode().strip()}
                           for c in self.pgp]
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


def pgp_key(user: str = "helmop test <test@helmop.dev>") -> tuple[str, pysequoia.Cert]:
    """A new OpenPGP key: (its armored private key, its certificate)."""
    tsk = pysequoia.Tsk.generate(user)
    return str(tsk), tsk.extract_certificate()
