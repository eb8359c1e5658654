"""The CEL corpus: realistic admission inputs and expressions, with Kubernetes' own answers.

tests/cel/golden/results.json holds what real Kubernetes 1.34 (k8s.io/apiserver v0.34.4's base CEL
environment with the admission variables) answers for every case: the checked output type and the
value, the evaluation error, or the compile error. tests/cel/golden/regenerate.py rebuilds it (needs
Go); the tests only read it.
"""

from __future__ import annotations

import copy
from typing import Any

from tests.support.pods import container

POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "web-7d9f8b6c5-x2x4k",
        "namespace": "shop",
        "uid": "9a8b7c6d-1234-4f5e-8a9b-0c1d2e3f4a5b",
        "generateName": "web-7d9f8b6c5-",
        "labels": {"app": "web", "team": "storefront", "tier": "frontend", "pod-template-hash": "7d9f8b6c5"},
        "annotations": {
            "prometheus.io/scrape": "true",
            "prometheus.io/port": "9090",
            "kubernetes.io/description": "storefront web server",
        },
        "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d9f8b6c5", "controller": True}
        ],
    },
    "spec": {
        "serviceAccountName": "web",
        "automountServiceAccountToken": False,
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "securityContext": {
            "runAsUser": 1000,
            "runAsGroup": 3000,
            "fsGroup": 2000,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [
            container("web", "registry.example.com/shop/web:1.4.2"),
            container("sidecar", "registry.example.com/infra/envoy:1.29.1", ports=[{"containerPort": 15001}]),
            container(
                "debug",
                "docker.io/library/busybox:latest",
                securityContext={"privileged": True, "capabilities": {"add": ["NET_ADMIN", "SYS_TIME"]}},
                resources={"limits": {"cpu": "2", "memory": "1Gi"}},
            ),
        ],
        "initContainers": [container("init-config", "registry.example.com/shop/init:0.3", ports=[])],
        "volumes": [
            {"name": "config", "configMap": {"name": "web-config"}},
            {"name": "cache", "emptyDir": {"sizeLimit": "500Mi"}},
            {"name": "host-logs", "hostPath": {"path": "/var/log", "type": "Directory"}},
        ],
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "web", "effect": "NoSchedule"}],
        "hostNetwork": False,
        "priority": 1000,
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "overhead": {"cpu": "0.25"},
    },
    "status": {"phase": "Pending", "qosClass": "Burstable"},
}

POD_UPDATED = copy.deepcopy(POD)
POD_UPDATED["metadata"]["labels"]["team"] = "platform"
POD_UPDATED["metadata"]["annotations"]["owner"] = "alice"
POD_UPDATED["spec"]["containers"][0]["image"] = "registry.example.com/shop/web:1.5.0"

DEPLOYMENT: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web", "namespace": "shop", "labels": {"app": "web", "owner": "storefront"}},
    "spec": {
        "replicas": 12,
        "revisionHistoryLimit": 5,
        "selector": {"matchLabels": {"app": "web"}},
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
        "template": {
            "metadata": {"labels": {"app": "web", "tier": "frontend"}},
            "spec": {"containers": [container("web", "registry.example.com/shop/web:1.4.2")]},
        },
    },
}

INGRESS: dict[str, Any] = {
    "apiVersion": "networking.k8s.io/v1",
    "kind": "Ingress",
    "metadata": {
        "name": "shop",
        "namespace": "shop",
        "annotations": {"nginx.ingress.kubernetes.io/ssl-redirect": "true"},
    },
    "spec": {
        "ingressClassName": "nginx",
        "tls": [{"hosts": ["shop.example.com", "www.shop.example.com"], "secretName": "shop-tls"}],
        "rules": [
            {
                "host": "shop.example.com",
                "http": {
                    "paths": [
                        {
                            "path": "/",
                            "pathType": "Prefix",
                            "backend": {"service": {"name": "web", "port": {"number": 80}}},
                        },
                        {
                            "path": "/api",
                            "pathType": "Prefix",
                            "backend": {"service": {"name": "api", "port": {"number": 8080}}},
                        },
                    ]
                },
            },
            {
                "host": "admin.example.org",
                "http": {
                    "paths": [
                        {
                            "path": "/",
                            "pathType": "Exact",
                            "backend": {"service": {"name": "admin", "port": {"name": "http"}}},
                        }
                    ]
                },
            },
        ],
    },
}

SERVICE: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "web", "namespace": "shop", "labels": {"app": "web"}},
    "spec": {
        "type": "LoadBalancer",
        "selector": {"app": "web"},
        "externalIPs": ["203.0.113.10", "10.0.0.5"],
        "loadBalancerSourceRanges": ["192.168.0.0/16", "0.0.0.0/0"],
        "ports": [
            {"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"},
            {"name": "https", "port": 443, "targetPort": 8443, "protocol": "TCP", "nodePort": 30443},
        ],
    },
}

NAMESPACE: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Namespace",
    "metadata": {
        "name": "shop",
        "labels": {"kubernetes.io/metadata.name": "shop", "env": "prod", "owner": "storefront"},
    },
}

CONFIGMAP: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "web-config", "namespace": "shop"},
    "data": {
        "app.yaml": "port: 8080\nlog: info\n",
        "MAX_CONNECTIONS": "200",
        "endpoint": "https://api.example.com:8443/v1?region=eu&region=us",
    },
}


def _request(
    operation: str, kind: str, resource: str, group: str = "", version: str = "v1"
) -> dict[str, Any]:
    return {
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": resource},
        "requestKind": {"group": group, "version": version, "kind": kind},
        "requestResource": {"group": group, "version": version, "resource": resource},
        "name": "web",
        "namespace": "shop",
        "operation": operation,
        "userInfo": {
            "username": "alice@example.com",
            "uid": "1001",
            "groups": ["developers", "system:authenticated"],
        },
        "dryRun": False,
        "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
    }


PARAMS: dict[str, Any] = {
    "exemptImages": ["docker.io/library/busybox:*", "registry.example.com/infra/envoy:1.29.1"],
    "repos": ["registry.example.com/", "gcr.io/distroless/"],
    "labels": [{"key": "app"}, {"key": "team", "allowedRegex": "^[a-z]+$"}],
    "maxReplicas": 10,
    "allowedCapabilities": ["NET_BIND_SERVICE"],
    "cpuLimit": "1",
    "memoryLimit": "512Mi",
    "allowedHosts": ["example.com"],
    "ranges": [{"min": 1000, "max": 2000}],
}

#: name -> the variables of one admission request (missing variables are null)
INPUTS: dict[str, dict[str, Any]] = {
    "none": {},
    "pod_create": {
        "object": POD,
        "request": _request("CREATE", "Pod", "pods"),
        "params": PARAMS,
        "namespaceObject": NAMESPACE,
    },
    "pod_update": {
        "object": POD_UPDATED,
        "oldObject": POD,
        "request": _request("UPDATE", "Pod", "pods"),
        "params": PARAMS,
    },
    "pod_delete": {"oldObject": POD, "request": _request("DELETE", "Pod", "pods"), "params": PARAMS},
    "deployment": {
        "object": DEPLOYMENT,
        "request": _request("CREATE", "Deployment", "deployments", "apps"),
        "params": PARAMS,
    },
    "ingress": {
        "object": INGRESS,
        "request": _request("CREATE", "Ingress", "ingresses", "networking.k8s.io"),
        "params": PARAMS,
    },
    "service": {"object": SERVICE, "request": _request("CREATE", "Service", "services"), "params": PARAMS},
    "namespace": {"object": NAMESPACE, "request": _request("CREATE", "Namespace", "namespaces")},
    "configmap": {
        "object": CONFIGMAP,
        "request": _request("UPDATE", "ConfigMap", "configmaps"),
        "oldObject": CONFIGMAP,
    },
}
