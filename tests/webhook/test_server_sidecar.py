"""The master's sidecars (the informer, the metrics' collector): restarted when they die while the server
runs, reported stopped (and not restarted) once the server is stopping, even when they exit on their own
first, as on a Ctrl-C that reaches the whole process group."""

from __future__ import annotations

import logging
import time
from types import SimpleNamespace
from typing import Any

import pytest

from celkeeper.webhook.server import Sidecar

ARBITER: Any = SimpleNamespace(SIGNALS=[], LISTENERS=[], proc_name="test")  # what spawn reads of Gunicorn's


def _exit_of(sidecar: Sidecar) -> None:
    """Wait for the sidecar's child to exit and reap it as the master does."""
    deadline = time.monotonic() + 30
    while sidecar.pid and time.monotonic() < deadline:
        sidecar.reap()
        time.sleep(0.01)
    assert not sidecar.pid


def test_a_sidecar_that_exits_while_the_server_runs_is_restarted(caplog: pytest.LogCaptureFixture) -> None:
    sidecar = Sidecar("informer", lambda: 0)
    caplog.set_level(logging.INFO, logger="celkeeper.server")
    sidecar.spawn(ARBITER)
    first = sidecar.pid
    _exit_of(sidecar)
    assert "restarting it" in caplog.text
    sidecar.ensure(ARBITER)  # one that had not restarted yet is restarted at once
    assert sidecar.pid and sidecar.pid != first
    _exit_of(sidecar)


def test_a_sidecar_that_exits_once_the_server_is_stopping_is_not_restarted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sidecar = Sidecar("informer", lambda: 0)
    caplog.set_level(logging.INFO, logger="celkeeper.server")
    sidecar.spawn(ARBITER)
    pid = sidecar.pid
    sidecar.retire()
    _exit_of(sidecar)
    assert f"the informer (pid {pid}) stopped" in caplog.text
    assert "restarting" not in caplog.text
    sidecar.ensure(ARBITER)
    assert sidecar.pid == 0
