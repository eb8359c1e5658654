"""Synced data for the cel-python engine: the store (celkeeper.cel.inventory) read with Python's sqlite3.

Unlike the cel-go engine, which reads the store lazily, cel-python gives a template the whole of its
declared kinds as plain data, read once per request (in one read transaction, shared by every
template of the request): its cost grows with the number of objects of those kinds. cel-python is the
engine of machines without Go; its evaluation is ~200x slower than cel-go's anyway.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson

from celkeeper.cel.api import InventoryError
from celkeeper.cel.inventory import FORMAT, Gvk


class PyInventory:
    """A store opened read-only: one connection per thread that uses it."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._local = threading.local()
        self._closed = False
        if not Path(path).is_file():
            raise InventoryError(f"cannot open the synced data store {path}: no such file")
        try:
            found = self._connection().execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
        except sqlite3.Error as err:
            raise InventoryError(f"cannot read the synced data store {path}: {err}") from err
        if found is None or found[0] != FORMAT:
            raise InventoryError(
                f"the synced data store {path} has format {found[0] if found else None!r}; "
                f"this engine reads format {FORMAT!r}"
            )

    def _connection(self) -> sqlite3.Connection:
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is None:
            uri = f"file:{quote(self.path)}?mode=ro"
            db = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
            db.execute("PRAGMA query_only=1")
            self._local.db = db
        return db

    def view(self) -> PyView:
        if self._closed:
            raise InventoryError(f"the synced data store {self.path} is closed")
        return PyView(self._connection())

    def close(self) -> None:
        self._closed = True
        db = getattr(self._local, "db", None)
        if db is not None:
            db.close()
            self._local.db = None


class PyView:
    """One request's read of the store: a read transaction begun on the first read."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db
        self._begun = False

    def rows(self, kinds: Sequence[Gvk]) -> list[tuple[str, str, str, str, bytes]]:
        """(apiVersion, kind, namespace, name, body) of every object of these kinds."""
        if not self._begun:
            self._db.execute("BEGIN")
            self._begun = True
        wanted = {(k.api_version, k.kind) for k in kinds}
        ids = {
            kind_id: (api_version, kind)
            for kind_id, api_version, kind in self._db.execute("SELECT id, api_version, kind FROM kinds")
            if (api_version, kind) in wanted
        }
        if not ids:
            return []
        marks = ",".join("?" * len(ids))
        out = []
        for kind_id, namespace, name, body in self._db.execute(
            f"SELECT kind_id, namespace, name, body FROM objects WHERE kind_id IN ({marks}) "
            "ORDER BY kind_id, namespace, name",
            tuple(ids),
        ):
            api_version, kind = ids[kind_id]
            out.append((api_version, kind, namespace, name, body))
        return out

    def close(self) -> None:
        if self._begun:
            self._db.execute("ROLLBACK")
            self._begun = False


def read_data(view: PyView | None, kinds: Sequence[Gvk]) -> dict[str, Any]:
    """`data` for a template reading `kinds`: Gatekeeper's inventory shape (celkeeper.cel.inventory).
    Raises InventoryError when the store cannot be read."""
    cluster: dict[str, Any] = {}
    namespaced: dict[str, Any] = {}
    if view is not None:
        try:
            rows = view.rows(kinds)
        except sqlite3.Error as err:
            raise InventoryError(str(err)) from err
        for api_version, kind, namespace, name, body in rows:
            top = namespaced.setdefault(namespace, {}) if namespace else cluster
            top.setdefault(api_version, {}).setdefault(kind, {})[name] = orjson.loads(body)
    return {"inventory": {"cluster": cluster, "namespace": namespaced}}
