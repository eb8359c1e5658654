"""A template whose synced data is not synced is not evaluated: it fails under its failurePolicy."""

from __future__ import annotations

from pathlib import Path

import pytest

from celkeeper.cel.api import Engine
from celkeeper.review import SyncedData
from celkeeper.snapshot.datastore import write_inventory
from tests.support.syncdata import (
    INGRESS,
    REQUIRES_INGRESS,
    engine_fixture,  # noqa: F401 (the fixture `engine`)
    ingress,
    messages,
    policies,
    template_yaml,
)


@pytest.mark.parametrize("failure_policy", ["Fail", "Ignore"])
def test_a_template_whose_data_is_not_synced_fails_under_its_failure_policy(
    engine: Engine, tmp_path: Path, failure_policy: str
) -> None:
    loaded = policies(engine, template_yaml(REQUIRES_INGRESS, "false", failure_policy))
    path = write_inventory(tmp_path / "data.db", [ingress("api", "dev", "b")])
    inventory = engine.open_inventory(str(path))
    got = messages(engine, loaded, ingress("web", "prod", "a"), SyncedData(inventory, frozenset()))
    if failure_policy == "Fail":
        assert got == [
            "data not synced: template k8sreads reads networking.k8s.io/v1 Ingress, which celkeeper has not "
            "synced (name it in a SyncSet or in the Config's spec.sync.syncOnly; its first list must "
            "complete)"
        ]
    else:
        assert got == []
    # no synced data at all (a folder of policies): the same
    assert messages(engine, loaded, ingress("web", "prod", "a"), None) == got
    # synced: evaluated
    assert messages(
        engine, loaded, ingress("web", "prod", "a"), SyncedData(inventory, frozenset({INGRESS}))
    ) == ["hosts: dev"]
    inventory.close()
