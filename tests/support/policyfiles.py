"""A minimal template, constraint and plain object as the texts of policy files, a template and constraint
that deny Pods without an `owner` label, and writing files into a folder (the informer's, the snapshot's
and the webhook's tests)."""

from __future__ import annotations

from pathlib import Path

TEMPLATE = """\
apiVersion: templates.gatekeeper.sh/v1
kind: ConstraintTemplate
metadata:
  name: k8sdemo
spec:
  crd:
    spec:
      names:
        kind: K8sDemo
  targets:
    - target: admission.k8s.gatekeeper.sh
      code:
        - engine: K8sNativeValidation
          source:
            validations:
              - expression: "true"
"""
CONSTRAINT = """\
apiVersion: constraints.gatekeeper.sh/v1beta1
kind: K8sDemo
metadata:
  name: demo
"""
OWNER_TEMPLATE = """\
apiVersion: templates.gatekeeper.sh/v1
kind: ConstraintTemplate
metadata:
  name: k8srequiredowner
spec:
  crd:
    spec:
      names:
        kind: K8sRequiredOwner
  targets:
    - target: admission.k8s.gatekeeper.sh
      code:
        - engine: K8sNativeValidation
          source:
            validations:
              - expression: "has(object.metadata.labels) && 'owner' in object.metadata.labels"
                message: "an owner label is required"
"""
OWNER_CONSTRAINT = """\
apiVersion: constraints.gatekeeper.sh/v1beta1
kind: K8sRequiredOwner
metadata:
  name: owner-required
spec:
  match:
    kinds: [{apiGroups: [""], kinds: ["Pod"]}]
"""
OBJECT = """\
apiVersion: v1
kind: Pod
metadata:
  name: sample
"""


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
