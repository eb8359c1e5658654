"""`celkeeper audit --source kubernetes --audit-admission-policies` on a real kube-apiserver: the cluster's
ValidatingAdmissionPolicies (Deny, Warn and Audit bindings, one taking a ConfigMap parameter, one bound by
a namespaceSelector) and a MutatingAdmissionPolicy, created after the objects they would refuse or change;
one audit run (`--once`) answers each object as the API server answers a CREATE of it (Kubernetes' own code,
celkeeper.audit.admissionpolicies) and says so in its log lines and OpenReports; the long-running audit's
metrics count the violations per enforcement action. Without the option, the run has nothing to say of
them. A binding whose parameter does not exist (parameterNotFoundAction Deny), bound to another namespace,
refuses its one Deployment there: an error of that object, counted as the constraints' audit counts its
errors (the run's error total, `celkeeper_audit_errors`, an `error` result in the namespace's Report).

What is expected is worked out here from the objects created (which lacks the team label, which has too
many replicas, which runs :latest, which lacks the owner label), never read back from celkeeper.

Uses a control plane of its own: its admission policies would refuse other tests' objects.
"""

from __future__ import annotations

import json
import secrets
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.audit.support import AUDIT_ROLES, AuditServer, events_of, install_report_crds, run_once
from tests.incluster.support import install_crds, rbac_kubeconfig
from tests.support.apiserver import ControlPlane
from tests.support.binaries import KubeBinaries
from tests.support.kubectl import apply
from tests.support.native import mapped_libraries, require_celgo

pytestmark = pytest.mark.kube

GROUP = "admissionregistration.k8s.io/v1"
NAMESPACE = "shop"
PARAMS = "shop-params"
#: the namespace of the one Deployment the binding without its parameter refuses
ORPHANS = "orphans"
ORPHAN = ("orphan", {"team": "a", "owner": "platform"}, 1, "registry.example/app:1")
MAX_REPLICAS = 3
DEPLOYMENTS = [  # name -> labels, replicas, image
    ("good", {"team": "a", "owner": "platform"}, 1, "registry.example/app:1"),
    ("no-team", {"owner": "platform"}, 1, "registry.example/app:1"),
    ("big", {"team": "a", "owner": "platform"}, 5, "registry.example/app:1"),
    ("latest", {"team": "a", "owner": "platform"}, 1, "registry.example/app:latest"),
    ("no-owner", {"team": "a"}, 1, "registry.example/app:1"),
]
DEPLOYMENT_RULES = [
    {
        "apiGroups": ["apps"],
        "apiVersions": ["v1"],
        "operations": ["CREATE", "UPDATE"],
        "resources": ["deployments"],
    }
]


def deployment(
    name: str, labels: dict[str, str], replicas: int, image: str, namespace: str = NAMESPACE
) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": image}]},
            },
        },
    }


def validating(name: str, expression: str, message: str, param: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": DEPLOYMENT_RULES},
        "validations": [{"expression": expression, "messageExpression": message}],
    }
    if param:
        spec["paramKind"] = {"apiVersion": "v1", "kind": "ConfigMap"}
    return {
        "apiVersion": GROUP,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": spec,
    }


def binding(name: str, policy: str, actions: list[str], **more: Any) -> dict[str, Any]:
    return {
        "apiVersion": GROUP,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {"policyName": policy, "validationActions": actions, **more},
    }


POLICIES = [
    validating("require-team", "'team' in object.metadata.labels", "'the team label is required'"),
    binding(
        "require-team-deny",
        "require-team",
        ["Deny"],
        matchResources={"namespaceSelector": {"matchLabels": {"audit-test": "yes"}}},
    ),
    validating(
        "replica-limit",
        "object.spec.replicas <= int(params.data.maxReplicas)",
        "'at most ' + params.data.maxReplicas + ' replicas'",
        param=True,
    ),
    binding(
        "replica-limit-warn",
        "replica-limit",
        ["Warn"],
        paramRef={"name": "limits", "namespace": PARAMS, "parameterNotFoundAction": "Deny"},
    ),
    validating(
        "no-latest",
        "object.spec.template.spec.containers.all(c, !c.image.endsWith(':latest'))",
        "'no :latest image'",
    ),
    binding("no-latest-audit", "no-latest", ["Audit"]),
    binding(
        "replica-limit-missing",
        "replica-limit",
        ["Deny"],
        paramRef={"name": "absent", "namespace": PARAMS, "parameterNotFoundAction": "Deny"},
        matchResources={"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ORPHANS}}},
    ),
    {
        "apiVersion": GROUP,
        "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": "add-owner"},
        "spec": {
            "failurePolicy": "Fail",
            "reinvocationPolicy": "Never",
            "matchConstraints": {"resourceRules": DEPLOYMENT_RULES},
            "mutations": [
                {
                    "patchType": "ApplyConfiguration",
                    "applyConfiguration": {
                        "expression": 'Object{metadata: Object.metadata{labels: {"owner": "platform"}}}'
                    },
                }
            ],
        },
    },
    {
        "apiVersion": GROUP,
        "kind": "MutatingAdmissionPolicyBinding",
        "metadata": {"name": "add-owner"},
        "spec": {"policyName": "add-owner"},
    },
]
# what the API server would say of each object: (kind, policy/binding, enforcement action, object, message)
EXPECTED = {
    (
        "ValidatingAdmissionPolicy",
        "require-team/require-team-deny",
        "deny",
        "no-team",
        "the team label is required",
    ),
    (
        "ValidatingAdmissionPolicy",
        "replica-limit/replica-limit-warn",
        "warn",
        "big",
        f"at most {MAX_REPLICAS} replicas",
    ),
    ("ValidatingAdmissionPolicy", "no-latest/no-latest-audit", "dryrun", "latest", "no :latest image"),
}


@dataclass
class World:
    cluster: ControlPlane
    kubeconfig: Path
    workdir: Path


@pytest.fixture(scope="module")
def world(kube_binaries: KubeBinaries, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    require_celgo()
    workdir = tmp_path_factory.mktemp("kube-apaudit")
    with ControlPlane(workdir, kube_binaries) as plane:
        install_crds(plane)
        install_report_crds(plane)
        plane.kubectl("create", "namespace", "celkeeper-system")
        kubeconfig = rbac_kubeconfig(
            plane, "celkeeper-system", f"audit-{secrets.token_hex(3)}", roles=AUDIT_ROLES
        )
        apply(
            plane,
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": NAMESPACE, "labels": {"audit-test": "yes"}},
            },
        )
        apply(plane, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": PARAMS}})
        apply(plane, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ORPHANS}})
        apply(
            plane,
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "limits", "namespace": PARAMS},
                "data": {"maxReplicas": str(MAX_REPLICAS)},
            },
        )
        # the objects first: the API server enforces the policies on what is created after them
        for name, labels, replicas, image in DEPLOYMENTS:
            apply(plane, deployment(name, labels, replicas, image))
        apply(plane, deployment(*ORPHAN, namespace=ORPHANS))
        for obj in POLICIES:
            apply(plane, obj)
        yield World(plane, kubeconfig, workdir)


def _admission_lines(lines: list[dict[str, Any]]) -> set[tuple[str, ...]]:
    return {
        (
            line["constraint_kind"],
            line["constraint_name"],
            line["constraint_action"],
            line["resource_name"],
            line["msg"],
        )
        for line in events_of(lines, "violation_audited")
        if line["constraint_group"] == "admissionregistration.k8s.io"
    }


def test_one_run_reports_what_the_api_server_would_say_of_each_object(world: World) -> None:
    code, lines, raw = run_once(world.kubeconfig, "--audit-admission-policies")
    assert code == 0, raw[-4000:]
    assert _admission_lines(lines) == EXPECTED, raw[-4000:]
    for line in events_of(lines, "violation_audited"):
        assert line["constraint_api_version"] == "v1" and line["resource_kind"] == "Deployment"
        assert line["resource_group"] == "apps" and line["resource_namespace"] == NAMESPACE
    # what the MutatingAdmissionPolicy would change: a line of its own, no violation
    [change] = events_of(lines, "mutation_audited")
    assert (change["constraint_kind"], change["constraint_name"], change["resource_name"]) == (
        "MutatingAdmissionPolicy",
        "add-owner",
        "no-owner",
    )
    assert change["msg"] == 'would change: {"metadata":{"labels":{"owner":"platform"}}}'
    [finished] = events_of(lines, "audit_finished")
    assert finished["violations"] == len(EXPECTED) and finished["errors"] == 1  # the orphan's: see below
    assert finished["reports_failed"] == 0

    # the Report of the namespace: one result per violation, the policy named, its binding the rule
    report = json.loads(
        world.cluster.kubectl(
            "get", "reports.openreports.io", "celkeeper-audit", "-n", NAMESPACE, "-o", "json"
        ).stdout
    )
    found = {
        (
            r["policy"],
            r["rule"],
            r["properties"]["binding"],
            r["properties"]["enforcementAction"],
            r["result"],
            r["resources"][0]["name"],
            r["message"],
        )
        for r in report["results"]
    }
    result = {"deny": "fail", "warn": "warn", "dryrun": "warn"}
    assert found == {
        (
            f"{kind}/{name.split('/')[0]}",
            name.split("/")[1],
            name.split("/")[1],
            action,
            result[action],
            obj,
            message,
        )
        for kind, name, action, obj, message in EXPECTED
    }
    assert report["summary"]["fail"] == 1 and report["summary"]["warn"] == 2
    assert report["summary"]["error"] == 0


def test_an_object_a_binding_cannot_be_configured_for_is_an_error_of_the_run(world: World) -> None:
    code, lines, raw = run_once(world.kubeconfig, "--audit-admission-policies")
    assert code == 0, raw[-4000:]
    [finished] = events_of(lines, "audit_finished")
    assert finished["errors"] == 1, raw[-4000:]
    # the object's error, naming it and the binding, in Kubernetes' words
    key = "ValidatingAdmissionPolicy replica-limit/replica-limit-missing"
    said = f"apps/v1/Deployment {ORPHANS}/{ORPHAN[0]} could not be evaluated for {key}: failed to configure"
    assert any(said in line for line in raw.splitlines()), raw[-4000:]
    # and the binding's, once, located at it
    once = [
        line
        for line in raw.splitlines()
        if "the API server refuses every request the binding matches" in line
    ]
    assert len(once) == 1 and "replica-limit-missing" in once[0] and "(1 object(s) here)" in once[0]
    report = json.loads(
        world.cluster.kubectl(
            "get", "reports.openreports.io", "celkeeper-audit", "-n", ORPHANS, "-o", "json"
        ).stdout
    )
    [result] = report["results"]
    assert (result["policy"], result["rule"], result["result"]) == (
        "ValidatingAdmissionPolicy/replica-limit",
        "replica-limit-missing",
        "error",
    )
    assert result["resources"][0]["name"] == ORPHAN[0]
    assert "no params found for policy binding" in result["message"]
    assert report["summary"]["error"] == 1


def test_without_the_option_the_admission_policies_are_not_audited(world: World) -> None:
    code, lines, raw = run_once(world.kubeconfig)
    assert code == 0, raw[-4000:]
    assert _admission_lines(lines) == set() and not events_of(lines, "mutation_audited")
    [finished] = events_of(lines, "audit_finished")
    assert finished["violations"] == 0


def test_without_the_option_the_audit_loads_the_library_without_admission_policies(world: World) -> None:
    """The lighter variant of the native library (Gatekeeper's capabilities alone) audits the templates."""
    server = AuditServer(world.workdir, world.kubeconfig, "--audit-interval", "3600")
    server.start()
    try:
        server.wait_runs(1)
        libraries = mapped_libraries(server.process.pid)
    finally:
        server.stop()
    assert libraries == {"libcelkeeper-gatekeeper.so"}


def test_the_metrics_count_the_violations_per_enforcement_action(world: World) -> None:
    server = AuditServer(
        world.workdir, world.kubeconfig, "--audit-admission-policies", "--audit-interval", "3600"
    )
    server.start()
    try:
        server.wait_runs(1)
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=10) as answer:
            text = answer.read().decode()
        libraries = mapped_libraries(server.process.pid)
    finally:
        server.stop()
    assert libraries == {"libcelkeeper.so"}  # the library with Kubernetes' admission policies
    samples = {
        line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line and not line.startswith("#")
    }
    for action in ("deny", "warn", "dryrun"):
        assert samples[f'gatekeeper_violations{{enforcement_action="{action}"}}'] == 1
    for kind, name, action, _, _ in EXPECTED:
        labels = f'constraint_kind="{kind}",constraint_name="{name}",enforcement_action="{action}"'
        assert samples[f"celkeeper_audit_constraint_violations{{{labels}}}"] == 1
    # the object the binding without its parameter refuses: an error of that binding
    errors = {k: v for k, v in samples.items() if k.startswith("celkeeper_audit_errors{")}
    assert errors == {
        'celkeeper_audit_errors{constraint_kind="ValidatingAdmissionPolicy",'
        'constraint_name="replica-limit/replica-limit-missing"}': 1
    }
