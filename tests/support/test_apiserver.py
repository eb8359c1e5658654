"""The test control plane is a real Kubernetes API server: kubectl and the Python client see one state,
CRDs get established, server-side dry-run validates without storing, RBAC is enforced."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client

from tests.support.apiserver import ControlPlane, KubectlError, wait_for

pytestmark = pytest.mark.kube


def test_kubectl_and_python_client_share_one_api_server(
    kube_cluster: ControlPlane, kube_namespace: str
) -> None:
    kube_cluster.kubectl(
        "apply",
        "-n",
        kube_namespace,
        "-f",
        "-",
        input={
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "from-kubectl"},
            "data": {"colour": "teal", "count": "3"},
        },
    )
    core = client.CoreV1Api(kube_cluster.api_client)
    read = core.read_namespaced_config_map("from-kubectl", kube_namespace)
    assert read.data == {"colour": "teal", "count": "3"}
    assert read.metadata is not None
    assert read.metadata.uid

    meta = client.V1ObjectMeta(name="from-python", labels={"made-by": "python"})
    core.create_namespaced_config_map(kube_namespace, client.V1ConfigMap(metadata=meta, data={"k": "v"}))
    got = json.loads(
        kube_cluster.kubectl("get", "configmap", "from-python", "-n", kube_namespace, "-o", "json").stdout
    )
    assert got["data"] == {"k": "v"}
    assert got["metadata"]["labels"] == {"made-by": "python"}
    names = kube_cluster.kubectl(
        "get", "configmaps", "-n", kube_namespace, "-l", "made-by=python", "-o", "name"
    ).stdout.split()
    assert names == ["configmap/from-python"]


def test_each_test_gets_a_fresh_empty_namespace(kube_cluster: ControlPlane, kube_namespace: str) -> None:
    core = client.CoreV1Api(kube_cluster.api_client)
    assert kube_namespace.startswith("t-each-test-gets-a-fresh-empty-namespace-")
    status = core.read_namespace(kube_namespace).status
    assert status is not None
    assert status.phase == "Active"
    assert core.list_namespaced_config_map(kube_namespace).items == []
    default_ns = kube_cluster.kubectl("config", "view", "--minify", "-o", "jsonpath={..namespace}").stdout
    assert default_ns == "default"


WIDGET_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.harness.celkeeper.test"},
    "spec": {
        "group": "harness.celkeeper.test",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "required": ["size"],
                                "properties": {"size": {"type": "integer", "minimum": 1}},
                            }
                        },
                    }
                },
            }
        ],
    },
}


def test_a_crd_gets_established_and_serves_its_kind(kube_cluster: ControlPlane, kube_namespace: str) -> None:
    kube_cluster.kubectl("apply", "-f", "-", input=WIDGET_CRD)
    ext = client.ApiextensionsV1Api(kube_cluster.api_client)

    def established() -> bool:
        status = ext.read_custom_resource_definition(WIDGET_CRD["metadata"]["name"]).status
        conditions = (status.conditions if status else None) or []
        return any(c.type == "Established" and c.status == "True" for c in conditions)

    wait_for(established, timeout=30, what="the Widget CRD to be Established")
    kube_cluster.kubectl(
        "wait", "--for=condition=Established", "crd/widgets.harness.celkeeper.test", "--timeout=30s"
    )

    widget = {
        "apiVersion": "harness.celkeeper.test/v1",
        "kind": "Widget",
        "metadata": {"name": "w1"},
        "spec": {"size": 2},
    }
    # Discovery of a new group can lag behind Established for a moment.
    wait_for(
        lambda: (
            kube_cluster.kubectl(
                "apply", "-n", kube_namespace, "-f", "-", input=widget, check=False
            ).returncode
            == 0
        ),
        timeout=30,
        what="kubectl to create a Widget",
    )
    custom = client.CustomObjectsApi(kube_cluster.api_client)
    got: Any = custom.get_namespaced_custom_object(
        "harness.celkeeper.test", "v1", kube_namespace, "widgets", "w1"
    )
    assert got["spec"] == {"size": 2}

    bad = {**widget, "metadata": {"name": "w2"}, "spec": {"size": 0}}
    refused = kube_cluster.kubectl("apply", "-n", kube_namespace, "-f", "-", input=bad, check=False)
    assert refused.returncode != 0
    assert "spec.size" in refused.stderr


def test_server_side_dry_run_validates_without_storing(
    kube_cluster: ControlPlane, kube_namespace: str
) -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dry"}, "data": {"a": "b"}}
    out = kube_cluster.kubectl("apply", "--dry-run=server", "-n", kube_namespace, "-f", "-", input=cm)
    assert "configmap/dry" in out.stdout
    assert "(server dry run)" in out.stdout
    gone = kube_cluster.kubectl("get", "configmap", "dry", "-n", kube_namespace, check=False)
    assert gone.returncode != 0
    assert "NotFound" in gone.stderr

    invalid = {**cm, "metadata": {"name": "Not_A_Valid_Name"}}
    with pytest.raises(KubectlError) as err:
        kube_cluster.kubectl("apply", "--dry-run=server", "-n", kube_namespace, "-f", "-", input=invalid)
    assert "Invalid value" in err.value.stderr
    assert "Not_A_Valid_Name" in str(err.value)


def test_rbac_is_enforced_for_non_admin_users(kube_cluster: ControlPlane, kube_namespace: str) -> None:
    jane = kube_cluster.kubeconfig_for("jane", groups=["developers"])
    denied = kube_cluster.kubectl("get", "configmaps", "-n", kube_namespace, kubeconfig=jane, check=False)
    assert denied.returncode != 0
    assert 'User "jane" cannot list resource "configmaps"' in denied.stderr

    rbac = [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "cm-reader", "namespace": kube_namespace},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "developers-read", "namespace": kube_namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cm-reader"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "developers"}],
        },
    ]
    kube_cluster.kubectl("apply", "-f", "-", input=rbac)
    wait_for(
        lambda: (
            kube_cluster.kubectl(
                "get", "configmaps", "-n", kube_namespace, kubeconfig=jane, check=False
            ).returncode
            == 0
        ),
        timeout=30,
        what="the RoleBinding to take effect",
    )
    still_denied = kube_cluster.kubectl(
        "create", "configmap", "x", "-n", kube_namespace, kubeconfig=jane, check=False
    )
    assert 'cannot create resource "configmaps"' in still_denied.stderr


def test_readyz_and_version_are_those_of_the_built_server(kube_cluster: ControlPlane) -> None:
    status, body = kube_cluster.request("/readyz")
    assert (status, body) == (200, "ok")
    version = json.loads(kube_cluster.kubectl("version", "-o", "json").stdout)
    assert version["serverVersion"]["gitVersion"] == f"v{kube_cluster.binaries.kube_version}"
