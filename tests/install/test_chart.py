"""The Helm chart and the one-file install: `helm lint` passes, the default rendering is deploy/celkeeper.yaml
byte for byte, the values users set reach the objects, the seed's invariants and the pod hardening hold
in every rendering, and the API server accepts every rendering (`kubectl apply --dry-run=server`)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from celkeeper.documents import parse_documents
from tests.install.support import INSTALL, NAMESPACE, find
from tests.support.apiserver import ControlPlane
from tests.support.helm import CHART, Helm

ANTI = "affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0]"
VARIANTS = {
    "default": (),
    "five replicas, warn, exempt namespaces, extra args": (
        "replicas=5",
        "webhook.policyValidation.mode=warn",
        "exemptNamespaces={kube-system,tenant-*}",
        "extraArgs={--log-denies}",
        "logLevel=debug",
    ),
    "cert-manager": (
        "certificates.manage=false",
        "certificates.certManagerCertificate=celkeeper-system/celkeeper-serving-cert",
    ),
    "ignore-label guard, no policy validation": (
        "webhook.ignoreLabelGuard.enabled=true",
        "webhook.policyValidation.enabled=false",
        "webhook.failurePolicy=Fail",
        "webhook.timeoutSeconds=5",
    ),
    "placement": (
        "nodeSelector.pool=system",
        "tolerations[0].key=dedicated",
        "tolerations[0].operator=Exists",
        "priorityClassName=",
        "topologySpread=false",
        f"{ANTI}.weight=100",
        f"{ANTI}.podAffinityTerm.topologyKey=kubernetes.io/hostname",
        f"{ANTI}.podAffinityTerm.labelSelector.matchLabels.app\\.kubernetes\\.io/component=webhook",
    ),
}


def documents(text: str) -> list[dict[str, Any]]:
    return [json.loads(json.dumps(d.data)) for d in parse_documents(text, "rendering").documents]


def webhook_container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    deployment = find(docs, "Deployment", "celkeeper-webhook")
    containers = deployment["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return dict(containers[0])


def test_helm_lint_passes(helm: Helm) -> None:
    proc = helm.run("lint", str(CHART), "--strict")
    assert "1 chart(s) linted, 0 chart(s) failed" in proc.stdout


def test_the_default_rendering_is_deploy_celkeeper_yaml(helm: Helm) -> None:
    text = INSTALL.read_text(encoding="utf-8")
    header, _, body = text.partition("\n---\n")
    assert header.startswith("# celkeeper: everything for `kubectl apply -f deploy/celkeeper.yaml`")
    assert "---\n" + body == helm.template(), "deploy/celkeeper.yaml is stale: run hack/helm/render.sh"


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_every_rendering_keeps_the_invariants_and_the_hardening(helm: Helm, variant: str) -> None:
    docs = documents(helm.template(*VARIANTS[variant]))
    deployment = find(docs, "Deployment", "celkeeper-webhook")
    spec = deployment["spec"]
    pod = spec["template"]["spec"]
    container = webhook_container(docs)
    args = container["args"]
    # never more pods than --expected-pods, and that number is the replicas
    assert spec["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1},
    }
    assert f"--expected-pods={spec['replicas']}" in args
    # ready only once every policy is compiled
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    # a PDB keeps one pod serving, selecting exactly the Deployment's pods
    pdb = find(docs, "PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"] == spec["selector"]
    assert (
        find(docs, "Service", "celkeeper-webhook-service")["spec"]["selector"]
        == spec["selector"]["matchLabels"]
    )
    # hardening
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "emptyDir" in volumes["tmp"]
    assert "--state-dir=/tmp/celkeeper" in args and "--cert-dir=/certs" in args


def test_values_reach_the_objects(helm: Helm) -> None:
    docs = documents(helm.template(*VARIANTS["five replicas, warn, exempt namespaces, extra args"]))
    args = webhook_container(docs)["args"]
    assert "--expected-pods=5" in args and "--policy-validation=warn" in args and "--log-denies" in args
    assert "--log-level=debug" in args
    assert [a for a in args if a.startswith("--exempt-namespace=")] == [
        f"--exempt-namespace={NAMESPACE}",
        "--exempt-namespace=kube-system",
        "--exempt-namespace=tenant-*",
    ]
    config = find(docs, "ValidatingWebhookConfiguration")
    selector = config["webhooks"][0]["namespaceSelector"]["matchExpressions"]
    assert {
        "key": "kubernetes.io/metadata.name",
        "operator": "NotIn",
        "values": [NAMESPACE, "kube-system"],
    } in selector  # `tenant-*` is only known to the pods

    placement = documents(helm.template(*VARIANTS["placement"]))
    pod = find(placement, "Deployment")["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"kubernetes.io/os": "linux", "pool": "system"}
    assert pod["tolerations"] == [{"key": "dedicated", "operator": "Exists"}]
    assert "priorityClassName" not in pod and "topologySpreadConstraints" not in pod
    assert (
        pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]["weight"]
        == 100
    )
    assert not [d for d in placement if d["kind"] == "ResourceQuota"]


def test_cert_manager_mode_mounts_its_secret_and_asks_for_ca_injection(helm: Helm) -> None:
    docs = documents(helm.template(*VARIANTS["cert-manager"]))
    container = webhook_container(docs)
    assert "--disable-cert-rotation" in container["args"]
    pod = find(docs, "Deployment")["spec"]["template"]["spec"]
    assert {"name": "certs", "secret": {"secretName": "celkeeper-webhook-server-cert"}} in pod["volumes"]
    config = find(docs, "ValidatingWebhookConfiguration")
    assert config["metadata"]["annotations"] == {
        "cert-manager.io/inject-ca-from": "celkeeper-system/celkeeper-serving-cert"
    }
    assert not [d for d in docs if d["kind"] == "Secret"]
    rules = [r for d in docs if d["kind"] in ("Role", "ClusterRole") for r in d["rules"]]
    assert not [
        r for r in rules if "secrets" in r["resources"] or "validatingwebhookconfigurations" in r["resources"]
    ]


def test_the_webhooks_registered(helm: Helm) -> None:
    default = find(documents(helm.template()), "ValidatingWebhookConfiguration")
    assert [
        (w["name"], w["clientConfig"]["service"]["path"], w["failurePolicy"]) for w in default["webhooks"]
    ] == [
        ("validation.celkeeper.io", "/v1/admit", "Ignore"),
        ("check-policies.celkeeper.io", "/v1/admitpolicy", "Ignore"),
    ]
    guarded = find(
        documents(helm.template(*VARIANTS["ignore-label guard, no policy validation"])),
        "ValidatingWebhookConfiguration",
    )
    hooks = {w["name"]: w for w in guarded["webhooks"]}
    assert set(hooks) == {"validation.celkeeper.io", "check-ignore-label.celkeeper.io"}
    guard = hooks["check-ignore-label.celkeeper.io"]
    assert guard["clientConfig"]["service"]["path"] == "/v1/admitlabel" and guard["failurePolicy"] == "Fail"
    assert guard["rules"] == [
        {
            "apiGroups": [""],
            "apiVersions": ["*"],
            "operations": ["CREATE", "UPDATE"],
            "resources": ["namespaces"],
        }
    ]
    assert hooks["validation.celkeeper.io"]["failurePolicy"] == "Fail"
    assert hooks["validation.celkeeper.io"]["timeoutSeconds"] == 5


def test_the_audit_deployment_has_its_marked_place(helm: Helm) -> None:
    proc = helm.run("template", "celkeeper", str(CHART), "--set", "audit.enabled=true", check=False)
    assert proc.returncode != 0 and "issue 13" in proc.stderr


@pytest.mark.kube
def test_the_api_server_accepts_every_rendering(
    kube_cluster: ControlPlane, helm: Helm, tmp_path: Any
) -> None:
    """Server-side dry run (nothing stored but the Namespace the namespaced objects need)."""
    namespace = find(documents(INSTALL.read_text(encoding="utf-8")), "Namespace")
    kube_cluster.kubectl("apply", "-f", "-", input=namespace)
    renderings = {"deploy/celkeeper.yaml": INSTALL.read_text(encoding="utf-8")}
    renderings.update({name: helm.template(*sets) for name, sets in VARIANTS.items()})
    for name, text in renderings.items():
        path = tmp_path / "rendering.yaml"
        path.write_text(text, encoding="utf-8")
        proc = kube_cluster.kubectl("apply", "--dry-run=server", "-f", str(path), check=False)
        assert proc.returncode == 0, f"{name}:\n{proc.stderr}"
        assert "(server dry run)" in proc.stdout
