"""The synced data store: written by the informer's writer, read by both engines; a store that cannot
be read is an error."""

from __future__ import annotations

from pathlib import Path

import pytest

from celkeeper.cel import InventoryError
from celkeeper.cel.api import Engine
from celkeeper.review import SyncedData
from celkeeper.snapshot.datastore import DataStore, Delete, Put
from tests.support.syncdata import (
    INGRESS,
    NO_OTHER,
    REQUIRES_INGRESS,
    engine_fixture,  # noqa: F401 (the fixture `engine`)
    ingress,
    messages,
    policies,
    template_yaml,
)


def test_both_engines_read_what_the_writer_wrote(engine: Engine, tmp_path: Path) -> None:
    store = DataStore(tmp_path / "data.db")
    inventory = engine.open_inventory(str(tmp_path / "data.db"))
    loaded = policies(engine, template_yaml(REQUIRES_INGRESS, NO_OTHER))
    synced = SyncedData(inventory, frozenset({INGRESS}))
    mine = ingress("web", "prod", "a.example.com")
    assert messages(engine, loaded, mine, synced) == []
    store.apply([Put(ingress("api", "dev", "b")), Put(ingress("x", "qa", "c")), Put(mine)])
    assert messages(engine, loaded, mine, synced) == ["hosts: dev,prod,qa"]
    store.apply([Delete(ingress("x", "qa"))])
    assert store.retain(INGRESS, {("dev", "api")}) == 1  # what a relist no longer has
    assert messages(engine, loaded, mine, synced) == ["hosts: dev"]
    assert store.counts() == {INGRESS: 1}
    assert store.drop(INGRESS) == 1
    assert messages(engine, loaded, mine, synced) == []
    inventory.close()
    store.close()


def test_a_store_that_cannot_be_read_is_an_error(engine: Engine, tmp_path: Path) -> None:
    with pytest.raises(InventoryError):
        engine.open_inventory(str(tmp_path / "missing.db"))
    store = DataStore(tmp_path / "old.db")
    store._db.execute("UPDATE meta SET value = '0'")
    with pytest.raises(InventoryError, match="format"):
        engine.open_inventory(str(tmp_path / "old.db"))
