"""`celkeeper serve --enforce-admission-policies` over TLS: the ValidatingAdmissionPolicies,
MutatingAdmissionPolicies, bindings and parameters in the policy folder are enforced as the API server
enforces them. The expected answers are Kubernetes' own, from the code the offline tools use
(celkeeper.admissionpolicy, proven identical to kube-apiserver in tests/admissionpolicy): a refusal is the
API server's status, a mutation the object it would store (Gatekeeper's mutators then applied on top)."""

from __future__ import annotations

import base64
import json
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
import yaml

from celkeeper.admissionpolicy import AdmissionPolicies, select
from celkeeper.documents import Document, parse_documents
from tests.support.native import mapped_libraries, require_celgo
from tests.support.serve import ServeProcess

SUITE = Path(__file__).resolve().parents[1] / "admissionpolicy" / "suite"
OWNER_LABEL = """\
apiVersion: mutations.gatekeeper.sh/v1
kind: AssignMetadata
metadata: {name: owner-label}
spec:
  match:
    scope: Namespaced
    kinds: [{apiGroups: [apps], kinds: [Deployment]}]
  location: metadata.labels.owner
  parameters:
    assign: {value: platform}
"""


def _load(name: str) -> dict[str, Any]:
    loaded = yaml.safe_load((SUITE / name).read_text())
    assert isinstance(loaded, dict)
    return loaded


def _review(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj["metadata"]
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": "apps", "version": "v1", "kind": obj["kind"]},
            "resource": {"group": "apps", "version": "v1", "resource": "deployments"},
            "name": meta["name"],
            "namespace": meta["namespace"],
            "operation": "CREATE",
            "userInfo": {"username": "alice"},
            "object": obj,
        },
    }


@pytest.fixture(scope="module")
def kubernetes() -> Iterator[AdmissionPolicies]:
    """What Kubernetes' own code answers for the folder's policies (the offline tools' answer)."""
    require_celgo()
    documents = list(parse_documents((SUITE / "policies.yaml").read_text(), "policies.yaml").documents)
    selected = select(documents)
    namespace = Document.from_object(_load("namespace-prod.yaml"))
    with AdmissionPolicies.build(
        selected.policies, params=selected.params, namespaces=[namespace], crds=selected.crds
    ) as policies:
        yield policies


def _serve(workdir: Path, *args: str) -> ServeProcess:
    require_celgo()
    policies = workdir / "policies"
    policies.mkdir()
    shutil.copy(SUITE / "policies.yaml", policies / "policies.yaml")
    (policies / "owner-label.yaml").write_text(OWNER_LABEL)
    namespaces = ["--namespaces", str(SUITE / "namespace-prod.yaml")]
    return ServeProcess(workdir, policies, workers=1, args=[*namespaces, *args]).start()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    proc = _serve(tmp_path_factory.mktemp("enforce"), "--enforce-admission-policies")
    try:
        yield proc
    finally:
        proc.stop()


def test_a_request_the_policies_refuse_is_refused_with_the_api_server_s_status(
    server: ServeProcess, kubernetes: AdmissionPolicies
) -> None:
    review = _review(_load("deployment-8.yaml"))
    expected = kubernetes.review(review["request"])
    assert not expected.allowed
    assert "ValidatingAdmissionPolicy 'replica-limit' with binding 'replica-limit-prod' denied request" in (
        expected.message
    )

    status, body = server.admit(review)

    assert status == 200
    response = body["response"]
    assert response["uid"] == review["request"]["uid"]
    assert response["allowed"] is False
    assert response["status"] == {
        "code": expected.code,
        "reason": expected.reason,
        "message": expected.message,
    }


def test_an_allowed_request_carries_the_policies_audit_annotations(
    server: ServeProcess, kubernetes: AdmissionPolicies
) -> None:
    review = _review(_load("deployment-2.yaml"))
    expected = kubernetes.review(review["request"])
    assert expected.allowed and expected.audit_annotations

    status, body = server.admit(review)

    assert status == 200
    assert body["response"]["allowed"] is True
    assert body["response"]["auditAnnotations"] == dict(expected.audit_annotations)


def test_the_mutation_patch_holds_the_policies_changes_then_gatekeepers(
    server: ServeProcess, kubernetes: AdmissionPolicies
) -> None:
    deployment = _load("deployment-2.yaml")
    review = _review(deployment)
    expected = kubernetes.review(review["request"])
    assert expected.patched is not None  # the MutatingAdmissionPolicy sets the team label

    response = server.post("/v1/mutate", json.dumps(review).encode())
    answer = response.json()["response"]

    assert answer["allowed"] is True and answer["patchType"] == "JSONPatch"
    patched = jsonpatch.apply_patch(deployment, json.loads(base64.b64decode(answer["patch"])))
    # the policy's label (Kubernetes' answer), then Gatekeeper's mutator's, applied after the policy
    assert patched["metadata"]["labels"] == {**expected.patched["metadata"]["labels"], "owner": "platform"}
    assert patched["metadata"]["labels"]["team"] == "payments"


def test_without_the_flag_the_policies_are_not_enforced_and_the_worker_loads_the_library_without_them(
    tmp_path: Path,
) -> None:
    """The worker loads the variant of the native library with Gatekeeper's capabilities alone (the
    admission policies' Go packages hold memory: docs/performance.md); the mutators still apply."""
    proc = _serve(tmp_path)
    try:
        status, body = proc.admit(_review(_load("deployment-8.yaml")))
        deployment = _load("deployment-8.yaml")
        mutated = proc.post("/v1/mutate", json.dumps(_review(deployment)).encode()).json()["response"]
        (worker,) = proc.worker_pids()
        libraries = mapped_libraries(worker)
    finally:
        proc.stop()
    assert status == 200
    assert body["response"]["allowed"] is True
    assert "auditAnnotations" not in body["response"]
    patched = jsonpatch.apply_patch(deployment, json.loads(base64.b64decode(mutated["patch"])))
    assert patched["metadata"]["labels"]["owner"] == "platform"  # Gatekeeper's mutator, in this variant
    assert libraries == {"libcelkeeper-gatekeeper.so"}


def test_with_the_flag_the_worker_loads_the_library_with_admission_policies(server: ServeProcess) -> None:
    server.admit(_review(_load("deployment-8.yaml")))
    (worker,) = server.worker_pids()
    assert mapped_libraries(worker) == {"libcelkeeper.so"}


BROKEN = """\
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: broken}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}
  validations:
  - expression: object.spec.replicas <
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: broken}
spec:
  policyName: broken
  validationActions: [Deny]
"""


def test_a_policy_that_does_not_compile_is_a_located_problem_and_as_in_kubernetes_has_no_effect(
    tmp_path: Path,
) -> None:
    require_celgo()
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "broken.yaml").write_text(BROKEN)
    documents = list(parse_documents(BROKEN, "broken.yaml").documents)
    review = _review(_load("deployment-2.yaml"))
    with AdmissionPolicies.build(select(documents).policies) as kubernetes:
        expected = kubernetes.review(review["request"])
    # the API server refuses to store a policy that does not compile: it has no effect on requests
    assert expected.allowed

    proc = ServeProcess(tmp_path / "srv", policies, workers=1, args=["--enforce-admission-policies"]).start()
    try:
        ready = proc.get("/readyz").json()
        status, body = proc.admit(review)
    finally:
        proc.stop()
    # what the API server would hold: the binding, not the policy it refused
    assert ready["admissionPolicies"] == ["ValidatingAdmissionPolicyBinding/broken"]
    problem = next(p for p in ready["problems"] if "broken" in p)
    assert "broken.yaml:10:" in problem and "spec.validations[0].expression" in problem, problem
    assert status == 200 and body["response"]["allowed"] is True
