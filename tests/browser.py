"""The web UI as its users meet it: ``helmop ui`` as a process of its own, and Debian's chromium driven by
Playwright (its own browser download is not reachable here; scripts/setup --test installs chromium as root)."""

from __future__ import annotations

import os
import queue
import shutil
import subprocess
import sys
import threading
from pathlib import Path

CHROMIUM = os.environ.get("HELMOP_CHROMIUM") or shutil.which("chromium")
NO_CHROMIUM = "no chromium on this machine: scripts/setup --test installs Debian's as root (apt-get install chromium)"
# Without these, chromium reaches for Google's services at every start, and this machine's network refuses them.
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]
SCREENSHOTS = os.environ.get("HELMOP_UI_SCREENSHOTS", "")  # docs/assets/ui to refresh the docs' pictures


class Ui:
    """``helmop ui --port 0 ...`` until closed; ``url`` is what it printed."""

    def __init__(self, kubeconfig: Path | str, *args: str) -> None:
        env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
        self.process = subprocess.Popen([sys.executable, "-m", "helmop.cli", "ui", "--port", "0", *args], env=env,
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        lines: queue.Queue[str] = queue.Queue()
        self.output: list[str] = []

        def read() -> None:
            assert self.process.stdout is not None
            for line in self.process.stdout:
                self.output.append(line)
                lines.put(line)

        threading.Thread(target=read, daemon=True).start()
        try:
            first = lines.get(timeout=30)
        except queue.Empty:
            self.close()
            raise AssertionError(f"helmop ui did not start: {''.join(self.output)}") from None
        assert first.startswith("helmop ui: http://127.0.0.1:"), "".join(self.output)
        self.url = first.split(": ", 1)[1].strip()

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()


def screenshot_path(name: str) -> Path | None:
    return Path(SCREENSHOTS) / f"{name}.png" if SCREENSHOTS else None
