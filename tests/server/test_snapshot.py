"""Snapshots: atomic publication, cheap change detection, worker statuses; the folder source."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from celkeeper.informer import FolderSource, Informer
from celkeeper.informer.folder import FolderSourceError
from celkeeper.settings import Settings
from celkeeper.snapshot import (
    Snapshot,
    SnapshotItem,
    SnapshotReadError,
    SnapshotStore,
    StateDir,
    WorkerBoard,
    WorkerStatus,
)
from celkeeper.snapshot.documents import DocumentCache

TEMPLATE = """\
apiVersion: templates.gatekeeper.sh/v1
kind: ConstraintTemplate
metadata:
  name: k8sdemo
spec:
  crd:
    spec:
      names:
        kind: K8sDemo
  targets:
    - target: admission.k8s.gatekeeper.sh
      code:
        - engine: K8sNativeValidation
          source:
            validations:
              - expression: "true"
"""
CONSTRAINT = """\
apiVersion: constraints.gatekeeper.sh/v1beta1
kind: K8sDemo
metadata:
  name: demo
"""
OBJECT = """\
apiVersion: v1
kind: Pod
metadata:
  name: sample
"""


def _snapshot(generation: int, *texts: str) -> Snapshot:
    items = tuple(SnapshotItem(f"f{i}.yaml", t) for i, t in enumerate(texts))
    return Snapshot(
        generation=generation, created=1000.0 + generation, source="test", synced=True, items=items
    )


def test_publication_round_trips_and_changes_the_stamp(tmp_path: Path) -> None:
    store = SnapshotStore(tmp_path / "snapshot.json")
    assert store.stamp() is None
    assert store.latest() is None
    first = _snapshot(1, TEMPLATE, CONSTRAINT)
    store.publish(first)
    stamp1, read1 = store.read()
    assert read1 == first
    assert stamp1 == store.stamp()
    store.publish(_snapshot(2, TEMPLATE))
    assert store.stamp() != stamp1
    assert store.read()[1].generation == 2


def test_a_reader_never_sees_half_a_snapshot(tmp_path: Path) -> None:
    store = SnapshotStore(tmp_path / "snapshot.json")
    big = "x" * 2_000_000  # large enough that a non-atomic write would be seen half-done
    store.publish(_snapshot(1, big))
    stop = threading.Event()
    published = [1]

    def writer() -> None:
        while not stop.is_set():
            published[0] += 1
            store.publish(_snapshot(published[0], big + str(published[0])))

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        reads = 0
        deadline = time.monotonic() + 0.5
        while time.monotonic() < deadline:
            _, snap = store.read()  # raises SnapshotReadError on a torn file
            assert snap.items[0].text.startswith(big)
            reads += 1
    finally:
        stop.set()
        thread.join()
    assert reads > 5 and published[0] > 5


def test_a_corrupt_snapshot_is_a_read_error(tmp_path: Path) -> None:
    path = tmp_path / "snapshot.json"
    path.write_text('{"format": 1, "generation": ')
    with pytest.raises(SnapshotReadError, match="not a valid snapshot"):
        SnapshotStore(path).read()
    assert SnapshotStore(path).latest() is None


def test_state_reset_clears_what_an_earlier_server_left(tmp_path: Path) -> None:
    state = StateDir(tmp_path / "state")
    state.reset()
    SnapshotStore(state.snapshot).publish(_snapshot(3, TEMPLATE))
    (state.metrics / "counter_1.db").write_bytes(b"x")
    WorkerBoard(state.workers).write(WorkerStatus(pid=1, generation=3))
    state.reset()
    assert not state.snapshot.exists()
    assert list(state.metrics.iterdir()) == []
    assert WorkerBoard(state.workers).read_all() == []


def test_worker_board_reports_the_generation_all_workers_loaded(tmp_path: Path) -> None:
    board = WorkerBoard(tmp_path)
    assert board.loaded_generation() is None
    board.write(WorkerStatus(pid=10, generation=4, ready=True))
    board.write(WorkerStatus(pid=11, generation=0))
    assert board.loaded_generation() == 0
    board.write(WorkerStatus(pid=11, generation=5, ready=True))
    assert board.loaded_generation() == 4
    board.remove(10)
    assert board.loaded_generation() == 5
    assert [s.pid for s in board.read_all()] == [11]


def test_document_cache_parses_each_text_once_and_keeps_only_policies() -> None:
    cache = DocumentCache()
    items = (
        SnapshotItem("t.yaml", TEMPLATE),
        SnapshotItem("c.yaml", CONSTRAINT),
        SnapshotItem("o.yaml", OBJECT),
    )
    docs = cache.policy_documents(items)
    assert [d.kind for d in docs.documents] == ["ConstraintTemplate", "K8sDemo"]
    assert cache.parses == 3
    cache.policy_documents(items)
    assert cache.parses == 3
    changed = (items[0], SnapshotItem("c.yaml", CONSTRAINT.replace("demo", "demo2")), items[2])
    assert [d.name for d in cache.policy_documents(changed).documents] == ["k8sdemo", "demo2"]
    assert cache.parses == 4
    broken = cache.policy_documents([SnapshotItem("b.yaml", "kind: [unclosed\n")])
    assert broken.documents == ()
    assert len(broken.errors) == 1 and "b.yaml" in str(broken.errors[0])


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_folder_source_lists_yaml_and_json_recursively_skipping_hidden(tmp_path: Path) -> None:
    _write(tmp_path / "a" / "template.yaml", TEMPLATE)
    _write(tmp_path / "a" / "constraint.yml", CONSTRAINT)
    _write(tmp_path / "b.json", '{"apiVersion": "v1", "kind": "ConfigMap"}')
    _write(tmp_path / "notes.txt", "not read")
    _write(tmp_path / ".hidden.yaml", TEMPLATE)
    _write(tmp_path / ".git" / "x.yaml", TEMPLATE)
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


def test_informer_publishes_only_on_change_and_continues_generations(tmp_path: Path) -> None:
    policies = tmp_path / "policies"
    _write(policies / "template.yaml", TEMPLATE)
    _write(policies / "objects" / "pod.yaml", OBJECT)  # not a policy: left out of the snapshot
    state = StateDir(tmp_path / "state")
    state.reset()
    informer = Informer(FolderSource(policies), state, Settings(), validate=False)
    first = informer.step()
    assert first is not None and first.generation == 1
    assert [os.path.basename(i.name) for i in first.items] == ["template.yaml"]
    assert informer.step() is None
    _write(policies / "constraint.yaml", CONSTRAINT)
    second = informer.step()
    assert second is not None and second.generation == 2
    # a restarted informer continues from the published generation
    restarted = Informer(FolderSource(policies), state, Settings(), validate=False)
    assert restarted.step() is None
    _write(policies / "constraint.yaml", CONSTRAINT.replace("demo", "other"))
    third = restarted.step()
    assert third is not None and third.generation == 3


def test_informer_puts_a_vanished_snapshot_back(tmp_path: Path) -> None:
    _write(tmp_path / "p" / "template.yaml", TEMPLATE)
    state = StateDir(tmp_path / "state")
    state.reset()
    informer = Informer(FolderSource(tmp_path / "p"), state, Settings(), validate=False)
    informer.step()
    state.snapshot.unlink()
    assert informer.step() is None
    assert SnapshotStore(state.snapshot).read()[1].generation == 1


def test_folder_source_reads_a_namespace_inventory(tmp_path: Path) -> None:
    _write(tmp_path / "policies" / "template.yaml", TEMPLATE)
    inventory = tmp_path / "namespaces"
    _write(
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
