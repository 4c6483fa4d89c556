"""The CustomResourceDefinitions a chart ships in its ``crds/`` folder, read from a chart directory or
archive, for the CRD policies helm itself does not offer (Create on upgrade, CreateReplace). Pure."""

from __future__ import annotations

import tarfile
from pathlib import Path
from typing import Any

from helmop.api import yamlc


def _documents(text: str) -> list[dict[str, Any]]:
    return [d for d in yamlc.load_all(text) if isinstance(d, dict) and d.get("kind") == "CustomResourceDefinition"]


def chart_crds(chart: Path) -> list[dict[str, Any]]:
    """The CRDs of the chart itself (not of its subcharts), in file name order."""
    out: list[dict[str, Any]] = []
    if chart.is_dir():
        for file in sorted((chart / "crds").glob("*")):
            if file.suffix in (".yaml", ".yml", ".json"):
                out += _documents(file.read_text())
        return out
    with tarfile.open(chart) as archive:
        for member in sorted(archive.getmembers(), key=lambda m: m.name):
            parts = member.name.split("/")
            if len(parts) == 3 and parts[1] == "crds" and member.isfile() \
                    and parts[2].endswith((".yaml", ".yml", ".json")):
                data = archive.extractfile(member)
                if data is not None:
                    out += _documents(data.read().decode())
    return out
