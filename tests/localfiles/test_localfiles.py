"""celkeeper.localfiles.walk: the files under a folder, in a stable order, symbolic links followed once."""

from __future__ import annotations

import os
from pathlib import Path

from celkeeper.localfiles import walk


def _tree(root: Path) -> None:
    for name in (
        "b.yaml",
        "a.yaml",
        "notes.txt",
        ".hidden.yaml",
        "sub/z.yml",
        "sub/deeper/c.yaml",
        ".git/x.yaml",
    ):
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("a: 1\n")


def test_each_folders_files_sorted_then_its_folders_dot_names_skipped(tmp_path: Path) -> None:
    _tree(tmp_path)
    found = walk(str(tmp_path), (".yaml", ".yml"))
    assert [os.path.relpath(p, tmp_path) for p in found] == [
        "a.yaml",
        "b.yaml",
        "sub/z.yml",
        "sub/deeper/c.yaml",
    ]


def test_a_linked_folder_is_followed_and_a_link_loop_listed_once(tmp_path: Path) -> None:
    _tree(tmp_path / "real")
    (tmp_path / "real" / "sub" / "back").symlink_to(tmp_path / "real")  # a loop
    (tmp_path / "link").symlink_to(tmp_path / "real" / "sub")  # another way into sub
    found = [os.path.relpath(p, tmp_path) for p in walk(str(tmp_path), (".yaml", ".yml"))]
    # `link` (sorted first) is sub: its files, then `back` (real, first reached there: its files; its
    # sub, already listed, is not again), then deeper; real/ itself was listed as link/back: not again
    assert found == ["link/z.yml", "link/back/a.yaml", "link/back/b.yaml", "link/deeper/c.yaml"]


def test_an_unlistable_folder_is_reported(tmp_path: Path) -> None:
    errors: list[str] = []
    assert walk(str(tmp_path / "missing"), (".yaml",), errors) == []
    assert len(errors) == 1
    assert "missing: cannot list" in errors[0]
