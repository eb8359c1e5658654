"""A worker gives back the native library's code pages that loading policies mapped (issue 29: the
library's initialisation and compiler touch megabytes of its file that evaluating never uses): after a
load they are unmapped, and the worker decides as before, mapping again only what deciding uses."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from werkzeug.test import Client

from celkeeper.informer import FolderSource, Informer
from celkeeper.native import ffi
from celkeeper.settings import Settings
from celkeeper.snapshot import StateDir
from celkeeper.webhook import live
from celkeeper.webhook.app import WebhookConfig, create_app
from tests.support.native import library_file_bytes, require_celgo
from tests.support.serve import POLICIES, pod, review


def test_a_load_unmaps_the_library_code_it_ran(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    require_celgo()
    state = StateDir(tmp_path / "state")
    state.reset()
    shutil.copytree(POLICIES, tmp_path / "policies")
    mapped: list[tuple[int, int]] = []  # the library's file bytes resident before and after each release

    def recording() -> int:
        before = library_file_bytes()
        released = ffi.release_file_pages()
        mapped.append((before, library_file_bytes()))
        return released

    monkeypatch.setattr(live, "release_file_pages", recording)
    app = create_app(WebhookConfig(settings=Settings(), state=state, watch=False))
    assert Informer(FolderSource(tmp_path / "policies"), state, Settings(), validate=False).step()
    policies = app.extensions["celkeeper"]["live"]
    assert policies.refresh() is True
    assert len(mapped) == 1
    before, after = mapped[0]
    assert before > 8 << 20  # the library's initialisation and the compiler ran
    assert after < before // 4
    answer = Client(app).post(
        "/v1/admit", data=json.dumps(review(pod(labels={"team": "t"}))), content_type="application/json"
    )
    assert answer.get_json()["response"]["status"]["message"] == "[pods-need-owner] missing labels: owner"
    assert library_file_bytes() > after  # what deciding used is mapped again
