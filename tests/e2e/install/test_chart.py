"""The Helm chart and the one-file install: `helm lint` passes, the default rendering (with the Namespace) is
deploy/celkeeper.yaml byte for byte, the values users set reach the objects, the seed's invariants and
the pod hardening hold in every rendering, the API server accepts every rendering (`kubectl apply
--dry-run=server`), and `helm install`, `helm upgrade` and `helm uninstall` work on a real API server as
the README says, keeping what the pods write (the caBundle, the certificate Secret's data)."""

from __future__ import annotations

import base64
import functools
import json
from pathlib import Path
from typing import Any

import pytest

from celkeeper.documents import parse_documents
from tests.e2e.install.support import INSTALL, NAMESPACE, find
from tests.support.apiserver import ControlPlane
from tests.support.binaries import KubeBinaries
from tests.support.helm import CHART, Helm

WEBHOOKS = "celkeeper-validating-webhook-configuration"
SECRET = "celkeeper-webhook-server-cert"
ANTI = "affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0]"
VARIANTS = {
    "default": (),
    "five replicas, warn, exempt namespaces, extra args": (
        "replicas=5",
        "webhook.policyValidation.mode=warn",
        "exemptNamespaces={kube-system,tenant-*}",
        "extraArgs={--log-denies}",
        "logLevel=debug",
        "webhook.exportDecisions=stdout",
        "webhook.exportAllowed=true",
    ),
    "cert-manager": (
        "certificates.manage=false",
        "certificates.certManagerCertificate=celkeeper-system/celkeeper-serving-cert",
    ),
    "no ignore-label guard, no policy validation": (
        "webhook.ignoreLabelGuard.enabled=false",
        "webhook.policyValidation.enabled=false",
        "webhook.failurePolicy=Fail",
        "webhook.timeoutSeconds=5",
    ),
    "audit settings, VAP for every template": (
        "audit.interval=300",
        "audit.chunkSize=100",
        "audit.constraintViolationsLimit=50",
        "audit.emitEvents=true",
        "audit.eventsInvolvedNamespace=true",
        "audit.excludedNamespaces={kube-system,team-*}",
        "audit.excludedResources={events,leases.coordination.k8s.io}",
        "audit.metricsService=true",
        "vap.createForTemplates=true",
        "vap.createBindingsForConstraints=false",
        "vap.waitForBindingSeconds=10",
    ),
    "no audit, no VAP rights": ("audit.enabled=false", "vap.rbac=false"),
    "admission policies enforced": (
        "admissionPolicies.enforce=true",
        "admissionPolicies.paramResources[0].apiGroups={example.com}",
        "admissionPolicies.paramResources[0].resources={limits}",
    ),
    "admission policies audited": ("admissionPolicies.audit=true",),
    "no reports": ("reports.enabled=false",),
    "policyreports": ("reports.format=policyreport",),
    "reports, their CRDs installed by someone else": ("reports.installCRDs=false",),
    "placement": (
        "nodeSelector.pool=system",
        "tolerations[0].key=dedicated",
        "tolerations[0].operator=Exists",
        "priorityClassName=",
        "topologySpread=false",
        "preStopSleepSeconds=0",
        f"{ANTI}.weight=100",
        f"{ANTI}.podAffinityTerm.topologyKey=kubernetes.io/hostname",
        f"{ANTI}.podAffinityTerm.labelSelector.matchLabels.app\\.kubernetes\\.io/component=webhook",
    ),
}


def documents(text: str) -> list[dict[str, Any]]:
    """The rendering's objects, a fresh copy on each call (the tests change what they get)."""
    loaded: list[dict[str, Any]] = json.loads(_parsed(text))
    return loaded


@functools.cache
def _parsed(text: str) -> str:
    """A rendering parsed once (the CRDs make it 300 KB: most of this file's time was parsing the same few
    renderings again)."""
    return json.dumps([d.data for d in parse_documents(text, "rendering").documents])


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
    rendering = helm.template("createNamespace=true")
    assert "---\n" + body == rendering, "deploy/celkeeper.yaml is stale: run hack/helm/render.sh"
    # the chart's own default leaves the Namespace to `helm install --create-namespace`
    assert [d["kind"] for d in documents(rendering) if d["kind"] == "Namespace"] == ["Namespace"]
    assert not [d for d in documents(helm.template()) if d["kind"] == "Namespace"]


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
    # a stopping pod keeps serving until the endpoints drop it (preStop), then drains and stops, all within
    # its grace period
    pre_stop = container.get("lifecycle", {}).get("preStop", {}).get("sleep", {}).get("seconds", 0)
    assert pre_stop == (0 if "preStopSleepSeconds=0" in VARIANTS[variant] else 5)

    def flag(name: str, default: int) -> int:
        return next((int(a.split("=")[1]) for a in args if a.startswith(f"--{name}=")), default)

    stopping = pre_stop + flag("drain-seconds", 5) + flag("graceful-timeout", 10)
    assert stopping < pod.get("terminationGracePeriodSeconds", 30)
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
    # the audit, when there is one: a singleton, as hardened, under its own service account
    audits = [d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == "celkeeper-audit"]
    for audit in audits:
        assert audit["spec"]["replicas"] == 1 and audit["spec"]["strategy"] == {"type": "Recreate"}
        audit_pod = audit["spec"]["template"]["spec"]
        assert audit_pod["serviceAccountName"] == "celkeeper-audit"
        assert audit_pod["securityContext"] == pod["securityContext"]
        [audit_container] = audit_pod["containers"]
        assert audit_container["securityContext"] == container["securityContext"]
        assert audit_container["args"][:2] == ["audit", "--source=kubernetes"]
        assert audit_container["readinessProbe"]["httpGet"]["path"] == "/readyz"
        assert audit["spec"]["selector"]["matchLabels"] != spec["selector"]["matchLabels"]
    assert len(audits) == (0 if "audit.enabled=false" in VARIANTS[variant] else 1)


def test_values_reach_the_objects(helm: Helm) -> None:
    docs = documents(helm.template(*VARIANTS["five replicas, warn, exempt namespaces, extra args"]))
    args = webhook_container(docs)["args"]
    assert "--expected-pods=5" in args and "--policy-validation=warn" in args and "--log-denies" in args
    assert "--export-decisions=stdout" in args and "--export-allowed" in args
    assert not [a for a in webhook_container(documents(helm.template()))["args"] if a.startswith("--export")]
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
    pod = find(placement, "Deployment", "celkeeper-webhook")["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"kubernetes.io/os": "linux", "pool": "system"}
    assert pod["tolerations"] == [{"key": "dedicated", "operator": "Exists"}]
    assert "priorityClassName" not in pod and "topologySpreadConstraints" not in pod
    assert "lifecycle" not in pod["containers"][0]
    assert (
        pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]["weight"]
        == 100
    )
    assert not [d for d in placement if d["kind"] == "ResourceQuota"]


def test_sync_rules_grant_list_and_watch_of_the_synced_kinds(helm: Helm) -> None:
    assert "celkeeper-sync" not in {d["metadata"]["name"] for d in documents(helm.template())}
    docs = documents(
        helm.template(
            "sync.rules[0].apiGroups={networking.k8s.io}",
            "sync.rules[0].resources={ingresses}",
            "sync.rules[1].apiGroups={}",
            "sync.rules[1].resources={services}",
        )
    )
    assert cluster_rules(docs, "celkeeper-sync") == [
        {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses"], "verbs": ["list", "watch"]},
        {"apiGroups": [""], "resources": ["services"], "verbs": ["list", "watch"]},  # {}: the core group
    ]
    binding = find(docs, "ClusterRoleBinding", "celkeeper-sync")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "celkeeper-webhook", "namespace": NAMESPACE}
    ]


def test_enforced_admission_policies_reach_the_webhook_pods_and_their_rights(helm: Helm) -> None:
    default = documents(helm.template())
    assert "--enforce-admission-policies" not in webhook_container(default)["args"]
    assert "celkeeper-admission-policies" not in {d["metadata"]["name"] for d in default}
    docs = documents(helm.template(*VARIANTS["admission policies enforced"]))
    assert "--enforce-admission-policies" in webhook_container(docs)["args"]
    policies = [
        "validatingadmissionpolicies",
        "validatingadmissionpolicybindings",
        "mutatingadmissionpolicies",
        "mutatingadmissionpolicybindings",
    ]
    assert cluster_rules(docs, "celkeeper-admission-policies") == [
        {
            "apiGroups": ["admissionregistration.k8s.io"],
            "resources": policies,
            "verbs": ["get", "list", "watch"],
        },
        {"apiGroups": ["example.com"], "resources": ["limits"], "verbs": ["get", "list", "watch"]},
    ]
    binding = find(docs, "ClusterRoleBinding", "celkeeper-admission-policies")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "celkeeper-webhook", "namespace": NAMESPACE}
    ]


def test_audited_admission_policies_reach_the_audit_pod(helm: Helm) -> None:
    docs = documents(helm.template(*VARIANTS["admission policies audited"]))
    [container] = find(docs, "Deployment", "celkeeper-audit")["spec"]["template"]["spec"]["containers"]
    assert "--audit-admission-policies" in container["args"]
    assert "--enforce-admission-policies" not in webhook_container(docs)["args"]
    # the audit's own ClusterRole reads every resource: the policies, bindings and parameters included
    assert {"apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "list", "watch"]} in cluster_rules(
        docs, "celkeeper-audit"
    )


def test_cert_manager_mode_mounts_its_secret_and_asks_for_ca_injection(helm: Helm) -> None:
    docs = documents(helm.template(*VARIANTS["cert-manager"]))
    container = webhook_container(docs)
    assert "--disable-cert-rotation" in container["args"]
    pod = find(docs, "Deployment", "celkeeper-webhook")["spec"]["template"]["spec"]
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
        ("check-ignore-label.celkeeper.io", "/v1/admitlabel", "Fail"),
    ]
    guard = default["webhooks"][2]
    assert guard["rules"] == [
        {
            "apiGroups": [""],
            "apiVersions": ["*"],
            "operations": ["CREATE", "UPDATE"],
            "resources": ["namespaces"],
        }
    ]
    # the namespaces that may carry the label are not even sent (the release's own is relabelled on apply)
    assert guard["namespaceSelector"]["matchExpressions"] == [
        {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": [NAMESPACE]}
    ]
    variant = find(
        documents(helm.template(*VARIANTS["no ignore-label guard, no policy validation"])),
        "ValidatingWebhookConfiguration",
    )
    hooks = {w["name"]: w for w in variant["webhooks"]}
    assert set(hooks) == {"validation.celkeeper.io"}
    assert hooks["validation.celkeeper.io"]["failurePolicy"] == "Fail"
    assert hooks["validation.celkeeper.io"]["timeoutSeconds"] == 5


def cluster_rules(docs: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [
        r for d in docs if d["kind"] == "ClusterRole" and d["metadata"]["name"] == name for r in d["rules"]
    ]


def test_the_audit_values_reach_its_pod_and_its_rights(helm: Helm) -> None:
    default = documents(helm.template())
    [container] = find(default, "Deployment", "celkeeper-audit")["spec"]["template"]["spec"]["containers"]
    assert container["args"] == [
        "audit",
        "--source=kubernetes",
        "--audit-interval=60",
        "--audit-chunk-size=500",
        "--constraint-violations-limit=20",
        "--reports=openreports",
        "--metrics-bind=0.0.0.0:8888",
        "--log-level=info",
    ]
    # events only in its own namespace; no Service for the metrics unless asked
    assert {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]} not in cluster_rules(
        default, "celkeeper-audit"
    )
    assert not [
        d for d in default if d["kind"] == "Service" and d["metadata"]["name"] == "celkeeper-audit-metrics"
    ]

    docs = documents(helm.template(*VARIANTS["audit settings, VAP for every template"]))
    [container] = find(docs, "Deployment", "celkeeper-audit")["spec"]["template"]["spec"]["containers"]
    args = container["args"]
    for wanted in (
        "--audit-interval=300",
        "--audit-chunk-size=100",
        "--constraint-violations-limit=50",
        "--emit-audit-events",
        "--audit-events-involved-namespace",
        "--excluded-namespace=kube-system",
        "--excluded-namespace=team-*",
        "--excluded-resource=events",
        "--excluded-resource=leases.coordination.k8s.io",
    ):
        assert wanted in args, wanted
    events = {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}
    assert events in cluster_rules(docs, "celkeeper-audit")
    service = find(docs, "Service", "celkeeper-audit-metrics")
    assert (
        service["spec"]["selector"]
        == find(docs, "Deployment", "celkeeper-audit")["spec"]["selector"]["matchLabels"]
    )
    assert service["spec"]["ports"] == [{"name": "metrics", "port": 8888, "targetPort": "metrics"}]

    none = documents(helm.template(*VARIANTS["no audit, no VAP rights"]))
    assert not [d for d in none if "audit" in d["metadata"]["name"]]


REPORT_CRDS = ("reports.openreports.io", "clusterreports.openreports.io")
REPORT_RULE = {
    "apiGroups": ["openreports.io"],
    "resources": ["reports", "clusterreports"],
    "verbs": ["get", "list", "create", "update", "delete"],
}


def report_crds(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        d for d in docs if d["kind"] == "CustomResourceDefinition" and d["spec"]["group"] == "openreports.io"
    ]


def test_the_reports_values_reach_the_audit_its_rights_and_the_crds(helm: Helm) -> None:
    default = documents(helm.template())
    crds = report_crds(default)
    assert [c["metadata"]["name"] for c in crds] == list(REPORT_CRDS)
    # the upstream definitions (crds/reports), kept when the release is uninstalled
    vendored = {
        d["metadata"]["name"]: d
        for f in sorted((CHART.parent.parent / "crds" / "reports").glob("*.yaml"))
        for d in documents(f.read_text(encoding="utf-8"))
    }
    for crd in crds:
        annotations = crd["metadata"]["annotations"]
        assert annotations.pop("helm.sh/resource-policy") == "keep"
        assert crd == vendored[crd["metadata"]["name"]]
    audit = find(default, "Deployment", "celkeeper-audit")["spec"]["template"]["spec"]
    assert "--reports=openreports" in audit["containers"][0]["args"]
    assert REPORT_RULE in cluster_rules(default, "celkeeper-audit")
    # a writable /tmp (its results until the reports are written) on the read-only root
    assert {"name": "tmp", "mountPath": "/tmp"} in audit["containers"][0]["volumeMounts"]
    assert {"name": "tmp", "emptyDir": {"sizeLimit": "1Gi"}} in audit["volumes"]

    theirs = documents(helm.template(*VARIANTS["reports, their CRDs installed by someone else"]))
    assert not report_crds(theirs) and REPORT_RULE in cluster_rules(theirs, "celkeeper-audit")
    older = documents(helm.template(*VARIANTS["policyreports"]))
    assert [c["metadata"]["name"] for c in older if c["kind"] == "CustomResourceDefinition"][-2:] == [
        "policyreports.wgpolicyk8s.io",
        "clusterpolicyreports.wgpolicyk8s.io",
    ]
    assert {
        "apiGroups": ["wgpolicyk8s.io"],
        "resources": ["policyreports", "clusterpolicyreports"],
        "verbs": ["get", "list", "create", "update", "delete"],
    } in cluster_rules(older, "celkeeper-audit")
    args = find(older, "Deployment", "celkeeper-audit")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--reports=policyreport" in args and not report_crds(older)
    refused = helm.run("template", "celkeeper", str(CHART), "--set", "reports.format=other", check=False)
    assert refused.returncode != 0 and "reports.format must be openreports or policyreport" in refused.stderr
    none = documents(helm.template(*VARIANTS["no reports"]))
    assert not report_crds(none) and REPORT_RULE not in cluster_rules(none, "celkeeper-audit")
    args = find(none, "Deployment", "celkeeper-audit")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--reports=none" in args


def test_the_vap_values_reach_the_webhook_pods_and_their_rights(helm: Helm) -> None:
    default = documents(helm.template())
    args = webhook_container(default)["args"]
    assert not [a for a in args if "vap" in a]  # Gatekeeper's defaults: the flags' own
    binding = find(default, "ClusterRoleBinding", "celkeeper-vap")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "celkeeper-webhook", "namespace": NAMESPACE}
    ]
    assert {
        "apiGroups": ["admissionregistration.k8s.io"],
        "resources": ["validatingadmissionpolicies", "validatingadmissionpolicybindings"],
        "verbs": ["get", "list", "watch", "create", "update", "delete"],
    } in find(default, "ClusterRole", "celkeeper-vap")["rules"]

    args = webhook_container(documents(helm.template(*VARIANTS["audit settings, VAP for every template"])))[
        "args"
    ]
    assert [a for a in args if "vap" in a] == [
        "--default-create-vap-for-templates",
        "--no-default-create-vap-binding-for-constraints",
        "--default-wait-for-vapb-generation=10",
    ]
    none = documents(helm.template(*VARIANTS["no audit, no VAP rights"]))
    assert not [d for d in none if d["metadata"]["name"] == "celkeeper-vap"]
    refused = helm.run(
        "template",
        "celkeeper",
        str(CHART),
        "--set",
        "vap.rbac=false",
        "--set",
        "vap.createForTemplates=true",
        check=False,
    )
    assert refused.returncode != 0 and "vap.createForTemplates needs vap.rbac" in refused.stderr


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


@pytest.mark.kube
def test_helm_installs_upgrades_and_uninstalls_the_chart_as_the_readme_says(
    kube_binaries: KubeBinaries, helm: Helm, tmp_path: Path
) -> None:
    """On a control plane of its own (the webhook configuration would reach every request of a shared
    one): the README's `helm install` into a namespace made beforehand (tests/e2e/node/test_helm.py runs the
    one with --create-namespace), an upgrade that keeps what the pods wrote, the uninstall."""
    with ControlPlane(tmp_path / "cluster", kube_binaries) as cluster:
        kubeconfig = cluster.kubeconfig_path
        cluster.kubectl("create", "namespace", NAMESPACE)
        # another tool installed one of the OpenReports CRDs: the chart installs only the absent one
        theirs = CHART.parent.parent / "crds" / "reports" / "openreports.io_clusterreports.yaml"
        cluster.kubectl("apply", "-f", str(theirs))
        helm.run("install", "celkeeper", str(CHART), "--namespace", NAMESPACE, kubeconfig=kubeconfig)
        crds = {
            name: json.loads(cluster.kubectl("get", "crd", name, "-o", "json").stdout)["metadata"]
            for name in REPORT_CRDS
        }
        assert crds["reports.openreports.io"]["annotations"]["meta.helm.sh/release-name"] == "celkeeper"
        assert "meta.helm.sh/release-name" not in crds["clusterreports.openreports.io"].get("annotations", {})
        rendering = tmp_path / "rendering.yaml"
        rendering.write_text(helm.template(), encoding="utf-8")
        assert cluster.kubectl("get", "-f", str(rendering), "-o", "name", check=False).returncode == 0
        # what the pods write into objects the chart owns: the caBundle, the certificate Secret's data
        bundle = base64.b64encode(b"-----BEGIN CERTIFICATE-----\n").decode()
        config = json.loads(
            cluster.kubectl("get", "validatingwebhookconfiguration", WEBHOOKS, "-o", "json").stdout
        )
        ops = [
            {"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": bundle}
            for i in range(len(config["webhooks"]))
        ]
        cluster.kubectl(
            "patch", "validatingwebhookconfiguration", WEBHOOKS, "--type=json", "-p", json.dumps(ops)
        )
        secret_patch = {"data": {"ca.crt": bundle}}
        cluster.kubectl(
            "patch", "secret", SECRET, "-n", NAMESPACE, "--type=merge", "-p", json.dumps(secret_patch)
        )

        helm.run(
            "upgrade",
            "celkeeper",
            str(CHART),
            "--namespace",
            NAMESPACE,
            "--set",
            "replicas=5",
            "--set",
            "audit.interval=120",
            kubeconfig=kubeconfig,
        )
        deployment = json.loads(
            cluster.kubectl("get", "deployment", "celkeeper-webhook", "-n", NAMESPACE, "-o", "json").stdout
        )
        assert deployment["spec"]["replicas"] == 5
        assert "--expected-pods=5" in deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        audit = json.loads(
            cluster.kubectl("get", "deployment", "celkeeper-audit", "-n", NAMESPACE, "-o", "json").stdout
        )
        assert "--audit-interval=120" in audit["spec"]["template"]["spec"]["containers"][0]["args"]
        config = json.loads(
            cluster.kubectl("get", "validatingwebhookconfiguration", WEBHOOKS, "-o", "json").stdout
        )
        assert {w["clientConfig"].get("caBundle") for w in config["webhooks"]} == {bundle}
        secret = json.loads(cluster.kubectl("get", "secret", SECRET, "-n", NAMESPACE, "-o", "json").stdout)
        assert secret["data"] == {"ca.crt": bundle}

        helm.run("uninstall", "celkeeper", "--namespace", NAMESPACE, kubeconfig=kubeconfig)
        gone = cluster.kubectl("get", "deployment", "-n", NAMESPACE, "-o", "name").stdout
        assert gone.strip() == ""
        for name in REPORT_CRDS:  # kept: other tools' reports live in them
            assert cluster.kubectl("get", "crd", name, check=False).returncode == 0
        assert cluster.kubectl("get", "validatingwebhookconfiguration", WEBHOOKS, check=False).returncode != 0
