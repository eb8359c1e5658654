"""The generated CRDs on a real kube-apiserver, through the real kubectl: accepted by server-side dry-run and
for real, Established, serving their kinds with the schemas, defaults and printer columns they declare."""

from __future__ import annotations

import copy
import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from celkeeper.crds import constraint_crd, static_crds
from tests.crds.helpers import (
    constraints_of,
    example_dirs,
    library_dirs,
    template_of,
)
from tests.support.apiserver import ControlPlane, wait_for
from tests.support.kubectl import apply
from tests.support.samples import library

pytestmark = pytest.mark.kube

CRDS_DIR = Path(__file__).resolve().parents[2] / "crds"


def established(cluster: ControlPlane, name: str) -> bool:
    ext = client.ApiextensionsV1Api(cluster.api_client)
    status = ext.read_custom_resource_definition(name).status
    conditions = (status.conditions if status else None) or []
    return any(c.type == "Established" and c.status == "True" for c in conditions)


def wait_established(cluster: ControlPlane, name: str) -> None:
    wait_for(lambda: established(cluster, name), timeout=30, what=f"CRD {name} to be Established")


@pytest.fixture(scope="module")
def static_installed(kube_cluster: ControlPlane) -> ControlPlane:
    """celkeeper's own CRDs from the committed crds/ files, applied as a user would (kubectl apply -f crds/).

    They are left installed: other tests of the session share them, and applying them again is a no-op.
    """
    dry = kube_cluster.kubectl("apply", "--dry-run=server", "-f", str(CRDS_DIR))
    assert dry.stdout.count("(server dry run)") == len(static_crds()), dry.stdout
    kube_cluster.kubectl("apply", "-f", str(CRDS_DIR))
    for crd in static_crds():
        wait_established(kube_cluster, crd["metadata"]["name"])
    return kube_cluster


def test_static_crds_are_accepted_and_established(static_installed: ControlPlane) -> None:
    ext = client.ApiextensionsV1Api(static_installed.api_client)
    for crd in static_crds():
        stored = ext.read_custom_resource_definition(crd["metadata"]["name"])
        assert stored.spec.group == crd["spec"]["group"]
        assert stored.status.accepted_names.kind == crd["spec"]["names"]["kind"]
        # no condition says the schema was refused or is not structural
        bad = [c for c in stored.status.conditions or [] if c.type == "NonStructuralSchema"]
        assert bad == []
    # a second apply of the generator's own output changes nothing
    again = static_installed.kubectl("apply", "-f", "-", input=static_crds())
    assert again.stdout.count("unchanged") == len(static_crds()), again.stdout


def unique_template(template: dict[str, Any]) -> dict[str, Any]:
    """A copy of a sample template with a kind of its own, so tests never collide on cluster-scoped names."""
    result = copy.deepcopy(template)
    kind = result["spec"]["crd"]["spec"]["names"]["kind"] + "T" + secrets.token_hex(3)
    result["spec"]["crd"]["spec"]["names"]["kind"] = kind
    result["metadata"] = {"name": kind.lower()}
    result["apiVersion"] = "templates.celkeeper.io/v1"
    return result


@pytest.fixture
def sample_template(static_installed: ControlPlane) -> Iterator[dict[str, Any]]:
    """The gatekeeper-library required-labels template, stored in the cluster as a celkeeper template."""
    template = unique_template(template_of(library() / "general" / "requiredlabels"))
    name = template["metadata"]["name"]
    apply(static_installed, template)
    custom = client.CustomObjectsApi(static_installed.api_client)
    stored: Any = custom.get_cluster_custom_object(
        "templates.celkeeper.io", "v1", "constrainttemplates", name
    )
    try:
        yield stored
    finally:
        crd_name = f"{name}.constraints.celkeeper.io"
        static_installed.kubectl("delete", "crd", crd_name, "--ignore-not-found", "--wait=false")
        static_installed.kubectl(
            "delete", "constrainttemplates.templates.celkeeper.io", name, "--ignore-not-found", "--wait=false"
        )


def test_a_template_object_keeps_its_cel_source_and_defaults_legacy_schema(
    static_installed: ControlPlane, sample_template: dict[str, Any]
) -> None:
    name = sample_template["metadata"]["name"]
    table = static_installed.kubectl("get", "constrainttemplates.templates.celkeeper.io", name).stdout
    header, row = table.splitlines()
    assert header.split() == ["NAME", "KIND", "CREATED", "AGE"]
    kind = sample_template["spec"]["crd"]["spec"]["names"]["kind"]
    assert row.split()[:2] == [name, kind]
    assert len(row.split()) == 3  # Created is empty until a pod reports
    custom = client.CustomObjectsApi(static_installed.api_client)
    custom.patch_cluster_custom_object_status(
        "templates.celkeeper.io",
        "v1",
        "constrainttemplates",
        name,
        {
            "status": {
                "created": True,
                "byPod": [
                    {
                        "id": "pod-a",
                        "observedGeneration": 1,
                        "errors": [
                            {"code": "compile_error", "message": "m", "location": "spec.targets[0]:1:2"}
                        ],
                    }
                ],
            }
        },
    )
    row = static_installed.kubectl(
        "get", "constrainttemplates.templates.celkeeper.io", name, "--no-headers"
    ).stdout.split()
    assert row[:3] == [name, kind, "true"]
    validation = sample_template["spec"]["crd"]["spec"]["validation"]
    assert validation["legacySchema"] is False  # defaulted by the CRD, as Gatekeeper's
    code = sample_template["spec"]["targets"][0]["code"]
    assert [c["engine"] for c in code] == ["K8sNativeValidation", "Rego"]
    assert code[0]["source"]["validations"][0]["expression"].startswith("(has(variables.anyObject.metadata)")
    assert validation["openAPIV3Schema"]["properties"]["labels"]["items"]["properties"]["key"] == {
        "type": "string",
        "description": "The required label.",
    }


def test_constraint_crd_of_a_sample_template_is_established_and_serves_constraints(
    static_installed: ControlPlane, sample_template: dict[str, Any]
) -> None:
    cluster = static_installed
    crd = constraint_crd(sample_template)
    crd_name = crd["metadata"]["name"]
    kind = crd["spec"]["names"]["kind"]
    dry = cluster.kubectl("apply", "--dry-run=server", "-f", "-", input=crd)
    assert "(server dry run)" in dry.stdout
    cluster.kubectl("apply", "-f", "-", input=crd)
    wait_established(cluster, crd_name)

    ext = client.ApiextensionsV1Api(cluster.api_client)
    stored = ext.read_custom_resource_definition(crd_name)
    (owner,) = stored.metadata.owner_references
    assert (owner.kind, owner.name, owner.uid) == (
        "ConstraintTemplate",
        sample_template["metadata"]["name"],
        sample_template["metadata"]["uid"],
    )
    assert stored.metadata.labels["celkeeper.io/template"] == sample_template["metadata"]["name"]

    # the library's own sample constraint, moved to celkeeper's group and the unique kind
    ((_, sample),) = constraints_of(
        library() / "general" / "requiredlabels" / "samples" / "all-must-have-owner", "K8sRequiredLabels"
    )
    constraint = {
        **copy.deepcopy(sample),
        "apiVersion": "constraints.celkeeper.io/v1beta1",
        "kind": kind,
        "metadata": {"name": "all-must-have-owner"},
    }
    apply(cluster, constraint)
    custom = client.CustomObjectsApi(cluster.api_client)
    got: Any = custom.get_cluster_custom_object(
        "constraints.celkeeper.io", "v1beta1", kind.lower(), "all-must-have-owner"
    )
    assert got["spec"]["enforcementAction"] == "deny"  # defaulted as in Gatekeeper
    assert got["spec"]["parameters"] == sample["spec"]["parameters"]
    assert got["spec"]["match"] == sample["spec"]["match"]
    # spec is structural: kubectl's strict field validation refuses what the schema does not know
    unknown = copy.deepcopy(constraint)
    unknown["spec"]["unknownField"] = "x"
    refused = cluster.kubectl("apply", "-f", "-", input=unknown, check=False)
    assert refused.returncode != 0
    assert 'unknown field "spec.unknownField"' in refused.stderr

    # served under v1 and v1alpha1 too
    for version in ("v1", "v1alpha1"):
        same: Any = custom.get_cluster_custom_object(
            "constraints.celkeeper.io", version, kind.lower(), "all-must-have-owner"
        )
        assert same["spec"]["parameters"] == sample["spec"]["parameters"]

    # `kubectl get constraints` lists it with Gatekeeper's columns
    table = cluster.kubectl("get", "constraints").stdout.splitlines()
    assert table[0].split() == ["NAME", "ENFORCEMENT-ACTION", "TOTAL-VIOLATIONS", "ENFORCED"]
    row = next(line.split() for line in table[1:] if "all-must-have-owner" in line)
    # kubectl prefixes names with their resource only when several kinds are listed
    assert row[0] in ("all-must-have-owner", f"{kind.lower()}.constraints.celkeeper.io/all-must-have-owner")
    assert row[1:] == ["deny"]  # no audit has counted violations yet, no celkeeper pod enforces it
    listed = cluster.kubectl("get", "constraints", "-o", "name").stdout.split()
    assert f"{kind.lower()}.constraints.celkeeper.io/all-must-have-owner" in listed

    # status is a subresource: totalViolations shows in the column
    custom.patch_cluster_custom_object_status(
        "constraints.celkeeper.io",
        "v1beta1",
        kind.lower(),
        "all-must-have-owner",
        {
            "status": {
                "totalViolations": 4,
                "auditTimestamp": "2026-01-02T03:04:05Z",
                "violations": [
                    {
                        "group": "",
                        "version": "v1",
                        "kind": "Namespace",
                        "name": "a",
                        "message": "m",
                        "enforcementAction": "deny",
                        "unknownExtra": "kept",
                    }
                ],
                "byPod": [
                    {"id": "pod-a", "observedGeneration": 1, "enforced": True, "celkeeperExtra": "kept"}
                ],
            }
        },
    )
    row = cluster.kubectl("get", kind.lower(), "all-must-have-owner", "--no-headers").stdout.split()
    assert row == ["all-must-have-owner", "deny", "4"]
    wide = cluster.kubectl("get", kind.lower(), "all-must-have-owner", "-o", "wide").stdout.splitlines()
    assert wide[0].split() == ["NAME", "ENFORCEMENT-ACTION", "TOTAL-VIOLATIONS", "ENFORCED", "AUDITED"]
    assert wide[1].split()[-1].endswith(("d", "y"))  # an age: the audit of 2026-01-02
    after: Any = custom.get_cluster_custom_object(
        "constraints.celkeeper.io", "v1beta1", kind.lower(), "all-must-have-owner"
    )
    assert after["status"]["byPod"][0]["celkeeperExtra"] == "kept"
    assert after["status"]["violations"][0]["unknownExtra"] == "kept"

    # parameters are validated by the schema of the template
    bad = copy.deepcopy(constraint)
    bad["metadata"]["name"] = "bad-parameters"
    bad["spec"]["parameters"]["labels"] = "owner"
    refused = cluster.kubectl("apply", "-f", "-", input=bad, check=False)
    assert refused.returncode != 0
    assert "spec.parameters.labels" in refused.stderr
    # and match by Gatekeeper's match schema
    bad_match = copy.deepcopy(constraint)
    bad_match["metadata"]["name"] = "bad-match"
    bad_match["spec"]["match"]["scope"] = "Everywhere"
    refused = cluster.kubectl("apply", "-f", "-", input=bad_match, check=False)
    assert refused.returncode != 0
    assert "spec.match.scope" in refused.stderr
    long_name = copy.deepcopy(constraint)
    long_name["metadata"]["name"] = "x" * 64
    refused = cluster.kubectl("apply", "-f", "-", input=long_name, check=False)
    assert refused.returncode != 0
    assert "metadata.name" in refused.stderr


@pytest.mark.parametrize("directory", library_dirs() + example_dirs(), ids=lambda p: p.name)
def test_every_sample_template_makes_a_crd_the_server_accepts(
    static_installed: ControlPlane, directory: Path
) -> None:
    template = unique_template(template_of(directory))
    crd = constraint_crd(template)
    out = static_installed.kubectl("apply", "--dry-run=server", "-f", "-", input=crd)
    assert "(server dry run)" in out.stdout


def test_legacy_and_open_parameter_schemas_are_accepted_and_keep_unknown_parameters(
    static_installed: ControlPlane,
) -> None:
    cluster = static_installed
    kind = "LegacyParams" + secrets.token_hex(3)
    template = {
        "apiVersion": "templates.gatekeeper.sh/v1beta1",
        "kind": "ConstraintTemplate",
        "metadata": {"name": kind.lower()},
        "spec": {
            "crd": {
                "spec": {
                    "names": {"kind": kind},
                    "validation": {
                        "openAPIV3Schema": {
                            "properties": {
                                "nested": {"properties": {"n": {"type": "integer"}}},
                                "list": {"type": "array"},
                            },
                        }
                    },
                }
            }
        },
    }
    crd = constraint_crd(template)
    try:
        cluster.kubectl("apply", "-f", "-", input=crd)
        wait_established(cluster, crd["metadata"]["name"])
        constraint = {
            "apiVersion": "constraints.celkeeper.io/v1beta1",
            "kind": kind,
            "metadata": {"name": "c"},
            "spec": {
                "parameters": {
                    "nested": {"n": 1, "extra": {"deep": True}},
                    "list": [{"a": 1}, "b"],
                    "unknown": "kept",
                }
            },
        }
        apply(cluster, constraint)
        got = json.loads(cluster.kubectl("get", kind.lower(), "c", "-o", "json").stdout)
        assert got["spec"]["parameters"] == constraint["spec"]["parameters"]
    finally:
        cluster.kubectl("delete", "crd", crd["metadata"]["name"], "--ignore-not-found", "--wait=false")


def test_pod_status_objects_keep_what_pods_report(
    static_installed: ControlPlane, kube_namespace: str
) -> None:
    cluster = static_installed
    template_status = {
        "apiVersion": "status.celkeeper.io/v1beta1",
        "kind": "ConstraintTemplatePodStatus",
        "metadata": {
            "name": "pod--a-k8srequiredlabels",
            "namespace": kube_namespace,
            "labels": {
                "internal.celkeeper.io/pod": "pod-a",
                "internal.celkeeper.io/constrainttemplate-name": "k8srequiredlabels",
            },
        },
        "status": {
            "id": "pod-a",
            "templateUID": "1234",
            "observedGeneration": 3,
            "snapshotGeneration": 17,
            "operations": ["webhook"],
            "errors": [
                {
                    "code": "compile_error",
                    "message": "undeclared reference to 'objekt'",
                    "location": "spec.targets[0].code[0].source.validations[0].expression:1:1",
                }
            ],
        },
    }
    constraint_status = {
        "apiVersion": "status.celkeeper.io/v1beta1",
        "kind": "ConstraintPodStatus",
        "metadata": {"name": "pod--a-k8srequiredlabels-all--must--have--owner", "namespace": kube_namespace},
        "status": {
            "id": "pod-a",
            "constraintUID": "5678",
            "observedGeneration": 2,
            "snapshotGeneration": 17,
            "enforced": True,
            "operations": ["webhook"],
        },
    }
    cluster.kubectl("apply", "-f", "-", input=[template_status, constraint_status])
    got = json.loads(
        cluster.kubectl(
            "get",
            "constrainttemplatepodstatuses.status.celkeeper.io",
            "-n",
            kube_namespace,
            "pod--a-k8srequiredlabels",
            "-o",
            "json",
        ).stdout
    )
    assert got["status"] == template_status["status"]
    got = json.loads(
        cluster.kubectl(
            "get",
            "constraintpodstatuses.status.celkeeper.io",
            "-n",
            kube_namespace,
            "pod--a-k8srequiredlabels-all--must--have--owner",
            "-o",
            "json",
        ).stdout
    )
    assert got["status"] == constraint_status["status"]
    row = cluster.kubectl(
        "get", "constraintpodstatuses.status.celkeeper.io", "-n", kube_namespace, "--no-headers"
    ).stdout.split()
    assert row[:4] == ["pod--a-k8srequiredlabels-all--must--have--owner", "pod-a", "2", "true"]

    wrong = copy.deepcopy(constraint_status)
    wrong["metadata"]["name"] = "wrong"
    wrong["status"]["observedGeneration"] = "two"
    refused = cluster.kubectl("apply", "-f", "-", input=wrong, check=False)
    assert refused.returncode != 0
    assert "status.observedGeneration" in refused.stderr
