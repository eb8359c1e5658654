"""The informer gives back what checking the policies took (issue 29): a round that compiled them releases
the compiled programs (in Go too), the Go runtime's free memory and the library's code pages, a round
whose listing is the last one's compiles nothing, and fail-static holds as before: a template that
breaks after the release is held back, a good one is published."""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import celkeeper.policy
from celkeeper.errors import CelkeeperError
from celkeeper.informer import FolderSource, Informer
from celkeeper.native import ffi
from celkeeper.policy import PolicySet
from celkeeper.settings import Settings
from celkeeper.snapshot import Snapshot, StateDir
from tests.support.native import in_fresh_process, library_file_bytes, require_celgo
from tests.support.policyfiles import OWNER_TEMPLATE

NOT_COMPILING = OWNER_TEMPLATE.replace(
    "'owner' in object.metadata.labels", "'owner' in object.metadata.labels +"
)
REWORDED = OWNER_TEMPLATE.replace("an owner label is required", "an owner label is needed")


class Listening(FolderSource):
    """A folder source told about each publication (a PublicationListener), keeping only weak references
    to the compiled programs of the policy set it is given."""

    def __init__(self, directory: Path) -> None:
        super().__init__(directory, deletion_grace=0.0)
        self.programs: list[weakref.ref[Any]] = []
        self.library_bytes = 0  # the library's file pages resident when told (compiling done)

    def published(
        self, snapshot: Snapshot, policies: PolicySet | None, errors: Sequence[CelkeeperError]
    ) -> None:
        assert policies is not None
        self.programs = [weakref.ref(t.program) for t in policies.templates.values()]
        self.library_bytes = library_file_bytes()


def informer(tmp_path: Path, source: FolderSource) -> Informer:
    state = StateDir(tmp_path / "state")
    state.reset()
    return Informer(source, state, Settings())


def test_a_round_releases_the_programs_it_compiled(tmp_path: Path, policies: Path) -> None:
    require_celgo()
    source = Listening(policies)
    handles = ffi.load().info()["handles"]
    published = informer(tmp_path, source).step()
    assert published is not None and published.problems == ()
    assert source.programs, "the policy set had a compiled template"
    assert all(ref() is None for ref in source.programs)
    assert ffi.load().info()["handles"] == handles  # nothing the round compiled is left in the library


UNMAPPING_ROUND = r"""
import json, sys
from pathlib import Path
from tests.informer.test_loop_memory import Listening, informer
from tests.support.native import library_file_bytes

source = Listening(Path(sys.argv[1]))
assert informer(Path(sys.argv[2]), source).step() is not None
print(json.dumps({"published": source.library_bytes, "after": library_file_bytes()}))
"""


def test_a_round_unmaps_the_library_code_it_ran(tmp_path: Path, policies: Path) -> None:
    """In a fresh process, as the informer's own: what a process has mapped depends on what it ran."""
    require_celgo()
    figures = in_fresh_process(UNMAPPING_ROUND, str(policies), str(tmp_path))
    assert figures["published"] > 8 << 20  # the library's initialisation and the compiler ran
    # what stays mapped after the release is what ran since (the Go runtime's threads fault pages back);
    # without the release all that ran stays mapped
    assert figures["after"] < figures["published"] * 2 // 3


def test_an_unchanged_listing_is_not_compiled_again(
    tmp_path: Path, policies: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[int] = []
    real = celkeeper.policy.build_policy_set

    def counting(*args: Any, **kwargs: Any) -> PolicySet:
        built.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(celkeeper.policy, "build_policy_set", counting)
    it = informer(tmp_path, FolderSource(policies, deletion_grace=0.0))
    assert it.step() is not None
    checks = len(built)
    assert checks >= 1
    assert it.step() is None and it.step() is None
    assert len(built) == checks
    (policies / "template.yaml").write_text(REWORDED)
    assert it.step() is not None
    assert len(built) > checks


def test_a_template_that_breaks_after_the_release_is_held_back(tmp_path: Path, policies: Path) -> None:
    it = informer(tmp_path, FolderSource(policies, deletion_grace=0.0))
    good = it.step()
    assert good is not None and good.held == ()
    (policies / "template.yaml").write_text(NOT_COMPILING)
    held = it.step()
    assert held is not None
    assert [Path(name).name for name in held.held] == ["template.yaml"]
    assert any("keeping the last good version" in p for p in held.problems)
    text = next(i.text for i in held.items if i.name.endswith("template.yaml"))
    assert text == OWNER_TEMPLATE
    assert it.step() is None  # the same listing: the version held back stays held
    assert it.last is not None and it.last.held == held.held
    (policies / "template.yaml").write_text(REWORDED)
    fixed = it.step()
    assert fixed is not None and fixed.held == () and fixed.problems == ()
    assert next(i.text for i in fixed.items if i.name.endswith("template.yaml")) == REWORDED


def test_checking_that_failed_is_tried_again(
    tmp_path: Path, policies: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = celkeeper.policy.build_policy_set
    calls: list[int] = []

    def failing_once(*args: Any, **kwargs: Any) -> PolicySet:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("a bug")
        return real(*args, **kwargs)

    monkeypatch.setattr(celkeeper.policy, "build_policy_set", failing_once)
    it = informer(tmp_path, FolderSource(policies, deletion_grace=0.0))
    assert it.step() is not None
    status = it.record.read()
    assert status is not None
    assert any("internal error while checking policies: a bug" in p for p in status.problems)
    it.step()  # the same listing: checked again, not taken as done
    assert len(calls) == 2
