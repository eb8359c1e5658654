"""Snapshots published through the file system (celkeeper.snapshot.store): atomic publication, cheap change
detection, a corrupt snapshot a read error, a reset state folder."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from celkeeper.snapshot import (
    Snapshot,
    SnapshotItem,
    SnapshotReadError,
    SnapshotStore,
    StateDir,
    WorkerBoard,
    WorkerStatus,
)
from tests.support.policyfiles import CONSTRAINT, TEMPLATE


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
