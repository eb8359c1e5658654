"""What the audit logs (celkeeper.audit.logs): Gatekeeper's log lines (JSON, same keys, same order), its run
and constraint lines, durations as Go writes them."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from celkeeper.audit.logs import JsonFormatter, constraint_line, go_duration, run_line, violation_line
from tests.audit.values import VIOLATION


def rendered(message: str, extra: dict[str, Any], level: int = logging.INFO) -> dict[str, Any]:
    record = logging.LogRecord("celkeeper.audit", level, __file__, 1, message, (), None)
    for key, value in extra.items():
        setattr(record, key, value)
    line = JsonFormatter().format(record)
    assert "\n" not in line
    parsed: dict[str, Any] = json.loads(line)
    return parsed


def test_a_violation_line_has_gatekeepers_keys_in_gatekeepers_order() -> None:
    message, extra = violation_line(VIOLATION, "2026-12-01T10:00:00Z", {"owner": "team-a"})
    line = rendered(message, extra)
    assert list(line) == [
        "level",
        "ts",
        "logger",
        "msg",
        "process",
        "audit_id",
        "details",
        "event_type",
        "semantic",
        "constraint_group",
        "constraint_api_version",
        "constraint_kind",
        "constraint_name",
        "constraint_namespace",
        "constraint_action",
        "constraint_enforcement_actions",
        "constraint_annotations",
        "resource_group",
        "resource_api_version",
        "resource_kind",
        "resource_namespace",
        "resource_name",
        "resource_labels",
    ]
    assert {k: v for k, v in line.items() if k not in ("ts", "logger")} == {
        "level": "info",
        "msg": "missing owner",
        "process": "audit",
        "audit_id": "2026-12-01T10:00:00Z",
        "details": None,
        "event_type": "violation_audited",
        "semantic": True,
        "constraint_group": "constraints.celkeeper.io",
        "constraint_api_version": "v1beta1",
        "constraint_kind": "K8sLabels",
        "constraint_name": "must-have-owner",
        "constraint_namespace": "",
        "constraint_action": "scoped",
        "constraint_enforcement_actions": ["deny", "warn"],
        "constraint_annotations": {"owner": "team-a"},
        "resource_group": "apps",
        "resource_api_version": "v1",
        "resource_kind": "Deployment",
        "resource_namespace": "shop",
        "resource_name": "web",
        "resource_labels": {"app": "web"},
    }


def test_run_and_constraint_lines() -> None:
    started = rendered("auditing constraints and violations", run_line("audit_started", "T"))
    assert (started["event_type"], started["process"], started["audit_id"]) == ("audit_started", "audit", "T")
    line = rendered("audit results for constraint", constraint_line("K8sLabels", "c", "deny", 12, "T"))
    assert line["event_type"] == "constraint_audited"
    assert (line["constraint_status"], line["constraint_violations"]) == (
        "enforced",
        "12",
    )  # a string, as Go's
    warned = rendered("careful", {}, logging.WARNING)
    assert warned["level"] == "warn"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (1.5, "1.5s"),
        (90, "1m30s"),
        (3723.5, "1h2m3.5s"),
        (0.0015, "1.5ms"),
        (0.000002, "2µs"),
        (0.25, "250ms"),
        (61.000001, "1m1.000001s"),
        (7200, "2h0m0s"),
    ],
)
def test_durations_are_written_as_go_writes_them(seconds: float, text: str) -> None:
    assert go_duration(seconds) == text
