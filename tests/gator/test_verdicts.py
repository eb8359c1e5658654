"""gator.verdicts.DiskVerdicts: jsonschema's verdicts kept on disk between runs, safely and boundedly."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from celkeeper.gator import verdicts as module
from celkeeper.gator.verdicts import DiskVerdicts, cache_root


def test_an_entry_is_read_back_as_written(tmp_path: Path) -> None:
    store = DiskVerdicts(tmp_path / "v")
    assert store.get("k") is None
    store.put("k", [("spec.parameters.a", "must be of type string, not integer (1)")])
    store.put("empty", [])
    again = DiskVerdicts(tmp_path / "v")  # another run
    assert again.get("k") == [("spec.parameters.a", "must be of type string, not integer (1)")]
    assert again.get("empty") == []
    assert not [p for p in (tmp_path / "v").iterdir() if not p.name.endswith(".json")]  # no temporary left


@pytest.mark.parametrize("content", [b"", b"{not json", b'{"a": 1}', b'[["only one"]]', b"[[1, 2]]"])
def test_an_unreadable_or_malformed_entry_is_a_miss(tmp_path: Path, content: bytes) -> None:
    store = DiskVerdicts(tmp_path / "v")
    store.put("k", [])
    (entry,) = (tmp_path / "v").iterdir()
    entry.write_bytes(content)
    assert store.get("k") is None


def test_a_cache_that_cannot_be_written_costs_nothing_but_time(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    store = DiskVerdicts(blocker / "v")  # a folder cannot be made under a file
    store.put("k", [("a", "b")])
    assert store.get("k") is None


def test_other_versions_go_and_the_oldest_half_past_the_bound(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(module, "MAX_ENTRIES", 4)
    old = tmp_path / "0000"
    old.mkdir()
    (old / ("0" * 64 + ".json")).write_text("[]")
    DiskVerdicts(tmp_path / "cur").put("seed", [])
    assert not old.exists()
    store = DiskVerdicts(tmp_path / "cur")
    for i in range(6):
        store.put(f"k{i}", [])
        os.utime(store._file(f"k{i}"), ns=(i * 10**9, i * 10**9))
    os.utime(store._file("seed"), ns=(0, 0))
    DiskVerdicts(tmp_path / "cur").put("new", [])  # a run that adds entries prunes first
    kept = {p.name for p in (tmp_path / "cur").iterdir()}
    assert kept == {store._file(k).name for k in ("k4", "k5", "new")}


def test_pruning_removes_only_what_the_cache_wrote(tmp_path: Path) -> None:
    """A store in a folder given by mistake (its parent holding other things) removes none of them:
    a test once gave a pytest tmp_path, and pruning emptied every sibling test's folder."""
    beside = tmp_path / "kube0"
    beside.mkdir()
    (beside / "kubeconfig").write_text("admin")
    (tmp_path / "cafe").mkdir()  # named like a version, holding something that is not an entry
    (tmp_path / "cafe" / "notes.txt").write_text("mine")
    (tmp_path / "cur").mkdir()
    (tmp_path / "cur" / "README").write_text("mine too")
    DiskVerdicts(tmp_path / "cur").put("k", [])
    assert (beside / "kubeconfig").read_text() == "admin"
    assert (tmp_path / "cafe" / "notes.txt").read_text() == "mine"
    assert (tmp_path / "cur" / "README").read_text() == "mine too"


def test_where_the_cache_is(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CELKEEPER_CACHE_DIR", str(tmp_path))
    assert cache_root() == tmp_path
    monkeypatch.setenv("CELKEEPER_CACHE_DIR", "")
    assert cache_root() is None
    assert DiskVerdicts.default() is None
    monkeypatch.delenv("CELKEEPER_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "celkeeper"
    store = DiskVerdicts.default()
    assert store is not None and store.directory.parent == tmp_path / "xdg" / "celkeeper" / "verdicts"
