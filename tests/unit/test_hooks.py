"""Which charts get helm's own --wait: those with post-install/post-upgrade hooks (helm runs them after its
wait), looked for in templates, helpers and subcharts, archived or not, erring towards helm's wait."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from helmop.helm.engine import UpgradeRequest, upgrade_args
from helmop.helm.hooks import needs_helm_wait

HOOK = 'metadata:\n  annotations:\n    "helm.sh/hook": {}\n    "helm.sh/hook-weight": "1"\n'


def chart(root: Path, files: dict[str, str]) -> Path:
    for name, text in {"Chart.yaml": "name: c\nversion: 0.1.0\n", **files}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def archive(path: Path, files: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


@pytest.mark.parametrize("files,waits", [
    ({"templates/deploy.yaml": "kind: Deployment\n"}, ""),
    ({"templates/job.yaml": HOOK.format("pre-install,pre-upgrade")}, ""),
    ({"templates/tests/t.yaml": HOOK.format("test")}, ""),
    ({"templates/job.yaml": HOOK.format("post-install")}, "templates/job.yaml"),
    ({"templates/job.yaml": HOOK.format('"pre-install,post-upgrade"')}, "templates/job.yaml"),
    ({"templates/_helpers.tpl": "{{- define \"x\" -}}\nhelm.sh/hook: post-upgrade\n{{- end }}"}, "_helpers.tpl"),
    # a templated or missing value may be a post hook: helm waits
    ({"templates/job.yaml": HOOK.format("{{ .Values.when }}")}, "templates/job.yaml"),
    ({"templates/job.yaml": "annotations:\n  helm.sh/hook:\n    post-install\n"}, "templates/job.yaml"),
    ({"charts/db/templates/job.yaml": HOOK.format("post-install")}, "charts/db/templates/job.yaml"),
    ({"README.md": "helm.sh/hook: post-install"}, ""),  # not a template
])
def test_post_hooks_are_found_in_a_chart_folder(tmp_path: Path, files: dict[str, str], waits: str) -> None:
    reason = needs_helm_wait(chart(tmp_path, files))
    assert (waits in reason and reason != "") if waits else reason == ""


def test_post_hooks_are_found_in_archives_and_their_subchart_archives(tmp_path: Path) -> None:
    sub = archive(tmp_path / "db.tgz", {"db/templates/job.yaml": HOOK.format("post-install").encode()})
    parent = archive(tmp_path / "app.tgz", {"app/Chart.yaml": b"name: app\n",
                                            "app/charts/db-0.1.0.tgz": sub.read_bytes()})
    assert "db/templates/job.yaml" in needs_helm_wait(parent)
    plain = archive(tmp_path / "plain.tgz", {"plain/templates/d.yaml": b"kind: Deployment\n"})
    assert needs_helm_wait(plain) == ""
    broken = archive(tmp_path / "broken.tgz", {"b/charts/x.tgz": b"not a tar"})
    assert "could not be looked into" in needs_helm_wait(broken)


def test_an_unchanged_archive_is_looked_into_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = archive(tmp_path / "app.tgz", {"app/templates/d.yaml": b"kind: Deployment\n"})
    opened: list[object] = []  # archives opened for reading
    real_open = tarfile.open
    monkeypatch.setattr(tarfile, "open", lambda *a, **kw: (len(a) == 1 and opened.append(a)) or real_open(*a, **kw))
    assert needs_helm_wait(path) == needs_helm_wait(path) == "" and len(opened) == 1
    archive(path, {"app/templates/job.yaml": HOOK.format("post-install").encode()})  # rewritten in place
    assert "templates/job.yaml" in needs_helm_wait(path) and len(opened) == 2


def test_archives_nested_too_deep_get_helms_wait(tmp_path: Path) -> None:
    inner = archive(tmp_path / "l4.tgz", {"l4/templates/d.yaml": b"kind: Deployment\n"})
    for level in (3, 2, 1, 0):
        inner = archive(tmp_path / f"l{level}.tgz", {f"l{level}/charts/sub.tgz": inner.read_bytes()})
    assert "nested too deep" in needs_helm_wait(inner)


def test_helm_waits_for_hooks_only_when_helmop_judges_readiness() -> None:
    req = UpgradeRequest("web", "apps", Path("/c.tgz"), {}, 60, wait=False)
    assert "--wait=hookOnly" in upgrade_args(req, 4)
    assert not [a for a in upgrade_args(req, 3) if a.startswith("--wait")]  # helm 3 waits for hooks always
    waiting = UpgradeRequest("web", "apps", Path("/c.tgz"), {}, 60)
    assert "--wait=watcher" in upgrade_args(waiting, 4) and "--wait" in upgrade_args(waiting, 3)


def test_a_subchart_archive_of_too_many_entries_is_not_walked_through(tmp_path: Path) -> None:
    many = archive(tmp_path / "many.tgz", {f"m/templates/f{i}.yaml": b"" for i in range(20_001)})
    parent = archive(tmp_path / "app.tgz", {"app/Chart.yaml": b"name: app\n",
                                            "app/charts/m-0.1.0.tgz": many.read_bytes()})
    assert "too large to look into" in needs_helm_wait(parent)
