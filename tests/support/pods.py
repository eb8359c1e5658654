"""A realistic container for test and benchmark Pods (the shape a Deployment's pods have in practice):
ports, requests and limits, a few environment variables, a mount, a restricted securityContext and a
probe. Used by the CEL corpus (tests/cel/corpus.py, whose golden answers depend on it byte for byte)
and the engine benchmark (bench/engine.py)."""

from __future__ import annotations

from typing import Any


def container(
    name: str,
    image: str,
    *,
    env_vars: int = 4,
    env_width: int = 24,
    privileged: bool | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """`env_vars` variables whose values are `env_width` x's long (plus a prefix); securityContext
    .privileged only when given; `extra` fields replace the container's own (e.g. securityContext)."""
    security: dict[str, Any] = {
        "runAsNonRoot": True,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
    }
    if privileged is not None:
        security["privileged"] = privileged
    security["capabilities"] = {"drop": ["ALL"]}
    c: dict[str, Any] = {
        "name": name,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
        "resources": {
            "limits": {"cpu": "500m", "memory": "256Mi"},
            "requests": {"cpu": "250m", "memory": "128Mi"},
        },
        "env": [{"name": f"VAR_{i}", "value": f"value-{i}-" + "x" * env_width} for i in range(env_vars)],
        "volumeMounts": [{"name": "config", "mountPath": "/etc/app", "readOnly": True}],
        "securityContext": security,
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 10},
    }
    c.update(extra)
    return c


def realistic_pod(
    name: str,
    namespace: str,
    *,
    labels: dict[str, str] | None = None,
    image: str = "registry.example.com/team/app:1.4.2",
    privileged: bool | None = None,
) -> dict[str, Any]:
    """A Pod as a Deployment makes it (owner reference, template hash, two containers, volumes,
    tolerations): about 5 KB of JSON once the API server has added its defaults and managedFields."""
    app = labels.get("app", "web") if labels else "web"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "generateName": f"{app}-7d9f8b6c5-",
            "labels": {"app": app, "pod-template-hash": "7d9f8b6c5", "tier": "backend", **(labels or {})},
            "annotations": {
                "prometheus.io/scrape": "true",
                "prometheus.io/port": "9090",
            },
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": f"{app}-7d9f8b6c5",
                    "uid": "5f0c3a56-1a2b-4c3d-9e8f-0123456789ab",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "containers": [
                container("app", image, env_vars=4, privileged=privileged),
                container("metrics-sidecar", "registry.example.com/observability/exporter:0.9.1", env_vars=1),
            ],
            "volumes": [
                {"name": "config", "configMap": {"name": f"{app}-config", "defaultMode": 420}},
                {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}},
            ],
            "serviceAccountName": app,
            "nodeSelector": {"kubernetes.io/os": "linux"},
            "tolerations": [
                {
                    "key": "node.kubernetes.io/unreachable",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
            ],
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": 10001,
                "fsGroup": 10001,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "terminationGracePeriodSeconds": 30,
        },
    }
