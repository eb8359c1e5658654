"""Workload expansion on a real kube-apiserver, with the real kubectl:

- the webhook (`celkeeper serve` on a policy folder holding examples/workload-expansion's ExpansionTemplates,
  registered with the API server): a Deployment is refused because of its Pod template, with the
  parent-level message `[Implied by expand-workloads] ...`; a CronJob's Pod only warns (expand-jobs'
  enforcementAction); a fine Deployment is created; `--log-denies=explain` logs the denial explained;
- the audit (`celkeeper audit --source kubernetes --once` under the audit's RBAC in
  deploy/celkeeper.yaml, with an ExpansionTemplate stored in the cluster under
  deploy/expansiontemplate-crd.yaml): a Deployment already in the cluster is reported on the
  constraint's status for its Pod template.
"""

from __future__ import annotations

import secrets
import shutil
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests.audit.support import AUDIT_ROLES, constraint, install_template, run_once
from tests.incluster.support import ROOT, install_crds, rbac_kubeconfig, status
from tests.support.admission import (
    NAMESPACE_LABEL,
    create,
    register_webhook,
    unregister_webhook,
    warnings_of,
    webhook_configuration,
)
from tests.support.apiserver import ControlPlane
from tests.support.examples import example_template
from tests.support.kubectl import apply
from tests.support.serve import ServeProcess
from tests.support.waiting import wait_for

pytestmark = pytest.mark.kube

EXAMPLES = ROOT / "examples"
EXPANSION_CRD = ROOT / "deploy" / "expansiontemplate-crd.yaml"


def _workload(kind: str, name: str, namespace: str, privileged: bool) -> dict[str, Any]:
    pod_spec = {
        "restartPolicy": "OnFailure" if kind in ("Job", "CronJob") else "Always",
        "containers": [
            {
                "name": "app",
                "image": "registry.example.com/app:1.0",
                "securityContext": {"privileged": privileged},
            }
        ],
    }
    template = {"metadata": {"labels": {"app": name}}, "spec": pod_spec}
    meta = {"name": name, "namespace": namespace}
    if kind == "Deployment":
        return {
            "apiVersion": "apps/v1",
            "kind": kind,
            "metadata": meta,
            "spec": {"selector": {"matchLabels": {"app": name}}, "template": template},
        }
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": meta,
        "spec": {"schedule": "0 2 * * *", "jobTemplate": {"spec": {"template": template}}},
    }


class Webhook:
    def __init__(self, server: ServeProcess, selector: str) -> None:
        self.server, self.selector = server, selector


@pytest.fixture(scope="module")
def webhook(kube_cluster: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Webhook]:
    workdir = tmp_path_factory.mktemp("expansion-serve")
    policies = workdir / "policies"
    policies.mkdir()
    for name in ("template.yaml", "constraint.yaml"):
        shutil.copy(EXAMPLES / "privileged-containers" / name, policies / f"privileged-{name}")
    shutil.copy(EXAMPLES / "workload-expansion" / "expansion.yaml", policies / "expansion.yaml")
    server = ServeProcess(workdir, policies, workers=1, args=["--log-denies=explain"])
    server.start()
    selector = secrets.token_hex(4)
    name = f"celkeeper-expansion-{selector}"
    config = webhook_configuration(
        name, f"https://127.0.0.1:{server.port}/v1/admit", server.certs.ca_cert.read_bytes(), selector
    )
    config["webhooks"][0]["rules"] = [
        {
            "apiGroups": ["apps"],
            "apiVersions": ["v1"],
            "operations": ["CREATE", "UPDATE"],
            "resources": ["deployments"],
            "scope": "Namespaced",
        },
        {
            "apiGroups": ["batch"],
            "apiVersions": ["v1"],
            "operations": ["CREATE", "UPDATE"],
            "resources": ["cronjobs"],
            "scope": "Namespaced",
        },
    ]
    try:
        register_webhook(kube_cluster, config)
        yield Webhook(server, selector)
    finally:
        unregister_webhook(kube_cluster, name)
        server.stop()


@pytest.fixture
def namespace(kube_cluster: ControlPlane, kube_namespace: str, webhook: Webhook) -> str:
    kube_cluster.kubectl("label", "namespace", kube_namespace, f"{NAMESPACE_LABEL}={webhook.selector}")

    def answers() -> bool:  # the API server's webhook cache: until it calls celkeeper, creates pass
        probe = _workload("Deployment", f"probe-{secrets.token_hex(2)}", kube_namespace, privileged=True)
        proc = create(kube_cluster, probe)
        if proc.returncode == 0:
            kube_cluster.kubectl("delete", "deployment", probe["metadata"]["name"], "-n", kube_namespace)
            return False
        return "Implied by expand-workloads" in proc.stderr

    wait_for(answers, timeout=30, interval=0.3, what="the webhook to answer for the namespace")
    return kube_namespace


def test_a_deployment_is_refused_because_of_its_pod_template(
    kube_cluster: ControlPlane, namespace: str, webhook: Webhook
) -> None:
    proc = create(kube_cluster, _workload("Deployment", "web", namespace, privileged=True))
    assert proc.returncode != 0
    assert (
        'admission webhook "validation.celkeeper.io" denied the request: [no-privileged-containers] '
        "[Implied by expand-workloads] privileged containers are not allowed: app"
    ) in proc.stderr
    proc = create(kube_cluster, _workload("Deployment", "fine", namespace, privileged=False))
    assert proc.returncode == 0, proc.stderr

    def explained() -> str | None:
        log = (webhook.server.workdir / "serve.log").read_text(errors="replace")
        at = log.find("denied (uid")
        marker = f"Pod {namespace}/web-pod (generated by ExpansionTemplate expand-workloads)"
        return log if at >= 0 and marker in log else None

    log = wait_for(explained, timeout=10, interval=0.2, what="the explained denial in the log")
    assert f"Deployment {namespace}/web (CREATE at validation.gatekeeper.sh): DENIED" in log
    assert (
        "  CKPrivilegedContainers/no-privileged-containers  VIOLATED  (template ckprivilegedcontainers; deny)"
        in log
    )


def test_a_cronjobs_pod_only_warns(kube_cluster: ControlPlane, namespace: str) -> None:
    proc = create(kube_cluster, _workload("CronJob", "nightly", namespace, privileged=True))
    assert proc.returncode == 0, proc.stderr
    assert warnings_of(proc.stderr) == [
        "[no-privileged-containers] [Implied by expand-jobs] privileged containers are not allowed: app"
    ]


def test_the_audit_reports_deployments_for_their_pods(
    kube_cluster: ControlPlane, kube_namespace: str
) -> None:
    install_crds(kube_cluster)
    kube_cluster.kubectl("apply", "-f", str(EXPANSION_CRD))
    kube_cluster.kubectl(
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "crd/expansiontemplate.expansion.gatekeeper.sh",
    )
    suffix = secrets.token_hex(3)
    kind = f"AuditPriv{suffix}"
    template = example_template("privileged-containers", kind)
    expansion = next(yaml.safe_load_all((EXAMPLES / "workload-expansion" / "expansion.yaml").read_text()))
    expansion["metadata"]["name"] = f"expand-workloads-{suffix}"
    try:
        install_template(kube_cluster, template)
        apply(
            kube_cluster,
            constraint(
                kind,
                "no-privileged",
                {"kinds": [{"apiGroups": [""], "kinds": ["Pod"]}], "namespaces": [kube_namespace]},
            ),
        )
        apply(kube_cluster, expansion)
        kube_cluster.kubectl(
            "apply",
            "-f",
            "-",
            input=[
                _workload("Deployment", "web", kube_namespace, privileged=True),
                _workload("Deployment", "fine", kube_namespace, privileged=False),
            ],
        )
        kubeconfig = rbac_kubeconfig(kube_cluster, kube_namespace, f"audit-{suffix}", roles=AUDIT_ROLES)
        code, _, raw = run_once(kubeconfig)
        assert code == 0, raw
        found = status(kube_cluster, f"{kind.lower()}.constraints.celkeeper.io", "no-privileged")
        assert found["totalViolations"] == 1, found
        (violation,) = found["violations"]
        assert violation == {
            "group": "apps",
            "version": "v1",
            "kind": "Deployment",
            "namespace": kube_namespace,
            "name": "web",
            "message": f"[Implied by expand-workloads-{suffix}] privileged containers are not allowed: app",
            "enforcementAction": "deny",
        }
    finally:
        kube_cluster.kubectl(
            "delete", "expansiontemplate", expansion["metadata"]["name"], "--ignore-not-found", check=False
        )
        kube_cluster.kubectl("delete", "constrainttemplates", kind.lower(), "--ignore-not-found", check=False)
        kube_cluster.kubectl(
            "delete", "crd", f"{kind.lower()}.constraints.celkeeper.io", "--ignore-not-found", check=False
        )
