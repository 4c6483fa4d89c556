"""The confinement of the programs that read tenants' files (helmop.infra.confine), held by the kernel: a Python
started inside it (through its ELF loader, the one program it may execute) tries what a hostile build would,
and each attempt fails; the same attempts outside it succeed, so each case can fail."""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from helmop.infra import confine

pytestmark = pytest.mark.skipif(confine.landlock_abi() < 1, reason="this kernel offers no Landlock")


def _interpreter(executable: str) -> str:
    """The ELF loader a dynamically linked program names (PT_INTERP), or the program itself."""
    data = Path(executable).read_bytes()
    phoff, = struct.unpack_from("<Q", data, 0x20)
    size, count = struct.unpack_from("<HH", data, 0x36)
    for i in range(count):
        kind, _, offset, _, _, filesz = struct.unpack_from("<IIQQQQ", data, phoff + i * size)
        if kind == 3:
            return data[offset:offset + filesz].rstrip(b"\0").decode()
    return executable


PYTHON = os.path.realpath(sys.executable)
LOADER = _interpreter(PYTHON)
# what the interpreter itself reads: its own installation and the system's libraries
RUNTIME = sorted({os.path.realpath(p) for p in (sys.base_prefix, sys.prefix, "/lib", "/usr/lib", "/lib64",
                                                 "/usr/lib64") if os.path.isdir(p)})


def attempt(tmp_path: Path, code: str, *, confined: bool = True, readable: Path | None = None) -> str:
    """What ``code`` prints when run by a Python inside the confinement (reading ``readable`` only) or outside."""
    (tmp_path / "code").mkdir(exist_ok=True)
    script = tmp_path / "code" / "attempt.py"
    script.write_text(textwrap.dedent(code))
    folders = [*RUNTIME, str(script.parent), str(readable or tmp_path)]
    args = [PYTHON, "-I", "-S", str(script)] if LOADER != PYTHON else ["-I", "-S", str(script)]
    line = confine.command(LOADER, args, read=folders, data_limit=1 << 30, confined=confined)
    done = subprocess.run(line, capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


TRY = """
try:
    {}
    print("done")
except OSError as exc:
    print(type(exc).__name__)
"""


def test_files_outside_the_given_folders_cannot_be_read_even_through_a_link(tmp_path: Path) -> None:
    inside = tmp_path / "repo"
    inside.mkdir()
    (inside / "mine.yaml").write_text("mine")
    secret = tmp_path / "token"
    secret.write_text("operator's token")
    (inside / "link").symlink_to(secret)
    for path, confined, said in ((secret, True, "PermissionError"), (inside / "link", True, "PermissionError"),
                                 (inside / "mine.yaml", True, "done"), (secret, False, "done")):
        code = TRY.format(f"open({str(path)!r}).read()")
        assert attempt(tmp_path, code, confined=confined, readable=inside) == said, (path, confined)
    assert attempt(tmp_path, TRY.format("open('/etc/hostname').read()"), readable=inside) == "PermissionError"


def test_nothing_can_be_written_not_even_inside(tmp_path: Path) -> None:
    code = TRY.format(f"open({str(tmp_path / 'new')!r}, 'w').write('x')")
    assert attempt(tmp_path, code) == "PermissionError"
    assert attempt(tmp_path, code, confined=False) == "done"


def test_no_other_program_can_be_executed(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    helper = tmp_path / "git"
    helper.write_text(f"#!/bin/sh\ntouch {marker}\n")
    helper.chmod(0o755)
    code = TRY.format(f"import os; os.execv({str(helper)!r}, ['git'])")
    assert attempt(tmp_path, code) == "PermissionError" and not marker.exists()
    attempt(tmp_path, code, confined=False)
    assert marker.exists()


@pytest.mark.parametrize("family", ["AF_INET", "AF_INET6", "AF_UNIX", "AF_NETLINK"])
def test_no_socket_can_be_opened(tmp_path: Path, family: str) -> None:
    code = TRY.format(f"import socket; socket.socket(socket.{family}, socket.SOCK_DGRAM)")
    assert attempt(tmp_path, code) == "PermissionError"
    assert attempt(tmp_path, code, confined=False) == "done"


def test_no_connection_reaches_a_listener_on_loopback(tmp_path: Path) -> None:
    """The name lookup and the connection a remote base would need: neither happens. A connection made would
    wait in the listener's backlog after the attempt ended: none does."""

    def connected(server: socket.socket) -> bool:
        try:
            server.accept()[0].close()
            return True
        except BlockingIOError:
            return False

    with socket.create_server(("127.0.0.1", 0)) as server:
        server.setblocking(False)
        code = TRY.format(f"import socket; socket.create_connection(('127.0.0.1', {server.getsockname()[1]}))")
        assert attempt(tmp_path, code) == "PermissionError" and not connected(server)
        assert attempt(tmp_path, TRY.format("import socket; socket.getaddrinfo('example.com', 443)")) in (
            "PermissionError", "gaierror")
        assert attempt(tmp_path, code, confined=False) == "done" and connected(server)


def test_the_launcher_runs_nothing_it_cannot_confine(tmp_path: Path) -> None:
    """A confinement the kernel refuses to set up (here: a folder to grant that is not there) runs nothing,
    rather than the program unconfined."""
    marker = tmp_path / "ran"
    line = confine.command("/usr/bin/touch", [str(marker)], read=[str(tmp_path / "absent")], data_limit=1 << 30)
    done = subprocess.run(line, capture_output=True, text=True, timeout=60)
    assert done.returncode == confine.UNCONFINABLE and "cannot be confined" in done.stderr
    assert not marker.exists()
    assert subprocess.run(confine.command("/usr/bin/touch", [str(marker)], read=[str(tmp_path / "absent")],
                                          data_limit=1 << 30, confined=False)).returncode == 0 and marker.exists()
