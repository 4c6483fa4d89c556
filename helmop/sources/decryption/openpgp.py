"""OpenPGP input a tenant wrote, read by its framing before Sequoia sees it, and a wrapped data key opened in a
bounded child process.

Sequoia's parsers open every container they meet: ``PacketPile.from_bytes`` inflates a compressed packet, and one
nested in it, whole; a 785-byte wrapped key of nested zlib took gigabytes before any key was checked. What helmop
reads of a wrapped key is therefore its top-level packet headers only (RFC 9580 §4.2): at most ``MAX_ESK``
encrypted session keys, then one encrypted-data packet (SEIPD or OCB) that ends the message, else it is refused;
and a key entry may hold no top-level compressed packet (no exported key does). What the encrypted data holds is
seen only once a key opens it, and it may be compressed (gpg compresses by default): a tenant can encrypt a
bomb for a key it knows. So the opening runs in a child process of helmop's own (``python -m`` this module),
given the message and the secret keys to try over a pipe (never on disk, nor in its arguments or environment),
with an address-space limit and a deadline: at most ``MEMORY`` and ``TIMEOUT`` per wrapped key."""

from __future__ import annotations

import base64
import binascii
import json
import resource
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

MAX_ESK = 64  # PKESK and SKESK packets before the encrypted data
MEMORY = 256 << 20  # the child's address space: a data key is 32 bytes, Python and Sequoia need ~30 MiB
TIMEOUT = 20.0  # seconds for one wrapped key: every attempt at it, RSA-4096 included, on a loaded machine
CHILDREN = threading.BoundedSemaphore(2)  # at once, from the builds' threads: at most twice MEMORY in all
_ANSWER = 64  # bytes of what a key opens sent back: enough to tell a 32-byte data key from anything else
PKESK, SKESK, COMPRESSED, SEIPD, OCB = 1, 3, 8, 18, 20


class FramingError(ValueError):
    """Not OpenPGP data of the expected shape (the message says what, never the content)."""


class UnwrapFailed(Exception):
    """The child did not finish within its bounds."""


def dearmor(data: bytes) -> bytes:
    """The binary of one ASCII-armored block (RFC 9580 §6.2: its header lines skipped, its checksum not needed);
    binary data (its first octet a packet tag's) as it is."""
    if data[:1] and data[0] & 0x80:
        return data
    lines = [line.strip() for line in data.strip().splitlines()]
    if len(lines) < 2 or not lines[0].startswith(b"-----BEGIN PGP ") or not lines[-1].startswith(b"-----END PGP "):
        raise FramingError("not ASCII-armored OpenPGP data")
    body = lines[1:-1]
    while body and (b":" in body[0] or not body[0]):  # armor headers ("Comment: ..."), then a blank line
        body = body[1:]
    if body and body[-1].startswith(b"=") and len(body[-1]) == 5:  # the CRC-24 checksum
        body = body[:-1]
    try:
        return base64.b64decode(b"".join(body), validate=True)
    except (binascii.Error, ValueError):
        raise FramingError("its armor is not base64") from None


def packets(data: bytes) -> Iterator[tuple[int, bytes, bool]]:
    """(tag, body, whether the body came in partial lengths) of each top-level packet of ``data``, read by their
    headers alone: nothing inside a packet is opened. Every step reads at least one octet: bounded by the size."""
    at = 0
    while at < len(data):
        first = data[at]
        if not first & 0x80:
            raise FramingError(f"octet {at} does not start an OpenPGP packet")
        if first & 0x40:  # the new format: a 6-bit tag, then lengths that may come in parts
            tag, (body, at, partial) = first & 0x3F, _new_body(data, at + 1)
        else:  # the legacy format: a 4-bit tag and a length of 1, 2 or 4 octets, or none (to the end)
            tag, size, partial = (first >> 2) & 0x0F, (1, 2, 4, 0)[first & 3], False
            length = int.from_bytes(_octets(data, at + 1, size)) if size else len(data) - at - 1
            body, at = _octets(data, at + 1 + size, length), at + 1 + size + length
        if tag == 0:
            raise FramingError("a packet of the reserved tag 0")
        yield tag, body, partial


def _octets(data: bytes, at: int, n: int) -> bytes:
    if at + n > len(data):
        raise FramingError("it ends inside a packet")
    return data[at:at + n]


def _new_body(data: bytes, at: int) -> tuple[bytes, int, bool]:
    """A new-format packet's body from its first length octet at ``at``: (body, where the next packet starts,
    whether it came in partial lengths)."""
    parts: list[bytes] = []
    while True:
        first = _octets(data, at, 1)[0]
        if first < 192:
            length, at, more = first, at + 1, False
        elif first < 224:
            length, at, more = ((first - 192) << 8) + _octets(data, at + 1, 1)[0] + 192, at + 2, False
        elif first == 255:
            length, at, more = int.from_bytes(_octets(data, at + 1, 4)), at + 5, False
        else:  # a partial body length: a power of two, then another length
            length, at, more = 1 << (first & 0x1F), at + 1, True
        parts.append(_octets(data, at, length))
        at += length
        if not more:
            return b"".join(parts), at, len(parts) > 1


def encrypted_message(message: bytes) -> tuple[bytes, list[bytes]]:
    """The binary message and its PKESK packets' bodies, if it is ESK packets (at most MAX_ESK) then one
    encrypted-data packet ending it; FramingError saying what it is not."""
    binary = dearmor(message)
    found = packets(binary)
    pkesks, esks = [], 0
    for tag, body, partial in found:
        if tag in (PKESK, SKESK) and not partial:
            esks += 1
            if esks > MAX_ESK:
                raise FramingError(f"more than {MAX_ESK} encrypted session keys")
            if tag == PKESK:
                pkesks.append(body)
            continue
        if tag not in (SEIPD, OCB) or not esks:
            raise FramingError("not an OpenPGP encrypted message")
        if next(found, None) is not None:
            raise FramingError("packets follow its encrypted data")
        return binary, pkesks
    raise FramingError("not an OpenPGP encrypted message")


def uncompressed(data: bytes) -> bytes:
    """The binary of ``data`` (armored or not), if none of its top-level packets is compressed (Sequoia would
    inflate it whole while parsing: no exported key has one)."""
    binary = dearmor(data)
    if any(tag == COMPRESSED for tag, _body, _partial in packets(binary)):
        raise FramingError("it holds a compressed packet, which no exported key has")
    return binary


@dataclass(frozen=True)
class Opened:
    key: bytes | None  # what the first key that opened the message found in it (at most _ANSWER bytes)
    refused: dict[int, str] = field(default_factory=dict)  # keys (by index) with no usable secret: "locked", "unusable"


def open_message(message: bytes, secrets: list[bytes]) -> Opened:
    """``message`` (binary, checked by :func:`encrypted_message`) opened by the first of ``secrets`` (binary
    transferable secret keys, one secret each) that can, in the bounded child; UnwrapFailed past its bounds."""
    request = json.dumps({"message": base64.b64encode(message).decode(),
                          "keys": [base64.b64encode(secret).decode() for secret in secrets]}).encode()
    try:
        with CHILDREN:
            done = subprocess.run([sys.executable, "-m", "helmop.sources.decryption.openpgp", str(MEMORY)],
                                  input=request, capture_output=True, timeout=TIMEOUT, check=False)
    except subprocess.TimeoutExpired:  # the child is killed
        raise UnwrapFailed(f"took longer than {TIMEOUT:g}s to open") from None
    try:
        answer = json.loads(done.stdout) if done.returncode == 0 else None
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        raise UnwrapFailed(f"took more than the {MEMORY >> 20} MiB it may to open (compressed data inflated?)")
    key = answer.get("key")
    return Opened(base64.b64decode(key) if isinstance(key, str) else None,
                  {int(i): str(why) for i, why in (answer.get("refused") or {}).items()})


def _child() -> None:
    """The child: cap the address space, then try each key on the message and answer one JSON object."""
    memory = int(sys.argv[1])
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    import pysequoia  # after the cap: what it allocates counts

    request = json.loads(sys.stdin.buffer.read())
    message = base64.b64decode(request["message"])
    refused: dict[int, str] = {}
    for i, secret in enumerate(request["keys"]):
        try:
            decryptor = pysequoia.Tsk.from_bytes(base64.b64decode(secret)).decryptor()
        except Exception as exc:  # Sequoia's: a secret behind a passphrase or absent, or none valid now
            said = (str(exc).splitlines() or [""])[0].lower()  # what follows may be a Rust backtrace
            refused[i] = "locked" if "secret key material is encrypted" in said else "unusable"
            continue
        try:
            opened = pysequoia.decrypt(message, decryptor=decryptor).bytes or b""
        except MemoryError:
            raise
        except Exception:  # not this key, or not a message it can read
            continue
        sys.stdout.write(json.dumps({"key": base64.b64encode(opened[:_ANSWER]).decode(), "refused": refused}))
        return
    sys.stdout.write(json.dumps({"key": None, "refused": refused}))


if __name__ == "__main__":
    _child()
