"""KubeClient against the real API server with a bearer token (a service account's, as a pod's
in-cluster configuration gives it): the token is sent, RBAC applies to its account, a wrong one is
refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from celkeeper.kube import ApiError, KubeClient
from celkeeper.kube.resources import Resource
from tests.support.apiserver import ControlPlane

pytestmark = pytest.mark.kube


def _token_kubeconfig(cluster: ControlPlane, path: Path, token: str) -> Path:
    config = json.loads(cluster.kubeconfig_path.read_text())
    for user in config["users"]:
        user["user"] = {"token": token}
    path.write_text(json.dumps(config))
    return path


def test_a_service_account_token_is_sent_and_its_rbac_applies(
    kube_cluster: ControlPlane, kube_namespace: str, tmp_path: Path
) -> None:
    ns = kube_namespace
    configmaps = Resource("", "v1", "configmaps", "ConfigMap", namespace=ns)
    kube_cluster.kubectl("create", "serviceaccount", "reader", "-n", ns)
    kube_cluster.kubectl("create", "role", "reader", "--verb=list,watch", "--resource=configmaps", "-n", ns)
    kube_cluster.kubectl(
        "create", "rolebinding", "reader", "--role=reader", f"--serviceaccount={ns}:reader", "-n", ns
    )
    kube_cluster.kubectl("create", "configmap", "seen", "-n", ns, "--from-literal=k=v")
    token = kube_cluster.kubectl("create", "token", "reader", "-n", ns).stdout.strip()

    client = KubeClient.connect(str(_token_kubeconfig(kube_cluster, tmp_path / "reader", token)))
    try:
        names = [item["metadata"]["name"] for item in client.list(configmaps).items]
        assert "seen" in names
        with pytest.raises(ApiError) as forbidden:  # its Role lists config maps, nothing else
            client.get(configmaps, "seen")
        assert forbidden.value.status == 403
        assert f"system:serviceaccount:{ns}:reader" in forbidden.value.message
    finally:
        client.close()

    wrong = KubeClient.connect(str(_token_kubeconfig(kube_cluster, tmp_path / "wrong", token[:-4] + "AAAA")))
    try:
        with pytest.raises(ApiError) as refused:
            wrong.list(configmaps)
        assert refused.value.status == 401
    finally:
        wrong.close()
