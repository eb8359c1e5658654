"""The decision export (celkeeper.webhook.export) in process: one line per violation with the documented
keys, allowed requests only when asked, a full buffer dropping and counting lines while the request path
goes on (the output blocked: a FIFO nobody reads), closing with the output blocked neither waiting for it
nor losing count of a line, a write refused (a full disk) counted as failed."""

from __future__ import annotations

import json
import os
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from celkeeper.model import Action, Result
from celkeeper.webhook import export as export_module
from celkeeper.webhook.export import DecisionExport
from tests.support.serve import pod, review

KEYS = {
    "id",
    "eventType",
    "time",
    "process",
    "pod",
    "operation",
    "user",
    "dryRun",
    "allowed",
    "resourceGroup",
    "resourceAPIVersion",
    "resourceKind",
    "resourceNamespace",
    "resourceName",
    "resourceLabels",
    "group",
    "version",
    "kind",
    "name",
    "enforcementAction",
    "message",
}
RESULTS = (
    Result("K8sLabels", "need-owner", Action.DENY, "missing owner"),
    Result("K8sLabels", "want-team", Action.WARN, "missing team"),
    Result("K8sLabels", "cost", Action.DRYRUN, "missing cost-center"),
)


class Counted:
    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.lock = threading.Lock()

    def count_export(self, result: str, lines: int) -> None:
        with self.lock:
            self.counts[result] += lines


def raw(name: str = "web", labels: dict[str, str] | None = None) -> dict[str, Any]:
    request: dict[str, Any] = review(pod(name, "team-a", labels={"app": "x", **(labels or {})}))["request"]
    return request


def lines_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_each_violation_is_one_line_with_the_documented_keys(tmp_path: Path) -> None:
    out = tmp_path / "decisions.jsonl"
    counted = Counted()
    export = DecisionExport(
        str(out), pod="celkeeper-webhook-0", counter=counted, clock=lambda: 1_800_000_000.25
    )
    request = raw()
    export.decision(request, RESULTS, allowed=False, policies=None)
    export.decision(raw("fine"), (), allowed=True, policies=None)  # not exported unless asked
    export.error(raw("late"), "the policies did not decide within 2.0 s", allowed=True)
    export.close()
    lines = lines_of(out)
    assert [set(line) for line in lines] == [KEYS] * 4
    first = lines[0]
    assert first == {
        "id": request["uid"],
        "eventType": "violation",
        "time": "2027-01-15T08:00:00.250Z",
        "process": "admission",
        "pod": "celkeeper-webhook-0",
        "operation": "CREATE",
        "user": "alice",
        "dryRun": False,
        "allowed": False,
        "resourceGroup": "",
        "resourceAPIVersion": "v1",
        "resourceKind": "Pod",
        "resourceNamespace": "team-a",
        "resourceName": "web",
        "resourceLabels": {"app": "x"},
        "group": "",
        "version": "",
        "kind": "K8sLabels",
        "name": "need-owner",
        "enforcementAction": "deny",
        "message": "missing owner",
    }
    assert [(line["eventType"], line["enforcementAction"]) for line in lines] == [
        ("violation", "deny"),
        ("violation", "warn"),
        ("violation", "dryrun"),
        ("error", ""),
    ]
    assert (
        lines[3]["message"] == "the policies did not decide within 2.0 s"
        and lines[3]["resourceName"] == "late"
    )
    assert counted.counts == {"written": 4}


def test_allowed_requests_are_exported_when_asked(tmp_path: Path) -> None:
    out = tmp_path / "decisions.jsonl"
    export = DecisionExport(str(out), allowed=True)
    export.decision(raw("fine"), (), allowed=True, policies=None)
    export.decision(raw("warned"), RESULTS[1:2], allowed=True, policies=None)
    export.close()
    assert [(line["eventType"], line["resourceName"], line["allowed"]) for line in lines_of(out)] == [
        ("allowed", "fine", True),
        ("violation", "warned", True),
    ]


def test_a_blocked_output_drops_and_counts_lines_and_never_holds_the_request_path(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # open, never read until the end: the pipe fills
    counted = Counted()
    export = DecisionExport(str(fifo), counter=counted, buffer_bytes=256 * 1024)
    sent = 20_000
    finished = threading.Event()

    def requests() -> None:
        for i in range(sent // len(RESULTS)):
            export.decision(raw(f"pod-{i}"), RESULTS, allowed=False, policies=None)
        finished.set()

    caller = threading.Thread(target=requests)
    caller.start()
    # every call returns while nothing reads the output (the writer thread is stuck in write())
    assert finished.wait(60), "the request path waited for the output"
    caller.join()
    assert export.dropped > 0 and counted.counts["dropped"] == export.dropped
    # the reader comes back: what was kept is written, each line whole
    received = bytearray()
    closer = threading.Thread(target=export.close)
    closer.start()
    while True:
        try:
            chunk = os.read(reader, 1 << 16)
        except BlockingIOError:
            if not closer.is_alive():
                break
            closer.join(0.01)
            continue
        if not chunk and not closer.is_alive():
            break
        received += chunk
    os.close(reader)
    lines = [json.loads(line) for line in bytes(received).splitlines()]
    total = sent // len(RESULTS) * len(RESULTS)
    assert len(lines) == export.written == counted.counts["written"]
    assert export.written + export.dropped == total and export.failed == 0


def test_closing_with_the_output_blocked_does_not_wait_for_it_and_counts_every_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(export_module, "CLOSE_WAIT", 0.5)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # open, never read: the pipe fills
    counted = Counted()
    export = DecisionExport(str(fifo), counter=counted)
    decisions = 2000  # 6,000 lines, ~3 MB: far more than the pipe holds, less than the buffer
    for i in range(decisions):
        export.decision(raw(f"pod-{i}"), RESULTS, allowed=False, policies=None)
    closer = threading.Thread(target=export.close)
    closer.start()
    closer.join(30)
    try:
        assert not closer.is_alive(), "close() waited for the blocked output"
        total = decisions * len(RESULTS)
        # the lines written before the pipe filled are counted as written, the rest as dropped: none is lost
        assert export.dropped > 0 and export.written + export.dropped == total and export.failed == 0
        assert (counted.counts["dropped"], counted.counts["written"]) == (export.dropped, export.written)
        assert set(counted.counts) <= {"dropped", "written"}
    finally:
        os.close(reader)  # the writer thread's write fails (EPIPE), it sees it was given up and ends
        closer.join()


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full on this system")
def test_a_refused_write_is_counted_as_failed(caplog: pytest.LogCaptureFixture) -> None:
    counted = Counted()
    export = DecisionExport("/dev/full", counter=counted)
    export.decision(raw(), RESULTS, allowed=False, policies=None)
    export.close()
    assert counted.counts == {"failed": 3} and export.written == 0
    assert "cannot export decisions to /dev/full: No space left on device" in caplog.text
