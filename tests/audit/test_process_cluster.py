"""The audit on a real kube-apiserver: thousands of objects of several kinds across namespaces, the real
`celkeeper audit` process under exactly the audit's RBAC of deploy/celkeeper.yaml, results on every
constraint's status.

What is expected is worked out here from the objects created (which lack which label, which namespace
is gold), never read back from celkeeper: exact totals per constraint, Gatekeeper's capped and ordered
lists, deny/dryrun/warn/scoped actions, namespaceSelector and namespaceObject, a cluster-scoped kind,
a huge object, an object nested 3,000 levels deep, one JSON log line per violation, an Event per violation.

Uses a control plane of its own (thousands of objects would slow the session's other tests).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.audit.support import (
    AUDIT_ROLES,
    constraint,
    events_of,
    install_template,
    labels_template,
    run_once,
    tier_template,
)
from tests.incluster.support import get, install_crds, rbac_kubeconfig, status
from tests.support.apiserver import ControlPlane
from tests.support.binaries import KubeBinaries
from tests.support.bulk import Raw, create_many
from tests.support.kubectl import apply
from tests.support.pods import realistic_pod

pytestmark = pytest.mark.kube

LABELS = "AuditLabels"
TIER = "AuditTier"
BLOBS = "AuditBlobs"
LIMIT = 5
NAMESPACES = {  # name -> labels
    "prod-a": {"env": "prod", "tier": "gold"},
    "prod-b": {"env": "prod", "tier": "silver"},
    "prod-c": {"env": "prod", "tier": "gold"},
    "dev-a": {"env": "dev", "tier": "silver"},
    "dev-b": {"env": "dev"},
    "dev-c": {"env": "dev", "owner": "x"},
}
CONFIGMAPS, SECRETS, PODS = 300, 100, 40  # per namespace
AUDIT_ONLY = [
    {"action": "deny", "enforcementPoints": [{"name": "audit.gatekeeper.sh"}]},
    {"action": "warn", "enforcementPoints": [{"name": "*"}]},
]
WEBHOOK_ONLY = [{"action": "deny", "enforcementPoints": [{"name": "validation.gatekeeper.sh"}]}]
BLOB_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "blobs.audit.example.com"},
    "spec": {
        "group": "audit.example.com",
        "names": {"kind": "Blob", "plural": "blobs", "singular": "blob", "listKind": "BlobList"},
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                        },
                    }
                },
            }
        ],
    },
}
DEEP = 3_000  # levels: the API server takes up to 10,000, orjson parses up to 1024


def owned(i: int, every: int) -> bool:
    """Object i of a series has the label `owner` unless i is a multiple of `every`."""
    return i % every != 0


@dataclass(frozen=True)
class Ref:
    group: str
    version: str
    kind: str
    namespace: str
    name: str


@dataclass
class World:
    cluster: ControlPlane
    kubeconfig: Path  # the audit's roles of deploy/celkeeper.yaml, nothing more
    namespace: str  # celkeeper's own (events)
    expected: dict[str, list[tuple[Ref, str]]]  # constraint -> its violations (object, message)
    objects: dict[str, int]  # kind -> how many exist in the test namespaces


def configmap(namespace: str, i: int) -> dict[str, Any]:
    labels = {"owner": "team"} if owned(i, 7) else {}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"cm-{i:04d}", "namespace": namespace, "labels": labels},
        "data": {"k": "v"},
    }


def secret(namespace: str, i: int) -> dict[str, Any]:
    labels = {"owner": "team"} if owned(i, 10) else {}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {"name": f"secret-{i:04d}", "namespace": namespace, "labels": labels},
        "stringData": {"k": "v"},
    }


def blob(name: str, spec_json: str) -> Raw:
    """A Blob written as JSON text (the deep one is deeper than Python's json module writes)."""
    meta = f'{{"name":"{name}","namespace":"dev-a"}}'
    head = f'{{"apiVersion":"audit.example.com/v1","kind":"Blob","metadata":{meta}'
    return Raw("/apis/audit.example.com/v1/namespaces/dev-a/blobs", f'{head},"spec":{spec_json}}}'.encode())


@pytest.fixture(scope="module")
def world(kube_binaries: KubeBinaries, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    with ControlPlane(tmp_path_factory.mktemp("kube-audit"), kube_binaries) as plane:
        yield build(plane)


def build(cluster: ControlPlane) -> World:
    install_crds(cluster)
    own = "celkeeper-system"
    cluster.kubectl("create", "namespace", own)
    kubeconfig = rbac_kubeconfig(cluster, own, f"audit-{secrets.token_hex(3)}", roles=AUDIT_ROLES)
    cluster.kubectl("apply", "-f", "-", input=BLOB_CRD)
    cluster.kubectl("wait", "--for=condition=Established", "crd/blobs.audit.example.com")
    for name, labels in NAMESPACES.items():
        apply(
            cluster,
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": name, "labels": {**labels, "audit-test": "yes"}},
            },
        )
    objects: list[dict[str, Any]] = []
    for namespace in NAMESPACES:
        objects += [configmap(namespace, i) for i in range(CONFIGMAPS)]
        objects += [secret(namespace, i) for i in range(SECRETS)]
        objects += [
            realistic_pod(f"pod-{i:03d}", namespace, labels={"owner": "x"} if owned(i, 4) else {})
            for i in range(PODS)
        ]
    huge = configmap("prod-b", 9999)  # ~900 KB of data, no owner: a violation like any other
    huge["data"] = {f"k{i}": "x" * 900 for i in range(1000)}
    huge["metadata"]["labels"] = {}
    objects.append(huge)
    deep = '{"n":' * (DEEP - 1) + "{}" + "}" * (DEEP - 1)
    blobs = [blob("deep", deep), blob("flat-1", '{"n":1}'), blob("flat-2", '{"n":2}')]
    created = create_many(cluster, [*objects, *blobs])
    assert created == len(objects) + len(blobs)

    for data in (labels_template(LABELS), tier_template(TIER), labels_template(BLOBS)):
        install_template(cluster, data)
    prod = {"matchLabels": {"env": "prod"}}
    core = {"apiGroups": [""]}
    policies = [
        constraint(
            LABELS,
            "configmaps-prod",
            {"kinds": [{**core, "kinds": ["ConfigMap"]}], "namespaceSelector": prod},
            {"key": "owner"},
        ),
        constraint(
            LABELS,
            "secrets",
            {"kinds": [{**core, "kinds": ["Secret"]}], "namespaces": ["prod-*", "dev-*"]},
            {"key": "owner"},
            action="dryrun",
        ),
        constraint(LABELS, "pods", {"kinds": [{**core, "kinds": ["Pod"]}]}, {"key": "owner"}, action="warn"),
        constraint(
            LABELS,
            "namespaces",
            {
                "kinds": [{**core, "kinds": ["Namespace"]}],
                "labelSelector": {"matchLabels": {"audit-test": "yes"}},
            },
            {"key": "owner"},
        ),
        constraint(
            LABELS,
            "configmaps-dev-scoped",
            {"kinds": [{**core, "kinds": ["ConfigMap"]}], "namespaces": ["dev-*"]},
            {"key": "owner"},
            action="scoped",
            scoped=AUDIT_ONLY,
        ),
        constraint(LABELS, "webhook-only", {}, {"key": "never-there"}, action="scoped", scoped=WEBHOOK_ONLY),
        constraint(
            TIER,
            "configmaps-in-gold",
            {"kinds": [{**core, "kinds": ["ConfigMap"]}], "namespaceSelector": prod},
        ),
        constraint(
            BLOBS,
            "blobs",
            {"kinds": [{"apiGroups": ["audit.example.com"], "kinds": ["Blob"]}]},
            {"key": "owner"},
        ),
    ]
    for data in policies:
        apply(cluster, data)
    return World(cluster, kubeconfig, own, expectations(), {"ConfigMap": len(NAMESPACES) * CONFIGMAPS + 1})


def expectations() -> dict[str, list[tuple[Ref, str]]]:
    """Every violation each constraint must report, from the objects created."""
    out: dict[str, list[tuple[Ref, str]]] = {}
    cms = [(ns, f"cm-{i:04d}", owned(i, 7)) for ns in NAMESPACES for i in range(CONFIGMAPS)]
    cms.append(("prod-b", "cm-9999", False))
    prod = [ns for ns, labels in NAMESPACES.items() if labels["env"] == "prod"]

    def ref(kind: str, ns: str, name: str, group: str = "") -> Ref:
        return Ref(group, "v1", kind, ns, name)

    out["configmaps-prod"] = [
        (ref("ConfigMap", ns, n), f"ConfigMap {n} lacks owner") for ns, n, ok in cms if ns in prod and not ok
    ]
    out["configmaps-dev-scoped"] = [
        (ref("ConfigMap", ns, n), f"ConfigMap {n} lacks owner")
        for ns, n, ok in cms
        if ns.startswith("dev-") and not ok
    ]
    out["secrets"] = [
        (ref("Secret", ns, f"secret-{i:04d}"), f"Secret secret-{i:04d} lacks owner")
        for ns in NAMESPACES
        for i in range(SECRETS)
        if not owned(i, 10)
    ]
    out["pods"] = [
        (ref("Pod", ns, f"pod-{i:03d}"), f"Pod pod-{i:03d} lacks owner")
        for ns in NAMESPACES
        for i in range(PODS)
        if not owned(i, 4)
    ]
    out["namespaces"] = [
        (ref("Namespace", "", ns), f"Namespace {ns} lacks owner")
        for ns, labels in NAMESPACES.items()
        if "owner" not in labels
    ]
    out["webhook-only"] = []
    out["configmaps-in-gold"] = [
        (ref("ConfigMap", ns, n), f"namespace {ns} is not gold")
        for ns, n, _ in cms
        if ns in prod and NAMESPACES[ns].get("tier") != "gold"
    ]
    out["blobs"] = [
        (ref("Blob", "dev-a", n, "audit.example.com"), f"Blob {n} lacks owner")
        for n in ("deep", "flat-1", "flat-2")
    ]
    return out


def capped(found: list[tuple[Ref, str]], action: str) -> list[dict[str, Any]]:
    """Gatekeeper's status list: the LIMIT smallest (group, version, kind, namespace, name, message,
    action), largest first."""
    keys = sorted((r.group, r.version, r.kind, r.namespace, r.name, m, action) for r, m in found)[:LIMIT]
    out = []
    for group, version, kind, namespace, name, message, act in reversed(keys):
        entry = {
            "group": group,
            "version": version,
            "kind": kind,
            "name": name,
            "message": message,
            "enforcementAction": act,
        }
        if namespace:
            entry["namespace"] = namespace
        out.append(entry)
    return out


ACTIONS = {
    "configmaps-prod": "deny",
    "secrets": "dryrun",
    "pods": "warn",
    "namespaces": "deny",
    "configmaps-dev-scoped": "scoped",
    "webhook-only": "scoped",
    "configmaps-in-gold": "deny",
    "blobs": "deny",
}
KINDS = {"configmaps-in-gold": TIER, "blobs": BLOBS}


def test_one_run_reports_every_constraint_exactly(world: World) -> None:
    cluster = world.cluster
    code, lines, raw = run_once(
        world.kubeconfig,
        "--audit-chunk-size",
        "50",
        "--constraint-violations-limit",
        str(LIMIT),
        "--emit-audit-events",
        "--pod-namespace",
        world.namespace,
    )
    assert code == 0, raw[-4000:]
    [finished] = events_of(lines, "audit_finished")
    run_id = finished["audit_id"]
    for name, violations in world.expected.items():
        kind = KINDS.get(name, LABELS)
        found = status(cluster, kind.lower(), name)
        assert found["auditTimestamp"] == run_id, name
        assert found["totalViolations"] == len(violations), name
        expected_list = capped(violations, ACTIONS[name])
        if name == "configmaps-dev-scoped":
            for entry in expected_list:
                entry["enforcementActions"] = ["deny", "warn"]
        assert found.get("violations", []) == expected_list, name
    # the object nested 3,000 levels deep is evaluated like the others (its violation is expected above)
    assert "totalAuditErrors" not in status(cluster, BLOBS.lower(), "blobs")
    assert "totalAuditErrors" not in status(cluster, LABELS.lower(), "pods")

    # one JSON line per violation, with the constraint's action; one constraint_audited per violated one
    violations = events_of(lines, "violation_audited")
    assert len(violations) == sum(len(v) for v in world.expected.values())
    per_constraint = dict.fromkeys(world.expected, 0)
    for line in violations:
        per_constraint[line["constraint_name"]] += 1
        assert line["constraint_action"] == ACTIONS[line["constraint_name"]]
    assert per_constraint == {name: len(v) for name, v in world.expected.items()}
    audited = {
        line["constraint_name"]: line["constraint_violations"]
        for line in events_of(lines, "constraint_audited")
    }
    assert audited == {name: str(len(v)) for name, v in world.expected.items() if v}
    assert finished["constraints_written"] == len(world.expected) and finished["constraints_failed"] == 0

    # an Event per violation, in celkeeper's namespace
    found_events = (get(cluster, "events", "-n", world.namespace) or {}).get("items") or []
    audit_events = [e for e in found_events if e.get("reason") == "AuditViolation"]
    assert len(audit_events) == len(violations)
    sample = next(e for e in audit_events if e["metadata"]["annotations"]["constraint_name"] == "pods")
    assert sample["type"] == "Warning" and sample["metadata"]["annotations"]["auditTimestamp"] == run_id
    assert sample["message"].startswith("Resource Namespace: ")

    # the printer columns
    table = cluster.kubectl("get", LABELS.lower(), "configmaps-prod", "-o", "wide").stdout.splitlines()
    assert table[0].split() == ["NAME", "ENFORCEMENT-ACTION", "TOTAL-VIOLATIONS", "ENFORCED", "AUDITED"]
    assert table[1].split()[:3] == ["configmaps-prod", "deny", str(len(world.expected["configmaps-prod"]))]


def test_the_audit_role_cannot_write_anything_but_constraint_status(world: World) -> None:
    def can(*args: str) -> bool:
        proc = world.cluster.kubectl("auth", "can-i", *args, kubeconfig=world.kubeconfig, check=False)
        return proc.stdout.strip() == "yes"

    assert can("list", "secrets", "-A") and can("watch", "configmaps", "-A")
    assert can("update", f"{LABELS.lower()}.constraints.celkeeper.io", "--subresource=status")
    assert can("create", "events", "-n", world.namespace)
    assert not can("update", f"{LABELS.lower()}.constraints.celkeeper.io")
    assert not can("create", "configmaps", "-n", "prod-a")
    assert not can("delete", "pods", "-A")
    assert not can("create", "customresourcedefinitions")
    assert not can("create", "events", "-n", "prod-a")
