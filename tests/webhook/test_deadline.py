"""The per-request evaluation deadline.

A nested comprehension over 3,000 containers (on the cel-python engine, which has no cost limit of its
own) must not hold a worker until Gunicorn's --timeout kills it with every connection it holds:
`--eval-deadline` goes to the engine with each request: constraints not evaluated in time
are evaluation errors under their own failurePolicy, the answer is a well-formed AdmissionReview
within about the deadline, and the same worker goes on serving (real server over TLS, both engines).
Should an evaluation ignore the deadline anyway, the webhook's watchdog interrupts it and the request
is answered by the failure mode (in-process, with an evaluation that never ends).
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from werkzeug.test import Client

from celkeeper.informer import FolderSource, Informer
from celkeeper.settings import Settings
from celkeeper.snapshot import StateDir
from celkeeper.webhook import admission as admission_module
from celkeeper.webhook.app import WebhookConfig, create_app
from celkeeper.webhook.deadline import DeadlineExceeded, Watchdog
from tests.support.policyfiles import OWNER_CONSTRAINT, OWNER_TEMPLATE
from tests.support.serve import ServeProcess, pod, review

DEADLINE = 1.0

TEMPLATE = (
    """\
apiVersion: templates.gatekeeper.sh/v1
kind: ConstraintTemplate
metadata:
  name: k8suniquecontainers
spec:
  crd:
    spec:
      names:
        kind: K8sUniqueContainers
      validation:
        openAPIV3Schema:
          type: object
          properties:
            i: {type: integer}
  targets:
    - target: admission.k8s.gatekeeper.sh
      code:
        - engine: K8sNativeValidation
          source:
            failurePolicy: FAILURE_POLICY
            validations:
              - expression: >-
                  object.spec.containers.all(c, object.spec.containers.all(d,
                    c == d || c.name != d.name)) && variables.params.i >= 0
                message: "container names must be unique"
---
"""
    + OWNER_TEMPLATE
    + "---\n"
    + OWNER_CONSTRAINT
)


UNIQUE = """\
---
apiVersion: constraints.gatekeeper.sh/v1beta1
kind: K8sUniqueContainers
metadata:
  name: unique-containers-{i:03d}
spec:
  match:
    kinds: [{{apiGroups: [""], kinds: ["Pod"]}}]
  parameters: {{i: {i}}}
"""

#: engine -> (containers, constraints): cel-python has no cost budget, one nested comprehension over
#: 3,000 containers runs for minutes; cel-go stops that at Gatekeeper's cost budget (a different
#: error, in milliseconds), so there each of 400 constraints stays within its budget (200 containers)
#: and together they take longer than the deadline (distinct parameters: cel-go evaluates each)
RUNAWAY = {"cel-python": (3000, 1), "cel-go": (200, 400)}


def _policies(failure_policy: str, constraints: int) -> str:
    text = TEMPLATE.replace("FAILURE_POLICY", failure_policy)
    return text + "".join(UNIQUE.format(i=i) for i in range(constraints))


def _huge_pod(containers: int = 3000) -> dict[str, Any]:
    huge = pod(labels={"owner": "a"})
    huge["spec"]["containers"] = [
        {"name": f"c{i}", "image": "registry.example.com/x:1"} for i in range(containers)
    ]
    return huge


@pytest.mark.server
@pytest.mark.parametrize("engine", ["cel-go", "cel-python"])
@pytest.mark.parametrize("failure_policy", ["Fail", "Ignore"])
def test_a_runaway_evaluation_fails_its_constraint_in_time_and_the_worker_lives(
    tmp_path: Path, engine: str, failure_policy: str
) -> None:
    policies = tmp_path / "policies"
    policies.mkdir()
    containers, constraints = RUNAWAY[engine]
    (policies / "policies.yaml").write_text(_policies(failure_policy, constraints))
    args = ["--engine", engine, "--eval-deadline", str(DEADLINE)]
    server = ServeProcess(tmp_path / "srv", policies, workers=1, args=args).start()
    try:
        worker = server.worker_pids()
        started = time.monotonic()
        status, body = server.admit(review(_huge_pod(containers), uid="uid-huge"))
        took = time.monotonic() - started
        assert status == 200 and body["response"]["uid"] == "uid-huge"  # a well-formed AdmissionReview
        assert took < DEADLINE + 3, f"answered after {took:.1f} s"
        answer = body["response"]
        if failure_policy == "Fail":  # an evaluation error under failurePolicy Fail: a violation
            assert answer["allowed"] is False
            message = answer["status"]["message"]
            assert message.startswith("[unique-containers-") and "deadline" in message, message
            assert "cost budget" not in message, message
        else:
            assert answer["allowed"] is True
        assert server.worker_pids() == worker  # the same worker, alive
        _, body = server.admit(review(pod(labels={})))  # and it goes on deciding
        assert body["response"]["allowed"] is False
        assert "an owner label is required" in body["response"]["status"]["message"]
        log = server.log(400)
        assert "Traceback" not in log and "WORKER TIMEOUT" not in log
    finally:
        server.stop()


@pytest.mark.server
@pytest.mark.parametrize("engine", ["cel-go", "cel-python"])
def test_while_one_loop_evaluates_until_the_deadline_the_other_serves(tmp_path: Path, engine: str) -> None:
    """One worker, its event loops on two threads (the default): a runaway evaluation holds one loop
    until the deadline, the other loop answers reviews meanwhile, each promptly (cel-go evaluates with
    the GIL released; cel-python's Python code gives it up every switch interval)."""
    policies = tmp_path / "policies"
    policies.mkdir()
    containers, constraints = RUNAWAY[engine]
    (policies / "policies.yaml").write_text(_policies("Fail", constraints))
    args = ["--engine", engine, "--eval-deadline", str(DEADLINE)]
    server = ServeProcess(tmp_path / "srv", policies, workers=1, threads=2, args=args).start()
    try:
        runaway: dict[str, Any] = {}

        def send_runaway() -> None:
            started = time.monotonic()
            runaway["answer"] = server.admit(review(_huge_pod(containers), uid="uid-huge"))
            runaway["seconds"] = time.monotonic() - started

        thread = threading.Thread(target=send_runaway)
        thread.start()
        time.sleep(0.3)  # the runaway review is being evaluated
        during: list[float] = []
        while thread.is_alive() and len(during) < 20:
            started = time.monotonic()
            status, body = server.admit(review(pod(labels={})))  # a new connection: the free loop takes it
            during.append(time.monotonic() - started)
            assert status == 200 and body["response"]["allowed"] is False
            assert "an owner label is required" in body["response"]["status"]["message"]
        thread.join()
        assert runaway["answer"][1]["response"]["allowed"] is False  # the deadline, under Fail
        assert during, f"the runaway review took only {runaway['seconds']:.2f} s"
        assert max(during) < DEADLINE, f"reviews took up to {max(during):.2f} s beside the runaway one"
    finally:
        server.stop()


def test_an_evaluation_that_ignores_the_deadline_is_interrupted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = StateDir(tmp_path / "state")
    state.reset()
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "policies.yaml").write_text(_policies("Fail", 1))
    assert Informer(FolderSource(policies), state, Settings(), validate=False).step() is not None

    def never_ends(*args: Any, **kwargs: Any) -> Any:
        while True:  # an engine that does not keep the deadline (Python code: interruptible)
            try:
                sum(range(1000))
            except Exception:  # even code that swallows errors is stopped
                continue

    monkeypatch.setattr(admission_module, "decide", never_ends)
    for mode in ("allow", "deny"):
        settings = Settings(eval_deadline=0.3, failure_mode=mode)
        app = create_app(WebhookConfig(settings=settings, state=state, watch=False))
        started = time.monotonic()
        resp = Client(app).post("/v1/admit", data=json.dumps(review(pod(labels={}), uid="u1")))
        assert time.monotonic() - started < 3
        answer = resp.get_json()["response"]
        assert resp.status_code == 200 and answer["uid"] == "u1"
        if mode == "allow":
            assert answer["allowed"] is True and "allowed by the failure mode" in answer["warnings"][0]
        else:
            assert answer["allowed"] is False and answer["status"]["code"] == 500


def test_the_watchdog_stops_only_what_overruns() -> None:
    watchdog = Watchdog(tick=0.01)
    started = time.monotonic()
    with pytest.raises(DeadlineExceeded), watchdog.limit(0.2):
        while True:
            pass
    assert 0.2 <= time.monotonic() - started < 2
    with watchdog.limit(0.2):  # in time: nothing raised, then or later
        time.sleep(0.05)
    time.sleep(0.3)
    with watchdog.limit(0):  # no deadline
        time.sleep(0.05)
    assert watchdog.fired >= 1


def test_an_interruption_the_block_swallows_is_raised_when_it_ends() -> None:
    """An engine that catches everything (BaseException included) cannot keep the request running
    past the deadline unnoticed: the guard raises DeadlineExceeded as the block ends, and the
    watchdog leaves the thread alone afterwards."""
    watchdog = Watchdog(tick=0.01)
    swallowed = 0
    with pytest.raises(DeadlineExceeded), watchdog.limit(0.05):
        while not swallowed:
            try:
                time.sleep(0.001)
            except BaseException:  # what a careless engine does
                swallowed += 1
    assert swallowed == 1 and watchdog.fired >= 1
    fired = watchdog.fired
    time.sleep(0.1)  # disarmed: nothing pending, nothing more raised
    assert watchdog.fired == fired


def test_the_watchdog_interrupts_only_the_thread_that_overruns() -> None:
    """The worker's event loops each guard their own evaluations with the process's one watchdog."""
    watchdog = Watchdog(tick=0.01)
    outcome: dict[str, str] = {}

    def guarded(name: str, seconds: float, runs: float) -> None:
        try:
            with watchdog.limit(seconds):
                until = time.monotonic() + runs
                while time.monotonic() < until:
                    sum(range(100))
            outcome[name] = "finished"
        except DeadlineExceeded:
            outcome[name] = "interrupted"

    threads = [
        threading.Thread(target=guarded, args=("slow", 0.1, 5.0)),
        threading.Thread(target=guarded, args=("in time", 2.0, 0.5)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert outcome == {"slow": "interrupted", "in time": "finished"}


def test_the_deadline_has_a_sane_default_and_flag() -> None:
    from celkeeper.cli.main import build_parser

    assert 0 < Settings().eval_deadline < 3  # below the webhook's timeoutSeconds (3 s in deploy/)
    args = build_parser().parse_args(["serve", "--cert", "c", "--key", "k", "--eval-deadline", "0.5"])
    assert args.eval_deadline == 0.5
