"""cel-python's reading of the synced data store: a request reads one consistent view."""

from __future__ import annotations

from pathlib import Path

from celkeeper.cel.celpython.inventory import PyInventory, read_data
from celkeeper.snapshot.datastore import DataStore, Put
from tests.support.syncdata import (
    INGRESS,
    ingress,
)


def test_a_request_reads_one_consistent_view(tmp_path: Path) -> None:
    store = DataStore(tmp_path / "data.db")
    store.apply([Put(ingress("a", "one"))])
    view = PyInventory(str(tmp_path / "data.db")).view()
    before = read_data(view, [INGRESS])
    store.apply([Put(ingress("b", "two"))])  # written while the request reads
    assert read_data(view, [INGRESS]) == before
    view.close()
    assert set(
        read_data(PyInventory(str(tmp_path / "data.db")).view(), [INGRESS])["inventory"]["namespace"]
    ) == {"one", "two"}
