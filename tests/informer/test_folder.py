"""The folder source (celkeeper.informer.folder): YAML and JSON listed recursively, hidden files skipped,
unreadable text reported, the namespace inventory read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from celkeeper.informer import FolderSource
from celkeeper.informer.folder import FolderSourceError
from tests.support.policyfiles import CONSTRAINT, OBJECT, TEMPLATE, write


def test_folder_source_lists_yaml_and_json_recursively_skipping_hidden(tmp_path: Path) -> None:
    write(tmp_path / "a" / "template.yaml", TEMPLATE)
    write(tmp_path / "a" / "constraint.yml", CONSTRAINT)
    write(tmp_path / "b.json", '{"apiVersion": "v1", "kind": "ConfigMap"}')
    write(tmp_path / "notes.txt", "not read")
    write(tmp_path / ".hidden.yaml", TEMPLATE)
    write(tmp_path / ".git" / "x.yaml", TEMPLATE)
    source = FolderSource(tmp_path, poll_interval=0.05)
    listing = source.listing()
    names = [os.path.relpath(i.name, tmp_path) for i in listing.items]
    assert names == ["a/constraint.yml", "a/template.yaml", "b.json"]
    assert listing.synced and listing.problems == ()
    again = source.listing()
    assert again == listing


def test_folder_source_reports_unreadable_text(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_bytes(b"\xff\xfe not utf-8")
    listing = FolderSource(tmp_path).listing()
    assert listing.items == () and listing.problems == ()
    (problem,) = listing.failed.values()  # the informer keeps its last good version, or reports it
    assert "bad.yaml" in problem and "UTF-8" in problem


def test_folder_source_check(tmp_path: Path) -> None:
    with pytest.raises(FolderSourceError, match="does not exist"):
        FolderSource(tmp_path / "nope").check()
    (tmp_path / "file").write_text("")
    with pytest.raises(FolderSourceError, match="not a directory"):
        FolderSource(tmp_path / "file").check()


def test_folder_source_reads_a_namespace_inventory(tmp_path: Path) -> None:
    write(tmp_path / "policies" / "template.yaml", TEMPLATE)
    inventory = tmp_path / "namespaces"
    write(
        inventory / "ns.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-a\n"
        "  labels:\n    tier: gold\n---\n" + OBJECT,
    )
    listing = FolderSource(tmp_path / "policies", namespaces=inventory).listing()
    assert list(listing.namespaces) == ["team-a"]
    assert listing.namespaces["team-a"]["metadata"]["labels"] == {"tier": "gold"}
    assert listing.namespaces_complete is False
    assert len(listing.problems) == 1 and "not a v1 Namespace" in listing.problems[0]
    assert [os.path.basename(i.name) for i in listing.items] == ["template.yaml"]
