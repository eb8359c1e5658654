"""celkeeper.mutation: mutator documents read as the API server and Gatekeeper read them (located errors,
every version Gatekeeper serves, external data refused), sets with schema conflicts, and Gatekeeper's
mutation webhook's answers (the Go side's own tests: native/go/mutation)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from celkeeper.documents import Document, parse_documents
from celkeeper.mutation import (
    MutationOptions,
    MutationRequest,
    MutatorSet,
    build_mutator_set,
    check_mutator,
    is_mutator,
)

PULL_ALWAYS = """\
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata:
  name: pull-always
spec:
  applyTo:
  - groups: [""]
    versions: [v1]
    kinds: [Pod]
  location: "spec.containers[name:*].imagePullPolicy"
  parameters:
    assign:
      value: Always
"""


def docs(text: str, name: str = "mutators.yaml") -> list[Document]:
    parsed = parse_documents(text, name)
    assert not parsed.errors, [str(e) for e in parsed.errors]
    return list(parsed.documents)


def pod_request(operation: str = "CREATE", **extra: Any) -> dict[str, Any]:
    return {
        "uid": "u-1",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "name": "p",
        "namespace": "default",
        "operation": operation,
        "userInfo": {"username": "alice"},
        "object": {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": "a", "image": "nginx"}]},
        },
        **extra,
    }


DEFAULT_NS = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}


def test_a_mutator_is_recognised_by_group_and_kind() -> None:
    documents = docs(
        "apiVersion: mutations.gatekeeper.sh/v1\nkind: Assign\nmetadata: {name: a}\n---\n"
        "apiVersion: mutations.gatekeeper.sh/v1alpha1\nkind: AssignImage\nmetadata: {name: i}\n---\n"
        "apiVersion: expansion.gatekeeper.sh/v1alpha1\nkind: ExpansionTemplate\nmetadata: {name: e}\n---\n"
        "apiVersion: mutations.gatekeeper.sh/v1\nkind: Other\nmetadata: {name: o}\n"
    )
    assert [is_mutator(d) for d in documents] == [True, True, False, False]
    assert not is_mutator(Document.from_object({"apiVersion": "v1", "kind": "Assign"}))


def test_an_assign_patches_the_object_as_gatekeepers_webhook_does() -> None:
    mutators = build_mutator_set(docs(PULL_ALWAYS))
    assert not mutators.errors
    assert [(m.kind, m.name, m.text) for m in mutators.mutators] == [
        ("Assign", "pull-always", "Assign//pull-always:1")
    ]
    result = mutators.mutate(MutationRequest(pod_request(), DEFAULT_NS))
    assert result.mutated and result.allowed and not result.error
    assert result.patch == ({"op": "add", "path": "/spec/containers/0/imagePullPolicy", "value": "Always"},)
    assert result.response["patchType"] == "JSONPatch"
    assert json.loads(base64.b64decode(result.response["patch"])) == list(result.patch)
    assert result.object is not None
    assert result.object["spec"]["containers"][0]["imagePullPolicy"] == "Always"


def test_every_served_version_is_read_and_others_are_refused() -> None:
    for version in ("v1", "v1beta1", "v1alpha1"):
        assert check_mutator(docs(PULL_ALWAYS.replace("/v1\n", f"/{version}\n"))[0]) == []
    (error,) = check_mutator(docs(PULL_ALWAYS.replace("/v1\n", "/v2\n"))[0])
    assert str(error) == (
        'mutators.yaml:1:1: document 1: Assign pull-always: no matches for kind "Assign" in version '
        '"mutations.gatekeeper.sh/v2"'
    )


def test_a_bad_location_is_located_at_its_field() -> None:
    text = PULL_ALWAYS.replace("[name:*].imagePullPolicy", "[name:*.imagePullPolicy")
    mutators = build_mutator_set(docs(text))
    assert mutators.mutators == ()
    (error,) = mutators.errors
    assert str(error).startswith("mutators.yaml:10:13: document 1: spec.location: Assign pull-always: ")
    assert "invalid location format" in str(error)


def test_schema_errors_are_the_api_servers_at_their_fields() -> None:
    text = PULL_ALWAYS.replace('  location: "spec', '  match:\n    source: Everything\n  location: "spec')
    (error,) = check_mutator(docs(text)[0])
    assert error.location.path == "spec.match.source"
    assert (error.location.line, error.location.column) == (11, 13)
    assert 'Unsupported value: "Everything"' in error.message


def test_external_data_is_refused_naming_the_mutator() -> None:
    text = PULL_ALWAYS.replace(
        "      value: Always", "      externalData:\n        provider: registry"
    ).replace("imagePullPolicy", "image")
    (error,) = build_mutator_set(docs(text)).errors
    assert error.location.path == "spec.parameters.assign.externalData"
    assert error.message.startswith(
        'Assign pull-always: external data (provider "registry") is not supported'
    )


CONFLICTING = """\
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata:
  name: as-a-map
spec:
  applyTo:
  - groups: [""]
    versions: [v1]
    kinds: [Pod]
  location: "spec.containers.a.imagePullPolicy"
  parameters:
    assign:
      value: Never
"""


def test_conflicting_mutators_are_all_reported_and_none_applied() -> None:
    mutators = build_mutator_set(docs(PULL_ALWAYS + "---\n" + CONFLICTING))
    assert [(m.name, m.conflicts) for m in mutators.mutators] == [
        ("as-a-map", (("Assign", "pull-always"),)),
        ("pull-always", (("Assign", "as-a-map"),)),
    ]
    assert [e.location.document for e in mutators.errors] == [1, 2]
    assert all("conflicting schemas" in e.message for e in mutators.errors)
    result = mutators.mutate(MutationRequest(pod_request(), DEFAULT_NS))
    assert not result.mutated and result.allowed


def test_a_mutator_defined_twice_keeps_the_first() -> None:
    twice = PULL_ALWAYS + "---\n" + PULL_ALWAYS.replace("Always", "Never")
    mutators = build_mutator_set(docs(twice))
    (error,) = mutators.errors
    assert "defined twice" in error.message and error.location.document == 2
    result = mutators.mutate(MutationRequest(pod_request(), DEFAULT_NS))
    assert result.patch[0]["value"] == "Always"


def test_annotations_explain_and_the_self_username() -> None:
    options = MutationOptions(annotations=True, self_username="system:serviceaccount:gk:gatekeeper-admin")
    mutators = build_mutator_set(docs(PULL_ALWAYS), options)
    uid = "00000000-0000-0000-0000-00000000000a"
    result = mutators.mutate(MutationRequest(pod_request(), DEFAULT_NS, mutation_id=uid, explain=True))
    assert result.object is not None
    assert result.object["metadata"]["annotations"] == {
        "gatekeeper.sh/mutations": "Assign//pull-always:1",
        "gatekeeper.sh/mutation-id": uid,
    }
    assert result.iterations == (("iteration_0", ("Assign//pull-always:1",)),)
    own = pod_request(userInfo={"username": options.self_username})
    skipped = mutators.mutate(MutationRequest(own, DEFAULT_NS))
    assert not skipped.mutated and skipped.response["status"]["message"] == "Gatekeeper does not self-manage"


def test_excluded_namespaces_are_not_mutated() -> None:
    exclusions = ({"excludedNamespaces": ["kube-*"], "processes": ["mutation-webhook"]},)
    mutators = build_mutator_set(docs(PULL_ALWAYS), MutationOptions(exclusions=exclusions))
    request = pod_request(namespace="kube-system")
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kube-system"}}
    result = mutators.mutate(MutationRequest(request, ns))
    assert not result.mutated
    assert result.response["status"]["message"] == "Namespace is set to be ignored by Gatekeeper config"


def test_a_missing_namespace_is_gatekeepers_not_found_error() -> None:
    mutators = build_mutator_set(docs(PULL_ALWAYS))
    result = mutators.mutate(MutationRequest(pod_request()))
    assert not result.allowed and result.error == 'namespaces "default" not found'
    assert result.response["status"]["code"] == 500
    assert mutators.mutate(MutationRequest(pod_request(), no_namespace=True)).mutated


def test_a_set_without_mutators_changes_nothing() -> None:
    result = MutatorSet().mutate(MutationRequest(pod_request()))
    assert result.allowed and not result.mutated and result.patch == ()


@pytest.mark.parametrize("operation", ["DELETE", "CONNECT"])
def test_only_create_and_update_are_mutated(operation: str) -> None:
    result = build_mutator_set(docs(PULL_ALWAYS)).mutate(MutationRequest(pod_request(operation), DEFAULT_NS))
    assert not result.mutated
    assert result.response["status"]["message"] == "Mutating only on create or update"
