"""A Helm chart repository served over HTTP on 127.0.0.1, for tests and e2e journeys."""

from __future__ import annotations

import functools
import gzip
import http.server
import io
import os
import shutil
import subprocess
import tarfile
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

# A small chart written here with the official Jenkins chart's values interface (see its Chart.yaml).
JENKINS_STAND_IN = Path(__file__).resolve().parent / "charts" / "jenkins"


def official_jenkins_chart() -> Path:
    """The official Jenkins chart's archive, named by $HELMOP_JENKINS_CHART (.ci/run sets it when the
    CI machine has one); the calling test is skipped, with this reason, when it is not set."""
    given = os.environ.get("HELMOP_JENKINS_CHART")
    if not given:
        pytest.skip("HELMOP_JENKINS_CHART is not set: no official Jenkins chart archive to run against")
    path = Path(given)
    if not path.is_file():
        pytest.fail(f"HELMOP_JENKINS_CHART={given} is not a file")
    return path


def chart_version(archive: Path) -> str:
    """The version in a packaged chart's Chart.yaml."""
    with tarfile.open(archive) as tgz:
        member = next(m for m in tgz.getmembers() if m.name.count("/") == 1 and m.name.endswith("/Chart.yaml"))
        data = tgz.extractfile(member)
        assert data is not None
        return str(yaml.safe_load(data.read())["version"])


def tiny_chart(source: Path, values: str, data: str) -> Path:
    """A chart of one ConfigMap named after the release, with ``values`` and ``data`` (the ConfigMap's data
    block, a template): installs cost helm little, so tests can run many."""
    (source / "templates").mkdir(parents=True)
    (source / "Chart.yaml").write_text("apiVersion: v2\nname: tiny\nversion: 0.1.0\n")
    (source / "values.yaml").write_text(values)
    (source / "templates" / "cm.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n" + data)
    return source


def tar_gz(entries: dict[str, bytes], links: dict[str, str] | None = None) -> bytes:
    """A gzipped tar of exactly these entries (names unchecked, as an attacker writes them) and symlinks;
    the same bytes on every call (no timestamp: tests parametrized with it collect alike on every worker)."""
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0) as packed, tarfile.open(fileobj=packed, mode="w") as archive:
        for path, data in entries.items():
            info = tarfile.TarInfo(path)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        for path, target in (links or {}).items():
            info = tarfile.TarInfo(path)
            info.type, info.linkname = tarfile.SYMTYPE, target
            archive.addfile(info)
    return out.getvalue()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def do_GET(self) -> None:
        getattr(self.server, "paths", []).append(self.path)  # what was asked for, counted by the tests
        super().do_GET()

    def log_message(self, format: str, *args: Any) -> None:
        pass


class ChartRepo:
    """A Helm repository served over HTTP on 127.0.0.1; charts can be published while tests run."""

    def __init__(self, root: Path, source: Path, helm: str) -> None:
        self.helm = helm
        self.root = root
        self.source = source
        self.dir = root / "repo"
        self.dir.mkdir()
        handler = functools.partial(_QuietHandler, directory=str(self.dir))
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.paths = self.paths = []  # type: ignore[attr-defined]
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def publish(self, name: str, version: str, *, templates: dict[str, str] | None = None,
                values: dict[str, Any] | None = None, files: dict[str, str] | None = None, bare: bool = False) -> None:
        """Package the source chart as name@version, with some templates (or any other files, by path
        in the chart) replaced or added (``bare``: only those, none of the source chart's), and serve it."""
        work = self.root / f"build-{name}-{version}"
        shutil.copytree(self.source, work)
        if bare:
            shutil.rmtree(work / "templates")
            (work / "values.yaml").write_text("{}\n")
        chart = yaml.safe_load((work / "Chart.yaml").read_text())
        chart.update(name=name, version=version)
        (work / "Chart.yaml").write_text(yaml.safe_dump(chart))
        for file, text in {**{f"templates/{k}": v for k, v in (templates or {}).items()}, **(files or {})}.items():
            (work / file).parent.mkdir(parents=True, exist_ok=True)
            (work / file).write_text(text)
        if values is not None:
            (work / "values.yaml").write_text(yaml.safe_dump(values))
        subprocess.run([self.helm, "package", str(work), "-d", str(self.dir)], check=True, capture_output=True)
        self._index()

    def add_archive(self, archive: Path) -> None:
        """Serve an already packaged chart (such as the official Jenkins chart)."""
        shutil.copy(archive, self.dir / archive.name)
        self._index()

    def add_chart(self, directory: Path) -> None:
        """Package a chart directory as it is and serve it."""
        subprocess.run([self.helm, "package", str(directory), "-d", str(self.dir)], check=True, capture_output=True)
        self._index()

    def _index(self) -> None:
        subprocess.run([self.helm, "repo", "index", str(self.dir), "--url", self.url], check=True,
                       capture_output=True)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def restart(self) -> None:
        """Up again on the same port after :meth:`close` (a repository that was down for a while)."""
        handler = functools.partial(_QuietHandler, directory=str(self.dir))
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.server.server_address[1]), handler)
        self.server.paths = self.paths  # type: ignore[attr-defined]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
