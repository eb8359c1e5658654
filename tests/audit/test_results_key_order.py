"""The status entries keep Gatekeeper's key order (what `celkeeper audit -o json` prints and what the
status write sends), with the keys `omitempty` leaves out absent."""

from __future__ import annotations

from celkeeper.audit.results import ObjectRef, RunResults, Violation, error_entry, status_violation

NAMESPACED = ObjectRef("apps", "v1", "Deployment", "prod", "web")
CLUSTER = ObjectRef("", "v1", "Namespace", "", "prod")
ENTRY = ["group", "version", "kind", "name", "namespace", "message"]  # an audit error's keys


def _unnamespaced(keys: list[str]) -> list[str]:
    return [k for k in keys if k != "namespace"]


def test_a_violation_lists_its_keys_in_gatekeepers_order() -> None:
    scoped = status_violation(Violation(("K8sX", "c"), "scoped", ("deny", "warn"), "m", NAMESPACED))
    assert list(scoped) == [*ENTRY, "enforcementAction", "enforcementActions"]
    plain = status_violation(Violation(("K8sX", "c"), "deny", (), "m", CLUSTER))
    assert list(plain) == [*_unnamespaced(ENTRY), "enforcementAction"]


def test_an_audit_error_lists_its_keys_in_order_and_the_status_fields_hold_both() -> None:
    assert list(error_entry(NAMESPACED, "boom")) == [
        "group",
        "version",
        "kind",
        "name",
        "namespace",
        "message",
    ]
    assert list(error_entry(CLUSTER, "boom")) == ["group", "version", "kind", "name", "message"]
    results = RunResults()
    results.add(Violation(("K8sX", "c"), "deny", (), "m", NAMESPACED))
    results.add_error(("K8sX", "c"), CLUSTER, "boom")
    fields = results.status_fields(("K8sX", "c"))
    assert list(fields) == ["totalViolations", "violations", "totalAuditErrors", "auditErrors"]
    assert fields["violations"][0]["namespace"] == "prod" and "namespace" not in fields["auditErrors"][0]
