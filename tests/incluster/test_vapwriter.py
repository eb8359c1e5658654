"""The in-cluster writer of generated policies and bindings, against a fake of celkeeper's API adapter:
what it writes and deletes, when it waits, whose objects it leaves alone, and the status it reports. The same
behaviour on a real API server is in tests/incluster/test_vapwriter_kube.py."""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

import pytest

from celkeeper.cel.api import Engine
from celkeeper.documents import Document
from celkeeper.incluster.resources import CONSTRAINT_CRDS, TEMPLATES
from celkeeper.incluster.vapwriter import REGISTRAR, VapSyncOptions, VapWriter
from celkeeper.kube import Resource
from celkeeper.kube.resources import VAP_BINDINGS, VAPS
from celkeeper.policy import TemplateCompiler, build_policy_set
from celkeeper.vap.plan import VapOptions, VapPlan, plan_vap
from tests.kube.fakes import FakeClient
from tests.support.engines import installed_engine
from tests.support.policydocs import constraint_data, template_data

KIND = "K8sWriter"
CRD = "k8swriter.constraints.celkeeper.io"


class FakeManager:
    """The WatchManager as the writer sees it: stores in sync with the fake client's collections."""

    def __init__(self, client: FakeClient) -> None:
        self.client = client
        self.intents: dict[str, frozenset[Resource]] = {}
        self.missing_resources: set[Resource] = set()

    def register(self, name: str, handler: Any, resources: Iterable[Resource] = ()) -> None:
        self.intents[name] = frozenset(resources)

    def set_intent(self, name: str, resources: Iterable[Resource]) -> None:
        self.intents[name] = frozenset(resources)

    def intent(self, name: str) -> frozenset[Resource]:
        return self.intents.get(name, frozenset())

    def synced(self, resource: Resource) -> bool:
        return True

    def missing(self, resource: Resource) -> bool:
        return resource in self.missing_resources

    def objects(self, resource: Resource) -> list[dict[str, Any]]:
        return [copy.deepcopy(o) for o in self.client.collections.get(resource, {}).values()]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _template(generate: bool | None = True, broken: bool = False) -> dict[str, Any]:
    expression = "1 +" if broken else "!has(object.metadata.labels)"
    data = template_data(
        KIND, [{"expression": expression, "message": "no"}], api_version="templates.celkeeper.io/v1"
    )
    if generate is not None:
        data["spec"]["targets"][0]["code"][0]["source"]["generateVAP"] = generate
    data["metadata"].update(uid="t-uid", generation=1)
    return data


def _constraint(name: str = "c", action: str = "deny") -> dict[str, Any]:
    data = constraint_data(KIND, name, action=action, api_version="constraints.celkeeper.io/v1beta1")
    data["metadata"].update(uid=f"{name}-uid", generation=3)
    return data


def _crd(established: bool = True) -> dict[str, Any]:
    condition = {"type": "Established", "status": "True" if established else "False"}
    return {"metadata": {"name": CRD, "resourceVersion": "1"}, "status": {"conditions": [condition]}}


class Env:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.client = FakeClient()
        self.manager = FakeManager(self.client)
        self.clock = Clock()
        self.status_changes = 0
        self.writer = VapWriter(
            self.client,  # type: ignore[arg-type]
            self.manager,  # type: ignore[arg-type]
            VapSyncOptions(wait_for_binding=30.0),
            on_status=self._count,
            clock=self.clock,
        )
        self.writer.register()
        for resource in (VAPS, VAP_BINDINGS, CONSTRAINT_CRDS, TEMPLATES):
            self.client.put(resource)

    def _count(self) -> None:
        self.status_changes += 1

    def plan(self, *objects: dict[str, Any]) -> VapPlan:
        documents = [Document.from_object(o) for o in objects]
        policies = build_policy_set(documents, TemplateCompiler(self.engine))
        return plan_vap(policies, VapOptions())

    def publish(self, *objects: dict[str, Any]) -> None:
        self.client.put(TEMPLATES, *(o for o in objects if o["kind"] == "ConstraintTemplate"))
        self.writer.published(self.plan(*objects))

    def crd_established(self) -> None:
        from celkeeper.kube.manager import Event

        self.client.put(CONSTRAINT_CRDS, _crd())
        self.writer.handle(Event("ADDED", CONSTRAINT_CRDS, _crd()))

    def settle(self, *objects: dict[str, Any]) -> None:
        """Publish, let the constraint CRD age past the wait, reconcile, forget the writes."""
        self.publish(*objects)
        self.crd_established()
        self.clock.now += 60
        self.writer.reconcile()
        self.writes()

    def writes(self) -> list[tuple[str, str]]:
        found = [(verb, name) for verb, _, name in self.client.writes]
        self.client.writes.clear()
        return found

    def stored(self, resource: Resource) -> dict[str, dict[str, Any]]:
        return self.client.collections.get(resource, {})


@pytest.fixture
def env() -> Env:
    return Env(installed_engine())  # the default engine, as tests/vap's


def test_nothing_is_watched_or_written_until_a_template_wants_a_policy(env: Env) -> None:
    env.publish(_template(generate=None), _constraint())
    env.writer.reconcile()
    assert VAPS not in env.manager.intent(REGISTRAR) and env.writes() == []
    env.publish(_template(generate=True), _constraint())
    assert {VAPS, VAP_BINDINGS} <= env.manager.intent(REGISTRAR)


def test_the_policy_then_after_the_wait_the_binding_each_owned_and_written_once(env: Env) -> None:
    env.publish(_template(), _constraint())
    env.crd_established()
    env.writer.reconcile()
    assert env.writes() == [("create", "gatekeeper-k8swriter")]
    policy = env.stored(VAPS)["gatekeeper-k8swriter"]
    assert policy["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "templates.celkeeper.io/v1",
            "kind": "ConstraintTemplate",
            "name": "k8swriter",
            "uid": "t-uid",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert env.writer.template_status("k8swriter") == {"state": "generated", "observedGeneration": 1}
    waiting = env.writer.constraint_status(KIND, "c")
    assert waiting is not None and waiting["state"] == "waiting" and env.writer.busy()
    env.clock.now += 29
    env.writer.reconcile()
    assert env.writes() == []
    env.clock.now += 1
    env.writer.reconcile()
    assert env.writes() == [("create", "gatekeeper-k8swriter-c")]
    binding = env.stored(VAP_BINDINGS)["gatekeeper-k8swriter-c"]
    assert binding["metadata"]["ownerReferences"][0]["uid"] == "c-uid"
    assert binding["spec"]["validationActions"] == ["Deny"]
    assert env.writer.constraint_status(KIND, "c") == {
        "enforcementPoint": "vap.k8s.io",
        "state": "generated",
        "observedGeneration": 3,
    }
    assert not env.writer.busy()
    changes = env.status_changes
    env.writer.reconcile()
    assert env.writes() == [] and env.status_changes == changes  # current: nothing written, nothing new


def test_an_object_controlled_by_another_owner_is_left_alone(env: Env) -> None:
    foreign = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {
            "name": "gatekeeper-k8swriter",
            "uid": "v",
            "ownerReferences": [
                {
                    "apiVersion": "templates.gatekeeper.sh/v1beta1",
                    "kind": "ConstraintTemplate",
                    "name": "k8swriter",
                    "uid": "gk",
                    "controller": True,
                }
            ],
        },
        "spec": {},
    }
    env.client.put(VAPS, foreign)
    env.publish(_template(), _constraint())
    env.writer.reconcile()
    assert env.writes() == []
    status = env.writer.template_status("k8swriter")
    assert status is not None and status["state"] == "error"
    assert "controlled by ConstraintTemplate k8swriter (templates.gatekeeper.sh/v1beta1)" in status["warning"]


def test_turning_generate_vap_off_deletes_what_was_made(env: Env) -> None:
    env.settle(_template(), _constraint())
    env.publish(_template(generate=False), _constraint())
    env.writer.reconcile()
    assert sorted(env.writes()) == [("delete", "gatekeeper-k8swriter"), ("delete", "gatekeeper-k8swriter-c")]
    assert env.writer.template_status("k8swriter") is None
    assert env.writer.constraint_status(KIND, "c") is None


def test_a_template_that_can_no_longer_be_a_policy_keeps_the_one_it_has(env: Env) -> None:
    env.settle(_template(), _constraint())
    env.publish(_template(broken=True), _constraint())
    env.writer.reconcile()
    assert env.writes() == []
    status = env.writer.template_status("k8swriter")
    assert status is not None and status["state"] == "error"
    assert status["warning"].startswith("ValidatingAdmissionPolicy is not generated: template k8swriter: ")
    bound = env.writer.constraint_status(KIND, "c")
    assert bound is not None and bound["state"] == "error"


def test_what_belongs_to_deleted_templates_and_constraints_goes(env: Env) -> None:
    env.settle(_template(), _constraint(), _constraint("d"))
    env.publish(_template(), _constraint())  # d is gone (the API says so: the fake has no such object)
    env.writer.reconcile()
    assert env.writes() == [("delete", "gatekeeper-k8swriter-d")]
    env.client.collections[TEMPLATES].clear()  # the template goes, and with its CRD its constraints
    env.writer.published(env.plan())
    env.writer.reconcile()
    assert sorted(env.writes()) == [("delete", "gatekeeper-k8swriter"), ("delete", "gatekeeper-k8swriter-c")]


def test_a_template_the_snapshot_lacks_but_the_api_has_keeps_its_policy(env: Env) -> None:
    env.publish(_template(), _constraint())
    env.writer.reconcile()
    env.writes()
    env.writer.published(env.plan())  # a snapshot without it (it no longer parses, say); the API has it
    env.writer.reconcile()
    assert env.writes() == []


def test_without_the_api_the_templates_say_so(env: Env) -> None:
    env.manager.missing_resources.add(VAPS)
    env.publish(_template(), _constraint())
    env.writer.reconcile()
    assert env.writes() == []
    assert env.writer.template_status("k8swriter") == {
        "state": "error",
        "observedGeneration": 1,
        "warning": "validatingAdmissionPolicy API is not enabled",
    }
