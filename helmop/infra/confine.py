"""A confined start for the programs that read a tenant's files (kustomize): the process may read only the
folders it is given, execute only its own program, and open no socket, whatever the files ask of it.

Run as ``python -I -S confine.py [--read DIR]... --data-limit BYTES -- PROGRAM ARGS...`` (``command`` builds
that line): it sets the limits on itself and then executes the program, which inherits them and cannot lift
them. The boundary is the kernel's, not a reading of the files:

* Landlock (Linux >= 5.13) for the file system: reads beneath the given folders only, nothing written, and
  no program executed but ``PROGRAM``; from its ABI 4, no TCP bind or connect; from ABI 6, no signal to and
  no abstract UNIX socket of a process outside the confinement. A host file (a ServiceAccount token, the
  operator's cache) or a git helper is out of reach even when a kustomization names it in a spelling no
  check of its text foresaw.
* a seccomp filter: ``socket()`` (and io_uring, which can open sockets without it) fails with EACCES, so
  no connection of any protocol is attempted, DNS included. Chosen over a network namespace, which needs
  privileges the operator's pod does not have (CAP_SYS_ADMIN, or user namespaces that the container
  runtime's default seccomp profile refuses); both Landlock and seccomp filters are open to any process.
* ``no_new_privs``, required by both: nothing executed gains privileges (setuid bits are ignored).

The file runs with ``-I -S`` before the program replaces it: it imports nothing of helmop's, and only
standard-library modules that come with the interpreter.
"""

from __future__ import annotations

import argparse
import ctypes
import errno
import os
import platform
import resource
import struct
import sys

# Landlock's system calls have the same numbers on every architecture.
_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2

# File-system rights, by the ABI that introduced them (the kernel refuses a right it does not know).
_FS_RIGHTS = {1: 0x1FFF, 2: 0x3FFF, 3: 0x7FFF, 5: 0xFFFF}  # EXECUTE .. MAKE_SYM, +REFER, +TRUNCATE, +IOCTL_DEV
_EXECUTE, _READ_FILE, _READ_DIR = 1 << 0, 1 << 2, 1 << 3
_NET_TCP = 0x3  # BIND_TCP | CONNECT_TCP, ABI 4
_SCOPES = 0x3  # ABSTRACT_UNIX_SOCKET | SIGNAL, ABI 6

# seccomp: the architecture each filter is for, and the numbers of the calls it refuses there.
_ARCHES = {"x86_64": (0xC000003E, (41, 425)), "aarch64": (0xC00000B7, (198, 425))}  # socket, io_uring_setup
_X32_BIT = 0x40000000  # x86_64's x32 calls: refused whole
UNCONFINABLE = 125  # the exit status when the kernel cannot confine the program (it did not run)


class ConfinementError(Exception):
    """The kernel cannot confine the program (no Landlock, or an architecture without a filter here)."""


def landlock_abi() -> int:
    """The Landlock ABI this kernel offers (0: none, or disabled)."""
    if not sys.platform.startswith("linux"):
        return 0
    libc = ctypes.CDLL(None, use_errno=True)
    version = libc.syscall(_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    return max(int(version), 0)


def command(program: str, args: list[str], *, read: list[str], data_limit: int, confined: bool = True) -> list[str]:
    """The command line that runs ``program args`` confined to reading ``read`` (folders), its data segment
    limited to ``data_limit`` bytes; with ``confined`` false, only limited."""
    line = [sys.executable, "-I", "-S", os.path.abspath(__file__), "--data-limit", str(data_limit)]
    for folder in read:
        line += ["--read", folder]
    return [*line, *([] if confined else ["--unconfined"]), "--", program, *args]


def _fail(what: str) -> ConfinementError:
    code = ctypes.get_errno()
    return ConfinementError(f"{what}: {os.strerror(code)}")


def _landlock(libc: ctypes.CDLL, abi: int, program: str, read: list[str]) -> None:
    fs_rights = _FS_RIGHTS[max(v for v in _FS_RIGHTS if v <= abi)]
    # struct landlock_ruleset_attr {u64 handled_access_fs, handled_access_net, scoped}: its size says the ABI
    attr = struct.pack("=QQQ", fs_rights, _NET_TCP if abi >= 4 else 0, _SCOPES if abi >= 6 else 0)
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    ruleset = libc.syscall(_CREATE_RULESET, ctypes.c_char_p(attr[:size]), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        raise _fail("landlock_create_ruleset")
    grants = [(folder, _READ_FILE | _READ_DIR) for folder in read] + [(program, _EXECUTE | _READ_FILE)]
    for path, rights in grants:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        try:
            # struct landlock_path_beneath_attr {u64 allowed_access; s32 parent_fd} (packed)
            rule = struct.pack("=Qi", rights, fd)
            if libc.syscall(_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.c_char_p(rule), ctypes.c_uint32(0)) < 0:
                raise _fail(f"landlock_add_rule {path}")
        finally:
            os.close(fd)
    if libc.syscall(_RESTRICT_SELF, ruleset, ctypes.c_uint32(0)) < 0:
        raise _fail("landlock_restrict_self")
    os.close(ruleset)


def _bpf(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def _seccomp(libc: ctypes.CDLL) -> None:
    machine = platform.machine()
    if machine not in _ARCHES:
        raise ConfinementError(f"no seccomp filter for the {machine} architecture")
    arch, refused = _ARCHES[machine]
    load, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06  # BPF_LD|W|ABS, BPF_JMP|JEQ|K, BPF_JMP|JGE|K, BPF_RET|K
    allow, deny = 0x7FFF0000, 0x00050000 | errno.EACCES  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO
    checks = [_bpf(jeq, len(refused) - i, 0, nr) for i, nr in enumerate(refused)]
    program = [_bpf(load, 0, 0, 4),  # seccomp_data.arch
               _bpf(jeq, 1, 0, arch), _bpf(ret, 0, 0, deny),  # another architecture's calls: refused
               _bpf(load, 0, 0, 0),  # seccomp_data.nr
               _bpf(jge, len(checks) + 1, 0, _X32_BIT), *checks,
               _bpf(ret, 0, 0, allow), _bpf(ret, 0, 0, deny)]
    filters = ctypes.create_string_buffer(b"".join(program))
    # struct sock_fprog {unsigned short len; struct sock_filter *filter}
    fprog = struct.pack("HxxxxxxP", len(program), ctypes.addressof(filters))
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.c_char_p(fprog), 0, 0) != 0:
        raise _fail("seccomp")


def confine(program: str, read: list[str]) -> None:
    """Confine this process (and what it executes) as the module says."""
    libc = ctypes.CDLL(None, use_errno=True)
    abi = landlock_abi()
    if abi < 1:
        raise ConfinementError("this kernel offers no Landlock (Linux 5.13 or later with landlock among its "
                               "security modules, and a container seccomp profile that allows its calls)")
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise _fail("no_new_privs")
    _landlock(libc, abi, program, read)
    _seccomp(libc)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="confine")
    parser.add_argument("--read", action="append", default=[])
    parser.add_argument("--data-limit", type=int, required=True)
    parser.add_argument("--unconfined", action="store_true")
    parser.add_argument("program", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    program = args.program[1:] if args.program[:1] == ["--"] else args.program
    # Go reserves address space it never touches: a limit of the data segment, not of the address space.
    resource.setrlimit(resource.RLIMIT_DATA, (args.data_limit, args.data_limit))
    if not os.access(program[0], os.X_OK):
        print(f"helmop: {program[0]} is not an executable file", file=sys.stderr)
        return 127
    try:
        if not args.unconfined:
            confine(program[0], args.read)
    except (ConfinementError, OSError) as exc:
        print(f"helmop: the build cannot be confined: {exc}", file=sys.stderr)
        return UNCONFINABLE
    try:
        os.execv(program[0], program)
    except OSError as exc:
        print(f"helmop: {program[0]} could not be started in the confinement: {exc}", file=sys.stderr)
    return 126


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
