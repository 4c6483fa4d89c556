"""What a ConfigSync's build decrypts (kustomize-controller's semantics, the MAC checked on the files as
committed):

* before the build, in the repository's tree: every YAML or JSON manifest document that carries SOPS metadata
  (a ``sops`` map with a ``mac``), unless it is annotated ``kustomize.toolkit.fluxcd.io/decrypt: disabled``
  (in any case); documents written by one ``sops`` run are decrypted together (one MAC covers them), and the
  other documents of a file are kept as they are, byte for byte; and the files the kustomizations read into
  objects, when encrypted: a secretGenerator's ``files`` (in the format their key's name says; an unknown one is
  binary) and ``envs`` (dotenv unless named otherwise), and patch files;
* after the build: a Secret's ``data`` entry that holds a SOPS file (found by its format's marker), decrypted in
  the format of the entry's name.

A document that is still encrypted after the build (no ``spec.decryption``, or one the build made) is refused
by name. A file of more than 5 MiB is refused before it is read, as Flux does."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any

import yaml

from helmop.api.manifests import Manifest

from .. import kustomize
from ..errors import SourceError
from . import sops, stores
from .keys import Keys

DISABLED = "kustomize.toolkit.fluxcd.io/decrypt"
MAX_FILE = 5 << 20


def _refused(where: str, why: str, reason: str = "DecryptionFailed") -> SourceError:
    return SourceError(reason, f"{where}: {why}", transient=False)


def _not_decrypted(where: str, exc: stores.StoreError | sops.SopsError) -> SourceError:
    return _refused(where, f"not decrypted: {exc}", exc.reason if isinstance(exc, sops.SopsError) else
                    "DecryptionFailed")


def disabled(obj: Any) -> bool:
    annotations = ((obj.get("metadata") or {}) if isinstance(obj, dict) else {}).get("annotations") or {}
    return isinstance(annotations, dict) and str(annotations.get(DISABLED, "")).lower() == "disabled"


def encrypted(obj: Any) -> bool:
    """Whether a document carries SOPS metadata with a MAC (what Flux decrypts)."""
    meta = obj.get("sops") if isinstance(obj, dict) else None
    return isinstance(meta, dict) and bool(meta.get("mac"))


@dataclass
class Decryptor:
    """One build's decryption with ``keys``; ``plaintexts``: every value it decrypted (to mask everywhere)."""

    keys: Keys
    plaintexts: list[str] = field(default_factory=list)

    def file(self, data: bytes, fmt: stores.Format, where: str, out: stores.Format | None = None) -> bytes:
        """A whole SOPS file stored as ``fmt``, decrypted and written as ``out`` (its own format by default)."""
        if len(data) > MAX_FILE:
            raise _refused(where, f"larger than {MAX_FILE >> 20} MiB")
        try:
            loaded = stores.load(data, fmt)
            branches, plain = sops.decrypt(loaded, self.keys.data_key, binary=fmt is stores.Format.BINARY)
            self.plaintexts += plain
            return stores.emit(branches, out or fmt)
        except (stores.StoreError, sops.SopsError) as exc:
            raise _not_decrypted(where, exc) from None

    def tree(self, files: dict[str, bytes], folders: list[str] | None = None) -> dict[str, bytes]:
        """``files`` with what a build reads of them decrypted: the files the kustomizations of ``folders`` read
        (None: a folder of plain manifests, all of ``files``). Nothing else is decrypted."""
        read = (kustomize.read_files(files, folders) if folders is not None
                else [(path, path, "manifest") for path in files])
        out = dict(files)
        for path, name, how in read:
            data = files[path]
            if out[path] is not data or stores.detect(data) is None:
                continue  # decrypted already (read twice), or not encrypted
            if how == "manifest":
                if path.endswith((".yaml", ".yml", ".json")):
                    out[path] = self._manifests(data, path)
                continue
            fmt = stores.format_for(name)
            out[path] = self.file(data, stores.Format.DOTENV if how == "envs" and fmt is stores.Format.BINARY
                                  else fmt, path)
        return out

    def _manifests(self, data: bytes, path: str) -> bytes:
        """A manifest file with each SOPS run's documents decrypted in place."""
        if len(data) > MAX_FILE:
            raise _refused(path, f"larger than {MAX_FILE >> 20} MiB")
        try:
            found = stores.documents(data)
        except (yaml.YAMLError, ValueError):
            return data  # not for decryption to judge: the build reports what is wrong with it
        runs: dict[str, list[int]] = {}
        for i, (_, _, doc) in enumerate(found):
            if encrypted(doc) and not disabled(doc):
                runs.setdefault(repr(doc["sops"]), []).append(i)
        replaced: dict[int, bytes] = {}
        for members in runs.values():
            loaded = stores.Loaded([{k: v for k, v in found[i][2].items() if k != "sops"} for i in members],
                                   found[members[0]][2]["sops"])
            try:
                branches, plain = sops.decrypt(loaded, self.keys.data_key)
            except (stores.StoreError, sops.SopsError) as exc:
                raise _not_decrypted(path, exc) from None
            self.plaintexts += plain
            for i, branch in zip(members, branches, strict=True):
                replaced[i] = stores.emit([branch], stores.Format.YAML if not path.endswith(".json")
                                          else stores.Format.JSON)
        text, at = b"", 0
        for i, (start, end, _) in enumerate(found):
            if i in replaced:
                text, at = text + data[at:start] + replaced[i], end
        return text + data[at:]

    def secret_entries(self, found: list[Manifest]) -> list[Manifest]:
        """The built objects with each Secret's encrypted ``data`` entries decrypted."""
        return [Manifest(self._secret(m.obj, m.origin), m.origin) if m.kind == "Secret" and not disabled(m.obj)
                else m for m in found]

    def _secret(self, obj: dict[str, Any], origin: str) -> dict[str, Any]:
        data = obj.get("data")
        if not isinstance(data, dict):
            return obj
        out = dict(data)
        for key, value in data.items():
            try:
                raw = base64.b64decode(str(value), validate=True)
            except binascii.Error:
                continue
            fmt = stores.detect(raw)
            if fmt is not None:
                plain = self.file(raw, fmt, f"{origin}: Secret data {key!r}", stores.format_for(str(key)))
                out[key] = base64.b64encode(plain).decode()
        return {**obj, "data": out}


def still_encrypted(found: list[Manifest], decrypting: bool) -> None:
    """Refuse a built object that is still SOPS-encrypted (and not marked to stay so)."""
    for item in found:
        if encrypted(item.obj) and not disabled(item.obj):
            why = ("it was not decrypted before the build (a generator or transformer made it)" if decrypting else
                   "set spec.decryption (provider sops, with a Secret of age or OpenPGP keys) to apply it")
            raise SourceError("DecryptionFailed", f"{item.origin}: {item.kind} {item.name} is SOPS-encrypted: {why}",
                              transient=False)


