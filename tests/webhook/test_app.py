"""The webhook's WSGI app in-process (no Gunicorn; Werkzeug's test client): snapshot loading, readiness,
failure mode, errors.

The real server is tested in test_server.py; these cover paths that are awkward to reach there.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from werkzeug.test import Client

from celkeeper.cel import ENGINES
from celkeeper.informer import FolderSource, Informer
from celkeeper.settings import Settings
from celkeeper.snapshot import StateDir, WorkerBoard
from celkeeper.webhook.app import WebhookApp, WebhookConfig, create_app
from celkeeper.webhook.live import LivePolicies
from tests.support.serve import POLICIES, pod, review


@pytest.fixture
def env(tmp_path: Path) -> tuple[StateDir, Path]:
    state = StateDir(tmp_path / "state")
    state.reset()
    policies = tmp_path / "policies"
    shutil.copytree(POLICIES, policies)
    return state, policies


def _app(state: StateDir, **settings: object) -> tuple[WebhookApp, Client]:
    app = create_app(WebhookConfig(settings=Settings().with_(**settings), state=state, watch=False))
    return app, Client(app)


def _live(app: WebhookApp) -> LivePolicies:
    live = app.extensions["celkeeper"]["live"]
    assert isinstance(live, LivePolicies)
    return live


def _publish(state: StateDir, policies: Path) -> int:
    informer = Informer(FolderSource(policies), state, Settings(), validate=False)
    snap = informer.step()
    assert snap is not None
    return snap.generation


def _admit(client: Client, body: object) -> tuple[int, dict[str, object]]:
    resp = client.post("/v1/admit", data=json.dumps(body), content_type="application/json")
    return resp.status_code, resp.get_json()


def test_before_any_snapshot_the_worker_is_unready_and_fails_open(env: tuple[StateDir, Path]) -> None:
    state, _ = env
    _, client = _app(state)
    resp = client.get("/readyz")
    assert resp.status_code == 503
    assert resp.get_json()["reason"] == "no snapshot loaded yet"
    status, body = _admit(client, review(pod(labels={}), uid="uid-open"))
    assert status == 200
    assert body["response"] == {
        "uid": "uid-open",
        "allowed": True,
        "warnings": [
            "celkeeper could not evaluate the policies (internal error, uid uid-open); "
            "allowed by the failure mode"
        ],
    }
    # the worker registered itself (generation 0) so "all workers loaded G" is never vacuously true
    assert [s.generation for s in WorkerBoard(state.workers).read_all()] == [0]
    assert client.get("/healthz").status_code == 200
    metrics = client.get("/metrics").get_data(as_text=True)
    assert 'celkeeper_admission_requests_total{decision="error",operation="CREATE"} 1.0' in metrics


def test_a_published_snapshot_is_loaded_and_enforced(env: tuple[StateDir, Path]) -> None:
    state, policies = env
    app, client = _app(state)
    generation = _publish(state, policies)
    assert _live(app).refresh() is True
    assert _live(app).refresh() is False  # nothing new: one stat, nothing read
    resp = client.get("/readyz")
    assert resp.status_code == 200
    assert resp.get_json()["generation"] == generation
    status, body = _admit(client, review(pod(labels={"team": "t"})))
    assert status == 200
    response = body["response"]
    assert response["allowed"] is False
    assert response["status"] == {
        "code": 403,
        "reason": "Forbidden",
        "message": "[pods-need-owner] missing labels: owner",
    }
    (worker,) = WorkerBoard(state.workers).read_all()
    assert worker.generation == generation and worker.ready and worker.constraints == 5


def test_only_changed_templates_are_compiled_again(env: tuple[StateDir, Path]) -> None:
    state, policies = env
    app, _ = _app(state)
    live = _live(app)
    _publish(state, policies)
    live.refresh()
    compiler = live._compiler
    assert compiler.misses == 2
    constraints = policies / "required-labels-constraints.yaml"
    constraints.write_text(constraints.read_text().replace('["owner"]', '["owner", "app"]'))
    _publish(state, policies)
    assert live.refresh() is True
    assert compiler.misses == 2  # constraints changed, templates did not
    template = policies / "disallowed-images.yaml"
    template.write_text(template.read_text().replace("are not allowed", "are forbidden"))
    _publish(state, policies)
    assert live.refresh() is True
    assert compiler.misses == 3  # just the template that changed


def test_an_unreadable_snapshot_keeps_the_last_good_policies(env: tuple[StateDir, Path]) -> None:
    state, policies = env
    app, client = _app(state)
    generation = _publish(state, policies)
    _live(app).refresh()
    state.snapshot.write_text('{"format": 1, "generation": 9, "items": [')  # torn, as a broken writer would
    assert _live(app).refresh() is False
    detail = client.get("/readyz").get_json()
    assert detail["ready"] is True and detail["generation"] == generation
    assert "not a valid snapshot" in detail["lastError"]
    assert _admit(client, review(pod(labels={})))[1]["response"]["allowed"] is False
    (worker,) = WorkerBoard(state.workers).read_all()
    assert worker.generation == generation and "not a valid snapshot" in worker.last_error


def test_failure_mode_deny_answers_500_in_the_review(env: tuple[StateDir, Path]) -> None:
    state, _ = env
    _, client = _app(state, failure_mode="deny")
    status, body = _admit(client, review(pod(), uid="uid-closed"))
    assert status == 200
    response = body["response"]
    assert response["uid"] == "uid-closed" and response["allowed"] is False
    assert response["status"]["code"] == 500
    assert "Traceback" not in json.dumps(body)


def test_http_errors_are_json_one_liners(env: tuple[StateDir, Path]) -> None:
    state, _ = env
    _, client = _app(state, max_request_bytes=1000)
    resp = client.get("/nope")
    assert resp.status_code == 404 and resp.get_json()["code"] == 404
    resp = client.get("/v1/admit")
    assert resp.status_code == 405 and "POST" in resp.headers["Allow"]
    resp = client.post("/v1/admit", data=b"x" * 1001)
    assert resp.status_code == 413
    assert resp.get_json()["error"] == "request body too large: the limit is 1000 bytes"
    resp = client.post("/v1/admit", data=b"[1, 2]")
    assert resp.status_code == 400 and "JSON object" in resp.get_json()["error"]
    resp = client.post("/v1/admit", data=b"\xff\xfe")
    assert resp.status_code == 400 and resp.get_json()["error"].startswith("malformed JSON")


def test_exempt_namespace_patterns(env: tuple[StateDir, Path]) -> None:
    state, policies = env
    app, client = _app(state, exempt_namespaces=frozenset({"kube-*", "tools"}))
    _publish(state, policies)
    _live(app).refresh()
    for ns, allowed in (("kube-system", True), ("tools", True), ("toolsx", False), ("default", False)):
        assert _admit(client, review(pod(namespace=ns, labels={})))[1]["response"]["allowed"] is allowed, ns


SELECTED = """\
apiVersion: constraints.gatekeeper.sh/v1beta1
kind: TestRequiredLabels
metadata:
  name: restricted-pods-need-app
spec:
  match:
    kinds:
      - apiGroups: [""]
        kinds: ["Pod"]
    namespaceSelector:
      matchLabels:
        profile: restricted
  parameters:
    labels: ["app"]
"""


def test_namespace_selector_sees_the_namespace_inventory(env: tuple[StateDir, Path]) -> None:
    state, policies = env
    (policies / "selected.yaml").write_text(SELECTED)
    inventory = state.root.parent / "namespaces.yaml"
    inventory.write_text(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: secure\n  labels:\n    profile: restricted\n"
        "---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: old\n"
        "  labels:\n    admission.celkeeper.io/ignore: ''\n"
    )
    app, client = _app(state, ignore_label_namespaces=frozenset({"old"}))  # "old" may carry the ignore label
    informer = Informer(FolderSource(policies, namespaces=inventory), state, Settings(), validate=False)
    assert informer.step() is not None
    _live(app).refresh()
    owned = {"owner": "o"}
    secure = _admit(client, review(pod(namespace="secure", labels=owned)))[1]["response"]
    assert secure["allowed"] is False
    assert secure["status"]["message"] == "[restricted-pods-need-app] missing labels: app"
    # a namespace the inventory does not list exists without labels: the selector does not match
    assert _admit(client, review(pod(namespace="elsewhere", labels=owned)))[1]["response"]["allowed"] is True
    assert _admit(client, review(pod(namespace="old", labels={})))[1]["response"]["allowed"] is True


def _examples_app(tmp_path: Path) -> tuple[Path, Client]:
    """The repository's root and a client of the webhook on examples/ (as `./dev serve` runs it)."""
    root = Path(__file__).resolve().parents[2]
    state = StateDir(tmp_path / "state")
    state.reset()
    Informer(FolderSource(root / "examples"), state, Settings(), validate=False).step()
    app, client = _app(state)
    assert _live(app).current is not None and _live(app).current.problems == ()
    return root, client


def test_the_readme_samples_on_the_examples(tmp_path: Path) -> None:
    """What the README's curl shows: examples/reviews/ against examples/ (as `./dev serve` runs it)."""
    root, client = _examples_app(tmp_path)
    denied = json.loads((root / "examples" / "reviews" / "pod-denied.json").read_text())
    response = _admit(client, denied)[1]["response"]
    assert response["uid"] == denied["request"]["uid"]
    assert response["allowed"] is False and response["status"]["code"] == 403
    assert response["status"]["message"].startswith("[pods-from-approved-registries] ")
    assert response["warnings"] == [
        "[no-latest-images] container web: image docker.io/library/nginx:latest uses disallowed tag latest"
    ]
    allowed = json.loads((root / "examples" / "reviews" / "pod-allowed.json").read_text())
    response = _admit(client, allowed)[1]["response"]
    assert response == {"uid": allowed["request"]["uid"], "allowed": True}


def test_the_wsgi_route_answers_like_the_workers_own(env: tuple[StateDir, Path]) -> None:
    """POST /v1/admit through WSGI and through the route the worker answers itself (webhook/worker.py):
    the same status and JSON, for a review, malformed JSON and a body over the limit; without the
    worker's route (fast_path=False) none is offered."""
    state, policies = env
    _publish(state, policies)
    settings = Settings(max_request_bytes=5000)
    app = create_app(WebhookConfig(settings=settings, state=state, watch=False))
    route = app.extensions["celkeeper"]["routes"][b"/v1/admit"]
    client = Client(app)
    bodies = [json.dumps(review(pod(labels={}), uid="same")).encode(), b"{oops", b"x" * 5001]
    for body in bodies:
        wsgi = client.post("/v1/admit", data=body, content_type="application/json")
        status, payload = route(body, len(body))
        assert wsgi.status == status
        assert wsgi.get_json() == json.loads(payload)
        assert wsgi.content_type == "application/json"
    plain = create_app(WebhookConfig(settings=settings, state=state, watch=False, fast_path=False))
    assert plain.extensions["celkeeper"]["routes"] == {}


def test_workloads_are_checked_as_their_pods_on_the_examples(tmp_path: Path) -> None:
    """examples/workload-expansion's ExpansionTemplates (what `./dev serve` loads): a Deployment is denied
    for its Pod template with the parent-level message; a CronJob's Pod only warns; a workload that
    cannot be expanded is answered as Gatekeeper answers it (not allowed, code 500)."""
    root, client = _examples_app(tmp_path)
    objects = root / "examples" / "workload-expansion" / "objects"
    deployment = yaml_object(objects / "deployment-privileged.yaml")
    response = _admit(client, review(deployment))[1]["response"]
    assert response["allowed"] is False and response["status"]["code"] == 403
    lines = response["status"]["message"].splitlines()
    assert (
        "[no-privileged-containers] [Implied by expand-workloads] privileged containers are not allowed: app"
        in lines
    )
    assert all(line.startswith("[") and "] [Implied by expand-workloads] " in line for line in lines), lines
    cronjob = yaml_object(objects / "cronjob-privileged.yaml")
    response = _admit(client, review(cronjob))[1]["response"]
    assert (
        "[no-privileged-containers] [Implied by expand-jobs] privileged containers are not allowed: backup"
        in (response.get("warnings") or [])
    )
    assert all("[Implied by expand-jobs]" in w for w in response.get("warnings") or [])
    broken = dict(deployment, spec={"replicas": 1})
    response = _admit(client, review(broken, uid="uid-broken"))[1]["response"]
    assert response == {
        "uid": "uid-broken",
        "allowed": False,
        "status": {
            "code": 500,
            "reason": "InternalError",
            "message": 'unable to expand object: could not find source field "spec.template" in resource web',
        },
    }


def test_denials_are_logged_explained(env: tuple[StateDir, Path], caplog: pytest.LogCaptureFixture) -> None:
    state, policies = env
    _publish(state, policies)
    app = create_app(
        WebhookConfig(settings=Settings(), state=state, watch=False, log_denies=True, explain_denies=True)
    )
    client = Client(app)
    with caplog.at_level("INFO", logger="celkeeper.webhook"):
        assert (
            _admit(client, review(pod(labels={"owner": "x", "team": "t"})))[1]["response"]["allowed"] is True
        )
        assert not [r for r in caplog.records if "explained" in r.getMessage()]  # only denials are explained
        assert (
            _admit(client, review(pod(labels={"team": "t"}), uid="uid-1"))[1]["response"]["allowed"] is False
        )
    (record,) = [r for r in caplog.records if "explained" in r.getMessage()]
    text = record.getMessage()
    assert text.startswith("denied (uid uid-1, CREATE Pod default/web), explained:\n")
    assert "Pod default/web (CREATE at validation.gatekeeper.sh): DENIED" in text
    assert "  deny  [pods-need-owner] missing labels: owner" in text


def test_an_explanation_that_overruns_the_deadline_leaves_the_denial_as_it_is(
    env: tuple[StateDir, Path], caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--log-denies=explain decides again, within the same deadline: an explanation the watchdog has to
    interrupt is logged as not explained, and the request is still denied (not answered by the failure
    mode, which would allow it)."""
    import celkeeper.webhook.admission as admission

    def endless(*_: object, **__: object) -> None:
        while True:  # Python bytecode: the watchdog's asynchronous exception lands here
            pass

    monkeypatch.setattr(admission, "explain", endless)
    state, policies = env
    _publish(state, policies)
    config = WebhookConfig(
        settings=Settings(eval_deadline=0.1), state=state, watch=False, log_denies=True, explain_denies=True
    )
    client = Client(create_app(config))
    with caplog.at_level("INFO", logger="celkeeper.webhook"):
        response = _admit(client, review(pod(labels={"team": "t"}), uid="uid-2"))[1]["response"]
    assert response["allowed"] is False and response["status"]["code"] == 403
    assert "[pods-need-owner] missing labels: owner" in response["status"]["message"]
    (record,) = [r for r in caplog.records if "could not explain" in r.getMessage()]
    assert record.getMessage() == "could not explain the denial of uid uid-2: DeadlineExceeded"
    assert not [r for r in caplog.records if "explained" in r.getMessage()]


def yaml_object(path: Path) -> dict[str, object]:
    from celkeeper.documents import parse_documents

    (document,) = parse_documents(path.read_text(), str(path)).documents
    assert isinstance(document.data, dict)
    return document.data


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("levels", [1_100, 9_000])
def test_an_object_nested_as_deep_as_the_api_server_sends_is_decided(
    env: tuple[StateDir, Path], levels: int, engine: str
) -> None:
    """orjson parses 1024 levels of nesting, the API server stores and sends up to 10,000 (a custom
    resource with x-kubernetes-preserve-unknown-fields): such a review is decided as Gatekeeper decides
    it - the same answer as without the nesting - never answered as malformed (with failurePolicy Ignore
    that would let any object through)."""
    state, policies = env
    app, client = _app(state, engine=engine)
    _publish(state, policies)
    _live(app).refresh()
    obj = pod(labels={})
    obj["spec"]["extra"] = "@nested@"
    shallow = json.dumps(review(obj, uid="uid-deep"))
    deep = shallow.replace('"@nested@"', '{"a":' * levels + "{}" + "}" * levels)
    answers = []
    for body in (shallow, deep):
        resp = client.post("/v1/admit", data=body, content_type="application/json")
        assert resp.status_code == 200, resp.get_data(as_text=True)[:500]
        answers.append(resp.get_json())
    assert answers[0]["response"]["allowed"] is False
    assert answers[1] == answers[0]


def test_a_body_nested_deeper_than_the_api_server_sends_is_malformed(env: tuple[StateDir, Path]) -> None:
    state, _ = env
    _, client = _app(state)
    levels = 100_000  # the API server refuses objects nested deeper than 10,000 levels
    resp = client.post("/v1/admit", data=b"[" * levels + b"]" * levels, content_type="application/json")
    assert resp.status_code == 400 and resp.get_json()["error"].startswith("malformed JSON")
