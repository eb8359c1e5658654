"""The install as a user runs it, on a control plane of its own: `kubectl apply -f deploy/celkeeper.yaml`,
then the webhook Deployment's pods run as sandboxed processes (tests.support.podsandbox) with exactly the
Deployment's args, env, user and volumes and the service account's real token; an EndpointSlice names
them behind the manifest's Service, as the EndpointSlice controller would once they are ready.

The control plane runs kube-apiserver with `--enable-aggregator-routing`, so it calls webhooks at the
endpoints of their Service (there is no kube-proxy to route the ClusterIP).
"""

from __future__ import annotations

import base64
import json
import secrets
import ssl
import sys
import urllib.error
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from celkeeper.documents import parse_documents
from tests.support.apiserver import ControlPlane
from tests.support.podsandbox import SandboxPod
from tests.support.serve import ROOT
from tests.support.waiting import wait_for

INSTALL = ROOT / "deploy" / "celkeeper.yaml"
NAMESPACE = "celkeeper-system"
SECRET = "celkeeper-webhook-server-cert"
SERVICE = "celkeeper-webhook-service"
WEBHOOK_CONFIGURATION = "celkeeper-validating-webhook-configuration"
MUTATING_CONFIGURATION = "celkeeper-mutating-webhook-configuration"
SERVICE_ACCOUNT = "celkeeper-webhook"
AUDIT = "celkeeper-audit"  # the audit's Deployment and ServiceAccount
AUDIT_METRICS_PORT = 8888
SERVER_NAME = f"{SERVICE}.{NAMESPACE}.svc"
APISERVER_ARGS = ("--enable-aggregator-routing=true",)


def install_documents() -> list[dict[str, Any]]:
    text = INSTALL.read_text(encoding="utf-8")
    return [json.loads(json.dumps(doc.data)) for doc in parse_documents(text, str(INSTALL)).documents]


def find(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, f"{len(found)} {kind} {name or ''} in {INSTALL}"
    return found[0]


def secret_data(cluster: ControlPlane) -> dict[str, bytes]:
    proc = cluster.kubectl("get", "secret", SECRET, "-n", NAMESPACE, "-o", "json")
    data = json.loads(proc.stdout).get("data") or {}
    return {key: base64.b64decode(value) for key, value in data.items()}


def webhook_bundles(cluster: ControlPlane) -> list[bytes]:
    """The caBundle of every webhook of the validating and the mutating configurations."""
    found = []
    for kind, name in (
        ("validatingwebhookconfiguration", WEBHOOK_CONFIGURATION),
        ("mutatingwebhookconfiguration", MUTATING_CONFIGURATION),
    ):
        proc = cluster.kubectl("get", kind, name, "-o", "json")
        found += [
            base64.b64decode(w.get("clientConfig", {}).get("caBundle") or "")
            for w in json.loads(proc.stdout)["webhooks"]
        ]
    return found


class Installation:
    """deploy/celkeeper.yaml applied and its webhook pods running (with `extra_args` after the
    Deployment's own)."""

    def __init__(self, cluster: ControlPlane, workdir: Path, extra_args: Sequence[str] = ()) -> None:
        self.cluster = cluster
        self.workdir = workdir
        self.extra_args = tuple(extra_args)
        self.docs = install_documents()
        self.deployment = find(self.docs, "Deployment", "celkeeper-webhook")
        self.audit_deployment = find(self.docs, "Deployment", AUDIT)
        self.pods: list[SandboxPod] = []
        self.audit: SandboxPod | None = None
        self.ready_seconds = 0.0

    @property
    def replicas(self) -> int:
        return int(self.deployment["spec"]["replicas"])

    def apply(self) -> None:
        self.cluster.kubectl("apply", "-f", str(INSTALL))
        self.cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")

    def token(self, service_account: str = SERVICE_ACCOUNT) -> str:
        return self.cluster.kubectl(
            "create", "token", service_account, "-n", NAMESPACE, "--duration=2h"
        ).stdout.strip()

    def pod_object(self, name: str, deployment: dict[str, Any] | None = None) -> dict[str, Any]:
        """The Pod the ReplicaSet would create (stored, never scheduled: there is no node)."""
        template = (deployment or self.deployment)["spec"]["template"]
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {**template["metadata"], "name": name, "namespace": NAMESPACE},
            "spec": template["spec"],
        }

    def start_pod(self, name: str | None = None) -> SandboxPod:
        name = name or f"celkeeper-webhook-{secrets.token_hex(5)[:10]}-{secrets.token_hex(3)[:5]}"
        self.cluster.kubectl("create", "-f", "-", input=self.pod_object(name))
        pod = SandboxPod(
            self.cluster,
            self.deployment,
            name,
            self.workdir / name,
            [str(Path(sys.executable).parent / "celkeeper")],
            token=self.token(),
            extra_args=self.extra_args,
        )
        self.pods.append(pod)
        pod.start()
        return pod

    def start(self) -> None:
        for _ in range(self.replicas):
            self.start_pod()
        for pod in self.pods:
            self.wait_ready(pod)
        self.publish_endpoints()

    def start_audit(self) -> SandboxPod:
        """The audit Deployment's one pod, with its own service account's token."""
        assert self.audit is None, "the audit is a singleton"
        name = f"{AUDIT}-{secrets.token_hex(5)[:10]}-{secrets.token_hex(3)[:5]}"
        self.cluster.kubectl("create", "-f", "-", input=self.pod_object(name, self.audit_deployment))
        self.audit = SandboxPod(
            self.cluster,
            self.audit_deployment,
            name,
            self.workdir / name,
            [str(Path(sys.executable).parent / "celkeeper")],
            token=self.token(AUDIT),
        )
        self.audit.start()
        return self.audit

    def audit_probe(self, path: str) -> int:
        """The audit's probes (plain HTTP on its metrics port, as its Deployment's probes say)."""
        assert self.audit is not None
        try:
            url = f"http://{self.audit.ip}:{AUDIT_METRICS_PORT}{path}"
            with urllib.request.urlopen(url, timeout=5) as resp:
                return int(resp.status)
        except urllib.error.HTTPError as err:
            return err.code
        except OSError:
            return 0

    def stop(self) -> None:
        """Every pod stopped at once (each drains for seconds after SIGTERM, as its Deployment says)."""
        pods = [*self.pods, *([self.audit] if self.audit else [])]
        with ThreadPoolExecutor(max_workers=max(1, len(pods))) as pool:
            for done in [pool.submit(pod.stop) for pod in pods]:
                done.result()

    # -- what the kubelet and the EndpointSlice controller would do ------------------------------------
    def ca_bundle(self) -> bytes:
        return secret_data(self.cluster).get("ca-bundle.crt", b"")

    def readyz(self, pod: SandboxPod) -> int:
        """The readiness probe (HTTPS; like the kubelet it does not verify the certificate)."""
        return self.readyz_detail(pod)[0]

    def readyz_detail(self, pod: SandboxPod) -> tuple[int, dict[str, Any]]:
        """/readyz's status and body (0 and {} when the pod does not answer)."""
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        try:
            with urllib.request.urlopen(f"https://{pod.ip}:8443/readyz", timeout=5, context=context) as resp:
                return int(resp.status), json.loads(resp.read())
        except urllib.error.HTTPError as err:
            return err.code, {}
        except (OSError, ValueError):
            return 0, {}

    def wait_ready(self, pod: SandboxPod, timeout: float = 120.0) -> None:
        def ready() -> bool:
            assert pod.running(), f"pod {pod.name} exited:\n{pod.log()}"
            return self.readyz(pod) == 200

        try:
            wait_for(ready, timeout=timeout, interval=0.5, what=f"pod {pod.name} to be ready")
        except TimeoutError as err:
            raise TimeoutError(f"{err}\n{pod.log()}") from None

    def publish_endpoints(self) -> None:
        """One EndpointSlice with every ready pod, on the Service's port name."""
        service = find(self.docs, "Service", SERVICE)
        port = service["spec"]["ports"][0]
        ready = [pod for pod in self.pods if pod.running()]
        slice_ = {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": f"{SERVICE}-sandbox",
                "namespace": NAMESPACE,
                "labels": {
                    "kubernetes.io/service-name": SERVICE,
                    "endpointslice.kubernetes.io/managed-by": "tests.celkeeper.io",
                },
            },
            "addressType": "IPv4",
            "ports": [{"name": port["name"], "port": 8443, "protocol": "TCP"}],
            "endpoints": [
                {
                    "addresses": [pod.ip],
                    "conditions": {"ready": True},
                    "targetRef": {"kind": "Pod", "namespace": NAMESPACE, "name": pod.name},
                }
                for pod in ready
            ],
        }
        self.cluster.kubectl("apply", "-f", "-", input=slice_)

    def cert_file(self, pod: SandboxPod) -> bytes:
        """What the pod serves: tls.crt in its emptyDir, read through its mount namespace."""
        assert pod.process is not None
        return (Path(f"/proc/{pod.process.pid}/root") / "certs" / "tls.crt").read_bytes()


def serving_certificate(host: str, ca_pem: bytes) -> bytes:
    """The certificate a pod presents, verified as the API server verifies it (CA bundle, service name)."""
    context = ssl.create_default_context(cadata=ca_pem.decode())
    import socket

    with (
        socket.create_connection((host, 8443), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname=SERVER_NAME) as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return ssl.DER_cert_to_PEM_cert(der).encode()
