"""The CustomResourceDefinitions of helmop's kinds (YAML files beside this module)."""

from __future__ import annotations

import copy
import functools
from importlib import resources
from typing import Any

import yaml

# libyaml's parser where PyYAML has it: the pure-Python one took 0.8 s for these files, and they were read again
# for each of Flux's kinds (made from them) at every operator start
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def definitions() -> list[dict[str, Any]]:
    """The CRDs, a copy the caller may change."""
    return copy.deepcopy(_read())


@functools.cache
def _read() -> list[dict[str, Any]]:
    folder = resources.files(__name__)
    return [yaml.load(f.read_text(), Loader=_LOADER) for f in sorted(folder.iterdir(), key=lambda p: p.name)
            if f.name.endswith(".yaml")]
