"""The ignore label, guarded, on a real `celkeeper serve` over TLS.

Whoever may create or label a Namespace must not escape every policy by setting
admission.celkeeper.io/ignore on it, nor delete a protected Namespace carrying it: the label is
honoured only on namespaces an admin lists (--exempt-namespace, --ignore-label-namespace);
/v1/admitlabel (Gatekeeper's /v1/admitlabel) refuses it anywhere else; DELETE of a Namespace is always
checked unless --exempt-namespace-deletes says otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.serve import ServeProcess, pod, review

pytestmark = pytest.mark.server

LABEL = "admission.celkeeper.io/ignore"

TEMPLATES = """\
apiVersion: templates.gatekeeper.sh/v1
kind: ConstraintTemplate
metadata:
  name: k8sprotectednamespaces
spec:
  crd:
    spec:
      names:
        kind: K8sProtectedNamespaces
  targets:
    - target: admission.k8s.gatekeeper.sh
      code:
        - engine: K8sNativeValidation
          source:
            validations:
              - expression: >-
                  request.operation != 'DELETE' || !has(oldObject.metadata.labels) ||
                  !('protected' in oldObject.metadata.labels)
                message: "a protected namespace cannot be deleted"
              - expression: >-
                  request.operation == 'DELETE' ||
                  (has(object.metadata.labels) && 'owner' in object.metadata.labels)
                message: "an owner label is required"
---
apiVersion: constraints.gatekeeper.sh/v1beta1
kind: K8sProtectedNamespaces
metadata:
  name: namespaces
spec:
  match:
    kinds: [{apiGroups: [""], kinds: ["Namespace", "Pod"]}]
"""


def _namespace(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def _start(tmp_path: Path, *extra: str) -> ServeProcess:
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "policies.yaml").write_text(TEMPLATES)
    inventory = tmp_path / "namespaces.yaml"
    inventory.write_text(
        "\n---\n".join(
            json.dumps(_namespace(name, **{LABEL: "true"})) for name in ("sandbox-1", "team-a", "kube-tools")
        )
    )
    args = [
        "--exempt-namespace",
        "kube-*",
        "--ignore-label-namespace",
        "sandbox-*",
        "--namespaces",
        str(inventory),
    ]
    return ServeProcess(tmp_path / "srv", policies, workers=1, args=[*args, *extra]).start()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    proc = _start(tmp_path_factory.mktemp("label"))
    yield proc
    proc.stop()


def _allowed(server: ServeProcess, request: dict[str, Any], path: str = "/v1/admit") -> tuple[bool, str]:
    resp = server.post(path, json.dumps(request).encode())
    assert resp.status_code == 200, resp.text
    answer = resp.json()["response"]
    return answer["allowed"], (answer.get("status") or {}).get("message", "")


def test_the_label_exempts_only_where_it_is_allowed(server: ServeProcess) -> None:
    assert _allowed(server, review(pod(namespace="sandbox-1", labels={})))[0] is True  # allowed and labelled
    assert _allowed(server, review(pod(namespace="kube-tools", labels={})))[0] is True  # exempt by name
    allowed, message = _allowed(server, review(pod(namespace="team-a", labels={})))  # labelled, not allowed
    assert not allowed and "an owner label is required" in message


def test_a_namespace_cannot_exempt_itself_by_labelling_itself(server: ServeProcess) -> None:
    allowed, message = _allowed(server, review(_namespace("escape", **{LABEL: "true"})))
    assert not allowed and "an owner label is required" in message  # the policies still run
    assert _allowed(server, review(_namespace("sandbox-2", **{LABEL: "true"})))[0] is True


def test_deleting_a_protected_namespace_is_checked_even_when_exempt(server: ServeProcess) -> None:
    for name in ("sandbox-1", "kube-tools"):
        old = _namespace(name, protected="yes", **{LABEL: "true"})
        allowed, message = _allowed(server, review(old, operation="DELETE", old=old))
        assert not allowed and "a protected namespace cannot be deleted" in message, name
    plain = _namespace("sandbox-3", **{LABEL: "true"})
    assert _allowed(server, review(plain, operation="DELETE", old=plain))[0] is True


def test_exempt_namespace_deletes_can_be_configured(tmp_path: Path) -> None:
    server = _start(tmp_path, "--exempt-namespace-deletes")
    try:
        old = _namespace("sandbox-1", protected="yes", **{LABEL: "true"})
        assert _allowed(server, review(old, operation="DELETE", old=old))[0] is True
    finally:
        server.stop()


def test_admitlabel_refuses_the_label_on_other_namespaces(server: ServeProcess) -> None:
    guard = "/v1/admitlabel"
    allowed, message = _allowed(server, review(_namespace("escape", **{LABEL: ""})), guard)
    assert not allowed and message == f"Only exempt namespace can have the {LABEL} label"
    kept = _namespace("escape", **{LABEL: "true", "owner": "me"})
    assert _allowed(server, review(kept, operation="UPDATE", old=kept), guard)[0] is False  # keeping it
    removed = _namespace("escape", owner="me")
    assert _allowed(server, review(removed, operation="UPDATE", old=kept), guard)[0] is True
    for name in ("sandbox-9", "kube-system"):  # --ignore-label-namespace sandbox-*, --exempt-namespace kube-*
        assert _allowed(server, review(_namespace(name, **{LABEL: "true"})), guard)[0] is True
    assert _allowed(server, review(kept, operation="DELETE", old=kept), guard)[0] is True  # always allowed
    assert _allowed(server, review(pod(labels={LABEL: "x"})), guard)[0] is True  # not a namespace
    assert server.post(guard, b"{nope").status_code == 400
