"""celkeeper's own CRDs: ConstraintTemplate (as Gatekeeper's v1 template) and the per-pod status kinds."""

from __future__ import annotations

from typing import Any

import pytest

from celkeeper.crds import (
    constraint_pod_status_crd,
    constraint_template_crd,
    constraint_template_pod_status_crd,
    names,
    static_crds,
    structural_errors,
)
from tests.crds.helpers import schema_at, walk


def only_version(crd: dict[str, Any]) -> dict[str, Any]:
    (version,) = crd["spec"]["versions"]
    return version


def schema_of(crd: dict[str, Any]) -> dict[str, Any]:
    return only_version(crd)["schema"]["openAPIV3Schema"]


# --- ConstraintTemplate ---------------------------------------------------------------------------------


def test_template_crd_is_cluster_scoped_v1_served_and_stored_with_a_status_subresource() -> None:
    crd = constraint_template_crd()
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["kind"] == "CustomResourceDefinition"
    assert crd["metadata"]["name"] == "constrainttemplates.templates.celkeeper.io"
    assert crd["metadata"]["labels"] == {"celkeeper.io/system": "yes"}
    spec = crd["spec"]
    assert spec["group"] == "templates.celkeeper.io"
    assert spec["scope"] == "Cluster"
    assert spec["names"] == {
        "kind": "ConstraintTemplate",
        "listKind": "ConstraintTemplateList",
        "plural": "constrainttemplates",
        "singular": "constrainttemplate",
    }
    version = only_version(crd)
    assert (version["name"], version["served"], version["storage"]) == ("v1", True, True)
    assert version["subresources"] == {"status": {}}


def test_template_schema_mirrors_gatekeepers_v1_template() -> None:
    schema = schema_of(constraint_template_crd())
    assert schema["type"] == "object"
    assert schema_at(schema, "spec.crd.spec.names.kind")["type"] == "string"
    assert schema_at(schema, "spec.crd.spec.names.shortNames")["items"] == {"type": "string"}

    validation = schema_at(schema, "spec.crd.spec.validation")
    assert validation["default"] == {"legacySchema": False}
    assert schema_at(schema, "spec.crd.spec.validation.legacySchema")["default"] is False
    parameters = schema_at(schema, "spec.crd.spec.validation.openAPIV3Schema")
    assert parameters["type"] == "object"
    assert parameters["x-kubernetes-preserve-unknown-fields"] is True

    targets = schema_at(schema, "spec.targets")
    assert targets["type"] == "array"
    assert set(targets["items"]["properties"]) == {"target", "rego", "libs", "code", "operations"}
    code = schema_at(schema, "spec.targets.[].code")
    assert code["x-kubernetes-list-type"] == "map"
    assert code["x-kubernetes-list-map-keys"] == ["engine"]
    assert code["items"]["required"] == ["engine", "source"]
    source = schema_at(schema, "spec.targets.[].code.[].source")
    assert source.get("x-kubernetes-preserve-unknown-fields") is True
    assert "type" not in source  # any value: CEL validations, variables, or Rego text
    assert schema_at(schema, "spec.targets.[].libs")["items"] == {"type": "string"}
    assert schema_at(schema, "spec.targets.[].operations.[]")["enum"] == [
        "*",
        "CREATE",
        "DELETE",
        "UPDATE",
        "CONNECT",
    ]


def test_template_status_has_created_and_by_pod_entries_with_errors() -> None:
    schema = schema_of(constraint_template_crd())
    assert schema_at(schema, "status.created")["type"] == "boolean"
    by_pod = schema_at(schema, "status.byPod.[]")
    assert by_pod["x-kubernetes-preserve-unknown-fields"] is True
    for field, kind in [
        ("id", "string"),
        ("observedGeneration", "integer"),
        ("templateUID", "string"),
        ("snapshotGeneration", "integer"),
    ]:
        assert by_pod["properties"][field]["type"] == kind
    error = schema_at(schema, "status.byPod.[].errors.[]")
    assert set(error["properties"]) == {"code", "message", "location"}
    assert error["required"] == ["code", "message"]


def test_template_printer_columns_show_the_kind_created_and_age() -> None:
    version = only_version(constraint_template_crd())
    columns = {c["name"]: (c["type"], c["jsonPath"]) for c in version["additionalPrinterColumns"]}
    assert columns == {
        "Kind": ("string", ".spec.crd.spec.names.kind"),
        "Created": ("boolean", ".status.created"),
        "Age": ("date", ".metadata.creationTimestamp"),
    }


# --- per-pod status -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "kind", "plural"),
    [
        (constraint_template_pod_status_crd, "ConstraintTemplatePodStatus", "constrainttemplatepodstatuses"),
        (constraint_pod_status_crd, "ConstraintPodStatus", "constraintpodstatuses"),
    ],
)
def test_pod_status_crds_are_namespaced_v1beta1_in_the_status_group(
    build: Any, kind: str, plural: str
) -> None:
    crd = build()
    assert crd["metadata"]["name"] == f"{plural}.status.celkeeper.io"
    assert crd["spec"]["group"] == names.STATUS_GROUP == "status.celkeeper.io"
    assert crd["spec"]["scope"] == "Namespaced"
    assert crd["spec"]["names"]["kind"] == kind
    assert crd["spec"]["names"]["plural"] == plural
    version = only_version(crd)
    assert (version["name"], version["served"], version["storage"]) == ("v1beta1", True, True)
    # the whole object is status, written by one pod: no status subresource (as Gatekeeper's)
    assert "subresources" not in version
    status = schema_at(schema_of(crd), "status")
    for field, type_ in [
        ("id", "string"),
        ("observedGeneration", "integer"),
        ("snapshotGeneration", "integer"),
        ("operations", "array"),
        ("errors", "array"),
    ]:
        assert status["properties"][field]["type"] == type_, field
    assert status["properties"]["observedGeneration"]["format"] == "int64"
    error = schema_at(schema_of(crd), "status.errors.[]")
    assert error["required"] == ["code", "message"]
    assert "line:column" in error["properties"]["location"]["description"]


def test_template_pod_status_carries_the_template_uid() -> None:
    status = schema_at(schema_of(constraint_template_pod_status_crd()), "status")
    assert status["properties"]["templateUID"]["type"] == "string"
    assert "enforced" not in status["properties"]


def test_constraint_pod_status_carries_enforced_and_the_constraint_uid() -> None:
    status = schema_at(schema_of(constraint_pod_status_crd()), "status")
    assert status["properties"]["enforced"]["type"] == "boolean"
    assert status["properties"]["constraintUID"]["type"] == "string"
    point = schema_at(schema_of(constraint_pod_status_crd()), "status.enforcementPointsStatus.[]")
    # Gatekeeper's EnforcementPointStatus: enforcementPoint and state (apis/status/v1beta1)
    assert point["required"] == ["enforcementPoint", "state"]


# --- every static CRD -----------------------------------------------------------------------------------


def test_static_crds_are_the_seven_in_apply_order() -> None:
    assert [c["metadata"]["name"] for c in static_crds()] == [
        "constrainttemplates.templates.celkeeper.io",
        "constrainttemplatepodstatuses.status.celkeeper.io",
        "constraintpodstatuses.status.celkeeper.io",
        "mutatorpodstatuses.status.celkeeper.io",
        "admissionpolicypodstatuses.status.celkeeper.io",
        "syncsets.syncset.celkeeper.io",
        "syncpodstatuses.status.celkeeper.io",
    ]


@pytest.mark.parametrize("crd", static_crds(), ids=lambda c: c["metadata"]["name"])
def test_static_crd_schemas_are_structural(crd: dict[str, Any]) -> None:
    for version in crd["spec"]["versions"]:
        assert structural_errors(version["schema"]["openAPIV3Schema"], root=True) == []


@pytest.mark.parametrize("crd", static_crds(), ids=lambda c: c["metadata"]["name"])
def test_static_crd_names_follow_kubernetes_rules(crd: dict[str, Any]) -> None:
    crd_names = crd["spec"]["names"]
    assert crd["metadata"]["name"] == f"{crd_names['plural']}.{crd['spec']['group']}"
    for key in ("plural", "singular"):
        assert names.is_dns1035_label(crd_names[key])
    assert names.is_dns1035_label(crd_names["kind"].lower())
    assert crd_names["listKind"] == crd_names["kind"] + "List"
    assert crd_names["singular"] == crd_names["kind"].lower()


@pytest.mark.parametrize("crd", static_crds(), ids=lambda c: c["metadata"]["name"])
def test_printer_columns_point_at_fields_of_the_schema(crd: dict[str, Any]) -> None:
    for version in crd["spec"]["versions"]:
        schema = version["schema"]["openAPIV3Schema"]
        for column in version.get("additionalPrinterColumns", []):
            path = column["jsonPath"]
            if path == ".metadata.creationTimestamp":
                continue
            field = schema_at(schema, path.lstrip("."))
            expected = {"boolean": "boolean", "integer": "integer", "string": "string"}[column["type"]]
            assert field["type"] == expected, path


@pytest.mark.parametrize("crd", static_crds(), ids=lambda c: c["metadata"]["name"])
def test_every_node_is_typed_or_open(crd: dict[str, Any]) -> None:
    for path, node in walk(schema_of(crd)):
        assert node.get("type") or node.get("x-kubernetes-preserve-unknown-fields") is True, path


def test_builders_return_fresh_objects() -> None:
    first = constraint_template_crd()
    first["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"].clear()
    assert constraint_template_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
