"""The informer (celkeeper.informer.loop): publishes only on change, continues generations, puts a vanished
snapshot back."""

from __future__ import annotations

import os
from pathlib import Path

from celkeeper.informer import FolderSource, Informer
from celkeeper.settings import Settings
from celkeeper.snapshot import (
    SnapshotStore,
    StateDir,
)
from tests.support.policyfiles import CONSTRAINT, OBJECT, TEMPLATE, write


def test_informer_publishes_only_on_change_and_continues_generations(tmp_path: Path) -> None:
    policies = tmp_path / "policies"
    write(policies / "template.yaml", TEMPLATE)
    write(policies / "objects" / "pod.yaml", OBJECT)  # not a policy: left out of the snapshot
    state = StateDir(tmp_path / "state")
    state.reset()
    informer = Informer(FolderSource(policies), state, Settings(), validate=False)
    first = informer.step()
    assert first is not None and first.generation == 1
    assert [os.path.basename(i.name) for i in first.items] == ["template.yaml"]
    assert informer.step() is None
    write(policies / "constraint.yaml", CONSTRAINT)
    second = informer.step()
    assert second is not None and second.generation == 2
    # a restarted informer continues from the published generation
    restarted = Informer(FolderSource(policies), state, Settings(), validate=False)
    assert restarted.step() is None
    write(policies / "constraint.yaml", CONSTRAINT.replace("demo", "other"))
    third = restarted.step()
    assert third is not None and third.generation == 3


def test_informer_puts_a_vanished_snapshot_back(tmp_path: Path) -> None:
    write(tmp_path / "p" / "template.yaml", TEMPLATE)
    state = StateDir(tmp_path / "state")
    state.reset()
    informer = Informer(FolderSource(tmp_path / "p"), state, Settings(), validate=False)
    informer.step()
    state.snapshot.unlink()
    assert informer.step() is None
    assert SnapshotStore(state.snapshot).read()[1].generation == 1
