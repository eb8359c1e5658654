"""Gatekeeper's manager, the oracle of the mutation differential (built by hack/gatekeeper/build.sh), run
out of cluster against a test control plane.

    manager = find_manager()                                   # Path; GatekeeperUnavailable says why
    install_crds(cluster)                                      # Gatekeeper v3.23.1's CRDs, established
    with GatekeeperManager(manager, cluster, workdir, ["--operation=mutation-webhook"]) as gk:
        register_mutating_webhook(cluster, "gatekeeper", gk.url, gk.ca_pem)
        gk.wait_mutators(cluster, {("Assign", "x"): 1})        # its mutation System holds exactly these

The manager runs as Gatekeeper's Deployment runs it, with what a pod has replaced: the admin kubeconfig
(KUBECONFIG) for the service account, a serving certificate of the test's own CA in --cert-dir with
--disable-cert-rotation (the CA goes into the webhook configuration's caBundle), POD_NAMESPACE and
POD_NAME naming a Pod object created in the control plane (the mutator controllers write each mutator's
MutatorPodStatus for it; no kubelet runs it), loopback ports for the webhook and the health probes. Tests
that need it use the `gatekeeper_manager` fixture: they skip with the reason when it cannot run here and
fail instead under CELKEEPER_REQUIRE_GATEKEEPER=1 (CI sets it).
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.support.apiserver import ControlPlane
from tests.support.pki import CertificateAuthority
from tests.support.processes import ManagedProcess, free_port
from tests.support.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = ROOT / "hack" / "gatekeeper" / "build.sh"
NAMESPACE = "gatekeeper-system"
POD = "gatekeeper-mutation"
#: Gatekeeper's own service account, whose requests its webhook does not mutate
SERVICE_ACCOUNT = f"system:serviceaccount:{NAMESPACE}:gatekeeper-admin"


class GatekeeperUnavailable(Exception):
    """Gatekeeper's manager cannot run here; the message says why and how to fix it."""


def find_manager() -> Path:
    """The up-to-date manager binary, or GatekeeperUnavailable."""
    where = subprocess.run(
        [str(BUILD_SCRIPT), "--print"], capture_output=True, text=True, check=True
    ).stdout.strip()
    path = Path(where)
    if subprocess.run([str(BUILD_SCRIPT), "--check"], capture_output=True, check=False).returncode == 0:
        return path
    what = "stale (built from other module files)" if path.exists() else "not built"
    if shutil.which("go") is None:
        raise GatekeeperUnavailable(
            f"Gatekeeper's manager {what} in {path} and no Go toolchain on PATH: install Go, then run "
            f"{BUILD_SCRIPT}"
        )
    raise GatekeeperUnavailable(f"Gatekeeper's manager {what} in {path}: run {BUILD_SCRIPT} (or ./dev test)")


def crd_files() -> list[Path]:
    """Gatekeeper v3.23.1's CRDs as its chart installs them (the module's manifest_staging)."""
    from tests.support.gatekeeper_src import gatekeeper_dir  # imports requirements, which imports us

    return sorted((gatekeeper_dir() / "manifest_staging" / "charts" / "gatekeeper" / "crds").glob("*.yaml"))


def install_crds(cluster: ControlPlane) -> None:
    """Create Gatekeeper's CRDs and wait until the API server serves them."""
    args = ["create"]
    for path in crd_files():
        args += ["-f", str(path)]
    cluster.kubectl(*args, timeout=120)
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all", timeout=90)


class GatekeeperManager:
    """Gatekeeper's manager, out of cluster, against `cluster`."""

    def __init__(
        self,
        binary: Path,
        cluster: ControlPlane,
        workdir: Path,
        args: Sequence[str] = ("--operation=mutation-webhook",),
        port: int = 0,
    ) -> None:
        self.cluster = cluster
        self.workdir = workdir
        self.port = port or free_port()
        self.health_port = free_port()
        self.prometheus_port = free_port()  # Gatekeeper's Prometheus exporter (default :8888, all addresses)
        ca = CertificateAuthority("gatekeeper-test-ca")
        self.ca_pem = ca.cert_pem
        self.cert_dir = workdir / "certs"
        pair = ca.serving_cert(["127.0.0.1", "localhost"])
        pair.write(self.cert_dir, "tls")
        self.binary = binary
        self.args = list(args)
        self.started = False
        self.process = self._process(args)

    def _process(self, args: Sequence[str]) -> ManagedProcess:
        argv = [
            str(self.binary),
            *args,
            "--disable-cert-rotation",
            f"--cert-dir={self.cert_dir}",
            "--host=127.0.0.1",
            f"--port={self.port}",
            f"--health-addr=127.0.0.1:{self.health_port}",
            "--metrics-addr=0",
            f"--prometheus-port={self.prometheus_port}",
            "--shutdown-delay=0",
            "--enable-external-data=false",
        ]
        env = {
            "PATH": "/usr/bin:/bin",
            "KUBECONFIG": str(self.cluster.kubeconfig_path),
            "POD_NAMESPACE": NAMESPACE,
            "POD_NAME": POD,
            "NO_PROXY": "127.0.0.1,localhost",
        }
        return ManagedProcess("gatekeeper", argv, self.workdir / "gatekeeper.log", env=env)

    def restart(self, args: Sequence[str]) -> None:
        """Stop the manager and start it again with `args` (same ports and certificate)."""
        self.stop()
        self.args = list(args)
        self.process = self._process(args)
        self.start()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}/v1/mutate"

    def __enter__(self) -> GatekeeperManager:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, timeout: float = 120.0, attempts: int = 3) -> None:
        """Start the manager and wait until it is ready. A port picked free can be taken before the
        manager binds it (the manager then exits at once): a first start tries other ports."""
        ensure_pod(self.cluster)
        for attempt in range(attempts):
            self.process.start()
            state = wait_for(self._state, timeout=timeout, what="Gatekeeper's manager ready")
            if state == "ready":
                self.started = True
                return
            if self.started or attempt == attempts - 1:
                raise AssertionError(f"Gatekeeper's manager exited:\n{self.log_tail(80)}")
            self.process.stop()
            self.port, self.health_port, self.prometheus_port = free_port(), free_port(), free_port()
            self.process = self._process(self.args)

    def stop(self) -> None:
        self.process.stop()

    def _state(self) -> str:
        """ "ready", "exited", or "" while it starts."""
        if not self.process.running():
            return "exited"
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}/readyz", timeout=2) as resp:
                return "ready" if resp.status == 200 else ""
        except (urllib.error.URLError, OSError):
            return ""

    def log_tail(self, lines: int = 60) -> str:
        return self.process.log_tail(lines)

    def wait_mutators(self, expected: Mapping[tuple[str, str], int], timeout: float = 60.0) -> dict[str, Any]:
        """Wait until Gatekeeper's MutatorPodStatuses are exactly `expected` ((kind, name) -> generation),
        each at its generation: its mutation System then holds exactly those mutators. Returns the
        statuses by (kind/name)."""
        seen: dict[str, Any] = {}

        def settled() -> bool:
            done = self.cluster.kubectl(
                "get", "mutatorpodstatuses.status.gatekeeper.sh", "-n", NAMESPACE, "-o", "json"
            )
            statuses = {}
            for item in json.loads(done.stdout)["items"]:
                labels = item["metadata"].get("labels", {})
                key = (
                    labels.get("internal.gatekeeper.sh/mutator-kind"),
                    labels.get("internal.gatekeeper.sh/mutator-name"),
                )
                statuses[key] = item.get("status", {})
            seen.clear()
            seen.update({f"{k[0]}/{k[1]}": v for k, v in statuses.items()})
            return set(statuses) == set(expected) and all(
                statuses[key].get("observedGeneration") == generation for key, generation in expected.items()
            )

        wait_for(settled, timeout=timeout, what=f"Gatekeeper's mutators {sorted(expected)}: {seen}")
        return dict(seen)


def ensure_pod(cluster: ControlPlane) -> None:
    """The namespace and the Pod object the manager says it runs as (never scheduled: no node)."""
    cluster.kubectl("create", "namespace", NAMESPACE, check=False)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": POD, "namespace": NAMESPACE},
        "spec": {"containers": [{"name": "manager", "image": "openpolicyagent/gatekeeper:v3.23.1"}]},
    }
    cluster.kubectl("apply", "-f", "-", input=pod)


def mutating_webhook(
    name: str, url: str, ca_pem: bytes, object_selector: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """A MutatingWebhookConfiguration calling `url` as Gatekeeper's chart registers its mutation webhook
    (every group, version and resource, CREATE and UPDATE, matchPolicy Exact), failing closed so that a
    webhook that does not answer shows."""
    webhook: dict[str, Any] = {
        "name": "mutation.gatekeeper.sh",
        "admissionReviewVersions": ["v1", "v1beta1"],
        "sideEffects": "None",
        "failurePolicy": "Fail",
        "matchPolicy": "Exact",
        "reinvocationPolicy": "Never",
        "timeoutSeconds": 10,
        "rules": [
            {
                "apiGroups": ["*"],
                "apiVersions": ["*"],
                "operations": ["CREATE", "UPDATE"],
                "resources": ["*"],
                "scope": "*",
            }
        ],
        "namespaceSelector": {
            "matchExpressions": [{"key": "admission.gatekeeper.sh/ignore", "operator": "DoesNotExist"}]
        },
        "clientConfig": {"url": url, "caBundle": base64.b64encode(ca_pem).decode()},
    }
    if object_selector is not None:
        webhook["objectSelector"] = dict(object_selector)
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [webhook],
    }


def validating_webhook(name: str, url: str, ca_pem: bytes) -> dict[str, Any]:
    """A ValidatingWebhookConfiguration calling `url` for Gatekeeper's mutators (CREATE and UPDATE),
    failing closed: Gatekeeper's validating webhook as its chart registers it, narrowed to mutators."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [
            {
                "name": "validation.gatekeeper.sh",
                "admissionReviewVersions": ["v1", "v1beta1"],
                "sideEffects": "None",
                "failurePolicy": "Fail",
                "matchPolicy": "Exact",
                "timeoutSeconds": 10,
                "rules": [
                    {
                        "apiGroups": ["mutations.gatekeeper.sh"],
                        "apiVersions": ["*"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["*"],
                    }
                ],
                "clientConfig": {"url": url, "caBundle": base64.b64encode(ca_pem).decode()},
            }
        ],
    }
