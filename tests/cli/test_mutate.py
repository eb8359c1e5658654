"""`celkeeper mutate`: objects, AdmissionReviews and Namespaces among the files, mutated as Gatekeeper's
mutation webhook mutates them (review.mutate; its agreement with Gatekeeper: tests/e2e/gatekeeper), printed
as YAML, a JSON List or JSONPatches, with every problem located on stderr."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.cli.conftest import write_dedented
from tests.support.native import require_celgo

MUTATORS = """\
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: pull-always}
spec:
  applyTo: [{groups: [""], versions: [v1], kinds: [Pod]}]
  match: {namespaceSelector: {matchLabels: {env: prod}}}
  location: "spec.containers[name:*].imagePullPolicy"
  parameters: {assign: {value: Always}}
---
apiVersion: mutations.gatekeeper.sh/v1
kind: AssignMetadata
metadata: {name: owner}
spec:
  match: {kinds: [{apiGroups: [""], kinds: [Pod]}]}
  location: "metadata.labels.owner"
  parameters: {assign: {value: platform}}
"""
OBJECTS = """\
apiVersion: v1
kind: Namespace
metadata: {name: shop, labels: {env: prod}}
---
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: shop}
spec:
  containers: [{name: web, image: "nginx:1.25"}]
---
apiVersion: v1
kind: Pod
metadata: {name: dev, namespace: dev}
spec:
  containers: [{name: web, image: "nginx:1.25"}]
"""


@pytest.fixture
def inputs(tmp_path: Path) -> Path:
    require_celgo()
    write_dedented(tmp_path / "mutators.yaml", MUTATORS)
    write_dedented(tmp_path / "objects.yaml", OBJECTS)
    return tmp_path


def test_objects_are_printed_as_mutated(cli, inputs: Path) -> None:
    run = cli("mutate", "-f", str(inputs))
    assert run.code == 0, run.err
    namespace, web, dev = list(yaml.safe_load_all(run.out))
    assert namespace == {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "shop", "labels": {"env": "prod"}},
    }
    assert web["metadata"]["labels"] == {"owner": "platform"}
    assert web["spec"]["containers"][0]["imagePullPolicy"] == "Always"
    # a namespace not among the files has no labels: the namespaceSelector does not match it
    assert dev["metadata"]["labels"] == {"owner": "platform"}
    assert "imagePullPolicy" not in dev["spec"]["containers"][0]


def test_json_patch_and_verbose(cli, inputs: Path) -> None:
    listed = json.loads(cli("mutate", "-f", str(inputs), "-o", "json").out)
    assert listed["kind"] == "List" and len(listed["items"]) == 3
    run = cli("mutate", "-f", str(inputs), "-o", "patch", "-v")
    # ordered by path: gomodules.xyz/jsonpatch walks maps in Go's random order, in Gatekeeper too
    patches = {p["object"]: sorted(p["patch"], key=lambda op: op["path"]) for p in json.loads(run.out)}
    assert patches["v1/Namespace shop"] == []
    assert patches["v1/Pod shop/web"] == [
        {"op": "add", "path": "/metadata/labels", "value": {"owner": "platform"}},
        {"op": "add", "path": "/spec/containers/0/imagePullPolicy", "value": "Always"},
    ]
    assert (
        "celkeeper mutate: v1/Pod shop/web: iteration_0: Assign//pull-always:1, AssignMetadata//owner:1"
        in run.err
    )


def test_an_update_is_an_admission_review(cli, inputs: Path) -> None:
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "name": "web",
            "namespace": "shop",
            "operation": "UPDATE",
            "userInfo": {"username": "alice"},
            "object": {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "web", "namespace": "shop", "labels": {"owner": "me"}},
                "spec": {"containers": [{"name": "web", "image": "nginx"}]},
            },
            "oldObject": {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "web", "namespace": "shop"},
                "spec": {"containers": [{"name": "web", "image": "nginx"}]},
            },
        },
    }
    (inputs / "objects.yaml").write_text(OBJECTS.split("---\n", maxsplit=1)[0])
    (inputs / "review.json").write_text(json.dumps(review))
    run = cli("mutate", "-f", str(inputs), "-o", "json")
    assert run.code == 0, run.err
    _, pod = json.loads(run.out)["items"]
    assert pod["metadata"]["labels"] == {"owner": "me"}  # AssignMetadata never changes a label that is set
    assert pod["spec"]["containers"][0]["imagePullPolicy"] == "Always"


def test_refused_and_conflicting_mutators_are_located_errors(cli, inputs: Path) -> None:
    write_dedented(
        inputs / "more.yaml",
        """\
        apiVersion: mutations.gatekeeper.sh/v1
        kind: Assign
        metadata: {name: as-a-map}
        spec:
          applyTo: [{groups: [""], versions: [v1], kinds: [Pod]}]
          location: "spec.containers.web.imagePullPolicy"
          parameters: {assign: {value: Never}}
        ---
        apiVersion: mutations.gatekeeper.sh/v1
        kind: ModifySet
        metadata: {name: bad}
        spec:
          applyTo: [{groups: [""], versions: [v1], kinds: [Pod]}]
          location: "spec.containers[name:*"
          parameters: {values: {fromList: [x]}}
        """,
    )
    run = cli("mutate", "-f", str(inputs), "-o", "patch")
    assert run.code == 1
    lines = run.err.splitlines()
    assert any(
        line.startswith(f"{inputs / 'more.yaml'}:14:13: document 2: spec.location: ModifySet bad: ")
        for line in lines
    ), lines
    conflicts = [line for line in lines if "conflicting schemas" in line]
    assert len(conflicts) == 2 and any("as-a-map" in line for line in conflicts)
    # neither mutator of the conflict applies; the others do
    patches = {p["object"]: p["patch"] for p in json.loads(run.out)}
    assert patches["v1/Pod shop/web"] == [
        {"op": "add", "path": "/metadata/labels", "value": {"owner": "platform"}}
    ]


def test_an_object_gatekeeper_refuses_is_an_error(cli, inputs: Path) -> None:
    write_dedented(
        inputs / "image.yaml",
        """\
        apiVersion: mutations.gatekeeper.sh/v1alpha1
        kind: AssignImage
        metadata: {name: not-a-string}
        spec:
          applyTo: [{groups: [""], versions: [v1], kinds: [Pod]}]
          location: "spec.containers[name:*].resources"
          parameters: {assignTag: ":v2"}
        """,
    )
    (inputs / "objects.yaml").write_text(
        OBJECTS
        + "---\n"
        + OBJECTS.split("---\n")[1]
        .replace("web, image", "web, resources: {}, image")
        .replace("name: web, namespace", "name: limited, namespace")
    )
    run = cli("mutate", "-f", str(inputs))
    assert run.code == 1
    (line,) = [line for line in run.err.splitlines() if "limited" in line]
    assert line.startswith(f"{inputs / 'objects.yaml'}:17:1: document 4: v1/Pod shop/limited: mutation ")
    assert "expected value at AssignImage location to be a string" in line
