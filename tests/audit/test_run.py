"""One run over a (fake) API: only the kinds some audited constraint can select are listed (explicit
kinds, `*`, no kinds), never celkeeper's own or excluded ones; a kind that cannot be listed is an error of
its constraints and the other kinds are still audited; broken discovery groups are reported."""

from __future__ import annotations

from typing import Any

from celkeeper.audit import AuditOptions, Evaluator, Silent, audit_cluster
from celkeeper.kube import ApiError, Resource
from tests.audit.test_evaluate import LABELS, labels, namespace, policies
from tests.kube.fakes import FakeClient
from tests.support.policydocs import constraint_data, template_data

CORE = [
    ("pods", "Pod", True),
    ("configmaps", "ConfigMap", True),
    ("secrets", "Secret", True),
    ("namespaces", "Namespace", False),
    ("events", "Event", True),
]


def discovery(fake: FakeClient) -> None:
    def resources(entries: list[tuple[str, str, bool]]) -> dict[str, Any]:
        return {
            "resources": [
                {"name": n, "kind": k, "namespaced": ns, "verbs": ["get", "list", "watch"]}
                for n, k, ns in entries
            ]
        }

    fake.paths = {
        "/api": {"versions": ["v1"]},
        "/api/v1": resources(CORE),
        "/apis": {
            "groups": [
                {"name": "apps", "preferredVersion": {"version": "v1"}, "versions": [{"version": "v1"}]},
                {
                    "name": "constraints.celkeeper.io",
                    "preferredVersion": {"version": "v1beta1"},
                    "versions": [{"version": "v1beta1"}],
                },
                {
                    "name": "broken.example.com",
                    "preferredVersion": {"version": "v1"},
                    "versions": [{"version": "v1"}],
                },
            ]
        },
        "/apis/apps/v1": resources([("deployments", "Deployment", True)]),
        "/apis/constraints.celkeeper.io/v1beta1": resources([("k8slabels", "K8sLabels", False)]),
    }


def core(plural: str, kind: str) -> Resource:
    return Resource("", "v1", plural, kind)


def obj(kind: str, name: str, api_version: str = "v1", namespace: str | None = "ns") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": api_version, "kind": kind, "metadata": meta}


def test_only_selectable_kinds_are_listed_and_a_failing_kind_does_not_stop_the_rest() -> None:
    fake = FakeClient()
    discovery(fake)
    fake.put(core("pods", "Pod"), obj("Pod", "p1"), obj("Pod", "p2"))
    fake.put(core("configmaps", "ConfigMap"), obj("ConfigMap", "c1"))
    fake.put(core("events", "Event"), obj("Event", "e1"))
    fake.put(Resource("apps", "v1", "deployments", "Deployment"), obj("Deployment", "d1", "apps/v1"))
    fake.broken[core("secrets", "Secret")] = ApiError(403, "Forbidden", "secrets is forbidden")
    # no namespaces collection: 404, as for a CRD deleted since discovery (nothing to audit, no error)
    evaluator = Evaluator(
        policies(
            LABELS,
            labels("pods", "a", match={"kinds": [{"apiGroups": [""], "kinds": ["Pod"]}]}),
            labels("core-anything", "a", match={"kinds": [{"apiGroups": [""], "kinds": ["*"]}]}),
            labels(
                "scoped-webhook",
                "a",
                action="scoped",
                scoped=[{"action": "deny", "enforcementPoints": [{"name": "validation.gatekeeper.sh"}]}],
            ),
        )
    )
    results = audit_cluster(
        fake,
        evaluator,
        namespace,
        AuditOptions(excluded_resources=frozenset({"events"})),
        Silent(),
    )
    listed = sorted({r.plural for r, _ in fake.pages})
    # core kinds (but not events, excluded), not apps (only the webhook-only constraint selects
    # everything), never celkeeper's own constraint kinds
    assert listed == ["configmaps", "namespaces", "pods", "secrets"]
    assert results.objects == {("", "v1", "Pod"): 2, ("", "v1", "ConfigMap"): 1}
    assert results.status_fields(("K8sLabels", "pods"))["totalViolations"] == 2
    anything = results.status_fields(("K8sLabels", "core-anything"))
    assert anything["totalViolations"] == 3
    assert anything["totalAuditErrors"] == 1
    assert anything["auditErrors"][0]["kind"] == "Secret"
    assert anything["auditErrors"][0]["message"].startswith("listing secrets failed: 403 Forbidden")
    assert "totalAuditErrors" not in results.status_fields(("K8sLabels", "pods"))
    assert results.list_errors == {("", "v1", "Secret"): "403 Forbidden: secrets is forbidden"}
    assert results.discovery_errors and results.discovery_errors[0].startswith("broken.example.com/v1")


def test_a_constraint_without_kinds_selects_every_listable_kind_but_celkeepers_own() -> None:
    fake = FakeClient()
    discovery(fake)
    evaluator = Evaluator(
        policies(
            template_data("K8sLabels", [{"expression": "true", "message": "ok"}]),
            constraint_data("K8sLabels", "all"),
        )
    )
    audit_cluster(fake, evaluator, lambda name: None, AuditOptions(), Silent())
    assert sorted({str(r) for r, _ in fake.pages}) == [
        "configmaps",
        "deployments.apps",
        "events",
        "namespaces",
        "pods",
        "secrets",
    ]
