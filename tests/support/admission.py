"""celkeeper as a real admission webhook of a test control plane: the end-to-end policy set, the
ValidatingWebhookConfiguration that points kube-apiserver at `celkeeper serve`, and a wait until the
API server really calls it.

The policy set is one template (`E2EForbiddenLabel`: an object must not carry a given label) and one
constraint per enforcement action, each forbidding its own label:

    label `deny-me`   -> constraint `e2e-deny`   (deny: refused)
    label `warn-me`   -> constraint `e2e-warn`   (warn: created, kubectl prints `Warning: [e2e-warn] ...`)
    label `dryrun-me` -> constraint `e2e-dryrun` (dryrun: created, nothing printed)

The webhook only sees namespaces labelled `celkeeper-e2e=<id>`, so other tests sharing the session's
control plane are unaffected.
"""

from __future__ import annotations

import base64
import json
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.support.apiserver import ControlPlane
from tests.support.waiting import wait_for

TEMPLATE_KIND = "E2EForbiddenLabel"
KINDS = (("", "ConfigMap", "configmaps"), ("", "Pod", "pods"), ("apps", "Deployment", "deployments"))
ACTIONS = {"deny": "deny-me", "warn": "warn-me", "dryrun": "dryrun-me"}
NAMESPACE_LABEL = "celkeeper-e2e"
WEBHOOK_NAME = "validation.celkeeper.io"

TEMPLATE: dict[str, Any] = {
    "apiVersion": "templates.celkeeper.io/v1",
    "kind": "ConstraintTemplate",
    "metadata": {"name": TEMPLATE_KIND.lower()},
    "spec": {
        "crd": {
            "spec": {
                "names": {"kind": TEMPLATE_KIND},
                "validation": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {"label": {"type": "string"}},
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
                                    "expression": "!has(variables.anyObject.metadata.labels) || "
                                    "!(variables.params.label in variables.anyObject.metadata.labels)",
                                    "messageExpression": '"%s %s must not have the label %s".format(['
                                    "string(variables.anyObject.kind), "
                                    "string(variables.anyObject.metadata.name), "
                                    "string(variables.params.label)])",
                                }
                            ]
                        },
                    }
                ],
            }
        ],
    },
}


def constraint(action: str, label: str) -> dict[str, Any]:
    groups = sorted({group for group, _, _ in KINDS})
    return {
        "apiVersion": "constraints.celkeeper.io/v1beta1",
        "kind": TEMPLATE_KIND,
        "metadata": {"name": f"e2e-{action}"},
        "spec": {
            "enforcementAction": action,
            "match": {"kinds": [{"apiGroups": groups, "kinds": [kind for _, kind, _ in KINDS]}]},
            "parameters": {"label": label},
        },
    }


def write_policies(directory: Path) -> Path:
    """Write the end-to-end template and its three constraints (JSON) into `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "template.json").write_text(json.dumps(TEMPLATE, indent=2), encoding="utf-8")
    for action, label in ACTIONS.items():
        (directory / f"constraint-{action}.json").write_text(
            json.dumps(constraint(action, label), indent=2), encoding="utf-8"
        )
    return directory


def deny_message(kind: str, name: str, action: str = "deny") -> str:
    """The line celkeeper reports for an object carrying constraint `e2e-<action>`'s label."""
    return f"[e2e-{action}] {kind} {name} must not have the label {ACTIONS[action]}"


def webhook_configuration(
    name: str, url: str, ca_pem: bytes, selector_value: str, timeout_seconds: int = 10
) -> dict[str, Any]:
    """A ValidatingWebhookConfiguration sending CREATE/UPDATE of KINDS in labelled namespaces to `url`."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [
            {
                "name": WEBHOOK_NAME,
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": "Fail",
                "timeoutSeconds": timeout_seconds,
                "clientConfig": {"url": url, "caBundle": base64.b64encode(ca_pem).decode("ascii")},
                "rules": [
                    {
                        "apiGroups": sorted({group for group, _, _ in KINDS}),
                        "apiVersions": ["v1"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": [plural for _, _, plural in KINDS],
                        "scope": "Namespaced",
                    }
                ],
                "namespaceSelector": {"matchLabels": {NAMESPACE_LABEL: selector_value}},
            }
        ],
    }


def labelled(
    kind: str, name: str, labels: Mapping[str, str] | None = None, namespace: str | None = None
) -> dict[str, Any]:
    """A minimal object of `kind` (ConfigMap, Pod or Deployment) the bare control plane accepts."""
    meta: dict[str, Any] = {"name": name, "labels": dict(labels or {})}
    if namespace:
        meta["namespace"] = namespace
    container = {"name": "main", "image": "registry.example.com/app:1.0"}
    if kind == "ConfigMap":
        return {"apiVersion": "v1", "kind": kind, "metadata": meta, "data": {"k": "v"}}
    if kind == "Pod":
        return {"apiVersion": "v1", "kind": kind, "metadata": meta, "spec": {"containers": [container]}}
    if kind == "Deployment":
        selector = {"app": name}
        return {
            "apiVersion": "apps/v1",
            "kind": kind,
            "metadata": meta,
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": selector},
                "template": {"metadata": {"labels": selector}, "spec": {"containers": [container]}},
            },
        }
    raise ValueError(f"no sample object for kind {kind}")


def register_webhook(cluster: ControlPlane, config: Mapping[str, Any]) -> None:
    cluster.kubectl("apply", "-f", "-", input=config)


def unregister_webhook(cluster: ControlPlane, name: str) -> None:
    cluster.kubectl("delete", "validatingwebhookconfiguration", name, "--ignore-not-found", check=False)


def enroll_namespace(cluster: ControlPlane, namespace: str, selector_value: str) -> None:
    """Label `namespace` for the webhook and wait until its requests really reach celkeeper."""
    cluster.kubectl("label", "namespace", namespace, f"{NAMESPACE_LABEL}={selector_value}", "--overwrite")
    wait_enforced(cluster, namespace)


def wait_enforced(cluster: ControlPlane, namespace: str, timeout: float = 30.0) -> None:
    """Until a server-side dry-run create of a `deny-me` ConfigMap in `namespace` is refused by celkeeper.

    The API server learns about a new webhook configuration and new namespace labels through its
    informers; until then requests pass unchecked (or fail to reach the webhook), so tests wait here.
    """
    probe = labelled("ConfigMap", "celkeeper-probe", {ACTIONS["deny"]: "1"}, namespace)
    expected = deny_message("ConfigMap", "celkeeper-probe")
    seen: list[str] = []

    def refused_by_celkeeper() -> bool:
        proc = create(cluster, probe, "--dry-run=server")
        seen[:] = [proc.stderr.strip() or proc.stdout.strip()]
        return proc.returncode != 0 and expected in proc.stderr

    try:
        wait_for(refused_by_celkeeper, timeout=timeout, interval=0.2, what="the webhook to be called")
    except TimeoutError as err:
        raise TimeoutError(f"{err}; last kubectl output: {seen[0] if seen else '-'}") from None


def create(cluster: ControlPlane, obj: Mapping[str, Any], *args: str) -> subprocess.CompletedProcess[str]:
    """`kubectl create -f -` of `obj` (check=False: tests look at the exit status and output)."""
    return cluster.kubectl("create", *args, "-f", "-", input=obj, check=False)


def warnings_of(stderr: str) -> list[str]:
    """The `Warning: ...` lines kubectl printed."""
    return [line.removeprefix("Warning: ") for line in stderr.splitlines() if line.startswith("Warning: ")]


def kinds() -> Sequence[str]:
    return [kind for _, kind, _ in KINDS]
