"""Helpers for the in-cluster tests: `celkeeper serve --source kubernetes` as a real process (a "pod"),
policies applied with the real kubectl, the webhook registered with the real API server, the webhook's
RBAC from deploy/celkeeper.yaml bound to a non-admin user, and an API server restart on the same port.
"""

from __future__ import annotations

import base64
import json
import secrets
import subprocess
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from celkeeper.documents import parse_documents
from celkeeper.snapshot import Snapshot, SnapshotStore
from tests.support.admission import NAMESPACE_LABEL, webhook_configuration
from tests.support.apiserver import ControlPlane, KubectlError
from tests.support.serve import ROOT, ServeProcess
from tests.support.waiting import wait_for

CRDS_DIR = ROOT / "crds"
INSTALL = ROOT / "deploy" / "celkeeper.yaml"
WEBHOOK_RBAC_NAME = "celkeeper-webhook"  # the webhook pods' ServiceAccount, (Cluster)Role(Binding)s
RBAC_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")


# --- celkeeper as a pod -------------------------------------------------------------------------------


class KubeServe(ServeProcess):
    """`celkeeper serve --source kubernetes` acting as pod `pod_name` of `pod_namespace`."""

    def __init__(
        self,
        workdir: Path,
        kubeconfig: Path,
        pod_name: str,
        pod_namespace: str,
        *,
        expected_pods: int = 1,
        workers: int = 1,
        args: Sequence[str] = (),
        threads: int | None = None,
        root: Path = ROOT,
        env: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(
            workdir, workdir / "unused", workers=workers, args=args, threads=threads, root=root, env=env
        )
        self.kubeconfig = kubeconfig
        self.pod_name = pod_name
        self.pod_namespace = pod_namespace
        self.expected_pods = expected_pods

    def argv(self) -> list[str]:
        argv = super().argv()
        at = argv.index("--policy-dir")
        del argv[at : at + 2]
        at = argv.index("--poll-interval")
        del argv[at : at + 2]
        return [
            *argv,
            "--source",
            "kubernetes",
            "--kubeconfig",
            str(self.kubeconfig),
            "--pod-name",
            self.pod_name,
            "--pod-namespace",
            self.pod_namespace,
            "--expected-pods",
            str(self.expected_pods),
        ]

    def snapshot(self) -> Snapshot | None:
        return SnapshotStore(self.state.snapshot).latest()

    def loaded(self) -> int:
        """The snapshot generation every worker has loaded (0 before any)."""
        return self.board.loaded_generation() or 0

    def full_log(self) -> str:
        return (self.workdir / "serve.log").read_text(encoding="utf-8", errors="replace")


# --- cluster set-up -------------------------------------------------------------------------------------


def install_crds(cluster: ControlPlane) -> None:
    """celkeeper's own CRDs, as a user installs them (kubectl apply -f crds/); idempotent."""
    cluster.kubectl("apply", "-f", str(CRDS_DIR))
    wait_all_established(
        cluster,
        [
            "constrainttemplates.templates.celkeeper.io",
            "constrainttemplatepodstatuses.status.celkeeper.io",
            "constraintpodstatuses.status.celkeeper.io",
            "mutatorpodstatuses.status.celkeeper.io",
            "admissionpolicypodstatuses.status.celkeeper.io",
        ],
    )


def wait_all_established(cluster: ControlPlane, names: Sequence[str], timeout: float = 60.0) -> None:
    """Until every CRD of `names` has the condition Established: one `kubectl get` of them all per poll,
    not a `kubectl wait` process per CRD."""

    def established() -> bool:
        found = json.loads(cluster.kubectl("get", "crd", *names, "-o", "json").stdout)
        items = found.get("items", [found])
        return len(items) == len(names) and all(
            any(
                c.get("type") == "Established" and c.get("status") == "True"
                for c in (item.get("status") or {}).get("conditions") or ()
            )
            for item in items
        )

    if names:
        wait_for(
            established, timeout=timeout, interval=0.2, what=f"CRDs {', '.join(names)} to be established"
        )


def create_namespace(cluster: ControlPlane, prefix: str, labels: Mapping[str, str] | None = None) -> str:
    name = f"{prefix}-{secrets.token_hex(3)}"
    obj = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": dict(labels or {})}}
    cluster.kubectl("create", "-f", "-", input=obj)
    return name


def remove_templates(cluster: ControlPlane, prefix: str) -> None:
    """Delete the templates whose names start with `prefix`, and their constraint CRDs (whether or not a
    celkeeper still runs to do it): what a test module leaves in the session's cluster."""
    found = get(cluster, "constrainttemplates") or {}
    names = [name for t in found.get("items") or [] if (name := t["metadata"]["name"]).startswith(prefix)]
    if names:
        cluster.kubectl("delete", "constrainttemplates", *names, "--ignore-not-found", "--wait=false")
        crds = [f"{name}.constraints.celkeeper.io" for name in names]
        cluster.kubectl("delete", "crd", *crds, "--ignore-not-found", "--wait=false", check=False)


def rbac_kubeconfig(
    cluster: ControlPlane,
    pod_namespace: str,
    user: str,
    roles: Sequence[str] = (WEBHOOK_RBAC_NAME,),
    *,
    also: Sequence[Path] = (),
) -> Path:
    """A kubeconfig for `user`, who gets exactly the (Cluster)Roles and bindings named `roles` in
    deploy/celkeeper.yaml (by default the webhook pods'; its Roles in `pod_namespace`), and every one of
    the manifests `also` names (e.g. deploy/sync-rbac.yaml)."""
    suffix = secrets.token_hex(3)
    objects = []
    docs = [(d, True) for d in parse_documents(INSTALL.read_text(encoding="utf-8"), str(INSTALL)).documents]
    for path in also:
        docs += [(d, False) for d in parse_documents(path.read_text(encoding="utf-8"), str(path)).documents]
    for doc, by_name in docs:
        obj = json.loads(json.dumps(doc.data))
        kind = obj["kind"]
        if kind not in RBAC_KINDS or kind == "ServiceAccount":
            continue
        if by_name and obj["metadata"]["name"] not in roles:
            continue
        if kind in ("ClusterRole", "ClusterRoleBinding"):
            obj["metadata"]["name"] = f"{obj['metadata']['name']}-{suffix}"
        else:
            obj["metadata"]["namespace"] = pod_namespace
        if kind == "ClusterRoleBinding":
            obj["roleRef"]["name"] = f"{obj['roleRef']['name']}-{suffix}"
        if kind.endswith("Binding"):
            obj["subjects"] = [{"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}]
        objects.append(obj)
    cluster.kubectl("apply", "-f", "-", input=objects)
    return cluster.kubeconfig_for(user)


def deployment_setting(cluster: ControlPlane, prefix: str) -> tuple[str, Path]:
    """What a celkeeper Deployment finds: celkeeper's CRDs installed, a fresh namespace `prefix-...` for
    its pods' status objects, and a kubeconfig for a new user bound to exactly the webhook's RBAC of
    deploy/celkeeper.yaml there."""
    install_crds(cluster)
    pod_namespace = create_namespace(cluster, prefix)
    return pod_namespace, rbac_kubeconfig(cluster, pod_namespace, f"celkeeper-{secrets.token_hex(3)}")


# --- policies -------------------------------------------------------------------------------------------


def required_labels_template(kind: str) -> dict[str, Any]:
    """A template whose constraints require the labels listed in `parameters.labels`."""
    return {
        "apiVersion": "templates.celkeeper.io/v1",
        "kind": "ConstraintTemplate",
        "metadata": {"name": kind.lower()},
        "spec": {
            "crd": {
                "spec": {
                    "names": {"kind": kind},
                    "validation": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {"labels": {"type": "array", "items": {"type": "string"}}},
                        }
                    },
                }
            },
            "targets": [
                {
                    "target": "admission.k8s.gatekeeper.sh",
                    "code": [
                        {
                            "engine": "K8sNativeValidation",
                            "source": {
                                "validations": [
                                    {
                                        "expression": "variables.params.labels.all(l, "
                                        "has(object.metadata.labels) && l in object.metadata.labels)",
                                        "messageExpression": '"missing labels: " + '
                                        "variables.params.labels.filter(l, "
                                        "!has(object.metadata.labels) || !(l in object.metadata.labels))"
                                        '.join(", ")',
                                    }
                                ]
                            },
                        }
                    ],
                }
            ],
        },
    }


def required_labels(
    kind: str, name: str, labels: Sequence[str], namespaces: Sequence[str], action: str = "deny"
) -> dict[str, Any]:
    return {
        "apiVersion": "constraints.celkeeper.io/v1beta1",
        "kind": kind,
        "metadata": {"name": name},
        "spec": {
            "enforcementAction": action,
            "match": {"kinds": [{"apiGroups": [""], "kinds": ["ConfigMap"]}], "namespaces": list(namespaces)},
            "parameters": {"labels": list(labels)},
        },
    }


def with_meta(obj: dict[str, Any], uid: str, generation: int = 1) -> dict[str, Any]:
    """`obj` as the API server would hand it to a watch: uid, generation and what changes without it."""
    obj["metadata"].update(uid=uid, generation=generation, resourceVersion="99", managedFields=[{}])
    obj["status"] = {"byPod": []}
    return obj


def get(cluster: ControlPlane, *args: str) -> dict[str, Any] | None:
    """kubectl get -o json; None when not found."""
    proc = cluster.kubectl("get", *args, "-o", "json", check=False)
    if proc.returncode != 0:
        if "NotFound" in proc.stderr or "the server doesn't have a resource type" in proc.stderr:
            return None
        raise KubectlError(proc.returncode, ["kubectl", "get", *args], proc.stdout, proc.stderr)
    doc: dict[str, Any] = json.loads(proc.stdout)
    return doc


def configmap(name: str, namespace: str, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {})},
        "data": {"k": "v"},
    }


def dry_run_create(cluster: ControlPlane, obj: Mapping[str, Any]) -> subprocess.CompletedProcess[str]:
    return cluster.kubectl("create", "--dry-run=server", "-f", "-", input=obj, check=False)


def denied_with(cluster: ControlPlane, obj: Mapping[str, Any], text: str) -> bool:
    proc = dry_run_create(cluster, obj)
    return proc.returncode != 0 and text in proc.stderr


def allowed(cluster: ControlPlane, obj: Mapping[str, Any]) -> bool:
    return dry_run_create(cluster, obj).returncode == 0


# --- the webhook ----------------------------------------------------------------------------------------


class Webhook:
    """A ValidatingWebhookConfiguration sending ConfigMaps (and pods, deployments) of namespaces labelled
    `celkeeper-e2e=<selector>` to a server."""

    def __init__(self, cluster: ControlPlane, server: ServeProcess) -> None:
        self.cluster = cluster
        self.selector = secrets.token_hex(4)
        self.name = f"celkeeper-incluster-{self.selector}"
        url = f"https://127.0.0.1:{server.port}/v1/admit"
        config = webhook_configuration(self.name, url, server.certs.ca_cert.read_bytes(), self.selector)
        cluster.kubectl("apply", "-f", "-", input=config)

    @property
    def labels(self) -> dict[str, str]:
        return {NAMESPACE_LABEL: self.selector}

    def remove(self) -> None:
        self.cluster.kubectl(
            "delete", "validatingwebhookconfiguration", self.name, "--ignore-not-found", check=False
        )


# --- status ---------------------------------------------------------------------------------------------


def status(cluster: ControlPlane, resource: str, name: str) -> dict[str, Any]:
    obj = get(cluster, resource, name)
    return dict((obj or {}).get("status") or {})


def by_pod(cluster: ControlPlane, resource: str, name: str) -> dict[str, dict[str, Any]]:
    return {entry["id"]: entry for entry in status(cluster, resource, name).get("byPod") or []}


def pod_statuses(
    cluster: ControlPlane, namespace: str, kind: str = "constraintpodstatuses"
) -> list[dict[str, Any]]:
    doc = get(cluster, kind, "-n", namespace)
    return list((doc or {}).get("items") or [])


# --- restarting the API server --------------------------------------------------------------------------


def etcd_compact(cluster: ControlPlane) -> int:
    """Compact etcd at its current revision (everything older is gone: watches from it get 410)."""

    def post(path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(
            cluster.etcd_url + path, data=json.dumps(body).encode(), method="POST"
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            doc: dict[str, Any] = json.loads(response.read())
            return doc

    header = post("/v3/kv/range", {"key": base64.b64encode(b"/").decode(), "limit": 1})["header"]
    revision = int(header["revision"])
    post("/v3/kv/compaction", {"revision": str(revision), "physical": True})
    return revision
