"""/v1/admitlabel registered in a real kube-apiserver, as docs/security.md says to register it, driven by
the real kubectl: a namespace that is not allowed to carry admission.celkeeper.io/ignore can neither
be created with it nor labelled with it; an allowed one can (issue 12)."""

from __future__ import annotations

import base64
import secrets
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.support.apiserver import ControlPlane
from tests.support.serve import POLICIES, ServeProcess
from tests.support.waiting import wait_for

pytestmark = pytest.mark.kube

LABEL = "admission.celkeeper.io/ignore"
REFUSAL = f"Only exempt namespace can have the {LABEL} label"


@dataclass
class Guard:
    cluster: ControlPlane
    token: str  # test namespaces carry celkeeper-guard-test=<token>: only they go to this webhook

    def namespace(self, name: str, *labels: str) -> dict[str, object]:
        values = {"celkeeper-guard-test": self.token, **dict.fromkeys(labels, "true")}
        return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": values}}


def label_guard_configuration(name: str, url: str, ca_pem: bytes, token: str) -> dict[str, object]:
    """The registration docs/security.md gives for /v1/admitlabel, scoped to this test's namespaces."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [
            {
                "name": "check-ignore-label.celkeeper.io",
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": "Fail",
                "matchPolicy": "Exact",
                "timeoutSeconds": 3,
                "clientConfig": {"url": url, "caBundle": base64.b64encode(ca_pem).decode("ascii")},
                "rules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["*"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["namespaces"],
                        "scope": "*",
                    }
                ],
                "objectSelector": {"matchLabels": {"celkeeper-guard-test": token}},
            }
        ],
    }


@pytest.fixture(scope="module")
def guard(kube_cluster: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Guard]:
    workdir = tmp_path_factory.mktemp("guard")
    server = ServeProcess(
        workdir, POLICIES, workers=1, args=["--ignore-label-namespace", "guard-ok-*"]
    ).start()
    token = secrets.token_hex(4)
    name = f"celkeeper-label-guard-{token}"
    url = f"https://127.0.0.1:{server.port}/v1/admitlabel"
    kube_cluster.kubectl(
        "apply",
        "-f",
        "-",
        input=label_guard_configuration(name, url, server.certs.ca_cert.read_bytes(), token),
    )
    found = Guard(kube_cluster, token)
    try:
        probe = found.namespace(f"guard-probe-{token}", LABEL)

        def refused() -> bool:  # the API server sees the configuration after its informer resyncs
            proc = kube_cluster.kubectl("create", "--dry-run=server", "-f", "-", input=probe, check=False)
            return proc.returncode != 0 and REFUSAL in proc.stderr

        wait_for(refused, timeout=30, interval=0.2, what="the label guard to be called")
        yield found
    finally:
        kube_cluster.kubectl(
            "delete", "validatingwebhookconfiguration", name, "--ignore-not-found", check=False
        )
        server.stop()


def _create(guard: Guard, obj: dict[str, object]) -> tuple[int, str]:
    proc = guard.cluster.kubectl("create", "-f", "-", input=obj, check=False)
    return proc.returncode, proc.stderr


def test_a_namespace_cannot_be_created_with_the_ignore_label(guard: Guard) -> None:
    code, err = _create(guard, guard.namespace(f"guard-{guard.token}-a", LABEL))
    assert code != 0 and REFUSAL in err and "check-ignore-label.celkeeper.io" in err


def test_an_allowed_namespace_can_carry_it(guard: Guard) -> None:
    name = f"guard-ok-{guard.token}"
    assert _create(guard, guard.namespace(name, LABEL)) == (0, "")
    guard.cluster.kubectl("delete", "namespace", name, "--wait=false")


def test_a_namespace_cannot_be_labelled_with_it_later(guard: Guard) -> None:
    name = f"guard-{guard.token}-b"
    assert _create(guard, guard.namespace(name))[0] == 0
    try:
        proc = guard.cluster.kubectl("label", "namespace", name, f"{LABEL}=true", check=False)
        assert proc.returncode != 0 and REFUSAL in proc.stderr
        labels = guard.cluster.kubectl("get", "namespace", name, "-o", "jsonpath={.metadata.labels}").stdout
        assert LABEL not in labels
    finally:
        guard.cluster.kubectl("delete", "namespace", name, "--wait=false")
