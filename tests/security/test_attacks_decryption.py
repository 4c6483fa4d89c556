"""The operator's own SOPS keys (--decryption-keys) against tenants, in both tenancy modes (see conftest).
Team B encrypts a Secret for those keys; team A copies the file into its own repository and syncs it with a
ConfigSync that names no key Secret. Without lockdown flags the operator's keys serve every namespace (Flux's
controller-wide decryption, as documented); under lockdown they serve only the namespaces an administrator lists
(--decryption-keys-namespaces; none by default), and the refusal names neither the other tenant nor a value.
Wrapped keys and key entries that are compression bombs cost a bounded time and memory, none of it the
operator's process's."""

from __future__ import annotations

import base64
import json
import resource
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pysequoia
import pytest
import yaml
from pysequoia.packet import PacketPile, Tag

from helmop.sources.decryption import openpgp, stores
from helmop.sources.decryption.keys import KeyInvalid, Keys
from helmop.sources.decryption.repository import Decryptor
from helmop.sources.errors import SourceError
from tests.controllers.conftest import GITREPO, condition, get
from tests.sops import GpgKey, Sops, age_identity, gpg_keys, packet, seipd, zeros_compressed

from .conftest import Target, configsync, gitrepository, refused, secret_forms, settled

pytestmark = pytest.mark.timeout(600)


def encrypted_secret(recipient: str, value: str) -> str:
    return Sops(age=[recipient], regex="^(data|stringData)$").yaml(
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db"}, "stringData": {"password": value}})


def syncs(target: Target, ns: str, text: str, name: str = "apps", **decryption: Any) -> None:
    """A repository of the namespace holding ``text``, and a ConfigSync of it (naming no key Secret unless
    ``decryption`` says)."""
    repo = target.repo(ns)
    repo.commit({"apps/secret.yaml": text})
    target.apply(ns, gitrepository(name, repo.url),
                 configsync(name, name, "apps", decryption={"provider": "sops", **decryption}))


def said_about(target: Target, ns: str) -> str:
    """Everything the operator wrote where the namespace's tenant reads: statuses and Events."""
    statuses = [o.get("status") for kind in ("csync", GITREPO)
                for o in get(target.kube, ns, kind)["items"]]
    return json.dumps([statuses, get(target.kube, ns, "events")["items"]])


def test_a_tenant_cannot_open_another_tenants_file_with_the_operators_keys(target: Target) -> None:
    identity, recipient = age_identity()
    (target.work / "decryption-keys" / f"platform-{uuid.uuid4().hex[:6]}.agekey").write_text(identity + "\n")
    victim, attacker = target.namespace("sops-victim"), target.namespace("sops-attacker")
    password = f"team-b-password-{uuid.uuid4().hex}"
    stolen = encrypted_secret(recipient, password)
    syncs(target, victim, stolen)
    syncs(target, attacker, stolen)  # the same file, copied
    if target.mode == "default":  # Flux's controller-wide decryption: every namespace (docs: Multi-tenancy)
        for ns in (victim, attacker):
            obj: dict[str, Any] = settled(target, ns, "csync", "apps")
            assert condition(obj)["status"] == "True", obj["status"]
            assert base64.b64decode(get(target.kube, ns, "secret", "db")["data"]["password"]).decode() == password
        return
    for ns in (attacker, victim):  # no namespace listed by the administrator: none served
        message = refused(target, ns, "csync", "apps", "DecryptionKeysNotAllowed")
        assert "apps/secret.yaml" in message and f"namespace {ns}" in message, message
        assert "spec.decryption.secretRef" in message
        assert not get(target.kube, ns, "secret", "db")
    said = said_about(target, attacker)
    assert victim not in said, "nothing names the other tenant"
    assert not [form for form in secret_forms(password) if form in said], "no form of the value"
    assert not [form for form in secret_forms(identity) if form in said + target.log()], "nor of the key"

    # the tenant's own keys, in a Secret of its namespace, still decrypt under lockdown
    own, own_recipient = age_identity()
    target.kube("kubectl", "-n", attacker, "create", "secret", "generic", "sops-keys",
                f"--from-literal=team.agekey={own}")
    mine = f"team-a-password-{uuid.uuid4().hex}"
    syncs(target, attacker, encrypted_secret(own_recipient, mine), "own", secretRef={"name": "sops-keys"})
    obj = settled(target, attacker, "csync", "own")
    assert condition(obj)["status"] == "True", obj["status"]
    assert base64.b64decode(get(target.kube, attacker, "secret", "db")["data"]["password"]).decode() == mine


SECRET = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db"}, "stringData": {"password": "p4ss"}}


@pytest.fixture(scope="module")
def gpg() -> Iterator[GpgKey]:
    with gpg_keys("primary-and-subkey") as (key,):
        yield key


def peak_rss() -> int:
    """This process's peak resident memory so far, in bytes (Linux counts KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss << 10


def with_wrapped_key(writer: Sops, message: bytes) -> bytes:
    """A file ``writer`` wrote, its wrapped data key replaced by ``message`` (binary)."""
    doc = yaml.safe_load(writer.yaml(SECRET))
    doc["sops"]["pgp"][0]["enc"] = pysequoia.armor(message, pysequoia.ArmorKind.Message)
    return yaml.safe_dump(doc).encode()


def test_a_wrapped_key_of_nested_compressed_packets_is_refused_before_it_is_inflated(gpg: GpgKey) -> None:
    """A hidden recipient (every key would be tried) then 4 GiB of zeros in three layers of zlib, 300 bytes:
    refused by its packet headers (an ESK must be followed by encrypted data), nothing inflated."""
    hidden = packet(1, b"\x03" + bytes(8) + b"\x01\x00\x08\xff")
    text = with_wrapped_key(Sops(gpg=[gpg]), hidden + zeros_compressed(4095, 3))
    assert len(text) < 4096
    keys = Keys.of_entries({"k.asc": gpg.secret()}, "Secret shop/keys")
    before, started = peak_rss(), time.monotonic()
    with pytest.raises(SourceError, match=f"pgp key for {gpg.fingerprint} is not opened: not an OpenPGP "
                                          "encrypted message"):
        Decryptor(keys).file(text, stores.Format.YAML, "secret.yaml")
    assert time.monotonic() - started < 2
    assert peak_rss() - before < 64 << 20


def test_a_bomb_encrypted_for_a_held_key_is_opened_in_a_bounded_child(gpg: GpgKey) -> None:
    """The same bomb (1 GiB of zeros) inside real encrypted data whose session key gpg wrapped for the key: only
    a key opens it, and the child that does is stopped at its memory limit: the file is refused saying so, this
    process's memory does not grow, and the keys still decrypt the next file."""
    message = gpg.encrypt(b"k" * 32)
    pkesk = next(bytes(p) for p in PacketPile.from_bytes(message.encode()) if p.tag == Tag.PKESK)
    writer, session = Sops(gpg=[gpg]), gpg.session_key(message)
    text = with_wrapped_key(writer, pkesk + seipd(session, zeros_compressed(1024, 2)))
    keys = Keys.of_entries({"k.asc": gpg.secret()}, "Secret shop/keys")
    before, started = peak_rss(), time.monotonic()
    with pytest.raises(SourceError, match=r"took more than the 256 MiB it may to open"):
        Decryptor(keys).file(text, stores.Format.YAML, "secret.yaml")
    assert time.monotonic() - started < 10
    assert peak_rss() - before < 64 << 20
    good = pkesk + seipd(session, packet(11, b"b" + bytes(5) + writer.key))  # the same, made as gpg makes it
    opened = Decryptor(keys).file(with_wrapped_key(writer, good), stores.Format.YAML, "secret.yaml")
    assert yaml.safe_load(opened) == SECRET


def test_a_key_entry_holding_compressed_data_is_refused_before_it_is_parsed() -> None:
    bomb = pysequoia.armor(zeros_compressed(4095, 3), pysequoia.ArmorKind.SecretKey)
    before, started = peak_rss(), time.monotonic()
    with pytest.raises(KeyInvalid, match=r"k\.asc: not an OpenPGP key: it holds a compressed packet"):
        Keys.of_entries({"k.asc": bomb.encode()}, "Secret shop/keys")
    assert time.monotonic() - started < 2
    assert peak_rss() - before < 64 << 20


def test_a_wrapped_key_that_takes_too_long_to_open_is_refused(gpg: GpgKey, monkeypatch: pytest.MonkeyPatch) -> None:
    """The child is killed at its deadline (here shorter than its start), and the file refused saying so."""
    monkeypatch.setattr(openpgp, "TIMEOUT", 0.01)
    keys = Keys.of_entries({"k.asc": gpg.secret()}, "Secret shop/keys")
    with pytest.raises(SourceError, match=r"took longer than 0\.01s to open: refused"):
        Decryptor(keys).file(Sops(gpg=[gpg]).yaml(SECRET).encode(), stores.Format.YAML, "secret.yaml")


def test_compression_bombs_stop_their_own_sync_and_nothing_else(target: Target, gpg: GpgKey) -> None:
    """Through the operator, in both tenancy modes: a tenant's files whose wrapped OpenPGP key is a bomb (nested
    zlib before any encrypted data; 1 GiB of zeros inside data encrypted for the tenant's own key) each stop their
    own sync with DecryptionFailed naming the file; the operator goes on: the tenant's good file applies."""
    ns = target.namespace("sops-bomb")
    target.kube("kubectl", "-n", ns, "create", "secret", "generic", "pgp-keys",
                f"--from-literal=team.asc={gpg.secret().decode()}")
    message = gpg.encrypt(b"k" * 32)
    pkesk = next(bytes(p) for p in PacketPile.from_bytes(message.encode()) if p.tag == Tag.PKESK)
    writer = Sops(gpg=[gpg], regex="^(data|stringData)$")
    bombs = {"nested": packet(1, b"\x03" + bytes(8) + b"\x01\x00\x08\xff") + zeros_compressed(4095, 3),
             "sealed": pkesk + seipd(gpg.session_key(message), zeros_compressed(1024, 2))}
    for name, bomb in bombs.items():
        syncs(target, ns, with_wrapped_key(writer, bomb).decode(), name, secretRef={"name": "pgp-keys"})
    said = {name: refused(target, ns, "csync", name, "DecryptionFailed") for name in bombs}
    assert "apps/secret.yaml" in said["nested"] and "not an OpenPGP encrypted message" in said["nested"]
    assert "apps/secret.yaml" in said["sealed"] and "took more than the 256 MiB" in said["sealed"]
    syncs(target, ns, writer.yaml(SECRET), "good", secretRef={"name": "pgp-keys"})
    obj = settled(target, ns, "csync", "good")
    assert condition(obj)["status"] == "True", obj["status"]
    assert base64.b64decode(get(target.kube, ns, "secret", "db")["data"]["password"]).decode() == "p4ss"
