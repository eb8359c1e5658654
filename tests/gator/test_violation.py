"""A review's result as the offline tools report it (gator's JSON fields)."""

from __future__ import annotations

from celkeeper.gator.violation import Violation


def test_a_violation_in_gators_json() -> None:
    violation = Violation("no", "scoped", ("deny", "warn"), ("K8sRequiredLabels", "must-have-owner"))
    assert violation.to_json() == {
        "msg": "no",
        "enforcementAction": "scoped",
        "scopedEnforcementActions": ["deny", "warn"],
    }
    assert Violation("no", "deny").to_json()["scopedEnforcementActions"] == []
    assert Violation("no", "deny").constraint == ("", "")
