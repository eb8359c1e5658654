"""Least-privilege CRD writes (issue 12), against a real kube-apiserver driven by the real kubectl.

RBAC cannot limit `create` to names, so celkeeper's ClusterRole lets it write every CRD in the
cluster. The rule "only our constraint CRDs" is enforced twice, and both are checked here:
- by celkeeper itself: a real `celkeeper serve --source kubernetes`, with deploy/'s RBAC, given a
  template whose kind collides with a CRD someone else made, leaves that CRD alone;
- by the API server: docs/security.md's ValidatingAdmissionPolicy, applied as written (only the
  user name changed), refuses the same user every CRD write that is not one of celkeeper's.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from celkeeper.documents import parse_documents
from tests.incluster.support import (
    KubeServe,
    create_namespace,
    deployment_setting,
    get,
    rbac_kubeconfig,
    remove_templates,
    required_labels_template,
)
from tests.support.apiserver import ControlPlane
from tests.support.waiting import wait_for

pytestmark = pytest.mark.kube

DOC = Path(__file__).resolve().parents[2] / "docs" / "security.md"
DOC_USER = "system:serviceaccount:celkeeper-system:celkeeper"
REFUSAL = "celkeeper may write only its own constraint CRDs"


def _crd(group: str, kind: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    plural = kind.lower()
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}", "labels": labels or {}},
        "spec": {
            "group": group,
            "names": {"kind": kind, "plural": plural, "singular": plural, "listKind": f"{kind}List"},
            "scope": "Cluster",
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                    },
                }
            ],
        },
    }


def policy_from_the_docs(user: str, suffix: str) -> list[dict[str, Any]]:
    text = DOC.read_text(encoding="utf-8")
    block = re.search(r"<!-- crd-writes-policy -->\n```yaml\n(.*?)```", text, re.DOTALL)
    assert block, "docs/security.md has no crd-writes-policy block"
    parsed = parse_documents(block.group(1).replace(DOC_USER, user), str(DOC))
    assert not parsed.errors, parsed.errors
    docs = [json.loads(json.dumps(d.data)) for d in parsed.documents]
    for doc in docs:  # names of their own: the session's cluster is shared
        doc["metadata"]["name"] += f"-{suffix}"
        if doc["kind"] == "ValidatingAdmissionPolicyBinding":
            doc["spec"]["policyName"] += f"-{suffix}"
    return docs


@dataclass
class Writer:
    cluster: ControlPlane
    user: str
    kubeconfig: Path

    def write(self, verb: str, obj: dict[str, Any], *args: str) -> tuple[int, str]:
        proc = self.cluster.kubectl(
            verb, *args, "-f", "-", input=obj, check=False, kubeconfig=self.kubeconfig
        )
        return proc.returncode, proc.stderr


@pytest.fixture(scope="module")
def writer(kube_cluster: ControlPlane) -> Writer:
    namespace = create_namespace(kube_cluster, "crd-writes")
    user = f"celkeeper-crd-{secrets.token_hex(3)}"
    return Writer(kube_cluster, user, rbac_kubeconfig(kube_cluster, namespace, user))


def test_rbac_alone_lets_celkeeper_write_any_crd(writer: Writer) -> None:
    foreign = _crd("example.com", f"Widget{secrets.token_hex(3)}")
    assert writer.write("create", foreign, "--dry-run=server") == (0, "")


@pytest.fixture(scope="module")
def policy(writer: Writer) -> Iterator[list[dict[str, Any]]]:
    suffix = secrets.token_hex(3)
    docs = policy_from_the_docs(writer.user, suffix)
    writer.cluster.kubectl("apply", "-f", "-", input=docs)
    probe = _crd("example.com", f"Probe{suffix}")
    try:
        wait_for(
            lambda: REFUSAL in writer.write("create", probe, "--dry-run=server")[1],
            timeout=30,
            what="the ValidatingAdmissionPolicy to be in force",
        )
        yield docs
    finally:
        for doc in reversed(docs):
            writer.cluster.kubectl(
                "delete", doc["kind"].lower(), doc["metadata"]["name"], "--ignore-not-found"
            )


def test_the_policy_refuses_every_crd_write_that_is_not_celkeepers(writer: Writer, policy: object) -> None:
    tag = secrets.token_hex(3)
    ours = {"celkeeper.io/constraint": "yes"}
    assert (
        writer.write("create", _crd("example.com", f"Widget{tag}"), "--dry-run=server")[1].count(REFUSAL) == 1
    )
    code, err = writer.write(
        "create", _crd("constraints.celkeeper.io", f"K8sUnlabelled{tag}"), "--dry-run=server"
    )
    assert code != 0 and REFUSAL in err  # the right group, but not labelled as ours
    assert (
        writer.write("create", _crd("constraints.celkeeper.io", f"K8sOurs{tag}", ours), "--dry-run=server")[0]
        == 0
    )
    # someone else's CRD (created by the admin) can be neither updated nor deleted by celkeeper's user
    theirs = _crd("example.com", f"Theirs{tag}")
    writer.cluster.kubectl("create", "-f", "-", input=theirs)
    try:
        changed = json.loads(json.dumps(theirs))
        changed["metadata"]["labels"] = ours
        code, err = writer.write("replace", changed)
        assert code != 0 and REFUSAL in err
        proc = writer.cluster.kubectl(
            "delete", "crd", theirs["metadata"]["name"], check=False, kubeconfig=writer.kubeconfig
        )
        assert proc.returncode != 0 and REFUSAL in proc.stderr
    finally:
        writer.cluster.kubectl("delete", "crd", theirs["metadata"]["name"], "--ignore-not-found")


def test_celkeeper_leaves_a_colliding_crd_alone(kube_cluster: ControlPlane, tmp_path: Path) -> None:
    kind = f"K8sCollide{secrets.token_hex(3)}"
    theirs = _crd("constraints.celkeeper.io", kind, {"owner": "someone-else"})
    kube_cluster.kubectl("create", "-f", "-", input=theirs)
    name = theirs["metadata"]["name"]
    before = get(kube_cluster, "crd", name)
    assert before is not None
    pod_namespace, kubeconfig = deployment_setting(kube_cluster, "crd-collide")
    server = KubeServe(tmp_path, kubeconfig, "pod-collide", pod_namespace).start()
    try:
        kube_cluster.kubectl("apply", "-f", "-", input=required_labels_template(kind))
        deadline = time.monotonic() + 30
        while "is not ours (left alone)" not in server.full_log():
            assert time.monotonic() < deadline, server.full_log()[-3000:]
            time.sleep(0.2)
        after = get(kube_cluster, "crd", name)
        assert after is not None
        assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
        assert after["metadata"].get("labels") == {"owner": "someone-else"}
    finally:
        server.stop()
        remove_templates(kube_cluster, kind.lower())
        kube_cluster.kubectl("delete", "crd", name, "--ignore-not-found")
