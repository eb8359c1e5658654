"""Publishing and reading snapshots through the file system, atomically.

The informer writes the whole snapshot to a temporary file in the same directory and renames it
over `snapshot.json` (os.replace): a reader opens either the old file or the new one, never a
half-written one, and keeps reading the file it opened even if it is replaced meanwhile. Every
publication makes a new inode, so (inode, mtime, size) from one stat() tells a worker cheaply
whether there is something new.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from celkeeper.localfiles import Stamp, stamp_of, write_atomic
from celkeeper.snapshot.contents import Snapshot


class SnapshotReadError(Exception):
    """The published snapshot could not be read (vanished, unreadable, corrupt)."""


class StateDir:
    """The files one server shares between its master, informer and workers.

        <root>/snapshot.json     the current snapshot (informer writes, workers read)
        <root>/informer.json     the informer's status (pid, generation published, problems)
        <root>/workers/<pid>.json  each worker's status (generation loaded, readiness)
        <root>/metrics/          prometheus_client multiprocess files
        <root>/data.db           synced cluster data (informer writes, workers' engines read)
        <root>/data.json         what is synced, kind by kind, and how fresh (informer writes)
        <root>/server/           the master's and workers' markers (<pid>.up, <pid>.retire)
        <root>/tmp/              Gunicorn's worker heartbeat files when /dev/shm is not writable

    It is the one place celkeeper writes to (a read-only root filesystem needs only this folder to be
    writable, e.g. an emptyDir volume).
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.snapshot = root / "snapshot.json"
        self.informer = root / "informer.json"
        self.workers = root / "workers"
        self.metrics = root / "metrics"
        self.server = root / "server"
        self.tmp = root / "tmp"
        self.data = root / "data.db"
        self.data_status = root / "data.json"

    def reset(self) -> None:
        """Start clean: no snapshot, statuses, metrics or synced data left from an earlier server."""
        self.root.mkdir(parents=True, exist_ok=True)
        for path in (self.snapshot, self.informer, self.data_status):
            path.unlink(missing_ok=True)
        for suffix in ("", "-wal", "-shm"):
            Path(f"{self.data}{suffix}").unlink(missing_ok=True)
        for directory in (self.workers, self.metrics, self.server, self.tmp):
            shutil.rmtree(directory, ignore_errors=True)
            directory.mkdir()


class SnapshotStore:
    def __init__(self, path: Path) -> None:
        self.path = path

    def publish(self, snapshot: Snapshot) -> None:
        write_atomic(self.path, snapshot.to_json())

    def stamp(self) -> Stamp | None:
        """Identity of the current file (None when there is none): changes with every publication."""
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return stamp_of(st)

    def read(self) -> tuple[Stamp, Snapshot]:
        """The current snapshot and the stamp of exactly the file that was read."""
        try:
            with open(self.path, "rb") as f:
                st = os.fstat(f.fileno())
                data = f.read()
        except OSError as err:
            raise SnapshotReadError(f"cannot read {self.path}: {err.strerror or err}") from err
        try:
            snapshot = Snapshot.from_json(data)
        except ValueError as err:
            raise SnapshotReadError(f"{self.path} is not a valid snapshot: {err}") from err
        return stamp_of(st), snapshot

    def latest(self) -> Snapshot | None:
        """The current snapshot, or None when there is none or it cannot be read."""
        try:
            return self.read()[1]
        except SnapshotReadError:
            return None
