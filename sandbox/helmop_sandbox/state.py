"""What ``helmop sandbox --state-dir DIR`` keeps across a restart, as etcd and the API server's keys do.

- ``journal.jsonl``: every write of the store, one JSON line per event, appended (and flushed) as it
  happens, so even a killed sandbox loses nothing it answered. A start replays it: objects,
  resourceVersions and the watch history come back, so a client resuming a watch from a version it saw
  before the restart goes on. Then the journal is compacted to the objects alone, behind a ``compacted``
  mark: watches from before that mark get 410 Gone on the next restart, as after etcd's compaction.
- ``ca.crt``, ``serving.crt``, ``serving.key``: the same CA, so a running client's TLS stays valid.
- ``token``, ``signing.key``: the admin token and the key ServiceAccount tokens are signed with.
- ``port``: the port the kubeconfig names, taken again unless another is asked for.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import IO, Any

from .store import Event, Key, Store
from .tls import ServingCert, make_serving_cert


class StateDir:
    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self.path.chmod(0o700)  # keys and every object, Secrets included
        self.journal = self.path / "journal.jsonl"
        self._out: IO[str] | None = None

    def _secret(self, name: str, make: Any) -> bytes:
        file = self.path / name
        if not file.exists():
            tmp = file.with_suffix(".tmp")
            tmp.write_bytes(make())
            tmp.chmod(0o600)
            tmp.replace(file)
        return file.read_bytes()

    def serving_cert(self) -> ServingCert:
        files = ("ca.crt", "serving.crt", "serving.key")
        if not all((self.path / f).exists() for f in files):
            cert = make_serving_cert()
            for name, data in zip(files, (cert.ca_pem, cert.cert_pem, cert.key_pem), strict=True):
                self._secret(name, lambda data=data: data)
        ca, cert_pem, key = (self._secret(f, bytes) for f in files)
        return ServingCert(ca_pem=ca, cert_pem=cert_pem, key_pem=key)

    def token(self) -> str:
        return self._secret("token", lambda: secrets.token_hex(16).encode()).decode()

    def signing_key(self) -> bytes:
        return self._secret("signing.key", lambda: secrets.token_bytes(32))

    def port(self, asked: int) -> int:
        file = self.path / "port"
        return asked or (int(file.read_text()) if file.exists() else 0)

    def remember_port(self, port: int) -> None:
        (self.path / "port").write_text(str(port))

    def restore(self, store: Store) -> bool:
        """Replay the journal into ``store``; False when there is none (a first start)."""
        if not self.journal.exists():
            return False
        with self.journal.open() as lines:
            for line in lines:
                if not line.endswith("\n"):
                    break  # a write cut short by a kill: it was never answered
                entry = json.loads(line)
                if "compacted" in entry:
                    store.compacted(int(entry["compacted"]))
                    continue
                key: Key = (entry["key"][0], entry["key"][1])
                store.replay(key, Event(int(entry["rv"]), entry["type"], entry["obj"]))
        return True

    def record(self, store: Store) -> None:
        """Compact the journal to the current objects, then append every write from now on."""
        tmp = self.journal.with_suffix(".tmp")
        with tmp.open("w") as out:
            out.write(json.dumps({"compacted": store.rv}) + "\n")
            for key, obj in store.everything():
                out.write(_line(key, Event(int(obj["metadata"]["resourceVersion"]), "ADDED", obj)))
        tmp.chmod(0o600)
        tmp.replace(self.journal)
        self._out = self.journal.open("a")
        store.listeners.insert(0, self._append)

    def _append(self, key: Key, event: Event) -> None:
        # Called under the store's lock, before anyone is told: what a client hears of is on disk.
        assert self._out is not None
        self._out.write(_line(key, event))
        self._out.flush()

    def close(self) -> None:
        if self._out is not None:
            self._out.close()


def _line(key: Key, event: Event) -> str:
    return json.dumps({"key": list(key), "rv": event.rv, "type": event.type, "obj": event.obj},
                      separators=(",", ":")) + "\n"
