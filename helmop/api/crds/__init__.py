"""The CustomResourceDefinitions of helmop's kinds (YAML files beside this module)."""

from __future__ import annotations

from importlib import resources
from typing import Any

import yaml


def definitions() -> list[dict[str, Any]]:
    folder = resources.files(__name__)
    return [yaml.safe_load(f.read_text()) for f in sorted(folder.iterdir(), key=lambda p: p.name)
            if f.name.endswith(".yaml")]
