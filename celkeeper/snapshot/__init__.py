"""Snapshots: how the informer process hands complete, immutable policy sources to the workers.

state = StateDir(root); state.reset()                   # master, at start
SnapshotStore(state.snapshot).publish(snapshot)         # informer: atomic (os.replace)
store.stamp() / store.read() -> (stamp, Snapshot)       # workers: cheap change check, then read
WorkerBoard(state.workers).loaded_generation()          # generation every live worker has loaded
"""

from celkeeper.localfiles import write_atomic
from celkeeper.snapshot.contents import ORIGIN_FILE, ORIGIN_OBJECT, Snapshot, SnapshotItem, digest
from celkeeper.snapshot.loadstatus import InformerRecord, InformerStatus, WorkerBoard, WorkerStatus
from celkeeper.snapshot.store import SnapshotReadError, SnapshotStore, StateDir

__all__ = [
    "ORIGIN_FILE",
    "ORIGIN_OBJECT",
    "InformerRecord",
    "InformerStatus",
    "Snapshot",
    "SnapshotItem",
    "SnapshotReadError",
    "SnapshotStore",
    "StateDir",
    "WorkerBoard",
    "WorkerStatus",
    "digest",
    "write_atomic",
]
