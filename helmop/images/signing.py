"""Signing an automation's commits with the key of spec.git.commit.signingKey: OpenPGP (``git.asc`` and
``passphrase``, signed in the process by Sequoia: no gpg agent or keyring) or SSH (``identity`` and ``password``,
an OpenSSH private key, signed by ``ssh-keygen -Y sign`` in the ``git`` namespace as git does). The signature is
what git puts in a commit's ``gpgsig`` header: ``git verify-commit`` checks it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import tempfile
from pathlib import Path

import pysequoia

from helmop.api.process import minimal_env
from helmop.infra.kube import Kube
from helmop.sources.errors import SourceError
from helmop.sources.gitwrite import Sign
from helmop.sources.secrets import decoded, secret_data

TIMEOUT = 30.0
_OPENSSH = "-----BEGIN OPENSSH PRIVATE KEY-----"


async def signer(kube: Kube, namespace: str, kind: str, secret: str) -> tuple[Sign, list[str]]:
    """What signs with the key of Secret ``namespace/secret`` (``kind`` gpg or ssh), and the strings to mask."""
    data = await secret_data(kube, namespace, secret, "spec.git.commit.signingKey.secretRef")
    what = f"Secret {namespace}/{secret}"
    if kind == "ssh":
        identity, password = decoded(data, "identity"), decoded(data, "password")
        if _OPENSSH not in identity:
            raise SourceError("InvalidSigningKey", f"{what}: identity must be an OpenSSH private key ({_OPENSSH})",
                              transient=False)
        return (lambda payload: _ssh(identity, password, payload)), [password] if len(password) >= 3 else []
    armored, passphrase = decoded(data, "git.asc"), decoded(data, "passphrase")
    try:
        key = pysequoia.Tsk.from_bytes(armored.encode()).signer(passphrase or None)
    except Exception:  # Sequoia's errors are one type, whatever is wrong (the key, its passphrase)
        raise SourceError("InvalidSigningKey", f"{what}: git.asc is not an OpenPGP secret key that signs (with its "
                                               "passphrase, if it has one)", transient=False) from None

    async def sign(payload: bytes) -> str:
        made = await asyncio.to_thread(pysequoia.sign, key, payload, mode=pysequoia.SignatureMode.DETACHED)
        return bytes(made).decode()

    return sign, [passphrase] if len(passphrase) >= 3 else []


async def _ssh(identity: str, password: str, payload: bytes) -> str:
    with tempfile.TemporaryDirectory(prefix="helmop-sign-") as private:
        folder = Path(private)
        key, message = folder / "key", folder / "commit"
        key.write_text(identity if identity.endswith("\n") else identity + "\n")
        key.chmod(0o600)
        message.write_bytes(payload)
        env = minimal_env(private)
        if password:  # handed over by an askpass program reading a private file: never on a command line
            (folder / "password").write_text(password)
            (folder / "password").chmod(0o600)
            askpass = folder / "askpass"
            askpass.write_text(f"#!/bin/sh\nexec cat {folder / 'password'}\n")
            askpass.chmod(0o700)
            env.update(SSH_ASKPASS=str(askpass), SSH_ASKPASS_REQUIRE="force", DISPLAY=":0")
        await _run(["ssh-keygen", "-q", "-Y", "sign", "-n", "git", "-f", str(key), str(message)], env)
        return (folder / "commit.sig").read_text()


async def _run(args: list[str], env: dict[str, str]) -> None:
    proc = await asyncio.create_subprocess_exec(*args, env=env, stdin=asyncio.subprocess.DEVNULL,
                                                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
                                                process_group=0)
    try:
        _, err = await asyncio.wait_for(proc.communicate(), TIMEOUT)
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()
        raise
    if proc.returncode != 0:
        raise SourceError("InvalidSigningKey", "the SSH signing key could not sign (a wrong password, or not a key "
                                               f"ssh-keygen reads): {err.decode(errors='replace').strip()[:200]}",
                          transient=False)
