"""review.mutate: an AdmissionReview answered with a policy set's mutators as Gatekeeper's mutation webhook
answers it (the Namespace from the lookup, a Namespace object as its own namespace, UPDATEs, the answer's
AdmissionReview), and the policy set carrying its mutators and their problems."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from celkeeper.cel.api import Engine
from celkeeper.documents import parse_documents
from celkeeper.errors import ReviewError
from celkeeper.mutation import MutatorError
from celkeeper.policy import build_policy_set
from celkeeper.review import admission_review_for, inventory_lookup
from celkeeper.review.mutate import admission_review_response, mutate
from celkeeper.templates import TemplateCompiler
from tests.support.native import require_celgo

MUTATORS = """\
apiVersion: mutations.gatekeeper.sh/v1
kind: AssignMetadata
metadata:
  name: team
spec:
  match:
    namespaceSelector:
      matchLabels:
        owner: team-a
  location: metadata.labels.team
  parameters:
    assign:
      value: a
---
apiVersion: mutations.gatekeeper.sh/v1
kind: ModifySet
metadata:
  name: verbose
spec:
  applyTo:
  - groups: [""]
    versions: [v1]
    kinds: [Pod]
  location: "spec.containers[name:*].args"
  parameters:
    operation: merge
    values:
      fromList: [--verbose]
---
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata:
  name: broken
spec:
  location: "spec.containers[name:"
  parameters:
    assign:
      value: x
"""


@pytest.fixture
def policies(default_engine: Engine) -> Any:
    require_celgo()
    parsed = parse_documents(MUTATORS, "mutators.yaml")
    return build_policy_set(parsed.documents, TemplateCompiler(default_engine))


NAMESPACES = {
    "team-a": {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "team-a", "labels": {"owner": "team-a"}},
    },
}


def pod(namespace: str = "team-a", args: list[str] | None = None, **metadata: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "nginx"}
    if args is not None:
        container["args"] = args
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": namespace, **metadata},
        "spec": {"containers": [container]},
    }


def test_the_policy_set_carries_its_mutators_and_their_errors(policies: Any) -> None:
    assert [m.text for m in policies.mutators.mutators] == ["AssignMetadata//team:1", "ModifySet//verbose:1"]
    (error,) = policies.errors
    assert isinstance(error, MutatorError) and error.location.document == 3
    assert error.location.path == "spec.location"


def test_a_create_is_patched_with_every_matching_mutator(policies: Any) -> None:
    review = admission_review_for(pod(), operation="CREATE")
    mutation = mutate(review, policies, inventory_lookup(NAMESPACES, complete=True))
    assert mutation.allowed and mutation.mutated and not mutation.error
    assert mutation.object is not None
    assert mutation.object["metadata"]["labels"] == {"team": "a"}
    assert mutation.object["spec"]["containers"][0]["args"] == ["--verbose"]
    answer = admission_review_response(mutation)
    assert answer["response"]["uid"] == review["request"]["uid"]
    assert json.loads(base64.b64decode(answer["response"]["patch"])) == list(mutation.patch)


def test_the_namespace_selector_reads_the_lookups_namespace(policies: Any) -> None:
    lookup = inventory_lookup({"other": {"metadata": {"name": "other"}}}, complete=True)
    mutation = mutate(admission_review_for(pod("other"), operation="CREATE"), policies, lookup)
    assert mutation.object is not None
    assert "labels" not in mutation.object["metadata"]  # only the ModifySet applies
    missing = mutate(admission_review_for(pod("nowhere"), operation="CREATE"), policies, lookup)
    assert not missing.allowed and missing.error == 'namespaces "nowhere" not found'


def test_a_namespace_is_its_own_namespace(policies: Any) -> None:
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x", "labels": {"owner": "team-a"}}}
    mutation = mutate(
        admission_review_for(ns, operation="CREATE"), policies, inventory_lookup({}, complete=True)
    )
    assert mutation.object is not None and mutation.object["metadata"]["labels"]["team"] == "a"


def test_an_update_already_mutated_is_not_patched_again(policies: Any) -> None:
    done = pod(args=["--verbose"], labels={"team": "a"})
    review = admission_review_for(done, operation="UPDATE", old_object=pod())
    mutation = mutate(review, policies, inventory_lookup(NAMESPACES, complete=True))
    assert mutation.allowed and not mutation.mutated and mutation.patch == ()
    assert mutation.object == done
    assert mutation.response["status"]["message"] == "Resource was not mutated"


def test_not_an_admission_review_is_a_review_error(policies: Any) -> None:
    with pytest.raises(ReviewError):
        mutate({"kind": "AdmissionReview"}, policies, inventory_lookup({}, complete=True))
