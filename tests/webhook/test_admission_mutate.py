"""POST /v1/mutate on the webhook's app in-process: Gatekeeper's mutation webhook's answer to a request,
from the same snapshot, exemptions and failure mode as POST /v1/admit (webhook/admission.py).

What Gatekeeper answers is proven by tests/e2e/gatekeeper (celkeeper.review.mutate against Gatekeeper's
own mutation webhook); here the served answer must be that one, and its patch must make the object the
mutation Suite (tests/e2e/gator/suites/mutation) says Gatekeeper makes of it."""

from __future__ import annotations

import base64
import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from werkzeug.test import Client

from celkeeper.informer import FolderSource, Informer
from celkeeper.review.mutate import mutate
from celkeeper.settings import Settings
from celkeeper.snapshot import StateDir
from celkeeper.webhook import admission as admission_module
from celkeeper.webhook.app import WebhookApp, WebhookConfig, create_app
from celkeeper.webhook.live import LivePolicies
from tests.support.native import require_celgo

SUITE = Path(__file__).resolve().parents[1] / "e2e" / "gator" / "suites"


def _load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def _review(obj: dict[str, Any], uid: str = "uid-1", operation: str = "CREATE") -> dict[str, Any]:
    meta = obj["metadata"]
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": obj["kind"]},
            "resource": {"group": "", "version": "v1", "resource": obj["kind"].lower() + "s"},
            "name": meta["name"],
            "namespace": meta.get("namespace", ""),
            "operation": operation,
            "userInfo": {"username": "alice"},
            "object": obj,
        },
    }


@pytest.fixture
def served(tmp_path: Path) -> tuple[StateDir, Path]:
    require_celgo()
    policies = tmp_path / "policies"
    policies.mkdir()
    shutil.copy(SUITE / "mutation" / "mutators.yaml", policies / "mutators.yaml")
    state = StateDir(tmp_path / "state")
    state.reset()
    return state, policies


def _app(state: StateDir, policies: Path | None, **settings: Any) -> tuple[WebhookApp, Client]:
    if policies is not None:
        # the Namespaces the webhook knows (its namespaceSelectors'): the Suite's, env=prod
        source = FolderSource(policies, namespaces=SUITE / "mutation" / "namespace.yaml")
        assert Informer(source, state, Settings(), validate=False).step() is not None
    app = create_app(WebhookConfig(settings=Settings().with_(**settings), state=state, watch=False))
    return app, Client(app)


def _post(client: Client, body: object, path: str = "/v1/mutate") -> tuple[int, dict[str, Any]]:
    resp = client.post(path, data=json.dumps(body), content_type="application/json")
    return resp.status_code, resp.get_json()


def _patch(response: dict[str, Any]) -> list[dict[str, Any]]:
    assert response["patchType"] == "JSONPatch"
    patch: list[dict[str, Any]] = json.loads(base64.b64decode(response["patch"]))
    return patch


def _ops(patch: list[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps(op, sort_keys=True) for op in patch)


def test_a_pod_is_answered_with_gatekeepers_patch(served: tuple[StateDir, Path]) -> None:
    state, policies = served
    app, client = _app(state, policies)
    live = app.extensions["celkeeper"]["live"]
    assert isinstance(live, LivePolicies) and live.current is not None
    assert live.current.problems == ()
    review = _review(_load(SUITE / "expansion" / "pod.yaml"))
    status, body = _post(client, review)
    assert status == 200
    response = body["response"]
    assert response["uid"] == "uid-1" and response["allowed"] is True
    # the answer of the code proven against Gatekeeper's webhook, and the object the Suite expects
    offline = mutate(review, live.current.policies, live.current.namespace)
    # the same operations (those on map keys come in Go's random map order, as Gatekeeper's do)
    assert _ops(_patch(response)) == _ops([dict(op) for op in offline.patch])
    assert offline.object == _load(SUITE / "mutation" / "pod-mutated.yaml")
    ops = {(op["op"], op["path"]) for op in _patch(response)}
    assert ("add", "/spec/containers/0/imagePullPolicy") in ops
    # the worker's own route answers the same
    route = app.extensions["celkeeper"]["routes"][b"/v1/mutate"]
    data = json.dumps(review).encode()
    reason, payload = route(data, len(data))
    again = json.loads(payload)
    assert reason == "200 OK" and _ops(_patch(again["response"])) == _ops(_patch(response))


def test_an_object_no_mutator_changes_gets_no_patch(served: tuple[StateDir, Path]) -> None:
    state, policies = served
    _, client = _app(state, policies)
    config: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "other"},
    }
    # AssignMetadata applies to every kind: a ConfigMap gets its team label
    status, body = _post(client, _review(config))
    assert status == 200 and body["response"]["allowed"] is True
    assert _patch(body["response"]) == [{"op": "add", "path": "/metadata/labels", "value": {"team": "other"}}]
    labelled = {**config, "metadata": {**config["metadata"], "labels": {"team": "other"}}}
    status, body = _post(client, _review(labelled))
    # Gatekeeper's words (pkg/webhook/mutation.go: admission.Allowed("Resource was not mutated"))
    assert body["response"]["allowed"] is True and "patch" not in body["response"]
    assert body["response"]["status"]["message"] == "Resource was not mutated"


def test_annotations_as_gatekeepers_flag_adds_them(served: tuple[StateDir, Path]) -> None:
    state, policies = served
    _, client = _app(state, policies, mutation_annotations=True)
    _, body = _post(client, _review(_load(SUITE / "expansion" / "pod.yaml")))
    paths = [op["path"] for op in _patch(body["response"])]
    assert "/metadata/annotations" in paths, paths
    added = next(op["value"] for op in _patch(body["response"]) if op["path"] == "/metadata/annotations")
    assert set(added) == {"gatekeeper.sh/mutation-id", "gatekeeper.sh/mutations"}


def test_an_exempt_namespace_is_not_mutated(served: tuple[StateDir, Path]) -> None:
    state, policies = served
    _, client = _app(state, policies, exempt_namespaces=frozenset({"shop"}))
    _, body = _post(client, _review(_load(SUITE / "expansion" / "pod.yaml")))
    assert body["response"] == {"uid": "uid-1", "allowed": True}


def test_the_webhooks_own_user_is_not_mutated(served: tuple[StateDir, Path]) -> None:
    """Gatekeeper's mutation webhook leaves its own service account's requests alone (isGkServiceAccount,
    in the Handle the native library mirrors): the served webhook does so for --self-username."""
    state, policies = served
    me = "system:serviceaccount:celkeeper-system:celkeeper-webhook"
    _, client = _app(state, policies, self_username=me)
    review = _review(_load(SUITE / "expansion" / "pod.yaml"))
    _, others = _post(client, review)
    assert _patch(others["response"])  # alice's request is mutated
    review["request"]["userInfo"] = {"username": me}
    status, body = _post(client, review)
    assert status == 200 and body["response"]["allowed"] is True
    assert "patch" not in body["response"], body
    assert body["response"]["status"]["message"] == "Gatekeeper does not self-manage"


def test_before_any_snapshot_the_failure_mode_answers(served: tuple[StateDir, Path]) -> None:
    state, _ = served
    _, client = _app(state, None)
    _, body = _post(client, _review(_load(SUITE / "expansion" / "pod.yaml"), uid="u-open"))
    assert body["response"]["allowed"] is True and "patch" not in body["response"]
    assert "allowed by the failure mode" in body["response"]["warnings"][0]
    _, client = _app(state, None, failure_mode="deny")
    _, body = _post(client, _review(_load(SUITE / "expansion" / "pod.yaml"), uid="u-closed"))
    assert body["response"]["allowed"] is False and body["response"]["status"]["code"] == 500


def test_mutators_that_overrun_the_deadline_get_the_failure_mode(
    served: tuple[StateDir, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The deadline of /v1/admit holds for /v1/mutate: a mutation that does not end is interrupted at
    --eval-deadline and answered by the failure mode, without a patch (test_deadline.py for /v1/admit)."""
    state, policies = served

    def never_ends(*args: Any, **kwargs: Any) -> Any:
        while True:  # interruptible Python code that even swallows errors
            try:
                sum(range(1000))
            except Exception:
                continue

    monkeypatch.setattr(admission_module, "mutate", never_ends)
    _app(state, policies)  # the snapshot both apps serve
    for mode in ("allow", "deny"):
        _, client = _app(state, None, eval_deadline=0.3, failure_mode=mode)
        started = time.monotonic()
        status, body = _post(client, _review(_load(SUITE / "expansion" / "pod.yaml"), uid="u-late"))
        assert time.monotonic() - started < 3
        answer = body["response"]
        assert status == 200 and answer["uid"] == "u-late" and "patch" not in answer
        if mode == "allow":
            assert answer["allowed"] is True and "allowed by the failure mode" in answer["warnings"][0]
        else:
            assert answer["allowed"] is False and answer["status"]["code"] == 500


def test_a_malformed_review_is_a_bad_request(served: tuple[StateDir, Path]) -> None:
    state, policies = served
    _, client = _app(state, policies)
    resp = client.post("/v1/mutate", data=b"{not json", content_type="application/json")
    assert resp.status_code == 400 and "malformed JSON" in resp.get_data(as_text=True)
    status, _ = _post(client, {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"})
    assert status == 400


GENERATED_ONLY = """\
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: unprivileged-generated-pods}
spec:
  applyTo: [{groups: [""], versions: [v1], kinds: [Pod]}]
  match: {source: Generated}
  location: "spec.containers[name:*].securityContext.privileged"
  parameters: {assign: {value: false}}
"""


def test_admit_validates_generated_objects_as_the_mutators_leave_them(tmp_path: Path) -> None:
    """Gatekeeper's validating webhook expands a workload and mutates what it generates (source
    Generated) before validating it (pkg/expansion/system.go): the Deployment's Pod is validated without
    the privileged flag the mutator takes away; a Pod sent itself (source Original) is not mutated."""
    require_celgo()
    policies = tmp_path / "policies"
    policies.mkdir()
    for name in ("template.yaml", "constraint.yaml", "expansion.yaml"):
        shutil.copy(SUITE / "expansion" / name, policies / name)
    deployment = _review(_load(SUITE / "expansion" / "deployment.yaml"))
    deployment["request"]["kind"] = {"group": "apps", "version": "v1", "kind": "Deployment"}
    deployment["request"]["resource"] = {"group": "apps", "version": "v1", "resource": "deployments"}
    pod = _review(_load(SUITE / "expansion" / "pod.yaml"))

    def answers(state_dir: str) -> tuple[bool, bool, str]:
        state = StateDir(tmp_path / state_dir)
        state.reset()
        _, client = _app(state, policies)
        _, denied = _post(client, deployment, "/v1/admit")
        _, direct = _post(client, pod, "/v1/admit")
        return denied["response"]["allowed"], direct["response"]["allowed"], json.dumps(denied)

    without = answers("without")
    assert without[:2] == (False, False), without[2]
    assert "Implied by expand-deployments" in without[2]
    (policies / "mutator.yaml").write_text(GENERATED_ONLY)
    with_mutator = answers("with")
    assert with_mutator[:2] == (True, False), with_mutator[2]
