"""SOPS decryption (helmop.sources.decryption): files the real sops wrote (the folder HELMOP_SOPS_FILES names),
files the tests' own encryptor writes for age and OpenPGP keys in every store, OpenPGP keys of every shape
Debian's gpg makes with their data keys wrapped by gpg itself (several encryption subkeys; an expired or revoked
one beside a valid one), and what is refused: a value changed or moved, a foreign key, a cloud KMS, Shamir groups,
keys and documents past their bounds."""

from __future__ import annotations

import base64
import json
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pysequoia
import pytest
import yaml
from pysequoia.packet import PacketPile, Tag

from helmop.api.sources import parse_config_sync
from helmop.sources.build import Builder
from helmop.sources.buildcache import BuildOutputs
from helmop.sources.decryption import openpgp, sops, stores
from helmop.sources.decryption.keys import MAX_ENTRY, KeyInvalid, Keys
from helmop.sources.decryption.repository import Decryptor
from helmop.sources.errors import SourceError
from helmop.sources.kustomize import Kustomize
from helmop.sources.trees import TreeArtifact
from tests.sops import STAMP, GpgKey, Sops, age_identity, armor_age, gpg_keys, packet, pgp_key
from tests.tools import tool

SHARED = os.environ.get("HELMOP_SOPS_FILES", "")
needs_shared = pytest.mark.skipif(not SHARED, reason="HELMOP_SOPS_FILES (a folder of files made by the real "
                                                     "sops) is not set: .ci/run sets it when it has them")
SECRET = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db", "namespace": "shop"},
          "stringData": {"password": "hunter2-very-secret", "port": 5432}}


def decrypt(data: bytes | str, fmt: stores.Format, keys: Keys) -> bytes:
    raw = data.encode() if isinstance(data, str) else data
    return Decryptor(keys).file(raw, fmt, "file")


@needs_shared
@pytest.mark.parametrize(("name", "fmt", "plain"), [
    ("format.enc.yaml", stores.Format.YAML, b"foo: bar\n"),
    ("format.enc.json", stores.Format.JSON, b'{\n\t"foo": "bar"\n}\n'),
    ("format.enc.env", stores.Format.DOTENV, b"foo = bar\n"),
    ("format.enc.ini", stores.Format.INI, b"[foo]\nbar = baz\n\n"),
    ("comments.enc.yaml", stores.Format.YAML, b"lorem: ipsum\ndolor: sit\n"),
])
def test_files_the_real_sops_wrote_decrypt_with_their_mac(name: str, fmt: stores.Format, plain: bytes) -> None:
    keys = Keys.of_entries({"test.asc": (Path(SHARED) / "sops_functional_tests_key.asc").read_bytes()}, "test")
    data = (Path(SHARED) / name).read_bytes()
    assert decrypt(data, fmt, keys) == plain
    assert stores.detect(data) is fmt or fmt is stores.Format.YAML
    # one character of the MAC's ciphertext changed: refused
    tampered = re.sub(rb"(mac[\"\s:=]+ENC\[AES256_GCM,data:)(.)", lambda m: m[1] + (b"B" if m[2] == b"A" else b"A"),
                      data, count=1)
    assert tampered != data
    with pytest.raises(SourceError, match="not decrypted"):
        decrypt(tampered, fmt, keys)


@pytest.fixture(scope="module")
def age() -> tuple[str, str]:
    return age_identity()


@pytest.fixture(scope="module")
def pgp() -> tuple[str, object]:
    return pgp_key()


def age_keys(identity: str) -> Keys:
    return Keys.of_entries({"team.agekey": f"# created by the test\n{identity}\n".encode()}, "Secret shop/keys")


def test_age_and_openpgp_in_every_store(age: tuple[str, str], pgp: tuple[str, object]) -> None:
    both = Sops(age=[age[1]], pgp=[pgp[1]])  # type: ignore[list-item]
    for keys in (age_keys(age[0]), Keys.of_entries({"key.asc": pgp[0].encode()}, "Secret shop/keys")):
        decrypted = yaml.safe_load(decrypt(both.yaml(SECRET), stores.Format.YAML, keys))
        assert decrypted == SECRET
        assert json.loads(decrypt(both.json(SECRET), stores.Format.JSON, keys)) == SECRET
        assert decrypt(both.dotenv({"USER": "app", "PASSWORD": "p@ss=word\nline"}), stores.Format.DOTENV,
                       keys) == b"USER=app\nPASSWORD=p@ss=word\\nline\n"
        assert decrypt(both.binary(b"raw \x01 bytes"), stores.Format.BINARY, keys) == b"raw \x01 bytes"


@pytest.fixture(scope="module")
def gpg() -> Iterator[dict[str, GpgKey]]:
    """One key of each shape gpg users have, made by gpg (--quick-gen-key, --quick-add-key)."""
    shapes = ("primary-only", "primary-and-subkey", "subkey-only")
    with gpg_keys(*shapes) as keys:
        yield dict(zip(shapes, keys, strict=True))


def pkesk_ids(armored: str) -> list[str]:
    """The key ids a message's PKESK packets name (lower-case hex; zeros: a hidden recipient)."""
    return [bytes(p.body)[1:9].hex() for p in PacketPile.from_bytes(armored.encode()) if p.tag == Tag.PKESK]


@pytest.mark.parametrize(("shape", "encrypted_to"), [("primary-only", 0), ("primary-and-subkey", 1),
                                                     ("subkey-only", 1)])
def test_keys_gpg_made_decrypt_what_gpg_encrypted_for_them(gpg: dict[str, GpgKey], shape: str,
                                                          encrypted_to: int) -> None:
    """SOPS's pgp entry names the primary's fingerprint; gpg wraps the data key for the key it chooses (the
    newest encryption subkey, else the primary): whichever it is, its secret key decrypts, as with gpg. A key whose
    primary can encrypt and that has an encryption subkey (Flux's own test key) is the case Sequoia's one
    decryptor per certificate misses."""
    key = gpg[shape]
    text = Sops(gpg=[key], regex="^(data|stringData)$").yaml(SECRET)
    entry = yaml.safe_load(text)["sops"]["pgp"][0]
    assert entry["fp"] == key.fingerprint
    assert pkesk_ids(entry["enc"]) == [key.key_ids()[encrypted_to]]  # gpg chose this one
    assert len(key.gpg("--decrypt", data=entry["enc"].encode())) == 32  # gpg opens it with the same key
    keys = Keys.of_entries({"team.asc": key.secret()}, "Secret shop/keys")
    assert [k.key_id for k in keys.pgp] == key.key_ids()
    assert yaml.safe_load(decrypt(text, stores.Format.YAML, keys)) == SECRET
    # gpg --export-secret-subkeys (the primary's secret kept offline): the subkey alone still decrypts
    if encrypted_to:
        only_subkeys = Keys.of_entries({"team.asc": key.secret(subkeys_only=True)}, "Secret shop/keys")
        assert yaml.safe_load(decrypt(text, stores.Format.YAML, only_subkeys)) == SECRET
    # the MAC is still checked
    with pytest.raises(SourceError, match="MAC does not match"):
        decrypt(text.replace("name: db", "name: dc", 1), stores.Format.YAML, keys)


def test_every_key_of_an_entry_is_tried_for_the_one_gpg_named(gpg: dict[str, GpgKey]) -> None:
    """One .asc entry holding three keys; files for each of them, for a hidden recipient (gpg tries every secret
    key then), and for a key the entry does not hold (named in the refusal by SOPS's fingerprint)."""
    both = b"".join(key.secret() for key in gpg.values())
    keys = Keys.of_entries({"all.asc": both}, "Secret shop/keys")
    for key in gpg.values():
        assert yaml.safe_load(decrypt(Sops(gpg=[key]).yaml(SECRET), stores.Format.YAML, keys)) == SECRET
    hidden = yaml.safe_load(Sops(gpg=[gpg["primary-and-subkey"]]).yaml(SECRET))
    hidden["sops"]["pgp"][0]["enc"] = gpg["primary-and-subkey"].encrypt(b"x", hidden=True)  # a wrong data key
    assert pkesk_ids(hidden["sops"]["pgp"][0]["enc"]) == ["0" * 16]
    with pytest.raises(SourceError, match="32-byte data key"):  # opened: by trying each key, as gpg does
        decrypt(yaml.safe_dump(hidden), stores.Format.YAML, keys)
    only_one = Keys.of_entries({"one.asc": gpg["primary-only"].secret()}, "Secret shop/keys")
    with pytest.raises(SourceError, match=f"pgp {gpg['subkey-only'].fingerprint}.*Secret shop/keys"):
        decrypt(Sops(gpg=[gpg["subkey-only"]]).yaml(SECRET), stores.Format.YAML, only_one)


def test_a_named_key_that_cannot_decrypt_says_why() -> None:
    """gpg asks for a passphrase, and decrypts with expired and revoked keys; helmop has no one to ask, and
    Sequoia's decryptor takes only keys valid now (pysequoia offers no other time or policy): the refusal says
    which of the keys it holds, and why: for an expired one, when it expired."""
    with gpg_keys("primary-and-subkey", passphrase="pass-phrase-1") as (locked,):
        text = Sops(gpg=[locked]).yaml(SECRET)
        keys = Keys.of_entries({"k.asc": locked.secret("pass-phrase-1")}, "Secret shop/keys")
        with pytest.raises(SourceError, match=f"{locked.key_ids()[1].upper()} is held but cannot decrypt: its secret "
                                              "is protected by a passphrase") as refused:
            decrypt(text, stores.Format.YAML, keys)
        assert "pass-phrase-1" not in str(refused.value)
    with gpg_keys("subkey-only", when="20200101T000000", expire="1d") as (expired,):
        key = Keys.of_entries({"k.asc": expired.secret()}, "Secret shop/keys")
        old = yaml.safe_load(Sops(age=[age_identity()[1]]).yaml(SECRET))
        old["sops"]["pgp"] = [{"fp": expired.fingerprint, "created_at": "2020-01-01T00:00:00Z",
                               "enc": expired.encrypt(b"k" * 32, when="20200101T000000")}]
        with pytest.raises(SourceError, match=f"{expired.key_ids()[1].upper()} is held but cannot decrypt: it "
                                              r"expired on 2020-01-02 00:00 UTC; gpg \(and so Flux's SOPS\) still "
                                              "decrypts with an expired key"):
            decrypt(yaml.safe_dump(old), stores.Format.YAML, key)
    with gpg_keys("primary-only") as (revoked,):
        text = Sops(gpg=[revoked]).yaml(SECRET)  # encrypted before the key was revoked
        revoked.revoke()
        key = Keys.of_entries({"k.asc": revoked.secret()}, "Secret shop/keys")
        with pytest.raises(SourceError, match=f"{revoked.key_ids()[0].upper()} is held but cannot decrypt: it is "
                                              "revoked"):
            decrypt(text, stores.Format.YAML, key)


def gpg_file(key: GpgKey, to: str, when: str = "") -> str:
    """A SOPS file (Flux's usual regex) whose data key gpg wrapped for ``key``'s subkey ``to`` alone (--recipient
    KEYID!), gpg's clock at ``when``; one pgp entry, naming the primary's fingerprint as SOPS does."""
    writer = Sops(regex="^(data|stringData)$")
    doc = yaml.safe_load(writer.yaml(SECRET))
    doc["sops"]["pgp"] = [{"created_at": STAMP, "fp": key.fingerprint,
                           "enc": key.encrypt(writer.key, to=to, when=when)}]
    return yaml.safe_dump(doc)


def wrapped_for(text: str) -> list[str]:
    """The key ids the pgp entry of a SOPS file (YAML) names."""
    return pkesk_ids(yaml.safe_load(text)["sops"]["pgp"][0]["enc"])


def test_a_key_with_several_encryption_subkeys_decrypts_for_each() -> None:
    """Two cv25519 encryption subkeys and an RSA one: gpg encrypts to the newest, and to an older one when told
    (--recipient KEYID!); whichever the message names, its secret subkey decrypts, as with gpg."""
    with gpg_keys("several-subkeys") as (key,):
        ids = key.key_ids()
        keys = Keys.of_entries({"team.asc": key.secret()}, "Secret shop/keys")
        assert [k.key_id for k in keys.pgp] == ids and len(ids) == 4
        text = Sops(gpg=[key], regex="^(data|stringData)$").yaml(SECRET)
        assert len(wrapped_for(text)) == 1 and wrapped_for(text)[0] in ids[1:]  # gpg chose one of them
        assert yaml.safe_load(decrypt(text, stores.Format.YAML, keys)) == SECRET
        for subkey in ids[1:]:
            told = gpg_file(key, subkey)
            assert wrapped_for(told) == [subkey]
            assert yaml.safe_load(decrypt(told, stores.Format.YAML, keys)) == SECRET
        with pytest.raises(SourceError, match="MAC does not match"):
            decrypt(told.replace("name: db", "name: dc", 1), stores.Format.YAML, keys)


def test_expired_subkeys_beside_a_valid_one() -> None:
    """A key made in 2020 whose first two encryption subkeys expired a day and two days later, its third never: gpg
    now encrypts to the valid one, which decrypts. A file gpg wrapped in 2020 for an expired one is refused, naming
    that subkey and when it expired: gpg still decrypts it, but Sequoia's decryptor takes only keys valid now
    (pysequoia offers no other time or policy), so helmop cannot. Two expired: whatever order the certificate
    lists its subkeys in, one of them is not the last."""
    with gpg_keys("expired-subkey", when="20200101T000000") as (key,):
        _primary, *expired, valid = key.key_ids()
        assert [key.validity(k) for k in expired] == ["e", "e"] and key.validity(valid) not in ("e", "r")
        keys = _the_valid_one_decrypts(key, valid)
        for subkey, day in zip(expired, ("02", "03"), strict=True):
            old = gpg_file(key, subkey, when="20200101T120000")
            assert wrapped_for(old) == [subkey]
            assert len(key.gpg("--decrypt", data=yaml.safe_load(old)["sops"]["pgp"][0]["enc"].encode())) == 32
            with pytest.raises(SourceError, match=f"{subkey.upper()} is held but cannot decrypt: it expired on "
                                                  f"2020-01-{day} 00:00 UTC") as refused:
                decrypt(old, stores.Format.YAML, keys)
            assert valid.upper() not in str(refused.value)


def _the_valid_one_decrypts(key: GpgKey, valid: str) -> Keys:
    """The key's entry: what gpg encrypts now (for ``valid``) decrypts with it, its MAC checked."""
    keys = Keys.of_entries({"team.asc": key.secret()}, "Secret shop/keys")
    text = Sops(gpg=[key], regex="^(data|stringData)$").yaml(SECRET)
    assert wrapped_for(text) == [valid]
    assert yaml.safe_load(decrypt(text, stores.Format.YAML, keys)) == SECRET
    with pytest.raises(SourceError, match="MAC does not match"):
        decrypt(text.replace("name: db", "name: dc", 1), stores.Format.YAML, keys)
    return keys


def test_revoked_subkeys_beside_a_valid_one() -> None:
    """A key whose first two encryption subkeys were revoked after a file was encrypted for each: gpg now encrypts
    to the third, which decrypts; a file for a revoked one is refused naming it (gpg would still decrypt it). Two
    revoked: whatever order the certificate lists its subkeys in, one of them is not the last."""
    with gpg_keys("revoked-subkey") as (key,):
        _primary, *revoked, valid = key.key_ids()
        old = {subkey: gpg_file(key, subkey) for subkey in revoked}
        for subkey in revoked:
            key.revoke_subkey(subkey)
        keys = _the_valid_one_decrypts(key, valid)
        for subkey, file in old.items():
            assert len(key.gpg("--decrypt", data=yaml.safe_load(file)["sops"]["pgp"][0]["enc"].encode())) == 32
            with pytest.raises(SourceError, match=f"{subkey.upper()} is held but cannot decrypt: it is "
                                                  "revoked") as refused:
                decrypt(file, stores.Format.YAML, keys)
            assert valid.upper() not in str(refused.value)


def test_a_v6_key_is_named_by_its_fingerprint() -> None:
    """An RFC 9580 (v6) key, made by Sequoia: its messages' PKESK packets (version 6) name the encryption subkey
    by its fingerprint, and the file decrypts with that key alone; another v6 key is not tried."""
    armored, cert = pgp_key(profile=pysequoia.Profile.RFC9580)
    text = Sops(pgp=[cert], regex="^(data|stringData)$").yaml(SECRET)
    pkesks = [bytes(p.body) for p in PacketPile.from_bytes(yaml.safe_load(text)["sops"]["pgp"][0]["enc"].encode())
              if p.tag == Tag.PKESK]
    keys = Keys.of_entries({"v6.asc": armored.encode()}, "Secret shop/keys")
    assert [body[:1] for body in pkesks] == [b"\x06"]
    assert pkesks[0][3:3 + 32].hex() in [k.fingerprint for k in keys.pgp if len(k.fingerprint) == 64]
    assert yaml.safe_load(decrypt(text, stores.Format.YAML, keys)) == SECRET
    other = Keys.of_entries({"other.asc": pgp_key(profile=pysequoia.Profile.RFC9580)[0].encode()}, "Secret shop/keys")
    with pytest.raises(SourceError, match=f"pgp {cert.fingerprint.upper()}"):
        decrypt(text, stores.Format.YAML, other)


def test_a_wrapped_key_for_too_many_hidden_recipients_is_passed_over(gpg: dict[str, GpgKey]) -> None:
    """Hidden recipients name no key: each is tried with every secret key. Past 64 attempts a wrapped key is
    passed over before any private-key operation, with a note; a later master key the keys open still decrypts
    the file, as SOPS tries each in turn."""
    key = gpg["primary-and-subkey"]
    packets = list(PacketPile.from_bytes(key.encrypt(b"k" * 32, hidden=True).encode()))
    pkesk = next(bytes(p) for p in packets if p.tag == Tag.PKESK)
    message = pkesk * 40 + b"".join(bytes(p) for p in packets if p.tag != Tag.PKESK)
    writer = Sops(gpg=[key])
    doc = yaml.safe_load(writer.yaml(SECRET))
    doc["sops"]["pgp"][0]["enc"] = pysequoia.armor(message, pysequoia.ArmorKind.Message)
    keys = Keys.of_entries({"k.asc": key.secret()}, "Secret shop/keys")
    started = time.monotonic()
    with pytest.raises(SourceError, match=r"40 recipients.*2 OpenPGP keys.*more than 64 attempts"):
        decrypt(yaml.safe_dump(doc), stores.Format.YAML, keys)
    assert time.monotonic() - started < 2
    doc["sops"]["pgp"].append({**doc["sops"]["pgp"][0], "enc": key.encrypt(writer.key)})
    assert yaml.safe_load(decrypt(yaml.safe_dump(doc), stores.Format.YAML, keys)) == SECRET


def esk(version: int = 3) -> bytes:
    """A PKESK packet's body for a hidden recipient (its key material one octet)."""
    return bytes([version]) + bytes(8) + b"\x01\x00\x08\xff" if version == 3 else b"\x06\x00\x01\x00\x08\xff"


@pytest.mark.parametrize(("message", "said"), [
    (packet(1, esk()) + packet(18, b"\x01sealed"), None),
    (b"\x84\x0d" + esk() + b"\xd2\x07\x01sealed", None),  # the legacy format, one-octet lengths
    (packet(1, esk(6)) * 64 + b"\xd2" + b"\xe1\x01\x02" + b"\x03" + b"sea", None),  # a partial body length
    (packet(1, esk()) + b"\xcb\x06b" + bytes(5), "not an OpenPGP encrypted message"),  # literal data
    (packet(1, esk()) + packet(8, b"\x02x"), "not an OpenPGP encrypted message"),  # compressed
    (packet(18, b"\x01sealed"), "not an OpenPGP encrypted message"),  # no session key
    (packet(1, esk()) * 65 + packet(18, b"\x01"), "more than 64 encrypted session keys"),
    (b"\xc1\xe1" + esk() + packet(18, b"\x01"), "not an OpenPGP encrypted message"),  # an ESK in parts
    (packet(1, esk()) + packet(18, b"\x01") + packet(8, b"\x02x"), "packets follow its encrypted data"),
    (packet(1, esk()) + packet(18, b"\x01sealed")[:-2], "ends inside a packet"),
    (b"\x40" + packet(18, b""), "does not start an OpenPGP packet"),
])
def test_a_wrapped_key_is_read_by_its_packet_headers(message: bytes, said: str | None) -> None:
    armored = pysequoia.armor(message, pysequoia.ArmorKind.Message).encode()
    if said is None:
        assert openpgp.encrypted_message(armored)[0] == message
        assert openpgp.encrypted_message(armored.replace(b"\n\n", b"\nComment: made by hand\n\n", 1))[0] == message
        return
    with pytest.raises(openpgp.FramingError, match=said):
        openpgp.encrypted_message(armored)


def test_flux_usual_regex_leaves_metadata_in_clear_and_still_binds_it(age: tuple[str, str]) -> None:
    """encrypted_regex ^(data|stringData)$: apiVersion, kind and metadata stay readable, and are in the MAC."""
    text = Sops(age=[age[1]], regex="^(data|stringData)$").yaml(SECRET)
    written = yaml.safe_load(text)
    assert written["metadata"]["name"] == "db" and written["stringData"]["password"].startswith("ENC[")
    assert yaml.safe_load(decrypt(text, stores.Format.YAML, age_keys(age[0]))) == SECRET
    renamed = text.replace("name: db", "name: other", 1)
    with pytest.raises(SourceError, match="MAC does not match"):
        decrypt(renamed, stores.Format.YAML, age_keys(age[0]))


def test_a_value_moved_to_another_key_does_not_decrypt(age: tuple[str, str]) -> None:
    doc = yaml.safe_load(Sops(age=[age[1]]).yaml({"a": "first", "b": "second"}))
    doc["a"], doc["b"] = doc["b"], doc["a"]
    with pytest.raises(SourceError, match="changed, or moved"):
        decrypt(yaml.safe_dump(doc), stores.Format.YAML, age_keys(age[0]))


def test_a_file_for_other_keys_names_them_and_nothing_else(age: tuple[str, str]) -> None:
    other = age_identity()
    text = Sops(age=[other[1]]).yaml(SECRET)
    with pytest.raises(SourceError) as refused:
        decrypt(text, stores.Format.YAML, age_keys(age[0]))
    assert other[1] in str(refused.value) and "Secret shop/keys" in str(refused.value)
    assert "hunter2" not in str(refused.value) and age[0] not in str(refused.value)


@pytest.mark.parametrize(("metadata", "said"), [
    ({"kms": [{"arn": "arn:aws:kms:eu-west-1:1:key/x", "enc": "AQI="}]}, "only for AWS KMS"),
    ({"hc_vault": [{"vault_address": "https://vault", "enc": "vault:v1:x"}]}, "only for Vault/OpenBao"),
    ({"key_groups": [{"age": [{"recipient": "age1x", "enc": "x"}]}, {"age": [{"recipient": "age1y", "enc": "y"}]}],
      "shamir_threshold": 2}, r"key groups \(Shamir\)"),
    ({}, "names no key"),
])
def test_keys_helmop_does_not_use_are_refused_by_name(age: tuple[str, str], metadata: dict[str, object],
                                                      said: str) -> None:
    doc = {"foo": "ENC[AES256_GCM,data:AAAA,iv:AAAA,tag:AAAAAAAAAAAAAAAAAAAAAA==,type:str]",
           "sops": {"lastmodified": "2026-01-01T00:00:00Z", "mac": "x", **metadata}}
    with pytest.raises(SourceError, match=said):
        decrypt(yaml.safe_dump(doc), stores.Format.YAML, age_keys(age[0]))


@pytest.mark.parametrize(("entries", "said"), [
    ({"big.agekey": b"A" * (MAX_ENTRY + 1)}, "larger than"),
    ({"pq.agekey": b"AGE-SECRET-KEY-PQ-1QQQQ\n"}, "post-quantum and plugin"),
    ({"bad.agekey": b"not a key\n"}, "not an age identity"),
    ({"bad.asc": b"-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nnot a key\n-----END PGP PRIVATE KEY BLOCK-----\n"},
     "bad.asc"),
])
def test_key_entries_that_cannot_be_used_are_named(entries: dict[str, bytes], said: str) -> None:
    with pytest.raises(KeyInvalid, match=said) as refused:
        Keys.of_entries(entries, "Secret shop/keys")
    assert "Secret shop/keys" in str(refused.value)


def test_the_operators_key_folder_is_parsed_again_only_when_a_file_changed(tmp_path: Path) -> None:
    """Every reconcile of an object naming no Secret reads the folder: unchanged, the keys parsed before serve; a
    file added or removed is seen; a bad one is named (never its content) until it is fixed."""
    (tmp_path / "a.agekey").write_text(age_identity()[0] + "\n")
    (tmp_path / "README").write_text("not a key: left alone\n")
    first = Keys.of_folder(tmp_path)
    assert Keys.of_folder(tmp_path) is first and len(first.age) == 1
    (tmp_path / "b.agekey").write_text(age_identity()[0] + "\n")
    second = Keys.of_folder(tmp_path)
    assert second is not first and len(second.age) == 2
    (tmp_path / "broken.asc").write_text("-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nc2VjcmV0LXZhbHVl\n"
                                         "-----END PGP PRIVATE KEY BLOCK-----\n")
    for _ in range(2):
        with pytest.raises(KeyInvalid, match=r"the operator's key folder: broken\.asc: not an OpenPGP key") as bad:
            Keys.of_folder(tmp_path)
        assert "c2VjcmV0LXZhbHVl" not in str(bad.value) and "secret-value" not in str(bad.value)
    (tmp_path / "broken.asc").write_bytes(b"x" * (MAX_ENTRY + 1))
    with pytest.raises(KeyInvalid, match=r"broken\.asc is larger than 256 KiB"):
        Keys.of_folder(tmp_path)
    (tmp_path / "broken.asc").unlink()
    assert len(Keys.of_folder(tmp_path).age) == 2


def test_an_age_stanza_bomb_is_refused_at_once(age: tuple[str, str]) -> None:
    """A wrapped key of thousands of recipient stanzas: refused by its size before any X25519 work."""
    many = Sops(age=[age_identity()[1] for _ in range(3)])
    text = yaml.safe_load(many.yaml({"a": "b"}))
    bomb = b"age-encryption.org/v1\n" + b"".join(b"-> X25519 " + base64.b64encode(os.urandom(32)).rstrip(b"=")
                                                  + b"\n" + base64.b64encode(os.urandom(32)).rstrip(b"=") + b"\n"
                                                  for _ in range(3000)) + b"--- x\n"
    text["sops"]["age"] = [{"recipient": "age1bomb", "enc": armor_age(bomb)}]
    started = time.monotonic()
    with pytest.raises(SourceError, match="larger than 64 KiB"):
        decrypt(yaml.safe_dump(text), stores.Format.YAML, age_keys(age[0]))
    assert time.monotonic() - started < 5


def test_a_document_nested_too_deeply_is_refused(age: tuple[str, str]) -> None:
    deep: dict[str, object] = {"leaf": "x"}
    for _ in range(80):
        deep = {"d": deep}
    with pytest.raises(SourceError, match="nested more than 64"):
        decrypt(Sops(age=[age[1]]).yaml(deep), stores.Format.YAML, age_keys(age[0]))


def test_an_oversized_file_is_refused_before_it_is_read(age: tuple[str, str]) -> None:
    with pytest.raises(SourceError, match="larger than 5 MiB"):
        decrypt(b"a: " + b"x" * (5 << 20) + b"\nsops: {mac: 'ENC['}\n", stores.Format.YAML, age_keys(age[0]))


def test_yaml_is_read_as_sops_reads_it() -> None:
    """go-yaml v3: yes/on stay strings (no boolean keys), dates are times and hash as Go prints them."""
    loaded = stores.load(b"on: yes\nwhen: 2024-01-02\nn: 0x10\nsops: {lastmodified: x}\n", stores.Format.YAML)
    assert loaded.branches == [{"on": "yes", "when": "2024-01-02", "n": 16}]
    assert sops.go_bytes(loaded.branches[0]["when"]) == b"2024-01-02T00:00:00Z"
    assert sops.go_bytes(1.5e21) == b"1500000000000000000000" and sops.go_bytes(True) == b"True"
    with pytest.raises(stores.StoreError, match="twice"):
        stores.load(b"a: 1\na: 2\nsops: {}\n", stores.Format.YAML)


def test_a_repository_tree_is_decrypted_where_sops_wrote_it(age: tuple[str, str]) -> None:
    """Manifests (a plain document beside an encrypted one kept byte for byte), a secretGenerator's env and
    binary files, and a document marked to stay encrypted; what the build does not read is not decrypted."""
    writer = Sops(age=[age[1]], regex="^(data|stringData)$")
    plain_doc = b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: kept}   # a comment kept as written\n"
    kept = {**SECRET, "metadata": {"name": "raw", "annotations": {"kustomize.toolkit.fluxcd.io/decrypt": "Disabled"}}}
    files = {
        "app/kustomization.yaml": b"resources: [secret.yaml, raw.yaml]\nsecretGenerator:\n"
                                  b"- {name: env, envs: [db.env]}\n- {name: tok, files: [token=token.enc]}\n",
        "app/secret.yaml": plain_doc + b"---\n" + writer.yaml(SECRET).encode(),
        "app/raw.yaml": writer.yaml(kept).encode(),
        "app/db.env": Sops(age=[age[1]]).dotenv({"DB_USER": "app", "DB_PASS": "s3cret-env-value"}).encode(),
        "app/token.enc": Sops(age=[age[1]]).binary(b"tok-3456789").encode(),
        # another folder's file, for a key this build does not have: not read by the build, not decrypted
        "other/secret.yaml": Sops(age=[age_identity()[1]]).yaml(SECRET).encode(),
    }
    decryptor = Decryptor(age_keys(age[0]))
    out = decryptor.tree(files, ["app"])
    assert out["app/secret.yaml"].startswith(plain_doc + b"---\n")
    assert yaml.safe_load_all(out["app/secret.yaml"].decode()).__next__()["metadata"]["name"] == "kept"
    assert list(yaml.safe_load_all(out["app/secret.yaml"]))[1] == SECRET
    assert out["app/raw.yaml"] is files["app/raw.yaml"]  # marked to stay encrypted
    assert out["app/db.env"] == b"DB_USER=app\nDB_PASS=s3cret-env-value\n"
    assert out["app/token.enc"] == b"tok-3456789"
    assert out["other/secret.yaml"] is files["other/secret.yaml"]
    assert {"hunter2-very-secret", "s3cret-env-value", "tok-3456789"} <= set(decryptor.plaintexts)


async def test_a_build_applies_plaintext_and_refuses_what_it_cannot_decrypt(age: tuple[str, str],
                                                                            tmp_path: Path) -> None:
    """Through the build stage with the real kustomize: an age-encrypted Secret and an encrypted dotenv generator
    come out in plaintext (substituted after decryption, as Flux does); without spec.decryption the encrypted
    Secret is refused by name rather than applied."""
    tree = {"app/kustomization.yaml": b"resources: [secret.yaml]\nsecretGenerator:\n- {name: env, envs: [db.env]}\n",
            "app/secret.yaml": Sops(age=[age[1]], regex="^(data|stringData)$").yaml(
                {**SECRET, "stringData": {"password": "${prefix}-hunter2"}}).encode(),
            "app/db.env": Sops(age=[age[1]]).dotenv({"DB_PASS": "s3cret-env-value"}).encode()}
    outputs = BuildOutputs()
    builder = Builder(Kustomize(tool("kubectl"), tmp_path, outputs=outputs), scope="team")
    spec = parse_config_sync({"sourceRef": {"name": "x"}, "path": "app", "decryption": {"provider": "sops"},
                              "postBuild": {"substitute": {"prefix": "pre"}}})
    built = await builder.build(TreeArtifact(tree), spec, dict(spec.post_build.substitute), keys=age_keys(age[0]))
    assert (outputs.hits, outputs.misses) == (0, 0), "a build of decrypted files is never kept"
    objects = {m.name: m.obj for m in built.objects}
    assert objects["db"]["stringData"]["password"] == "pre-hunter2"
    generated = next(obj for name, obj in objects.items() if name.startswith("env-"))
    assert base64.b64decode(generated["data"]["DB_PASS"]) == b"s3cret-env-value"
    assert "s3cret-env-value" in built.plaintexts
    plain = parse_config_sync({"sourceRef": {"name": "x"}, "path": "app"})
    with pytest.raises(SourceError, match=r"Secret db is SOPS-encrypted: set spec\.decryption") as refused:
        await builder.build(TreeArtifact(tree), plain, {})
    assert refused.value.reason == "DecryptionFailed"
