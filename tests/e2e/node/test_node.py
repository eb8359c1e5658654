"""The node is real: pods from locally built images run, Deployments roll, Services reach their pods,
pods reach the API server through the `kubernetes` Service, and the garbage collector removes
dependents. Everything goes through the real kubectl against tests.support.node's cluster."""

from __future__ import annotations

import ipaddress
import json
from typing import Any

import pytest

from tests.support.node import NodeCluster
from tests.support.node_config import POD_CIDR
from tests.support.waiting import wait_for

IMAGE = "celkeeper.test/nodetest:1"  # hack/kube/images/build.py: imported by the fixture, never pulled


def container(name: str, args: list[str], **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "image": IMAGE,
        "imagePullPolicy": "Never",
        "args": args,
        "securityContext": {
            "runAsNonRoot": True,
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
        **extra,
    }


def server(name: str) -> dict[str, Any]:
    return container(
        name,
        ["serve", "-port", "8080"],
        ports=[{"containerPort": 8080, "name": "http"}],
        readinessProbe={"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 1},
    )


def pod(name: str, namespace: str, containers: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"containers": containers, "terminationGracePeriodSeconds": 1, **spec},
    }


def deployment(name: str, namespace: str, replicas: int) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [server("web")], "terminationGracePeriodSeconds": 1},
            },
        },
    }


def run_to_completion(node: NodeCluster, namespace: str, name: str, args: list[str], **spec: Any) -> str:
    """Run a one-container Pod of `nodetest ARGS` until it ends; return what it fetched (its log less
    nodetest's notes of retries). Fails, with the whole log, if it does not succeed."""
    node.kubectl(
        "apply",
        "-f",
        "-",
        input=pod(name, namespace, [container("main", args)], restartPolicy="Never", **spec),
    )

    def phase() -> str | None:
        value = node.kubectl_json("get", "pod", name, "-n", namespace)["status"].get("phase")
        return value if value in ("Succeeded", "Failed") else None

    ended = wait_for(phase, timeout=120, what=f"pod {name} to finish")
    read = wait_for(lambda: _log(node, namespace, name), timeout=20, what=f"pod {name}'s log")
    assert read is not None  # wait_for returns only what is truthy
    log = read[0]
    assert ended == "Succeeded", f"pod {name} {ended}: {log}"
    return fetched(log)


def fetched(log: str) -> str:
    """What `nodetest get` printed of the answer: its log less the lines it writes to stderr while it
    retries (a Service's ClusterIP answers once kube-proxy's rules are in place, which may be after the
    client pod starts)."""
    return "".join(
        line
        for line in log.splitlines(keepends=True)
        if not (line.startswith("GET ") and line.rstrip().endswith("(retrying)"))
    )


def _log(node: NodeCluster, namespace: str, name: str) -> tuple[str] | None:
    """The container's log; None while kubelet answers that the log file is not there yet (once in a full
    run it did, right after the pod Succeeded: kubelet's "failed to try resolving symlinks in path")."""
    log = node.kubectl("logs", name, "-n", namespace).stdout
    return None if log.startswith("failed to try resolving symlinks in path") else (log,)


def test_a_pod_from_a_locally_built_image_runs_and_is_ready(
    node_cluster: NodeCluster, node_namespace: str
) -> None:
    node_cluster.kubectl("apply", "-f", "-", input=pod("web", node_namespace, [server("web")]))
    node_cluster.kubectl(
        "wait", "--for=condition=Ready", "pod/web", "-n", node_namespace, "--timeout=120s", timeout=130
    )

    status = node_cluster.kubectl_json("get", "pod", "web", "-n", node_namespace)["status"]
    assert ipaddress.ip_address(status["podIP"]) in ipaddress.ip_network(POD_CIDR)
    assert status["containerStatuses"][0]["image"].endswith(IMAGE)
    assert node_cluster.kubectl("logs", "web", "-n", node_namespace).stdout == "serving on :8080 as web\n"
    # kubectl exec: the API server to kubelet (its client certificate) to containerd's streaming server
    inside = node_cluster.kubectl(
        "exec", "web", "-n", node_namespace, "--", "/nodetest", "get", "http://127.0.0.1:8080/from-inside"
    )
    assert inside.stdout == "web /from-inside\n"
    # The readiness probe passed: kubelet reached the pod over the pod network.


def test_a_deployment_rolls_out_and_its_service_reaches_its_pods(
    node_cluster: NodeCluster, node_namespace: str
) -> None:
    ns = node_namespace
    node_cluster.kubectl("apply", "-f", "-", input=deployment("web", ns, replicas=2))
    node_cluster.kubectl("expose", "deployment", "web", "-n", ns, "--port=80", "--target-port=8080")
    node_cluster.kubectl("rollout", "status", "deployment/web", "-n", ns, "--timeout=120s", timeout=130)
    first = {
        p["metadata"]["name"]
        for p in node_cluster.kubectl_json("get", "pods", "-n", ns, "-l", "app=web")["items"]
    }
    assert len(first) == 2

    cluster_ip = node_cluster.kubectl_json("get", "service", "web", "-n", ns)["spec"]["clusterIP"]
    answer = run_to_completion(
        node_cluster, ns, "client", ["get", "-timeout", "60s", f"http://{cluster_ip}/hello"]
    )
    assert answer.split()[0] in first  # kube-proxy sent the ClusterIP to one of the Deployment's pods
    assert answer.split()[1] == "/hello"

    # A change of the pod template rolls: new pods replace the old ones.
    node_cluster.kubectl("set", "env", "deployment/web", "-n", ns, "ROLLED=1")
    node_cluster.kubectl("rollout", "status", "deployment/web", "-n", ns, "--timeout=120s", timeout=130)

    def replaced() -> set[str] | None:
        pods = node_cluster.kubectl_json("get", "pods", "-n", ns, "-l", "app=web")["items"]
        names = {p["metadata"]["name"] for p in pods}
        return names if len(names) == 2 and not names & first else None

    second = wait_for(replaced, timeout=60, what="the old pods to be gone")
    assert second is not None
    replica_sets = node_cluster.kubectl_json("get", "replicasets", "-n", ns, "-l", "app=web")["items"]
    assert sorted(rs["status"].get("replicas", 0) for rs in replica_sets) == [0, 2]
    answer = run_to_completion(
        node_cluster, ns, "client-2", ["get", "-timeout", "60s", f"http://{cluster_ip}/"]
    )
    assert answer.split()[0] in second


def test_pods_reach_the_api_server_through_the_kubernetes_service(
    node_cluster: NodeCluster, node_namespace: str
) -> None:
    sa = "/var/run/secrets/kubernetes.io/serviceaccount"
    log = run_to_completion(
        node_cluster,
        node_namespace,
        "api-client",
        ["get", "-timeout", "60s", "-ca", f"{sa}/ca.crt", "-bearer", f"{sa}/token", "https://10.0.0.1/api"],
    )
    assert json.loads(log)["kind"] == "APIVersions"  # TLS verified against the cluster CA, token accepted


def test_the_garbage_collector_removes_a_deployments_pods(
    node_cluster: NodeCluster, node_namespace: str
) -> None:
    ns = node_namespace
    node_cluster.kubectl("apply", "-f", "-", input=deployment("gone", ns, replicas=1))
    node_cluster.kubectl("rollout", "status", "deployment/gone", "-n", ns, "--timeout=120s", timeout=130)
    assert node_cluster.kubectl_json("get", "pods", "-n", ns, "-l", "app=gone")["items"]

    node_cluster.kubectl("delete", "deployment", "gone", "-n", ns, "--cascade=background")

    def dependents() -> list[str]:
        kinds = node_cluster.kubectl(
            "get", "replicasets,pods", "-n", ns, "-l", "app=gone", "-o", "name"
        ).stdout
        return kinds.split()

    wait_for(lambda: dependents() == [], timeout=90, what="the ReplicaSet and its pods to be collected")


def test_the_garbage_collector_follows_owner_references(
    node_cluster: NodeCluster, node_namespace: str
) -> None:
    ns = node_namespace
    owner = node_cluster.kubectl_json("create", "configmap", "owner", "-n", ns)
    dependent = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "dependent",
            "namespace": ns,
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"]}
            ],
        },
    }
    node_cluster.kubectl("apply", "-f", "-", input=dependent)
    node_cluster.kubectl("delete", "configmap", "owner", "-n", ns)
    wait_for(
        lambda: node_cluster.kubectl("get", "configmap", "dependent", "-n", ns, check=False).returncode != 0,
        timeout=60,
        what="the dependent ConfigMap to be collected",
    )


@pytest.mark.parametrize(
    "what", ["kubelet", "containerd", "kube-proxy", "kube-controller-manager", "kube-scheduler"]
)
def test_every_node_program_runs_in_the_nodes_network_namespace(node_cluster: NodeCluster, what: str) -> None:
    import os

    proc = node_cluster.processes[what]
    assert proc.running()
    assert os.stat(f"/proc/{proc.pid}/ns/net").st_ino == os.stat(node_cluster.netns.path).st_ino
