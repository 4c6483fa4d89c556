"""FileMemo: a file's result is read once while the file stays the same, again once it is replaced, and only
so many files are kept."""

from __future__ import annotations

from pathlib import Path

from helmop.infra.filememo import FileMemo


def test_a_file_is_read_again_only_once_it_changed_and_few_are_kept(tmp_path: Path) -> None:
    reads: list[str] = []

    def size(path: Path) -> int:
        reads.append(path.name)
        return len(path.read_bytes())

    memo: FileMemo[int] = FileMemo(size=2)
    a, b, c = (tmp_path / name for name in "abc")
    for path in (a, b, c):
        path.write_bytes(b"x")
    assert memo.read(a, size) == memo.read(a, size) == 1 and reads == ["a"]
    a.write_bytes(b"xyz")  # rewritten: another size and mtime
    assert memo.read(a, size) == 3 and reads == ["a", "a"]
    replaced = tmp_path / "new"
    replaced.write_bytes(b"xyz")
    replaced.replace(a)  # same size, another inode
    assert memo.read(a, size) == 3 and reads == ["a", "a", "a"]
    memo.read(b, size)
    memo.read(c, size)  # a third file: the oldest kept (a) is dropped
    memo.read(a, size)
    assert reads == ["a", "a", "a", "b", "c", "a"]
