"""The helmop command run in-process: what a verb prints (stdout, stderr) and its exit code, as a child process of
its own would give them, without starting Python and importing helmop again for each call. Tests where the process
itself is the point (signals, the environment it inherits, a verb that follows until stopped) start a child."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import threading
import traceback
from collections.abc import Iterator

from helmop.cli.main import main

_ONE_AT_A_TIME = threading.Lock()  # stdout, stderr and the environment are the process's


@contextlib.contextmanager
def _environment(env: dict[str, str]) -> Iterator[None]:
    before = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def run_cli(args: list[str], env: dict[str, str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """``helmop <args>`` with ``env`` added to the environment (and ``stdin`` as its input). A shell's completion
    request is answered by a child: argcomplete ends the process that answers it."""
    if "_ARGCOMPLETE" in env:
        return subprocess.run([sys.executable, "-m", "helmop.cli", *args], env={**os.environ, **env}, input=stdin,
                              capture_output=True, text=True, timeout=180)
    # text streams over bytes, as a process's are: a verb may read or write their .buffer
    out, err = (io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True) for _ in range(2))
    with _ONE_AT_A_TIME, _environment(env), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        before_stdin = sys.stdin
        sys.stdin = io.TextIOWrapper(io.BytesIO((stdin or "").encode()), encoding="utf-8")
        try:
            code = main(list(args))
        except SystemExit as exc:  # argparse, or a verb that exits
            code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
            if not isinstance(exc.code, int | None):
                print(exc.code, file=sys.stderr)
        except Exception:  # what a child process would have died of: its traceback, exit code 1
            traceback.print_exc()
            code = 1
        finally:
            sys.stdin = before_stdin
    return subprocess.CompletedProcess(["helmop", *args], code, _text(out), _text(err))


def _text(stream: io.TextIOWrapper) -> str:
    stream.flush()
    written = stream.buffer
    assert isinstance(written, io.BytesIO)
    return written.getvalue().decode("utf-8", "replace")
