"""End to end: `celkeeper serve` registered as a ValidatingWebhookConfiguration of a real kube-apiserver,
exercised with the real kubectl. Deny refuses with `[constraint] message`, warn creates and kubectl
prints `Warning:`, dryrun lets the object through silently, an allowed object is created."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator

import pytest

from tests.support.admission import (
    ACTIONS,
    create,
    deny_message,
    enroll_namespace,
    kinds,
    labelled,
    register_webhook,
    unregister_webhook,
    warnings_of,
    webhook_configuration,
    write_policies,
)
from tests.support.apiserver import ControlPlane
from tests.support.serve import ServeProcess

pytestmark = pytest.mark.kube


class Webhook:
    def __init__(self, server: ServeProcess, selector_value: str) -> None:
        self.server = server
        self.selector_value = selector_value


@pytest.fixture(scope="module")
def webhook(kube_cluster: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Webhook]:
    workdir = tmp_path_factory.mktemp("serve")
    server = ServeProcess(workdir, write_policies(workdir / "policies"), workers=1)
    server.start()
    selector = secrets.token_hex(4)
    name = f"celkeeper-e2e-{selector}"
    try:
        url = f"https://127.0.0.1:{server.port}/v1/admit"
        config = webhook_configuration(name, url, server.certs.ca_cert.read_bytes(), selector)
        register_webhook(kube_cluster, config)
        yield Webhook(server, selector)
    finally:
        unregister_webhook(kube_cluster, name)
        server.stop()


@pytest.fixture
def namespace(kube_cluster: ControlPlane, kube_namespace: str, webhook: Webhook) -> str:
    """The test's namespace, enrolled in the webhook; returns once celkeeper really answers for it."""
    enroll_namespace(kube_cluster, kube_namespace, webhook.selector_value)
    return kube_namespace


def exists(cluster: ControlPlane, kind: str, name: str, namespace: str) -> bool:
    proc = cluster.kubectl("get", kind.lower(), name, "-n", namespace, "-o", "json", check=False)
    if proc.returncode != 0:
        assert "NotFound" in proc.stderr, proc.stderr
        return False
    return bool(json.loads(proc.stdout)["metadata"]["uid"])


@pytest.mark.parametrize("kind", kinds())
def test_deny_constraint_refuses_the_object(kube_cluster: ControlPlane, namespace: str, kind: str) -> None:
    obj = labelled(kind, "bad", {ACTIONS["deny"]: "yes", "team": "a"}, namespace)
    proc = create(kube_cluster, obj)
    assert proc.returncode != 0
    assert 'admission webhook "validation.celkeeper.io" denied the request' in proc.stderr
    assert deny_message(kind, "bad") in proc.stderr
    assert not exists(kube_cluster, kind, "bad", namespace)


@pytest.mark.parametrize("kind", kinds())
def test_warn_constraint_creates_and_kubectl_prints_the_warning(
    kube_cluster: ControlPlane, namespace: str, kind: str
) -> None:
    obj = labelled(kind, "noisy", {ACTIONS["warn"]: "yes"}, namespace)
    proc = create(kube_cluster, obj)
    assert proc.returncode == 0, proc.stderr
    assert warnings_of(proc.stderr) == [deny_message(kind, "noisy", "warn")]
    assert exists(kube_cluster, kind, "noisy", namespace)


def test_dryrun_constraint_lets_the_object_through_silently(
    kube_cluster: ControlPlane, namespace: str
) -> None:
    obj = labelled("ConfigMap", "quiet", {ACTIONS["dryrun"]: "yes"}, namespace)
    proc = create(kube_cluster, obj)
    assert proc.returncode == 0, proc.stderr
    assert warnings_of(proc.stderr) == []
    assert "configmap/quiet created" in proc.stdout
    assert exists(kube_cluster, "ConfigMap", "quiet", namespace)


def test_allowed_object_is_created(kube_cluster: ControlPlane, namespace: str) -> None:
    proc = create(kube_cluster, labelled("Deployment", "fine", {"team": "a"}, namespace))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert exists(kube_cluster, "Deployment", "fine", namespace)


def test_every_action_at_once_reports_deny_and_warn(kube_cluster: ControlPlane, namespace: str) -> None:
    labels = dict.fromkeys(ACTIONS.values(), "yes")
    proc = create(kube_cluster, labelled("Pod", "all", labels, namespace))
    assert proc.returncode != 0
    assert deny_message("Pod", "all") in proc.stderr
    assert "[e2e-dryrun]" not in proc.stderr
    assert warnings_of(proc.stderr) == [deny_message("Pod", "all", "warn")]


def test_updates_are_checked_too(kube_cluster: ControlPlane, namespace: str) -> None:
    assert create(kube_cluster, labelled("ConfigMap", "later", {}, namespace)).returncode == 0
    proc = kube_cluster.kubectl(
        "label", "configmap", "later", "-n", namespace, f"{ACTIONS['deny']}=now", check=False
    )
    assert proc.returncode != 0
    assert deny_message("ConfigMap", "later") in proc.stderr
    got = kube_cluster.kubectl("get", "configmap", "later", "-n", namespace, "-o", "json")
    current = json.loads(got.stdout)
    assert ACTIONS["deny"] not in (current["metadata"].get("labels") or {})


def test_an_update_of_an_object_as_large_as_the_api_server_stores_is_decided(
    kube_cluster: ControlPlane, namespace: str
) -> None:
    """An UPDATE's review carries the object twice: a ConfigMap with 1,000,000 newlines of data (the
    API server's limit is 1 MiB; 2 MB as JSON) makes a review of ~4 MB, which is decided (as
    Gatekeeper's webhook, which takes 7 MiB, decides it), not refused as too large (which the API
    server takes as the webhook failing: with failurePolicy Ignore, the update would go through)."""
    big = labelled("ConfigMap", "big", {}, namespace)
    big["data"] = {"blob": "\n" * 1_000_000}
    assert create(kube_cluster, big).returncode == 0
    proc = kube_cluster.kubectl(
        "label", "configmap", "big", "-n", namespace, f"{ACTIONS['deny']}=now", check=False
    )
    assert proc.returncode != 0
    assert "failed calling webhook" not in proc.stderr, proc.stderr[-2000:]
    assert deny_message("ConfigMap", "big") in proc.stderr


def test_server_side_dry_run_is_reviewed_and_stores_nothing(
    kube_cluster: ControlPlane, namespace: str
) -> None:
    bad = create(
        kube_cluster, labelled("ConfigMap", "dry-bad", {ACTIONS["deny"]: "1"}, namespace), "--dry-run=server"
    )
    assert bad.returncode != 0
    assert deny_message("ConfigMap", "dry-bad") in bad.stderr
    good = create(
        kube_cluster, labelled("ConfigMap", "dry-good", {ACTIONS["warn"]: "1"}, namespace), "--dry-run=server"
    )
    assert good.returncode == 0, good.stderr
    assert warnings_of(good.stderr) == [deny_message("ConfigMap", "dry-good", "warn")]
    assert not exists(kube_cluster, "ConfigMap", "dry-good", namespace)


def test_namespaces_outside_the_selector_are_not_sent(
    kube_cluster: ControlPlane, kube_namespace: str, webhook: Webhook
) -> None:
    del webhook  # registered, but this namespace is not labelled for it
    proc = create(kube_cluster, labelled("ConfigMap", "elsewhere", {ACTIONS["deny"]: "yes"}, kube_namespace))
    assert proc.returncode == 0, proc.stderr
    assert exists(kube_cluster, "ConfigMap", "elsewhere", kube_namespace)
