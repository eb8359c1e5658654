"""Per-pod status (pure): what each pod observes of templates and constraints, and the status objects it
reports."""

from __future__ import annotations

from typing import Any

from celkeeper.cel import get_engine
from celkeeper.crds import names
from celkeeper.documents import Document
from celkeeper.incluster import (
    Observation,
    ObservationTracker,
    Pod,
    observe,
    pod_status,
    pod_status_current,
)
from celkeeper.incluster.objects import item_name, policy_object
from celkeeper.policy import TemplateCompiler, build_policy_set
from tests.incluster.support import required_labels, required_labels_template, with_meta

POD = Pod("pod-a", "celkeeper-system")


def observe_objects(*objects: dict[str, Any]) -> dict[tuple[str, str], Observation]:
    """What a pod observes of these API objects: built the way the informer builds it."""
    items = {}
    for obj in objects:
        name = item_name(obj)
        assert name is not None
        items[name] = policy_object(obj)
    documents = [Document.from_object(o, file=n) for n, o in items.items()]
    policies = build_policy_set(documents, TemplateCompiler(get_engine("cel-python")))
    return observe(items, policies, policies.errors)


def test_observations_say_what_is_enforced_and_where_errors_are() -> None:
    template = with_meta(required_labels_template("Obs"), "t1", generation=3)
    template["spec"]["targets"][0]["code"][0]["source"]["validations"].append(
        {"expression": "object.metadata.name == 'a' &&\n  object.nope(1)"}
    )
    good = with_meta(required_labels("Obs", "good", ["owner"], ["ns"]), "c1", generation=2)
    bad = with_meta(required_labels("Obs", "bad", ["owner"], ["ns"]), "c2")
    bad["spec"]["parameters"] = {"labels": "not-a-list"}
    found = observe_objects(template, good, bad)
    t = found[("ConstraintTemplate", "obs")]
    assert (t.uid, t.generation, t.enforced) == ("t1", 3, True)
    assert [(e.code, e.location) for e in t.errors] == [
        ("compile_error", "spec.targets[0].code[0].source.validations[1].expression:2:14")  # the call's `(`
    ]
    assert t.errors[0].message.startswith("validation does not compile: ")
    assert found[("Obs", "good")] == Observation("Obs", "good", "c1", 2, True)
    b = found[("Obs", "bad")]
    assert not b.enforced
    assert [(e.code, e.location) for e in b.errors] == [("invalid_constraint", "spec.parameters.labels")]


def test_pod_status_objects_and_their_names() -> None:
    obs = Observation("Obs", "good", "c1", 2, True)
    resource, obj = pod_status(POD, obs, 17)
    assert resource.plural == "constraintpodstatuses" and resource.namespace == "celkeeper-system"
    assert obj["metadata"]["name"] == "pod--a-obs-good"
    assert obj["metadata"]["labels"] == {
        names.CONSTRAINT_NAME_LABEL: "good",
        names.CONSTRAINT_KIND_LABEL: "Obs",
        names.TEMPLATE_NAME_LABEL: "obs",
        names.POD_LABEL: "pod-a",
    }
    assert obj["status"] == {
        "id": "pod-a",
        "operations": ["webhook"],
        "observedGeneration": 2,
        "snapshotGeneration": 17,
        "constraintUID": "c1",
        "enforced": True,
    }
    stored = {**obj, "metadata": {**obj["metadata"], "uid": "x", "resourceVersion": "5"}}
    assert pod_status_current(stored, obj)
    assert not pod_status_current(stored, pod_status(POD, obs, 18)[1])


def test_snapshot_generation_stays_while_an_object_does_not_change() -> None:
    tracker = ObservationTracker()
    a, b = Observation("K", "a", "u1", 1, True), Observation("K", "b", "u2", 1, True)
    tracker.advance(5, {a.key: a})
    tracker.advance(6, {a.key: a, b.key: b})  # another object arrived
    assert tracker.current[a.key] == (a, 5)
    assert tracker.current[b.key] == (b, 6)
    a2 = Observation("K", "a", "u1", 2, True)
    tracker.advance(9, {a2.key: a2, b.key: b})
    assert tracker.current[a2.key] == (a2, 9)
    assert tracker.current[b.key] == (b, 6)


def test_mutators_are_observed_as_gatekeepers_mutator_controller_reports_them() -> None:
    from celkeeper.incluster.podstatus import CONFLICTING_SCHEMA, MUTATOR_KEY, Pod, mutator_pod_status
    from tests.support.native import require_celgo

    require_celgo()

    def assign(name: str, location: str, value: Any) -> dict[str, Any]:
        return {
            "apiVersion": "mutations.gatekeeper.sh/v1",
            "kind": "Assign",
            "metadata": {"name": name, "uid": f"uid-{name}", "generation": 1},
            "spec": {
                "applyTo": [{"groups": [""], "versions": ["v1"], "kinds": ["Pod"]}],
                "location": location,
                "parameters": {"assign": {"value": value}},
            },
        }

    objects = [
        assign("fine", "spec.containers[name:*].imagePullPolicy", "Always"),
        assign("refused", "metadata.labels.team", "x"),
        assign("as-list", "spec.volumes[name:data].emptyDir", {}),
        assign("as-map", "spec.volumes.data", "x"),
    ]
    by_item = {item_name(o) or "": o for o in objects}
    docs = [Document.from_object(o, file=item_name(o) or "") for o in objects]
    policies = build_policy_set(docs, TemplateCompiler(get_engine("cel-go")))
    found = observe(by_item, policies, policies.errors)
    fine, refused = found[(MUTATOR_KEY, "Assign/fine")], found[(MUTATOR_KEY, "Assign/refused")]
    assert fine.enforced and not fine.errors and fine.uid == "uid-fine" and fine.mutator
    assert not refused.enforced and "metadata" in refused.errors[0].message
    for name in ("as-list", "as-map"):
        conflicted = found[(MUTATOR_KEY, f"Assign/{name}")]
        assert not conflicted.enforced and conflicted.errors[0].code == CONFLICTING_SCHEMA
    status = mutator_pod_status(Pod("web-0", "celkeeper-system", expected_pods=3), refused, 9)
    assert status["metadata"]["name"] == "web--0-assign-refused"
    assert status["status"] == {
        "id": "web-0",
        "operations": ["mutation-webhook"],
        "observedGeneration": 1,
        "snapshotGeneration": 9,
        "mutatorUID": "uid-refused",
        "enforced": False,
        "errors": [{"message": refused.errors[0].message}],
        "expectedPods": 3,
    }


def test_admission_policies_are_enforced_unless_kubernetes_refuses_them() -> None:
    from celkeeper.admissionpolicy import AdmissionPolicies
    from celkeeper.errors import AdmissionPolicyNote
    from celkeeper.incluster.podstatus import ADMISSION_KEY
    from tests.support.native import require_celgo

    require_celgo()

    def policy(name: str, expression: str) -> dict[str, Any]:
        return {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name, "uid": f"uid-{name}", "generation": 4},
            "spec": {
                "matchConstraints": {
                    "resourceRules": [
                        {
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "operations": ["CREATE"],
                            "resources": ["pods"],
                        }
                    ]
                },
                "validations": [{"expression": expression}],
            },
        }

    items = {
        f"admissionpolicy/validatingadmissionpolicy/{name}": policy(name, expression)
        for name, expression in (("fine", "object.metadata.name != ''"), ("broken", "object.spec.nope("))
    }
    with AdmissionPolicies.build([Document.from_object(o, file=n) for n, o in items.items()]) as built:
        errors = [p for p in built.problems if not isinstance(p, AdmissionPolicyNote)]
    policies = build_policy_set((), TemplateCompiler(get_engine("cel-python")))
    found = observe(items, policies, errors)

    fine = found[(ADMISSION_KEY, "ValidatingAdmissionPolicy/fine")]
    assert (fine.uid, fine.generation, fine.enforced, fine.errors) == ("uid-fine", 4, True, ())
    broken = found[(ADMISSION_KEY, "ValidatingAdmissionPolicy/broken")]
    assert not broken.enforced
    assert [e.location.split(":")[0] for e in broken.errors] == ["spec.validations[0].expression"]
    # without a policy set (the snapshot's could not be built) nothing is said to be enforced
    assert not observe(items, None, ())[(ADMISSION_KEY, "ValidatingAdmissionPolicy/fine")].enforced

    resource, status = pod_status(Pod("pod-a", "celkeeper-system", expected_pods=2), broken, 7)
    assert resource.plural == "admissionpolicypodstatuses" and resource.namespace == "celkeeper-system"
    assert status["kind"] == names.ADMISSION_POLICY_POD_STATUS_KIND
    assert status["metadata"]["name"] == "pod--a-validatingadmissionpolicy-broken"  # dash-packed
    assert status["metadata"]["labels"] == {
        names.ADMISSION_POLICY_NAME_LABEL: "broken",
        names.ADMISSION_POLICY_KIND_LABEL: "ValidatingAdmissionPolicy",
        names.POD_LABEL: "pod-a",
    }
    assert status["status"]["policyUID"] == "uid-broken" and status["status"]["enforced"] is False
    assert status["status"]["operations"] == ["webhook"] and status["status"]["expectedPods"] == 2
    assert status["status"]["snapshotGeneration"] == 7 and status["status"]["observedGeneration"] == 4
    assert status["status"]["errors"][0]["location"].startswith("spec.validations[0].expression")
