"""Fail-static policies through a real `celkeeper serve` over TLS: what an operator's mistakes must not
do to enforcement. An invalid edit, an emptied file or a folder vanishing for 3 s keeps the last good
policies (a denied Pod stays denied); a template that stops compiling keeps its last good version;
/readyz and the status say what was held back; a 30 MB file does not stall the informer.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.informer.test_loop_fail_static import BAD_YAML, CONSTRAINT, NOT_COMPILING, TEMPLATE
from tests.support.serve import ServeProcess, pod, review

pytestmark = pytest.mark.server

DENY = "an owner label is required"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServeProcess]:
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "template.yaml").write_text(TEMPLATE)
    (policies / "constraint.yaml").write_text(CONSTRAINT)
    proc = ServeProcess(tmp_path / "srv", policies, workers=2, args=["--max-policy-file-bytes", "1000000"])
    proc.start()
    yield proc
    proc.stop()


def _verdict(server: ServeProcess) -> str:
    status, body = server.admit(review(pod(labels={})))
    assert status == 200
    response = body["response"]
    return "allowed" if response["allowed"] else response["status"]["message"]


def _published(server: ServeProcess, after: int, timeout: float = 30.0) -> int:
    """Wait for a generation after `after` to be published and loaded by every worker."""
    deadline = time.monotonic() + timeout
    while server.published_generation() <= after:
        assert time.monotonic() < deadline, f"nothing published after generation {after}:\n{server.log()}"
        time.sleep(0.05)
    generation = server.published_generation()
    server.wait_generation(generation, timeout=timeout)
    return generation


def _metric(server: ServeProcess, name: str) -> float:
    text = server.get("/metrics").text
    found = re.search(rf"^{name} ([0-9.e+-]+)$", text, re.MULTILINE)
    assert found, f"{name} not in /metrics"
    return float(found.group(1))


def test_operator_mistakes_keep_the_last_good_policies(server: ServeProcess) -> None:
    policies = server.policy_dir
    template = policies / "template.yaml"
    assert _verdict(server) == f"[owner-required] {DENY}"
    generation = server.published_generation()

    # 1. the template edited into invalid YAML: held back, reported with file:line:col, still enforced
    template.write_text(BAD_YAML)
    generation = _published(server, generation)
    assert _verdict(server) == f"[owner-required] {DENY}"
    ready = server.get("/readyz")
    assert ready.status_code == 200
    detail = ready.json()
    assert detail["heldBack"] == [str(template)]
    (problem,) = [p for p in detail["problems"] if "keeping the last good version" in p]
    assert re.match(rf"{re.escape(str(template))}:5:\d+: .*syntax error", problem), problem
    assert _metric(server, "celkeeper_policy_sources_held") == 1
    assert _metric(server, "celkeeper_policy_load_errors") >= 1
    assert "policy problem: " + problem in server.log(2000)  # one log line, with the position

    # 2. the template's CEL stops compiling: the last good compiled version stays
    template.write_text(NOT_COMPILING)
    generation = _published(server, generation)
    assert _verdict(server) == f"[owner-required] {DENY}"
    problems = server.get("/readyz").json()["problems"]
    assert any(str(template) in p and "keeping the last good version" in p for p in problems), problems

    # 3. emptied: held back too (to remove a file's policies, delete the file)
    template.write_text("")
    generation = _published(server, generation)
    assert _verdict(server) == f"[owner-required] {DENY}"

    # 4. a file above the size limit is refused with a clear message, and the informer stays responsive
    big = policies / "big.yaml"
    big.write_text("# padding\n" * 200_000)  # 2 MB, above --max-policy-file-bytes
    generation = _published(server, generation)
    problems = server.get("/readyz").json()["problems"]
    assert any(str(big) in p and "larger than 1000000 bytes" in p for p in problems), problems

    # 5. the folder vanishes for 3 s: everything stays enforced
    moved = policies.with_name("moved-away")
    template.write_text(TEMPLATE)  # fixed first, so that the folder's return is a plain state
    big.unlink()
    generation = _published(server, generation)
    policies.rename(moved)
    end = time.monotonic() + 3.0
    while time.monotonic() < end:
        assert _verdict(server) == f"[owner-required] {DENY}"
        time.sleep(0.2)
    moved.rename(policies)
    assert _verdict(server) == f"[owner-required] {DENY}"

    # 6. an explicit deletion is honoured
    (policies / "constraint.yaml").unlink()
    deadline = time.monotonic() + 30
    while _verdict(server) != "allowed":
        assert time.monotonic() < deadline, "the deleted constraint is still enforced"
        time.sleep(0.2)
    assert server.get("/readyz").json().get("heldBack") is None


def test_a_template_never_good_is_loaded_as_gatekeeper_loads_it(tmp_path: Path) -> None:
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "template.yaml").write_text(NOT_COMPILING)
    (policies / "constraint.yaml").write_text(CONSTRAINT)
    server = ServeProcess(tmp_path / "srv", policies, workers=1).start()
    try:
        verdict = _verdict(server)  # its compile error is an evaluation error under failurePolicy Fail
        assert verdict.startswith("[owner-required] ") and DENY not in verdict, verdict
        ready = server.get("/readyz").json()
        assert "heldBack" not in ready and any("template.yaml" in p for p in ready["problems"])
    finally:
        server.stop()


def test_a_large_valid_file_does_not_stall_later_edits(tmp_path: Path) -> None:
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "template.yaml").write_text(TEMPLATE)
    constraints = [
        json.dumps({**json.loads(json.dumps(_constraint())), "metadata": {"name": f"c{i}"}}) for i in range(2)
    ]
    (policies / "constraint.json").write_text(constraints[0])
    server = ServeProcess(tmp_path / "srv", policies, workers=1).start()
    try:
        generation = server.published_generation()
        (policies / "huge.yaml").write_text("items:\n" + "- {a: b}\n" * 3_000_000)  # ~27 MB of valid YAML
        (policies / "constraint.json").write_text(constraints[1])
        started = time.monotonic()
        _published(server, generation, timeout=60)
        took = time.monotonic() - started
        problems = server.get("/readyz").json()["problems"]
        assert any("huge.yaml" in p and "larger than" in p for p in problems), problems
        assert took < 30, f"the edit took {took:.1f} s to be published"
    finally:
        server.stop()


def _constraint() -> dict[str, object]:
    from celkeeper.documents import parse_documents

    return parse_documents(CONSTRAINT, "c").documents[0].data
