"""Every result of one audit run, kept on disk for the reports (the constraint statuses keep only a few).

    with ReportRows.temporary() as rows:       # a SQLite file in a folder of its own, removed at close
        rows.add(row)                          # as the run finds violations (any number)
        rows.namespaces()                      # then, per namespace:
        rows.counts(namespace)                 #   results per object hash (how to split it)
        rows.bucket(namespace, buckets, b)     #   one report's rows

A run can find any number of violations; the audit's memory must not grow with them (it holds one page
of objects, and the capped status lists). So the rows go to a SQLite file (synchronous off: it lives
for one run) and are read back one report at a time. Without a writable temporary folder (a read-only
root with no /tmp volume) they are kept in an in-memory database instead, and a warning says so.
"""

from __future__ import annotations

import logging
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

from celkeeper.audit.openreports import ResultRow, row_hash

log = logging.getLogger("celkeeper.audit")

BATCH = 1000
_COLUMNS = ResultRow._fields
_SCHEMA = (
    "CREATE TABLE rows (hash INTEGER NOT NULL, " + ", ".join(f"{c} TEXT NOT NULL" for c in _COLUMNS) + ")",
    "CREATE INDEX rows_namespace ON rows (namespace, hash)",
)


class ReportRows:
    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._folder: Path | None = None
        target = str(path) if path is not None else ":memory:"
        self._db = sqlite3.connect(target, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA synchronous=OFF")
        self._db.execute("PRAGMA journal_mode=OFF")
        for statement in _SCHEMA:
            self._db.execute(statement)
        self._pending: list[tuple[object, ...]] = []
        self.total = 0

    @classmethod
    def temporary(cls) -> ReportRows:
        """A store in a new temporary folder (in memory when none can be made)."""
        try:
            folder = Path(tempfile.mkdtemp(prefix="celkeeper-audit-results-"))
        except OSError as err:
            log.warning(
                "no writable temporary folder (%s): this run's results are kept in memory for the reports "
                "(mount a volume at /tmp)",
                err,
            )
            return cls(None)
        store = cls(folder / "results.db")
        store._folder = folder
        return store

    def __enter__(self) -> ReportRows:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def add(self, row: ResultRow) -> None:
        self._pending.append((row_hash(row), *row))
        self.total += 1
        if len(self._pending) >= BATCH:
            self._flush()

    def _flush(self) -> None:
        if not self._pending:
            return
        marks = ", ".join("?" * (len(_COLUMNS) + 1))
        self._db.execute("BEGIN")
        self._db.executemany(f"INSERT INTO rows VALUES ({marks})", self._pending)
        self._db.execute("COMMIT")
        self._pending = []

    def namespaces(self) -> list[str]:
        """The namespaces with results ("" for cluster-scoped objects), sorted."""
        self._flush()
        return [str(n) for (n,) in self._db.execute("SELECT DISTINCT namespace FROM rows ORDER BY namespace")]

    def counts(self, namespace: str) -> dict[int, int]:
        """Results per object hash in one namespace."""
        self._flush()
        query = "SELECT hash, count(*) FROM rows WHERE namespace = ? GROUP BY hash"
        return {int(h): int(n) for h, n in self._db.execute(query, (namespace,))}

    def bucket(self, namespace: str, buckets: int, bucket: int) -> list[ResultRow]:
        """The rows of one bucket (object hash mod `buckets`) of a namespace."""
        self._flush()
        columns = ", ".join(_COLUMNS)
        query = f"SELECT {columns} FROM rows WHERE namespace = ? AND (hash & ?) = ?"
        return [ResultRow(*r) for r in self._db.execute(query, (namespace, buckets - 1, bucket))]

    def __iter__(self) -> Iterator[ResultRow]:
        self._flush()
        columns = ", ".join(_COLUMNS)
        for r in self._db.execute(f"SELECT {columns} FROM rows ORDER BY namespace"):
            yield ResultRow(*r)

    def close(self) -> None:
        self._db.close()
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None
