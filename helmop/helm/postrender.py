"""helmop's post-renderer: spec.commonMetadata and spec.postRenderers' kustomize patches, applied to
the manifests helm rendered, before helm applies them (so they are in the release's manifest too).

helm 3 runs an executable (``--post-renderer <path>``); helm 4 only a ``postrenderer/v1`` plugin
(``--post-renderer <name>``), so :func:`install_plugin` puts one into a private plugin directory. Both
run ``python -m helmop.helm.postrender <config.json>``: manifests on stdin, patched ones on stdout.

Patches are kustomize's: a YAML list is a JSON6902 patch (``jsonpatch``), a map a strategic-merge
patch (maps merge, lists of named items merge by ``name``, other lists are replaced, ``$patch: delete``
removes). Targets are Flux's selectors (:mod:`helmop.api.selectors`). Pure apart
from :func:`main` and :func:`install_plugin`.
"""

from __future__ import annotations

import copy
import hashlib
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import jsonpatch
import yaml

from helmop.api import k8syaml, yamlc
from helmop.api.selectors import parse_selector

PLUGIN = "helmop-postrender"


def _strategic(base: Any, patch: Any) -> Any:
    if isinstance(patch, dict) and isinstance(base, dict):
        if patch.get("$patch") == "delete":
            return None
        out = copy.deepcopy(base)
        for key, value in patch.items():
            if key == "$patch":
                continue
            merged = _strategic(base.get(key), value) if key in base else copy.deepcopy(value)
            if merged is None:
                out.pop(key, None)
            else:
                out[key] = merged
        return out
    if isinstance(patch, list) and isinstance(base, list) and all(isinstance(i, dict) and "name" in i
                                                                  for i in base + patch):
        out_list = [copy.deepcopy(i) for i in base]
        for item in patch:
            at = next((n for n, b in enumerate(out_list) if b.get("name") == item["name"]), None)
            if at is None:
                out_list.append(copy.deepcopy(item))
            elif item.get("$patch") == "delete":
                out_list.pop(at)
            else:
                out_list[at] = _strategic(out_list[at], item)
        return out_list
    return copy.deepcopy(patch)


HOOK = "helm.sh/hook"
NOTHING = "# helmop: nothing rendered\n"  # helm 4 refuses a post-renderer's empty output (a chart of CRDs only)


def _image_parts(image: str) -> tuple[str, str, str]:
    """(name, ":tag" or "", "@digest" or "") of an image reference (a registry's port is part of the name)."""
    rest, at, digest = image.partition("@")
    slash = rest.rfind("/")
    colon = rest.rfind(":")
    if colon > slash:
        return rest[:colon], rest[colon:], at + digest
    return rest, "", at + digest


def _new_image(image: str, rule: dict[str, str]) -> str:
    """kustomize's image transformer on one reference: newName, then digest (which wins) or newTag."""
    name, tag, digest = _image_parts(image)
    name = rule.get("newName") or name
    if rule.get("digest"):
        return f"{name}@{rule['digest']}"
    if rule.get("newTag"):
        return f"{name}:{rule['newTag']}"
    return name + tag + digest


def _images(node: Any, rules: list[dict[str, str]]) -> None:
    """Every container's image under ``node`` (any depth: pods, templates, job templates) that a rule names."""
    if isinstance(node, dict):
        for key, child in node.items():
            if key in ("containers", "initContainers", "ephemeralContainers") and isinstance(child, list):
                for container in child:
                    image = container.get("image") if isinstance(container, dict) else None
                    if isinstance(image, str):
                        rule = next((r for r in rules if r["name"] == _image_parts(image)[0]), None)
                        if rule is not None:
                            container["image"] = _new_image(image, rule)
            else:
                _images(child, rules)
    elif isinstance(node, list):
        for item in node:
            _images(item, rules)


def apply(obj: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """One rendered object with the common metadata, then the patches that select it, then the images. (Flux
    stamps the metadata last; first here, as helmop always has: a JSON6902 patch may add to the annotations
    the metadata made, and no key of the chart's survives either way.) A hook is left as rendered with the
    ``nohooks`` strategy (helm 3's way: hooks never reach a post-renderer)."""
    if config.get("strategy") == "nohooks" and HOOK in ((obj.get("metadata") or {}).get("annotations") or {}):
        return obj
    out = copy.deepcopy(obj)
    meta = out.setdefault("metadata", {})
    for field in ("labels", "annotations"):
        if config.get(field):
            meta[field] = {**(meta.get(field) or {}), **config[field]}
    for patch in config.get("patches") or []:
        body = yamlc.load(patch["patch"])
        if not (parse_selector(patch["target"], "target").matches(out) if patch.get("target")
                else isinstance(body, dict) and names(body, out)):
            continue
        out = jsonpatch.apply_patch(out, body) if isinstance(body, list) else _strategic(out, body)
    if config.get("images"):
        _images(out, config["images"])
    return out


def names(patch: dict[str, Any], obj: dict[str, Any]) -> bool:
    """Whether a strategic-merge patch without a target is for ``obj``: kustomize applies one to the object of
    its own kind and name (and group, and namespace, where it says them), not to every object."""
    meta, ours = patch.get("metadata") or {}, obj.get("metadata") or {}
    group = str(patch.get("apiVersion") or "").rpartition("/")[0]
    return (patch.get("kind"), meta.get("name")) == (obj.get("kind"), ours.get("name")) \
        and (not patch.get("apiVersion") or group == str(obj.get("apiVersion") or "").rpartition("/")[0]) \
        and (not meta.get("namespace") or meta.get("namespace") == ours.get("namespace"))


def render(text: str, config: dict[str, Any]) -> str:
    docs = [d for d in yamlc.load_all(text) if isinstance(d, dict)]
    return k8syaml.dump_all([apply(d, config) for d in docs]) if docs else NOTHING


def config_file(directory: Path, config: dict[str, Any]) -> Path:
    """The configuration as a file named by its content (so it is written once, and never changes)."""
    data = json.dumps(config, sort_keys=True).encode()
    path = directory / f"{hashlib.sha256(data).hexdigest()[:24]}.json"
    if not path.exists():
        directory.mkdir(parents=True, exist_ok=True)
        path.with_suffix(".tmp").write_bytes(data)
        path.with_suffix(".tmp").replace(path)
    return path


def install_plugin(plugins: Path) -> Path:
    """The post-renderer as a helm 4 plugin (and the executable helm 3 runs); returns the executable."""
    home = plugins / PLUGIN
    home.mkdir(parents=True, exist_ok=True)
    (home / "plugin.yaml").write_text(yaml.safe_dump({
        "apiVersion": "v1", "type": "postrenderer/v1", "name": PLUGIN, "version": "0.1.0", "runtime": "subprocess",
        "runtimeConfig": {"platformCommand": [{"command": "${HELM_PLUGIN_DIR}/postrender"}]}}))
    executable = home / "postrender"
    executable.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m helmop.helm.postrender "$@"\n')
    executable.chmod(0o755)
    return executable


def digest(directory: Path) -> str:
    """A digest of every file's path, mode and content under ``directory`` (small: a plugin)."""
    h = hashlib.sha256()
    for path in sorted(directory.rglob("*")):
        h.update(f"{path.relative_to(directory)}\0{path.lstat().st_mode:o}\0".encode())
        if path.is_file() and not path.is_symlink():
            h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def freeze(directory: Path) -> None:
    """No write permission left under ``directory`` (nor on it)."""
    for path in sorted(directory.rglob("*"), reverse=True):
        path.chmod(path.stat().st_mode & 0o555)
    directory.chmod(0o555)


def remove(*directories: Path) -> None:
    """Delete directories :func:`freeze` may have made read-only."""
    for directory in directories:
        if directory.exists():
            for path in [directory, *directory.rglob("*")]:
                if path.is_dir() and not path.is_symlink():
                    path.chmod(0o755)
            shutil.rmtree(directory, ignore_errors=True)


def main() -> None:
    config = json.loads(Path(sys.argv[1]).read_text())
    try:
        sys.stdout.write(render(sys.stdin.read(), config))
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, KeyError, IndexError, TypeError) as exc:
        # said in one line (helm passes it on into the release's status), not as a traceback
        sys.stderr.write(f"a post-renderer patch does not apply: {type(exc).__name__}: {exc}\n")
        sys.exit(1)


if __name__ == "__main__":
    main()
