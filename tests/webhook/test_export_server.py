"""The decision export in a real `celkeeper serve` (two Gunicorn workers over TLS): every violation answered
is one whole line in the file the workers append to (or on stdout), allowed requests too when asked,
each line naming the request it belongs to; /metrics counts the lines written. With the output blocked (a
FIFO nobody reads) every review is still answered, /metrics counts the lines dropped, and the server stops
without waiting for the output."""

from __future__ import annotations

import json
import os
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from celkeeper.webhook.export import BUFFER_BYTES
from tests.support.serve import POLICIES, ServeProcess, pod, review
from tests.support.waiting import wait_for

pytestmark = pytest.mark.server

# tests/support/policies: a Pod without labels breaks pods-need-owner (deny), pods-should-have-team (warn) and
# pods-should-have-cost-center (dryrun); one with all three breaks none
BARE = {}
LABELLED = {"owner": "a", "team": "b", "cost-center": "c"}
ACTIONS = {
    "pods-need-owner": "deny",
    "pods-should-have-team": "warn",
    "pods-should-have-cost-center": "dryrun",
}


@pytest.fixture
def exporting(tmp_path: Path) -> Iterator[tuple[ServeProcess, Path]]:
    out = tmp_path / "decisions.jsonl"
    server = ServeProcess(
        tmp_path,
        POLICIES,
        workers=2,
        args=["--export-decisions", str(out), "--export-allowed", "--pod-name", "webhook-7"],
    ).start()
    try:
        yield server, out
    finally:
        server.stop()


def send(server: ServeProcess, count: int) -> dict[str, dict[str, Any]]:
    """`count` reviews in parallel, every other one violating: uid -> the review sent."""
    reviews = {}
    for i in range(count):
        uid = str(uuid.uuid4())
        reviews[uid] = review(pod(f"pod-{i}", "team-a", labels=BARE if i % 2 else LABELLED), uid=uid)
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(server.admit, reviews.values()))
    assert all(status == 200 for status, _ in answers)
    return reviews


def test_every_decision_is_one_line_in_the_file_the_workers_append_to(
    exporting: tuple[ServeProcess, Path],
) -> None:
    server, out = exporting
    reviews = send(server, 200)
    violating = sum(1 for r in reviews.values() if not r["request"]["object"]["metadata"]["labels"])
    expected = violating * len(ACTIONS) + (len(reviews) - violating)

    def lines() -> list[dict[str, Any]] | None:
        text = out.read_text(encoding="utf-8") if out.exists() else ""
        found = [json.loads(line) for line in text.splitlines()]  # every line whole
        return found if len(found) >= expected else None

    found = wait_for(lines, timeout=10, interval=0.1, what=f"{expected} exported lines")
    assert found is not None and len(found) == expected
    by_uid: dict[str, list[dict[str, Any]]] = {}
    for line in found:
        by_uid.setdefault(line["id"], []).append(line)
    assert set(by_uid) == set(reviews)
    for uid, lines_of_request in by_uid.items():
        name = reviews[uid]["request"]["object"]["metadata"]["name"]
        assert {line["resourceName"] for line in lines_of_request} == {name}
        assert {line["pod"] for line in lines_of_request} == {"webhook-7"}
        if reviews[uid]["request"]["object"]["metadata"]["labels"]:
            assert [(line["eventType"], line["allowed"]) for line in lines_of_request] == [("allowed", True)]
        else:
            assert {line["name"]: line["enforcementAction"] for line in lines_of_request} == ACTIONS
            assert {line["allowed"] for line in lines_of_request} == {False}
            assert {(line["group"], line["version"], line["kind"]) for line in lines_of_request} == {
                ("constraints.gatekeeper.sh", "v1beta1", "TestRequiredLabels")
            }
    assert len({line.get("pod") for line in found}) == 1

    def written() -> float | None:
        text = server.get("/metrics").text
        for line in text.splitlines():
            if line.startswith('celkeeper_decision_export_lines_total{result="written"}'):
                value = float(line.split()[-1])
                return value if value >= expected else None
        return None

    assert wait_for(written, timeout=10, interval=0.2, what="the written lines counted") == expected


def test_stdout_takes_whole_lines(tmp_path: Path) -> None:
    server = ServeProcess(tmp_path, POLICIES, workers=2, args=["--export-decisions", "stdout"]).start()
    try:
        reviews = send(server, 40)

        def exported() -> Counter[str] | None:
            found: Counter[str] = Counter()
            for line in (tmp_path / "serve.log").read_text(encoding="utf-8").splitlines():
                if line.startswith('{"id":'):
                    found[json.loads(line)["id"]] += 1
            return found if sum(found.values()) >= 20 * len(ACTIONS) else None

        found = wait_for(exported, timeout=10, interval=0.1, what="the exported lines on stdout")
        assert found is not None
        violating = {u for u, r in reviews.items() if not r["request"]["object"]["metadata"]["labels"]}
        assert found == dict.fromkeys(violating, len(ACTIONS))
    finally:
        server.stop()


def metric_lines(server: ServeProcess) -> dict[str, float]:
    found = {}
    for line in server.get("/metrics").text.splitlines():
        if line.startswith("celkeeper_decision_export_lines_total{"):
            found[line.split('result="', 1)[1].split('"', 1)[0]] = float(line.split()[-1])
    return found


def test_a_blocked_output_drops_and_counts_lines_and_every_review_is_answered(tmp_path: Path) -> None:
    fifo = tmp_path / "decisions.fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # open, never read: the pipe fills, writes block
    server = ServeProcess(
        tmp_path,
        POLICIES,
        workers=2,
        # a graceful stop longer than the test's 10 s: a worker waiting for the output would be killed
        args=["--export-decisions", str(fifo), "--drain-seconds", "0", "--graceful-timeout", "60"],
    ).start()
    # each violating review exports 3 lines, each carrying the Pod's labels (~50 KB here): a worker's 8 MiB
    # buffer holds the lines of ~55 such reviews, the pipe of less than one
    noise = {f"note-{i:04d}": "x" * 40 for i in range(1000)}

    def reviews(first: int, count: int) -> list[dict[str, Any]]:
        return [
            review(pod(f"pod-{i}", "team-a", labels=noise), uid=str(uuid.uuid4()))
            for i in range(first, first + count)
        ]

    def answered(sent: list[dict[str, Any]]) -> None:
        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(server.admit, sent))
        for (status, answer), asked in zip(answers, sent, strict=True):
            assert status == 200
            assert answer["response"]["uid"] == asked["request"]["uid"]
            assert answer["response"]["allowed"] is False
            assert "[pods-need-owner]" in answer["response"]["status"]["message"]

    try:
        first = reviews(0, 300)
        answered(first)

        def dropping() -> dict[str, float] | None:
            found = metric_lines(server)
            return found if found.get("dropped", 0) > 0 else None

        counts = wait_for(dropping, timeout=10, interval=0.2, what="dropped lines counted")
        assert counts is not None
        # the reviews sent while lines are being dropped are answered as any other
        answered(reviews(300, 100))
        counts = metric_lines(server)
        lines = 400 * len(ACTIONS)
        assert counts.get("written", 0) + counts["dropped"] <= lines and counts.get("failed", 0) == 0
        # a worker keeps at most its buffer, the batch its writer thread is stuck on (as large) and the pipe
        kept = 2 * (2 * BUFFER_BYTES + 2**16) // len(json.dumps(noise, separators=(",", ":")))
        assert counts["dropped"] >= lines - kept
        server.stop()
        assert server.process is not None and server.process.returncode() == 0, server.log()
    finally:
        server.stop()
        os.close(reader)
