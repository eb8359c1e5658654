"""Templates that read synced data, for the tests of the modules that take part (the declaration, the
store, the review, per-pod status, the offline tools): an Ingress reading template, Ingresses, and
the decision of a policy set on one object."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from celkeeper.cel.api import Engine
from celkeeper.cel.inventory import Gvk
from celkeeper.documents import parse_documents
from celkeeper.model import EnforcementPoint
from celkeeper.policy import TemplateCompiler, build_policy_set
from celkeeper.review import SyncedData, decide, request_for_object
from tests.support.engines import engine as engine_fixture  # `engine`: each CEL engine in turn

ROOT = Path(__file__).resolve().parents[2]
INGRESS = Gvk("networking.k8s.io", "v1", "Ingress")
ANNOTATION = "metadata.gatekeeper.sh/requires-sync-data"
__all__ = ["engine_fixture"]  # import it into a test module to use it


def ingress(name: str, namespace: str, *hosts: str) -> dict[str, Any]:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"rules": [{"host": h} for h in hosts]},
    }


def template_yaml(annotation: str | None, expression: str, failure_policy: str = "Fail") -> str:
    annotations = f"\n  annotations:\n    {ANNOTATION}: {json.dumps(annotation)}" if annotation else ""
    return f"""
apiVersion: templates.gatekeeper.sh/v1
kind: ConstraintTemplate
metadata:
  name: k8sreads{annotations}
spec:
  crd: {{spec: {{names: {{kind: K8sReads}}}}}}
  targets:
  - target: admission.k8s.gatekeeper.sh
    code:
    - engine: K8sNativeValidation
      source:
        failurePolicy: {failure_policy}
        validations:
        - expression: {json.dumps(expression)}
          messageExpression: '"hosts: " + data.inventory.namespace.map(ns, string(ns)).join(",")'
---
apiVersion: constraints.gatekeeper.sh/v1beta1
kind: K8sReads
metadata: {{name: reads}}
spec: {{match: {{kinds: [{{apiGroups: ["networking.k8s.io"], kinds: ["Ingress"]}}]}}}}
"""


REQUIRES_INGRESS = '[[{"groups": ["networking.k8s.io"], "versions": ["v1"], "kinds": ["Ingress"]}]]'
NO_OTHER = "size(data.inventory.namespace) == 0"


def policies(engine: Engine, text: str) -> Any:
    parsed = parse_documents(text.lstrip("\n"), "policy.yaml")
    assert not parsed.errors
    return build_policy_set(parsed.documents, TemplateCompiler(engine))


def messages(engine: Engine, policy_set: Any, obj: dict[str, Any], data: SyncedData | None) -> list[str]:
    decision = decide(
        request_for_object(obj), policy_set, lambda _: None, EnforcementPoint.WEBHOOK, data=data
    )
    return [r.message for r in decision.results]
