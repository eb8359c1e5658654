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
