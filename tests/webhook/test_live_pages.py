"""A worker gives back the native library's code pages that loading policies mapped (issue 29: the
library's initialisation and compiler touch megabytes of its file that evaluating never uses): after a
load they are unmapped, and the worker decides as before, mapping again only what deciding uses. In a
fresh process, as a worker's own: what a process has mapped of the library depends on what it ran."""

from __future__ import annotations

from pathlib import Path

from tests.support.native import in_fresh_process, require_celgo

LOAD = r"""
import json, shutil, sys
from pathlib import Path
from werkzeug.test import Client
from celkeeper.informer import FolderSource, Informer
from celkeeper.settings import Settings
from celkeeper.snapshot import StateDir
from celkeeper.webhook import live
from celkeeper.webhook.app import WebhookConfig, create_app
from tests.support.native import library_file_bytes, record_releases
from tests.support.serve import POLICIES, pod, review

root = Path(sys.argv[1])
state = StateDir(root / "state")
state.reset()
shutil.copytree(POLICIES, root / "policies")
mapped = record_releases(live)  # the library's file bytes resident before and after each release
app = create_app(WebhookConfig(settings=Settings(), state=state, watch=False))
assert Informer(FolderSource(root / "policies"), state, Settings(), validate=False).step()
assert app.extensions["celkeeper"]["live"].refresh() is True
answer = Client(app).post(
    "/v1/admit", data=json.dumps(review(pod(labels={"team": "t"}))), content_type="application/json"
)
print(json.dumps({
    "mapped": mapped,
    "message": answer.get_json()["response"]["status"]["message"],
    "after_deciding": library_file_bytes(),
}))
"""


def test_a_load_unmaps_the_library_code_it_ran(tmp_path: Path) -> None:
    require_celgo()
    figures = in_fresh_process(LOAD, str(tmp_path))
    assert len(figures["mapped"]) == 1
    ((before, after),) = figures["mapped"]
    assert before > 8 << 20  # the library's initialisation and the compiler ran
    assert after < before // 4
    assert figures["message"] == "[pods-need-owner] missing labels: owner"  # it decides as before
    assert figures["after_deciding"] > after  # what deciding used is mapped again
