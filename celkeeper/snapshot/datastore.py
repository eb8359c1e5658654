"""The synced data store: how the informer shares cached cluster objects with the workers.

    store = DataStore(state.data)          # informer: the only writer
    store.apply([Put(obj), Delete(obj)])   # one transaction (a batch of watch events)
    store.retain(gvk, keys)                # after a (re)list: drop what the list no longer has
    write_inventory(path, objects)         # offline: a store holding exactly these objects

A SQLite file in WAL mode (format in celkeeper.cel.inventory): the informer writes, the workers' engines
open it read-only and read it lazily per request, each request in one read transaction (a consistent
view that a concurrent write does not change). Nothing is copied per snapshot or per worker: an update
costs one small transaction whatever the number of objects, and the file's pages are shared by every
process through the OS page cache (each reader adds a small page cache of its own). The store is a
cache rebuilt from the API server: nothing is synced to disk (synchronous=OFF); the server's state
directory starts empty.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import orjson

from celkeeper.cel.inventory import FORMAT, SCHEMA, Change, Delete, Gvk, Put, object_row
from celkeeper.model import JsonValue

__all__ = ["DataStore", "Delete", "Put", "write_inventory"]


class DataStore:
    """The writer. Use it from one thread."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=OFF")
        with self._transaction():
            for statement in SCHEMA:
                self._db.execute(statement)
            self._db.execute("INSERT OR REPLACE INTO meta VALUES ('format', ?)", (FORMAT,))
        self._kinds: dict[Gvk, int] = {
            Gvk.of(api_version, kind): kind_id
            for kind_id, api_version, kind in self._db.execute("SELECT id, api_version, kind FROM kinds")
        }

    @contextlib.contextmanager
    def _transaction(self) -> Any:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def _kind_id(self, gvk: Gvk) -> int:
        found = self._kinds.get(gvk)
        if found is None:
            cursor = self._db.execute(
                "INSERT INTO kinds (api_version, kind) VALUES (?, ?)", (gvk.api_version, gvk.kind)
            )
            found = self._kinds[gvk] = int(cursor.lastrowid or 0)
        return found

    def apply(self, changes: Iterable[Change]) -> int:
        """Write a batch of changes in one transaction; how many were written (objects without a
        kind or name are skipped)."""
        written = 0
        with self._transaction():
            for change in changes:
                row = object_row(change.object)
                if row is None:
                    continue
                gvk, namespace, name = row
                kind_id = self._kind_id(gvk)
                if isinstance(change, Put):
                    self._db.execute(
                        "INSERT OR REPLACE INTO objects VALUES (?, ?, ?, ?)",
                        (kind_id, namespace, name, orjson.dumps(change.object)),
                    )
                else:
                    self._db.execute(
                        "DELETE FROM objects WHERE kind_id = ? AND namespace = ? AND name = ?",
                        (kind_id, namespace, name),
                    )
                written += 1
        return written

    def retain(self, gvk: Gvk, keys: Iterable[tuple[str, str]]) -> int:
        """Delete the objects of a kind whose (namespace, name) is not in `keys` (what a complete list
        no longer has, e.g. deleted while no informer watched); how many were deleted."""
        kind_id = self._kinds.get(gvk)
        if kind_id is None:
            return 0
        wanted = set(keys)
        stored = self._db.execute(
            "SELECT namespace, name FROM objects WHERE kind_id = ?", (kind_id,)
        ).fetchall()
        gone = [(kind_id, ns, name) for ns, name in stored if (ns, name) not in wanted]
        if gone:
            with self._transaction():
                self._db.executemany(
                    "DELETE FROM objects WHERE kind_id = ? AND namespace = ? AND name = ?", gone
                )
        return len(gone)

    def drop(self, gvk: Gvk) -> int:
        """Delete every object of a kind (no longer synced)."""
        kind_id = self._kinds.get(gvk)
        if kind_id is None:
            return 0
        with self._transaction():
            cursor = self._db.execute("DELETE FROM objects WHERE kind_id = ?", (kind_id,))
        return cursor.rowcount

    def counts(self) -> dict[Gvk, int]:
        by_id = {v: k for k, v in self._kinds.items()}
        return {
            by_id[kind_id]: n
            for kind_id, n in self._db.execute("SELECT kind_id, count(*) FROM objects GROUP BY kind_id")
            if kind_id in by_id
        }

    def size(self) -> tuple[int, int]:
        """Bytes on disk: the database, and its write-ahead log."""
        sizes = []
        for suffix in ("", "-wal"):
            try:
                sizes.append(os.stat(f"{self.path}{suffix}").st_size)
            except OSError:
                sizes.append(0)
        return sizes[0], sizes[1]

    def checkpoint(self) -> None:
        """Fold the write-ahead log into the database and empty it (SQLite also folds it every 1,000
        pages, without emptying it)."""
        self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def settle(self) -> None:
        """Leave WAL mode (a store no one writes any more: readers then need no shared-memory file)."""
        self._db.execute("PRAGMA journal_mode=DELETE")

    def close(self) -> None:
        self._db.close()


def write_inventory(path: Path, objects: Iterable[Mapping[str, JsonValue]]) -> Path:
    """A new store at `path` holding exactly `objects` (the offline tools' inventory); closed, so
    that an engine can open it."""
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f"{path}{suffix}")
    store = DataStore(path)
    try:
        store.apply(Put(o) for o in objects)
        store.settle()
    finally:
        store.close()
    return path
